"""repetitions: auto: which variants get another repetition, and when it stops (recorded run trees)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_trees import lab_run

from serve_system.cli import main
from serve_system.errors import ServeSystemError
from serve_system.experiment import records
from serve_system.results import adaptive

LOADS = {"baseline": (1, 8, 16), "dynbatch": (8,), "gpus01_2x2": (8,), "gpus01_4x2": (8,), "onnx": (1,)}
ROUNDS = [["dynbatch", "baseline", "onnx", "gpus01_4x2", "gpus01_2x2"],
          ["onnx", "gpus01_2x2", "baseline", "dynbatch", "gpus01_4x2"],
          ["baseline", "gpus01_4x2", "dynbatch", "gpus01_2x2", "onnx"],
          ["gpus01_2x2", "dynbatch", "onnx", "baseline", "gpus01_4x2"]]


def _plan(run: Path, adaptive_: dict[str, object] | None) -> None:
    variants = [records.VariantPlan(
        name=n, model="food_classifier", version="1", config_pbtxt="", load_body={}, notes=[],
        input_data=None,
        perf={}, levels=[records.LevelPlan(id=f"c{load}_r{r}", mode="concurrency", load=load, repetition=r,
                                           argv=["perf_analyzer"], retry_argv=[])
                         for r in range(1, 5) for load in loads]) for n, loads in LOADS.items()]
    records.write(run / "node-1" / "plan.json", records.HostPlan(
        host="node-1", gpus=2, experiment="lab", run_id=run.name, variants=variants, rounds=ROUNDS,
        adaptive=adaptive_))


def test_noisy_comparisons_get_one_more_repetition_then_the_budget_ends(tmp_path: Path) -> None:
    run = lab_run(tmp_path / "lab" / "r1", repetitions=3, spread=(1.0, 0.7, 1.3))
    _plan(run, {"start": 3, "max": 4, "minutes": None})
    nxt = adaptive.next_round(run, "node-1")
    assert not nxt["decided"], nxt
    batch = nxt["batch"]
    # only the variants of undecided comparisons, in the plan's 4th round order, repetition 4 only
    assert batch["variants"] == [n for n in ROUNDS[3] if n in batch["variants"]] and batch["variants"]
    assert set(batch["variants"]) <= set(LOADS) and len(batch["variants"]) < len(LOADS) + 1
    assert batch["args"] == [*(f"--variant={n}" for n in batch["variants"]), "--repetition=4"]
    assert batch["todo"] == sum(len(LOADS[n]) for n in batch["variants"])
    assert "undecided: repetition 4 of" in nxt["text"]
    # the 4th repetition measured (the same noisy sample again): the plan holds no 5th, the budget is spent
    lab_run(tmp_path / "more", repetitions=4, spread=(1.0, 0.7, 1.3, 1.0))
    for n in batch["variants"]:
        for load in LOADS[n]:
            src = tmp_path / "more" / "node-1" / n / f"c{load}_r4"
            dst = run / "node-1" / n / f"c{load}_r4"
            dst.mkdir(parents=True)
            for f in src.iterdir():
                (dst / f.name).write_bytes(f.read_bytes())
    nxt = adaptive.next_round(run, "node-1")
    if not nxt["decided"]:  # whatever remains undecided has no 5th repetition planned
        raise AssertionError(nxt)
    assert nxt["batch"] is None and ("budget is spent (4 repetitions)" in nxt["text"]
                                     or "every claim is decided" in nxt["text"])


def test_picked_variants_are_the_only_ones_repeated(tmp_path: Path) -> None:
    """-e variants with repetitions: auto: the further repetitions are only of the variants picked."""
    run = lab_run(tmp_path / "lab" / "r1", repetitions=3, spread=(1.0, 0.7, 1.3))
    _plan(run, {"start": 3, "max": 4, "minutes": None})
    every = adaptive.next_round(run, "node-1")["batch"]["variants"]
    assert len(every) >= 2
    _plan(run, {"start": 3, "max": 4, "minutes": None, "only": every[1:]})
    assert adaptive.next_round(run, "node-1")["batch"]["variants"] == every[1:]
    _plan(run, {"start": 3, "max": 4, "minutes": None, "only": ["gone"]})
    nxt = adaptive.next_round(run, "node-1")
    assert nxt["decided"] and "no variant's repetition can decide it" in nxt["text"]


def test_the_minutes_budget_and_plans_without_auto(tmp_path: Path, capsys: object) -> None:
    run = lab_run(tmp_path / "lab" / "r1", repetitions=3, spread=(1.0, 0.7, 1.3))
    _plan(run, {"start": 3, "max": 4, "minutes": 0.01})
    nxt = adaptive.next_round(run, "node-1")
    assert nxt["decided"] and "the budget is spent" in nxt["text"] and "measured minutes" in nxt["text"]
    _plan(run, None)
    assert main(["decide", str(run), "--host", "node-1"]) == 0
    out = json.loads(capsys.readouterr().out)  # type: ignore[attr-defined]
    assert out == {"decided": True, "text": "node-1: every planned repetition is measured", "batch": None}


def test_fetched_records_are_collected_before_deciding(tmp_path: Path) -> None:
    run = lab_run(tmp_path / "lab" / "r1", repetitions=3, spread=(1.0, 0.7, 1.3))
    _plan(run, {"start": 3, "max": 4, "minutes": None})
    fetched = run / "node-1" / records.FETCHED
    fetched.parent.mkdir()
    fetched.write_bytes(b"not an archive")
    with pytest.raises(ServeSystemError, match=r"not a readable archive of records"):  # one line, named
        adaptive.next_round(run, "node-1")
    assert fetched.exists()  # kept for a look


def test_quiet_repetitions_decide_every_claim(tmp_path: Path) -> None:
    run = lab_run(tmp_path / "lab" / "r1", repetitions=3, spread=(1.0, 0.99, 1.01))
    _plan(run, {"start": 3, "max": 4, "minutes": None})
    assert adaptive.next_round(run, "node-1") == {"decided": True, "batch": None,
                                                  "text": "node-1: every claim is decided"}
