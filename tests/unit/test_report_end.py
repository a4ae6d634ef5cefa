"""report.md says when a run ended, from the hosts' own host.json files (raw files, not memory)."""

from __future__ import annotations

import json
from pathlib import Path

from serve_system.node import records
from serve_system.results.report import write_report

FIX = Path(__file__).parent / "fixtures"


def _run(tmp_path: Path, ends: dict[str, str | None]) -> Path:
    run = tmp_path / "dynbatch" / "r1"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps(
        {"experiment": "dynbatch", "run_id": "r1", "start": "2026-11-21T18:54:30Z", "hosts": sorted(ends)}))
    for host, end in ends.items():
        level = run / host / "baseline" / "c1_r1"  # one measured level (the notebook's first output)
        level.mkdir(parents=True)
        records.write(level / "level.json", records.LevelRecord(
            variant="baseline", level="c1_r1", mode="concurrency", load=1, repetition=1, status=records.OK,
            start=1.0, end=2.0, attempts=[]))
        (level / "perf.stdout").write_text((FIX / "perf" / "notebook_01.txt").read_text())
        if end:
            (run / host / "host.json").write_text(json.dumps({"host": host, "end": end,
                                                              "baseline_restored": True}))
    return run


def test_run_end_is_the_last_hosts_end(tmp_path: Path) -> None:
    run = _run(tmp_path, {"n1": "2026-11-21T18:58:01+00:00", "n2": "2026-11-21T18:59:12+00:00"})
    write_report(run)
    md = (run / "report.md").read_text()
    assert "Started 2026-11-21T18:54:30Z, ended 2026-11-21T18:59:12+00:00; hosts: n1, n2." in md


def test_a_host_without_host_json_is_named_as_not_finished(tmp_path: Path) -> None:
    run = _run(tmp_path, {"n1": "2026-11-21T18:58:01+00:00", "n2": None})
    write_report(run)  # no plan.json: nothing says n2 had more to do
    assert "ended (not finished on n2); hosts: n1, n2." in (run / "report.md").read_text()


def test_a_run_without_its_manifest_is_judged_by_the_default_objectives(tmp_path: Path) -> None:
    """Found while typing the manifest (issue 41): a run folder with hosts and no manifest.json ended in
    a KeyError ('smallest_effect'); it is reported with the spec's defaults."""
    from report_trees import lab_run

    run = lab_run(tmp_path / "lab" / "r1")
    (run / records.MANIFEST_FILE).unlink()
    out = write_report(run)
    text = (run / "report.md").read_text()
    assert out["rows"] == 7 and text.startswith("# lab: run r1\n")
    assert [b.objective for b in out["best"] if b] == ["max_throughput"]
