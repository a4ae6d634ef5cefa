"""Contention the node's processes do not show: a busy CPU that neither Triton, the measuring client
nor any process in the node's /proc accounts for (another tenant of the host, a rehearsal machine's
other work) counts as other work; the measuring client's own CPU time comes from its rusage, since
it has exited by the level's second reading."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from report_trees import lab_run
from test_sequential import _proc

from serve_system.node import nodeproc, plans, records
from serve_system.results import tree


def _readings(tmp_path: Path, busy_ticks: int, triton_ticks: int) -> tuple[dict, dict]:  # type: ignore[type-arg]
    """Two readings 10 s apart on a 2-CPU node (2000 ticks): ``busy_ticks`` of user time in all,
    Triton's share of it ``triton_ticks``; no other process of the node used the CPU."""
    _proc(tmp_path / "a", (0, 0, 0, 0, 0, 0, 0, 0), 0, {10: ("tritonserver", 0), 12: ("sshd", 0)})
    _proc(tmp_path / "b", (busy_ticks, 0, 0, 2000 - busy_ticks, 0, 0, 0, 0), 0,
          {10: ("tritonserver", triton_ticks), 12: ("sshd", 0)})
    before, after = nodeproc.cpu_snapshot(tmp_path / "a"), nodeproc.cpu_snapshot(tmp_path / "b")
    before["t"], after["t"] = 0.0, 10.0
    return before, after


def test_busy_time_no_process_accounts_for_is_other_work(tmp_path: Path) -> None:
    # the CPU fully busy, Triton 16 CPU-s, the client 4 CPU-s (exited: only its rusage knows): quiet
    before, after = _readings(tmp_path, 2000, 1600)
    quiet = nodeproc.contention(before, after, client_cpu_s=4.0)
    assert quiet.measuring == pytest.approx(1.0) and quiet.unseen == pytest.approx(0.0)
    assert quiet.cause is None
    # without the client's rusage its 4 CPU-s would look like someone else's: contention
    assert nodeproc.contention(before, after).unseen == pytest.approx(0.2)
    # Triton and the client got 3 CPU-s of 20, the CPU busy all along: 85 % went to work the node
    # does not show (the rehearsal machine's other work): flagged, and said so
    before, after = _readings(tmp_path, 2000, 200)
    hogged = nodeproc.contention(before, after, client_cpu_s=1.0)
    assert hogged.others == 0.0 and hogged.unseen == pytest.approx(0.85)
    assert hogged.cause is not None and hogged.cause.startswith("other processes took 85 % of the node's CPU")
    assert "85 % by work the node's processes do not account for" in hogged.cause


def test_unseen_work_counts_in_the_threshold_and_the_summary(tmp_path: Path) -> None:
    c = records.Contention(seconds=5, cpus=2, busy=0.6, others=0.1, measuring=0.4, unseen=0.1)
    assert records.contention_cause(c) is None  # 20 % of the CPU to other work: below 25 %
    c.unseen = 0.15
    assert (records.contention_cause(c) or "").startswith("other processes took 25 %")
    c = records.Contention(seconds=5, cpus=2, busy=0.4, others=0.0, measuring=0.4, unseen=None)
    assert records.contention_cause(c) is None  # an older record: no unseen share


def test_the_client_cpu_comes_from_its_rusage(tmp_path: Path) -> None:
    # a child that burns CPU then exits: the attempt records its CPU seconds (wait4's rusage)
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
    attempt, _ = nodeproc.run_capped([sys.executable, "-c", burn], tmp_path, memory_mb=4096, timeout_s=60)
    assert attempt.rc == 0 and attempt.cpu_s is not None and attempt.cpu_s >= 0.3


def test_the_summary_counts_unseen_work_as_other(tmp_path: Path) -> None:
    run = lab_run(tmp_path / "lab" / "r1", repetitions=3, spread=(1.0, 1.0, 1.0))
    path = run / "node-1" / "onnx" / "c1_r2" / "level.json"
    data = json.loads(path.read_text())
    data["contention"] = {"seconds": 9.0, "cpus": 2, "busy": 1.0, "steal": 0.0, "pressure": 0.9,
                          "others": 0.05, "measuring": 0.25, "unseen": 0.7, "top": []}
    path.write_text(json.dumps(data))
    row = next(r for r in tree.collect(run) if r["variant"] == "onnx" and r["repetition"] == 2)
    assert row["other_cpu"] == 0.75 and "work the node's processes do not account for" in row["contention"]


def test_a_run_measured_wholly_under_contention_says_so(tmp_path: Path) -> None:
    """Every level of an auto run measured under contention: no claim reads them, and each says that
    contention is why (not that nothing was measured)."""
    from test_adaptive import _plan

    from serve_system.results import findings, report

    run = lab_run(tmp_path / "lab" / "r1", repetitions=3, spread=(1.0, 1.0, 1.0))
    _plan(run, plans.AdaptivePlan(start=3, max=4))
    for path in sorted(run.glob("node-1/*/*/level.json")):
        data = json.loads(path.read_text())
        data["contention"] = {"seconds": 9.0, "cpus": 2, "busy": 1.0, "steal": 0.0, "pressure": 0.9,
                              "others": 0.02, "measuring": 0.4, "unseen": 0.58, "top": []}
        path.write_text(json.dumps(data))
    report.write_report(run, partial=True)
    found = {f["key"]: f for f in json.loads((run / "summary.json").read_text())["findings"]}
    assert {f["verdict"] for f in found.values()} == {findings.NOT_MEASURABLE}
    for f in found.values():
        assert f["detail"].startswith("Nothing counts in this run: all ") and "under contention" in \
            f["detail"] and "re-run it on a quiet node" in f["detail"], f
    assert "no level has a record" not in (run / "report.md").read_text()


def test_a_variant_whose_levels_were_all_contended_is_not_counted_not_failed() -> None:
    from serve_system.results import reasons

    rows = [{"host": "n1", "variant": v, "load": 8.0, "repetition": rep, "status": "ok", "throughput": 100.0,
             "contention": "other processes took 40 % of the node's CPU" if v == "b" else None}
            for v in ("a", "b") for rep in (1, 2, 3)]
    judged = reasons.set_aside(rows)
    assert {r["status"] for r in judged if r["variant"] == "b"} == {reasons.CONTENDED}
    objective = plans.ObjectiveRecord("max_throughput", "throughput", "max", at_load=8)
    text = reasons.unqualified(objective, judged, {"a"})
    assert text.startswith(" (`b`: not counted at load 8: measured under contention, not counted (the cause: "
                           "`contention` in summary.csv)"), text
    judged[3]["status"] = "failed"  # one of its levels failed outright: it failed
    assert "`b`: failed at load 8" in reasons.unqualified(objective, judged, {"a"})
