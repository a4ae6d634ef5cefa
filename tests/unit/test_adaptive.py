"""repetitions: auto: which variants get another repetition, and when it stops (recorded run trees)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from opened_files import watched
from report_trees import lab_run

from serve_system.cli import main
from serve_system.errors import ServeSystemError
from serve_system.experiment import runnercall
from serve_system.node import archive, plans, records
from serve_system.results import adaptive

LOADS = {"baseline": (1, 8, 16), "dynbatch": (8,), "gpus01_2x2": (8,), "gpus01_4x2": (8,), "onnx": (1,)}
ROUNDS = [["dynbatch", "baseline", "onnx", "gpus01_4x2", "gpus01_2x2"],
          ["onnx", "gpus01_2x2", "baseline", "dynbatch", "gpus01_4x2"],
          ["baseline", "gpus01_4x2", "dynbatch", "gpus01_2x2", "onnx"],
          ["gpus01_2x2", "dynbatch", "onnx", "baseline", "gpus01_4x2"]]


def _plan(run: Path, adaptive_: plans.AdaptivePlan | None, host: str = "node-1") -> None:
    variants = [plans.VariantPlan(
        name=n, model="food_classifier", version="1", config_pbtxt="", load_body={}, notes=[],
        input_data=None,
        perf={}, levels=[plans.LevelPlan(id=f"c{load}_r{r}", mode="concurrency", load=load, repetition=r,
                                           argv=["perf_analyzer"], retry_argv=[])
                         for r in range(1, 5) for load in loads]) for n, loads in LOADS.items()]
    records.write(run / host / "plan.json", plans.HostPlan(
        host=host, gpus=2, experiment="lab", run_id=run.name, variants=variants, rounds=ROUNDS,
        adaptive=adaptive_))


def _decision(answer: adaptive.Decision) -> dict[str, Any]:
    """A decision as the role reads it, without the name of its call's log (each call's own: the time it
    was asked)."""
    text = json.dumps(records.to_json(answer))
    out: dict[str, Any] = json.loads(re.sub(r"\.progress-\d{8}T\d{6}-", ".progress-", text))
    return out


def test_noisy_comparisons_get_one_more_repetition_then_the_budget_ends(tmp_path: Path) -> None:
    run = lab_run(tmp_path / "lab" / "r1", repetitions=3, spread=(1.0, 0.7, 1.3))
    _plan(run, plans.AdaptivePlan(start=3, max=4))
    nxt = adaptive.next_round(run, "node-1")
    assert not nxt.decided and nxt.call is not None, nxt
    batch = nxt.call
    # only the variants of undecided comparisons, in the plan's 4th round order, repetition 4 only
    assert batch.variants == [n for n in ROUNDS[3] if n in batch.variants] and batch.variants
    assert set(batch.variants) <= set(LOADS) and len(batch.variants) < len(LOADS) + 1
    # the call as the role runs it: the runner started detached on the plan's settings, then followed
    runner = runnercall.runner_argv(plans.RunnerSettings())
    log = batch.start[batch.start.index("--log") + 1]
    # the plan's last round restores the baseline itself (no call can follow it)
    assert batch.start == ["docker", "exec", "--detach", *runner[3:],
                           *(f"--variant={n}" for n in batch.variants), "--repetition=4", "--restore",
                           "--log", log, "--stderr", f"{log}.err"]
    assert batch.todo == sum(len(LOADS[n]) for n in batch.variants) == len(batch.follow)
    assert batch.explain == [*runner, "--triton-log", *(f"--variant={n}" for n in batch.variants)]
    assert "undecided: repetition 4 of" in nxt.text
    # the 4th repetition measured (the same noisy sample again): the plan holds no 5th, the budget is spent
    lab_run(tmp_path / "more", repetitions=4, spread=(1.0, 0.7, 1.3, 1.0))
    for n in batch.variants:
        for load in LOADS[n]:
            src = tmp_path / "more" / "node-1" / n / f"c{load}_r4"
            dst = run / "node-1" / n / f"c{load}_r4"
            dst.mkdir(parents=True)
            for f in src.iterdir():
                (dst / f.name).write_bytes(f.read_bytes())
    nxt = adaptive.next_round(run, "node-1")
    if not nxt.decided:  # whatever remains undecided has no 5th repetition planned
        raise AssertionError(nxt)
    assert nxt.call is None and ("budget is spent (4 repetitions)" in nxt.text
                                 or "every claim is decided" in nxt.text)


def test_picked_variants_are_the_only_ones_repeated(tmp_path: Path) -> None:
    """-e variants with repetitions: auto: the further repetitions are only of the variants picked."""
    run = lab_run(tmp_path / "lab" / "r1", repetitions=3, spread=(1.0, 0.7, 1.3))
    _plan(run, plans.AdaptivePlan(start=3, max=4))
    first = adaptive.next_round(run, "node-1").call
    assert first is not None and len(first.variants) >= 2
    every = first.variants
    _plan(run, plans.AdaptivePlan(start=3, max=4, only=every[1:]))
    again = adaptive.next_round(run, "node-1").call
    assert again is not None and again.variants == every[1:]
    _plan(run, plans.AdaptivePlan(start=3, max=4, only=["gone"]))
    nxt = adaptive.next_round(run, "node-1")
    assert nxt.decided and "no variant's repetition can decide it" in nxt.text


def test_the_minutes_budget_and_plans_without_auto(tmp_path: Path, capsys: object) -> None:
    run = lab_run(tmp_path / "lab" / "r1", repetitions=3, spread=(1.0, 0.7, 1.3))
    _plan(run, plans.AdaptivePlan(start=3, max=4, minutes=0.01))
    nxt = adaptive.next_round(run, "node-1")
    assert nxt.decided and "the budget is spent" in nxt.text and "measured minutes" in nxt.text
    # the minutes decide counts are the runner's (records.measured_minutes: every level record's
    # end - start), so a call that carries the budget (--restore-past) ends the run on the node exactly
    # where decide would
    spent = records.measured_minutes(run / "node-1")
    assert f"({spent:.1f} of 0.01 measured minutes)" in nxt.text and spent > 0
    _plan(run, plans.AdaptivePlan(start=3, max=5, minutes=spent + 1))
    hplan = records.read(run / "node-1" / "plan.json", plans.HostPlan)
    hplan.rounds = [*ROUNDS, ROUNDS[0]]  # a 5th round: the 4th is not the plan's last (that restores itself)
    records.write(run / "node-1" / "plan.json", hplan)
    call = adaptive.next_round(run, "node-1").call
    assert call is not None
    assert f"--restore-past={float(spent + 1)!r}" in call.start and "--restore" not in call.start
    _plan(run, None)
    assert main(["decide", str(run), "--host", "node-1"]) == 0
    out = json.loads(capsys.readouterr().out)  # type: ignore[attr-defined]
    assert out == {"decided": True, "text": "node-1: every planned repetition is measured", "call": None}


def test_fetched_records_are_collected_before_deciding(tmp_path: Path) -> None:
    run = lab_run(tmp_path / "lab" / "r1", repetitions=3, spread=(1.0, 0.7, 1.3))
    _plan(run, plans.AdaptivePlan(start=3, max=4))
    fetched = run / "node-1" / archive.FETCHED
    fetched.parent.mkdir()
    fetched.write_bytes(b"not an archive")
    with pytest.raises(ServeSystemError, match=r"not a readable archive of records"):  # one line, named
        adaptive.next_round(run, "node-1")
    assert fetched.exists()  # kept for a look


def test_quiet_repetitions_decide_every_claim(tmp_path: Path) -> None:
    run = lab_run(tmp_path / "lab" / "r1", repetitions=3, spread=(1.0, 0.99, 1.01))
    _plan(run, plans.AdaptivePlan(start=3, max=4))
    assert adaptive.next_round(run, "node-1") == adaptive.Decision(True, "node-1: every claim is decided")


def test_a_hosts_decision_reads_only_its_own_records(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A class of hosts: each is judged on its own levels, so a host's answer is the one it gets alone in
    the run, and its decide opens and lists nothing of another host's folder (a broken record or a bad
    archive fetched for another host does not stop it). The controller's cost of a round grows with the
    class, not with its square."""
    auto = plans.AdaptivePlan(start=3, max=4)
    alone = lab_run(tmp_path / "alone" / "r1", repetitions=3, spread=(1.0, 0.7, 1.3))
    _plan(alone, auto)
    want = _decision(adaptive.next_round(alone, "node-1"))
    assert not want["decided"]
    run = lab_run(tmp_path / "lab" / "r1", repetitions=3, spread=(1.0, 0.7, 1.3))
    quiet = lab_run(tmp_path / "quiet" / "r1", repetitions=3, spread=(1.0, 0.99, 1.01))
    shutil.copytree(quiet / "node-1", run / "node-2")
    shutil.copytree(run / "node-1", run / "node-3")
    for host in ("node-1", "node-2", "node-3"):
        _plan(run, auto, host)
    with watched() as seen:
        got = adaptive.next_round(run, "node-1")
    assert _decision(got) == want
    assert [p for _, p in seen if "/node-1/" in p and p.endswith("perf.stdout")]  # it does read its own
    others = [(e, p) for e, p in seen if "/node-2" in p or "/node-3" in p]
    assert not others, others
    assert adaptive.next_round(run, "node-2") == adaptive.Decision(True, "node-2: every claim is decided")
    # another host's broken level and bad archive are that host's answer, not this one's
    (run / "node-2" / "baseline" / "c1_r1" / "level.json").write_text("{not json")
    bad = run / "node-3" / archive.FETCHED
    bad.parent.mkdir()
    bad.write_bytes(b"not an archive")
    assert _decision(adaptive.next_round(run, "node-1")) == want
    with pytest.raises(ServeSystemError, match=r"node-2/baseline/c1_r1/level.json:1:2: not JSON"):
        adaptive.next_round(run, "node-2")
    with pytest.raises(ServeSystemError, match=r"node-3/.fetch/results.tar.gz: not a readable archive"):
        adaptive.next_round(run, "node-3")
    assert bad.exists()
    # a host name that is not a folder of the run: one line, nothing read outside it
    for name in ("../alone/r1/node-1", "..", ""):
        assert main(["decide", str(run), "--host", name]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "not a host of the run" in err[0], err
