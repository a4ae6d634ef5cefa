"""report.md's ``## Findings``: the lab's claims checked against a run's raw files, with verdicts."""

from __future__ import annotations

import csv
import dataclasses
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from report_trees import (
    DYN,
    FIX,
    FOOD_ONNX,
    NB,
    P260,
    SPREAD,
    config,
    fastapi_run,
    instances,
    lab_run,
    level,
    manifest,
    stats_snapshot,
    variant,
)

from serve_system.cli import main
from serve_system.errors import ServeSystemError
from serve_system.experiment.manifest import Manifest
from serve_system.node import plans, records
from serve_system.results import best, runs
from serve_system.results import claim as cl
from serve_system.results import findings as fnd
from serve_system.results.compare import compare
from serve_system.results.report import write_report
from serve_system.results.row import Row
from serve_system.results.status import Status

QUEUE = "Queue delay grows with concurrency on one instance"
DYNB = "Dynamic batching raises the average batch and throughput at the same load"
INST = "More instances raise throughput until the CPU or GPU saturates"
POIS = "Poisson arrivals raise tail latency over constant arrivals at the same rate"
ONNX = "ONNX (ONNX Runtime) serves faster than the Python backend (PyTorch)"
BEST = "The sweep's objective picks one best variant"


def _verdicts(md: str) -> dict[str, str]:
    section = md.split("## Findings", 1)[1].split("\n## ", 1)[0]
    return {m.group(1): m.group(2)
            for m in re.finditer(r"^- \*\*(.+?)\*\*: \*\*(.+?)\*\*\.", section, re.MULTILINE)}


def test_the_lab_notebooks_own_numbers(tmp_path: Path) -> None:
    """The notebook's outputs, each level repeated three times about 3 % apart: every claim decided."""
    run = lab_run(tmp_path / "lab" / "r1", repetitions=3)
    out = write_report(run)
    md = (run / "report.md").read_text()
    v = _verdicts(md)
    assert set(v.values()) <= set(fnd.VERDICTS) and len(v) == 6
    assert v[QUEUE] == "held"
    assert "queue at concurrency 1 -> 0.02 ms (infer 18.58 ms), 8 -> 132.42 ms (infer 18.93 ms), 16 -> " in md
    assert v[DYNB] == "held"
    assert ("average batch 1.00 (`baseline`) -> 3.72 (`dynbatch`), +272 % [+272 %, +272 %] (90 % interval), "
            "n = 3 per side; "
            "throughput 52.4 -> 78.6/s, +50 % [+42 %, +58 %] (90 % interval), n = 3 per side.") in md
    # the lab's own observation: 4+4 instances were slower than 2+2 with the GPUs far from busy
    assert v[INST] == "did not hold"
    assert ("4 -> 8 instances: 192.8 -> 118.7/s (-38 % [-42 %, -35 %] (90 % interval), n = 3 per side; "
            "at 4: busiest GPU "
            "46 %) flat/falls while not saturated") in md
    assert ("1 -> 4 instances: 52.4 -> 192.8/s (+268 % [+249 %, +288 %] (90 % interval), n = 3 per side; "
            "at 1: busiest GPU "
            "22 %) rises") in md
    assert v[POIS] == "not measurable here"
    assert v[ONNX] == "held"
    assert ("`baseline` 51.5/s, latency 19.32 ms vs `onnx` 138.4/s, 6.71 ms: throughput "
            "+169 % [+155 %, +183 %] (90 % interval), n = 3 per side; "
            "latency -65 % [-67 %, -63 %] (90 % interval), n = 3 per side") in md
    assert v[BEST] == "held"
    assert ("`gpus01_2x2` 192.85 vs next `gpus01_4x2` 118.69: lead +62 % [+52 %, +74 %], n = 3 per side: "
            "`gpus01_2x2` is the best") in md
    assert "(mean of 3); lead over `gpus01_4x2` +62 % [+52 %, +74 %], n = 3 per side" in md
    # what the words mean is said once, above the claims
    assert "- *inconclusive*: the effect's 90 % interval contains the smallest effect of interest" in md
    summary = json.loads((run / "summary.json").read_text())
    assert [f["verdict"] for f in summary["findings"]] == [f.verdict for f in out["findings"]]
    inst = next(f for f in summary["findings"] if f["key"] == "instances")
    assert [p["instances"] for p in inst["evidence"][0]["points"]] == [1, 4, 8]
    # the claim's 90 % interval
    assert inst["evidence"][0]["steps"][1]["effect"]["ci_high"] == pytest.approx(-0.35, abs=0.005)
    assert summary["best"][0]["variant"] == "gpus01_2x2" and len(summary["rows"]) == 21


def test_one_repetition_is_inconclusive_and_says_how_to_decide(tmp_path: Path) -> None:
    run = lab_run(tmp_path / "lab" / "r1")
    write_report(run)
    md = (run / "report.md").read_text()
    v = _verdicts(md)
    assert v[POIS] == "not measurable here"
    decided = {k: w for k, w in v.items() if w != "not measurable here"}
    assert len(decided) == 5 and set(decided.values()) == {"inconclusive"}
    assert md.count("Inconclusive: one repetition gives no interval: set `repetitions: 3`.") == 5
    assert "throughput 52.4 -> 78.6/s, +50 %, n = 1 per side, no interval." in md
    assert "lead +62 %, n = 1 per side, no interval: no winner named" in md
    assert "lead over `gpus01_4x2` +62 %, n = 1 per side, no interval: not a clear best" in md


def _reps(n: int = 3) -> list[tuple[int, float]]:
    return [(r, SPREAD[r - 1]) for r in range(1, n + 1)]


def test_dynamic_batching_that_lowers_throughput_did_not_hold(tmp_path: Path) -> None:
    run = tmp_path / "db" / "r1"
    manifest(run, "db", [{"metric": "throughput", "goal": "max"}])
    variant(run, "n1", "baseline", config(instance_group=instances(1), dynamic_batching=None))
    variant(run, "n1", "dynbatch", config(instance_group=instances(1), dynamic_batching=DYN))
    for r, speed in _reps():
        kw = {"repetition": r, "speed": speed}
        level(run, "n1", "baseline", f"c8_r{r}", load=8, stdout=NB / "notebook_06.txt",
              stats=stats_snapshot(False), **kw)
        level(run, "n1", "dynbatch", f"c8_r{r}", load=8, stdout=NB / "notebook_05.txt",
              stats=stats_snapshot(True), **kw)
        # at concurrency 1 nothing can be batched: that level is not a comparison
        level(run, "n1", "baseline", f"c1_r{r}", load=1, stdout=NB / "notebook_01.txt",
              stats=stats_snapshot(False), **kw)
        level(run, "n1", "dynbatch", f"c1_r{r}", load=1, stdout=NB / "notebook_01.txt",
              stats=stats_snapshot(True), **kw)
    write_report(run)
    md = (run / "report.md").read_text()
    assert _verdicts(md)[DYNB] == "did not hold"
    assert ("throughput 192.8 -> 78.6/s, -59 % [-61 %, -57 %] (90 % interval), n = 3 per side - "
            "throughput not higher") in md
    assert "concurrency 1 on n1: average batch" not in md


def test_claims_follow_the_configurations_not_the_names(tmp_path: Path) -> None:
    """Variants named like the lab's, whose configs do not differ the way the names say."""
    run = tmp_path / "names" / "r1"
    manifest(run, "names", [])
    variant(run, "n1", "baseline", config(instance_group=instances(1), dynamic_batching=None))
    level(run, "n1", "baseline", "c8_r1", load=8, stdout=NB / "notebook_02.txt", stats=stats_snapshot(False))
    # no batching at all
    variant(run, "n1", "dynbatch", config(instance_group=instances(1), dynamic_batching=None))
    level(run, "n1", "dynbatch", "c8_r1", load=8, stdout=NB / "notebook_05.txt", stats=stats_snapshot(True))
    variant(run, "n1", "onnx", config(instance_group=instances(1)))  # still the Python backend
    level(run, "n1", "onnx", "c8_r1", load=8, stdout=NB / "notebook_09.txt")
    v = _verdicts((write_report(run), (run / "report.md").read_text())[1])
    assert v[DYNB] == "not measurable here"
    assert v[ONNX] == "not measurable here"
    assert v[QUEUE] == "not measurable here"  # one level each


def test_more_instances_than_cpus_count_as_saturated(tmp_path: Path) -> None:
    run = tmp_path / "inst" / "r1"
    manifest(run, "inst", [])
    (run / "n1").mkdir()
    for name, count, nb in (("x1", 1, "notebook_02.txt"), ("x2", 2, "notebook_06.txt"),
                            ("x4", 4, "notebook_07.txt")):
        variant(run, "n1", name, config(instance_group=[{"count": count, "kind": "KIND_CPU"}]))
        for r, speed in _reps():
            # the runner keeps the host's CPU count in each level's provenance
            level(run, "n1", name, f"c8_r{r}", load=8, stdout=NB / nb, repetition=r, speed=speed, cpus=2)
    write_report(run)
    md = (run / "report.md").read_text()
    assert _verdicts(md)[INST] == "held"
    assert ("2 -> 4 instances: 192.8 -> 118.7/s (-38 % [-42 %, -35 %] (90 % interval), n = 3 per side; "
            "at 2: 2 CPU "
            "instances on 2 CPUs) flat/falls, already saturated") in md


def _rows(values: dict[str, list[float]]) -> list[dict[str, object]]:
    return [{"host": "n1", "variant": v, "mode": "concurrency", "load": 8, "status": "ok", "throughput": t,
             "repetition": i + 1} for v, ts in values.items() for i, t in enumerate(ts)]


MOST = [plans.ObjectiveRecord("most", "throughput", "max")]


def _winner(ev: cl.Evidence) -> str | None:
    """The winner named by a best variant's evidence for one objective."""
    assert isinstance(ev, cl.BestEvidence)
    return ev.winner


def test_best_variant_within_noise_is_a_tie_not_a_winner() -> None:
    # a and b the same within noise (1 % apart); c far behind
    rows = _rows({"a": [100.0, 103.0, 98.0], "b": [99.0, 97.0, 101.0], "c": [50.0, 51.0, 49.0]})
    f = best.best_variant(rows, MOST)
    assert f.verdict == "inconclusive" and _winner(f.evidence[0]) is None
    assert ("`a` at concurrency 8 100.33 vs next `b` 99.00: lead +1 % [-4 %, +7 %], n = 3 per side: a tie: "
            "the lead's interval includes zero") in f.detail
    # decided tie: the two differ by less than the smallest effect
    tight = _rows({"a": [100.0, 100.5, 99.8, 100.1], "b": [99.7, 100.2, 99.9, 100.0]})
    f = best.best_variant(tight, MOST)
    assert f.verdict == "did not hold"
    assert "a tie: they differ by less than the smallest effect (5 %)" in f.detail
    clear = best.best_variant(_rows({"a": [120.0, 123.0, 118.0], "b": [99.0, 97.0, 101.0]}), MOST)
    assert clear.verdict == "held" and _winner(clear.evidence[0]) == "a"
    assert "`a` is the best" in clear.detail
    only_one = best.best_variant(rows[:3], MOST)
    assert only_one.verdict == "not measurable here" and "only `a` qualifies" in only_one.detail


def test_a_lower_is_better_objective_names_the_lowest() -> None:
    rows = [{**r, "p99_us": 1e6 / float(r["throughput"])}  # type: ignore[arg-type]
            for r in _rows({"a": [120.0, 123.0, 118.0], "b": [99.0, 97.0, 101.0]})]
    f = best.best_variant(rows, [plans.ObjectiveRecord("fast", "p99_us", "min")])
    assert f.verdict == "held" and _winner(f.evidence[0]) == "a" and "lead -18 % [" in f.detail


def test_an_unmeasured_variant_is_named_with_its_reason(tmp_path: Path) -> None:
    run = tmp_path / "be" / "r1"
    manifest(run, "be", [], stand_in="Generated stand-in weights (serve_system_weights).")
    variant(run, "n1", "python", config(instance_group=instances(1)))
    level(run, "n1", "python", "c1_r1", load=1, stdout=NB / "notebook_01.txt")
    d = variant(run, "n1", "onnx", config(FOOD_ONNX))
    records.write(d / "variant.json", records.VariantRecord(name="onnx", model="food_classifier_onnx",
                                                            version="1",
                                                            status=records.REFUSED,
                                                            error="unable to find backend 'onnxruntime'"))
    write_report(run)
    md = (run / "report.md").read_text()
    assert _verdicts(md)[ONNX] == "not measurable here"
    assert ("Run but not measured: `onnx`: Triton refused its configuration: unable to find backend "
            "'onnxruntime'.") in md
    # a level perf_analyzer could not measure is named where a claim was not measurable
    (run / "n1" / "python" / "c8_r1").mkdir()
    records.write(run / "n1" / "python" / "c8_r1" / "level.json", records.LevelRecord(
        variant="python", level="c8_r1", mode="concurrency", load=8, repetition=1, status=records.OK,
        start=1.0, end=2.0, attempts=[]))
    (run / "n1" / "python" / "c8_r1" / "perf.stdout").write_text(
        (Path(__file__).parent / "fixtures" / "perf260" / "unstable_count_windows.txt").read_text())
    write_report(run)
    md = (run / "report.md").read_text()
    assert ("No Triton variant with one instance and no dynamic batching was measured at two or more "
            "concurrency levels: `python` at concurrency 1 only (failed at concurrency 8: ") in md
    assert ("(`smallest_effect` in the spec), measured on a stand-in model: the numbers are real for this "
            "model") in md


def test_fastapi_run_plots_its_latency_distribution_and_skips_empty_plots(tmp_path: Path) -> None:
    run = fastapi_run(tmp_path / "fastapi" / "r1")
    out = write_report(run)
    names = sorted(Path(p).name for p in out["plots"])
    assert names == ["node-1_fastapi_latency.png", "node-1_latency_vs_concurrency.png",
                     "node-1_throughput_latency.png"]
    assert all(Path(p).stat().st_size > 10_000 for p in out["plots"])
    md = (run / "report.md").read_text()
    assert "Not drawn (no data): node-1: server-side latency breakdown" in md
    v = _verdicts(md)
    assert v[ONNX] == "inconclusive"
    assert ("(PyTorch)**: **inconclusive**. Inconclusive: one repetition gives no interval: set "
            "`repetitions: 3`. "
            "FastAPI concurrency 1 on node-1: `pytorch`") in md


def test_gpu_plots_are_per_gpu_and_the_busiest_gpu_is_kept(tmp_path: Path) -> None:
    run = lab_run(tmp_path / "lab" / "r1")
    out = write_report(run)
    names = {Path(p).name for p in out["plots"]}
    assert {"node-1_gpu_utilisation.png", "node-1_gpu_memory.png",
            "node-1_latency_vs_concurrency.png"} <= names
    rows = json.loads((run / "summary.json").read_text())["rows"]
    base1 = next(r for r in rows if r["variant"] == "baseline" and r["load"] == 1)
    assert base1["gpu_util"] == pytest.approx(0.11) and base1["gpu_util_max"] == pytest.approx(0.22)
    assert "GPU 11% (busiest 22%)" in (run / "report.md").read_text()


def _plan(run: Path, variant: str, levels: list[tuple[str, int]], **extra: Any) -> None:
    """node-1's plan.json as ``serve-system plan`` writes it: ``variant`` at ``levels`` (id ``c<load>_r<n>``,
    repetition)."""
    records.write(run / "node-1" / "plan.json", plans.HostPlan(
        host="node-1", gpus=2, experiment="lab", run_id="r1", **extra,
        variants=[plans.VariantPlan(
            name=variant, model="food_classifier", version="1", config_pbtxt="", load_body={}, notes=[],
            levels=[plans.LevelPlan(id=lid, mode="concurrency", load=float(lid[1:].split("_")[0]),
                                      repetition=rep, argv=[], retry_argv=[]) for lid, rep in levels],
            input_data=None, perf={})]))


def test_an_interrupted_run_is_refused_unless_partial(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    run = lab_run(tmp_path / "lab" / "r1")
    _plan(run, "dynbatch", [("c8_r1", 1), ("c16_r1", 1)])
    (run / "node-1" / "host.json").write_text(json.dumps({"end": "2026-11-22T05:00:00Z"}))
    with pytest.raises(ServeSystemError, match=r"interrupted run, 1 missing: node-1/dynbatch/c16_r1;"):
        write_report(run)
    assert not (run / "report.md").exists() and not (run / "plots").exists()
    assert main(["report", "--partial", str(run)]) == 0
    assert "partial: 1 missing" in capsys.readouterr().out
    md = (run / "report.md").read_text()
    assert "**Interrupted run, reported with --partial.** Missing: node-1/dynbatch/c16_r1." in md
    assert json.loads((run / "summary.json").read_text())["missing"] == ["node-1/dynbatch/c16_r1"]


def test_an_auto_run_that_decided_early_is_not_interrupted(tmp_path: Path) -> None:
    """``repetitions: auto`` plans up to its budget (here 3) and stopped after the first one: the third
    repetition was never asked for. The README main job's report said "Interrupted run" for this."""
    run = lab_run(tmp_path / "lab" / "r1")
    _plan(run, "dynbatch", [(f"c8_r{r}", r) for r in (1, 2, 3)],
          adaptive={"start": 2, "max": 3, "minutes": 1.5})
    (run / "node-1" / "host.json").write_text(json.dumps({"end": "2026-11-22T05:00:00Z"}))
    # c8_r1 is measured (lab_run); c8_r2, one of the first repetitions, is not: that one is missing
    assert runs.missing(run, Manifest()) == ["node-1/dynbatch/c8_r2"]
    shutil.copytree(run / "node-1" / "dynbatch" / "c8_r1", run / "node-1" / "dynbatch" / "c8_r2")
    assert runs.missing(run, Manifest()) == []
    write_report(run)
    assert "Interrupted run" not in (run / "report.md").read_text()
    # an extra repetition that was started and not finished is missing (an interrupted auto run)
    (run / "node-1" / "dynbatch" / "c8_r3").mkdir()
    (run / "node-1" / "dynbatch" / "c8_r3" / "perf.stdout").write_text("")
    assert runs.missing(run, Manifest()) == ["node-1/dynbatch/c8_r3"]


def test_compare_reads_what_report_wrote(tmp_path: Path) -> None:
    lab = lab_run(tmp_path / "lab" / "r1")
    fa = fastapi_run(tmp_path / "fastapi" / "r1")
    write_report(lab)
    write_report(fa)
    rows = compare([fa, lab], [1])
    assert [(r["experiment"], r["variant"]) for r in rows] == [
        ("fastapi", "onnx"), ("fastapi", "pytorch"), ("lab", "baseline"), ("lab", "onnx")]
    assert rows[3]["throughput"] == pytest.approx(138.444)


def _arrivals(tmp_path: Path, constant_p99_us: int | None, constant_rate: float = 40) -> str:
    """Poisson at 40 requests/s (a real perf_analyzer 2.60 run, three times) beside a constant-arrivals twin.

    The twin at 40 requests/s is the same output with its p99 set by the test (varied by
    :data:`SPREAD` per repetition); at 120 requests/s it is a real rehearsal-node run.
    """
    run = tmp_path / "arr" / "r1"
    manifest(run, "arr", [])
    cfg = config(instance_group=instances(1), dynamic_batching=None)
    variant(run, "n1", "poisson", cfg)
    variant(run, "n1", "constant", cfg)
    for r, speed in _reps():
        level(run, "n1", "poisson", f"rr40_r{r}", mode="request_rate", load=40, distribution="poisson",
              stdout=P260 / "rate_40_poisson_grpc.stdout", csv=P260 / "rate_40_poisson_grpc.csv",
              repetition=r)
        if constant_p99_us is None:
            level(run, "n1", "constant", f"rr120_r{r}", mode="request_rate", load=constant_rate,
                  distribution="constant", stdout=FIX / "rehearsal" / "arrivals_constant_120.stdout",
                  csv=FIX / "rehearsal" / "arrivals_constant_120.csv", repetition=r)
        else:
            d = level(run, "n1", "constant", f"rr40_r{r}", mode="request_rate", load=40,
                      distribution="constant", repetition=r)
            header, values = (P260 / "rate_40_poisson_grpc.csv").read_text().splitlines()
            cols = values.split(",")
            cols[header.split(",").index("p99 latency")] = str(round(constant_p99_us / speed))
            (d / "perf.csv").write_text(header + "\n" + ",".join(cols) + "\n")
    write_report(run)
    return (run / "report.md").read_text()


def test_poisson_arrivals_against_constant_at_the_same_rate(tmp_path: Path) -> None:
    claim = POIS
    md = _arrivals(tmp_path / "a", 21_000)
    assert _verdicts(md)[claim] == "held"
    assert ("40 requests/s on n1: p99 21.01 ms constant (`constant`) -> 42.44 ms Poisson (`poisson`), "
            "+102 % [+92 %, +113 %] (90 % interval), n = 3 per side") in md
    md = _arrivals(tmp_path / "b", 50_000)
    assert _verdicts(md)[claim] == "did not hold"
    assert "-15 % [-19 %, -11 %] (90 % interval), n = 3 per side; queue 4.54 ms -> 4.54 ms - not higher" in md
    md = _arrivals(tmp_path / "c", 41_500)  # +2 %, within the spread: undecided, with an estimate
    assert _verdicts(md)[claim] == "inconclusive"
    assert re.search(r"n = 3 per side; queue 4.54 ms -> 4.54 ms - inconclusive: about \d+ more "
                     r"repetitions? per side would likely decide it", md)
    md = _arrivals(tmp_path / "d", None, 120)  # different rates are not compared
    assert _verdicts(md)[claim] == "not measurable here"


def test_batches_formed_are_told_where_throughput_was_not_measured(tmp_path: Path) -> None:
    run = tmp_path / "db" / "r1"
    manifest(run, "db", [])
    variant(run, "n1", "baseline", config(instance_group=instances(1), dynamic_batching=None))
    level(run, "n1", "baseline", "c8_r1", load=8, stdout=NB / "notebook_02.txt", stats=stats_snapshot(False))
    variant(run, "n1", "dynbatch", config(instance_group=instances(1), dynamic_batching=DYN))
    level(run, "n1", "dynbatch", "c8_r1", load=8, stdout=P260 / "unstable_count_windows.txt",
          stats=stats_snapshot(True))
    write_report(run)
    md = (run / "report.md").read_text()
    assert _verdicts(md)[DYNB] == "not measurable here"
    assert ("Triton's statistics alone (no throughput to compare) give average batches concurrency 8: "
            "1.00 (`baseline`) -> 3.72 (`dynbatch`).") in md


def test_summary_stats_per_level_and_the_noise_flag(tmp_path: Path) -> None:
    # repetitions 20 % apart at the dynamic batching level: noisy (cv >= 10 %); the rest about 3 %
    run = lab_run(tmp_path / "lab" / "r1", repetitions=3)
    noisy = lab_run(tmp_path / "noisy" / "r1", repetitions=3, spread=(1.0, 0.8, 1.2))
    write_report(run)
    out = write_report(noisy)
    with (run / "summary_stats.csv").open(newline="") as fh:
        stats = list(csv.DictReader(fh))
    thr = next(s for s in stats if (s["variant"], s["load"], s["metric"]) == ("dynbatch", "8", "throughput"))
    assert (thr["n"], thr["noisy"]) == ("3", "False")
    assert float(thr["ci_low"]) < float(thr["mean"]) < float(thr["ci_high"])
    assert float(thr["mean"]) == pytest.approx(78.6, abs=0.1)
    assert float(thr["cv"]) == pytest.approx(0.03, abs=0.002)
    # the notebook printed no percentiles
    assert {s["metric"] for s in stats} == {"throughput", "latency_avg_us"}
    assert len(json.loads((run / "summary.json").read_text())["stats"]) == len(stats) == 14
    md = (run / "report.md").read_text()
    assert "| node-1 | dynbatch | conc 8 | 3 | 78.6 [72.8, 84.5] | 101.29 [93.74, 108.85] | - | - |  |" in md
    assert "Noisy levels" not in md
    nmd = (noisy / "report.md").read_text()
    assert "Noisy levels (7): node-1 / baseline @ conc 1: throughput cv 20 %, latency_avg cv 20 %;" in nmd
    assert "| **noisy** |" in nmd
    # the same effect, measured 20 % apart: its interval five times as wide (+42 % to +58 % quiet)
    assert "throughput 52.4 -> 78.6/s, +50 % [+5 %, +114 %] (90 % interval), n = 3 per side." in nmd
    assert len(out["plots"]) == 6


def test_the_smallest_effect_comes_from_the_spec_as_run(tmp_path: Path) -> None:
    run = lab_run(tmp_path / "lab" / "r1", repetitions=3)
    doc = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**doc, "spec": {"smallest_effect": 0.55}}))
    write_report(run)
    md = (run / "report.md").read_text()
    assert "judged against the smallest effect of interest, 55 % (`smallest_effect` in the spec)" in md
    # +50 % [+42 %, +58 %] (90 %) straddles 55 %: inconclusive now
    assert _verdicts(md)[DYNB] == \
        "inconclusive"


def test_a_level_whose_windows_vary_is_flagged_noisy(tmp_path: Path) -> None:
    """perf_analyzer -v windows: concurrency 4's last three vary 14 % (flagged), concurrency 1's 8 %."""
    run = tmp_path / "windows" / "r1"
    manifest(run, "windows", [])
    variant(run, "n1", "one", config(instance_group=instances(1)))
    for lid, load in (("c1_r1", 1), ("c4_r1", 4)):
        level(run, "n1", "one", lid, load=load, stdout=P260 / "verbose_windows_1_4.stdout")
    write_report(run)
    with (run / "summary.csv").open(newline="") as fh:
        rows = {r["load"]: r for r in csv.DictReader(fh)}
    assert (rows["1"]["windows"], rows["4"]["windows"]) == ("6", "3")
    assert float(rows["4"]["window_cv"]) == pytest.approx(0.141, abs=0.002)
    md = (run / "report.md").read_text()
    assert "| n1 | one | conc 4 | 1 | 205.3 | 19.39 | 27.61 | 43.91 | 14.1 % | **noisy** |" in md
    assert "| n1 | one | conc 1 | 1 | 131.4 | 7.61 | 11.89 | 17.91 | 8.2 % |  |" in md
    assert "Noisy levels (1): n1 / one @ conc 4: windows cv 14 %." in md


def test_a_level_keeps_each_metric_s_mean_and_samples() -> None:
    """One mean per metric of ``METRICS``, in its order; a metric named at run time read with ``mean``."""
    assert [f.name for f in dataclasses.fields(fnd.Level)] == ["repetitions", "samples", *fnd.METRICS]
    rows: list[Row] = [{"host": "h", "variant": "v", "mode": "concurrency", "load": 4, "status": Status.OK,
                        "throughput": t, "p95_us": None} for t in (10.0, 20.0)]
    (lv,) = fnd.levels(rows).values()
    assert lv.repetitions == 2 and lv.throughput == lv.mean("throughput") == 15.0
    assert lv.samples["throughput"] == [10.0, 20.0] and lv.p95_us is None and lv.samples["p95_us"] == []
    with pytest.raises(KeyError, match="not a metric"):
        lv.mean("repetitions")


def test_evidence_is_written_under_its_json_names() -> None:
    """A field named after a keyword writes the keyword; a batching comparison at a request rate writes
    no throughput (none was judged)."""
    e = cl.EffectRecord(0.1, 0.05, 0.15, (3, 3), 0.9, 0.08)
    at_rate = cl.BatchingEvidence("h", "a", "b", "request_rate", 40.0, 1.0, 2.0, e, verdict="held")
    assert list(at_rate.to_json()) == ["host", "without", "with", "mode", "load", "avg_batch_without",
                                       "avg_batch_with", "batch_effect", "verdict"]
    assert at_rate.to_json()["batch_effect"] == {"change": 0.1, "ci_low": 0.05, "ci_high": 0.15, "n": [3, 3],
                                                 "level": 0.9, "detectable": 0.08}
    assert cl.InstanceStep(1, 2, e, "held", False).to_json()["from"] == 1
