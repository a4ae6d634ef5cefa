"""A short ``halving`` search through the ``experiment`` role on a rehearsal node (real Triton on CPU,
real perf_analyzer, the MNIST stand-in): 4 candidates of the mnist_cpu_sweep grid, 2 rungs of 2
measurements with the behaviour windows (windows.py: 300 ms, then 600 ms). The role asks
``serve-system decide`` for every batch; the report has the search path and the winner or the tie; a
re-run with the same run id measures nothing again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from serve_system.node import plans, records

from .ansible_run import REPO, run_playbook
from .windows import Windows

pytestmark = [pytest.mark.integration, pytest.mark.windows("behaviour")]


def _spec(tmp_path: Path, windows: Windows) -> Path:
    spec = yaml.safe_load((REPO / "experiments" / "specs" / "mnist_cpu_sweep.yml").read_text())
    dest = tmp_path / "model_repository" / "onnx-mnist-cpu" / "config.pbtxt"
    dest.parent.mkdir(parents=True)
    shutil.copyfile(REPO / "model_repository" / "onnx-mnist-cpu" / "config.pbtxt", dest)
    spec["load"]["levels"] = [1, 8]
    spec["sweep"]["grid"] = {"instances": [1, 4], "delay": [100, 4000]}
    spec["perf"].update(stability_percentage=60, max_trials=8)
    spec["warmup"] = {"requests": 10}
    spec["search"] = {"strategy": "halving", "objective": "most_throughput_at_8", "repetitions": 2,
                      "rungs": 2, "window_ms": windows.window_ms, "budget": {"runs": 16}}
    path = tmp_path / "mnist_cpu_sweep.yml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_a_short_halving_search_through_the_role(rehearsal_cluster, tmp_path: Path,
                                                 windows: Windows) -> None:  # type: ignore[no-untyped-def]
    cluster = rehearsal_cluster
    node = cluster.nodes[0]
    path = _spec(tmp_path, windows)
    first, second = windows.window_ms, 2 * windows.window_ms
    results = tmp_path / "results"
    args = ("-e", f"experiment_spec={path}", "-e", f"experiment_results_dir={results}", "-e", "run_id=s1")
    res = run_playbook("../experiments/mnist_cpu_sweep.yml", cluster.inventory, *args, limit=node.name)
    assert res.rc == 0, res.tail(80)
    assert f"rung 1 of 2: 4 candidate(s) x 2 measurement(s), {first} ms windows" in res.flat, res.tail(80)
    assert "search decided" in res.flat, res.tail(80)
    run = results / "mnist_cpu_sweep" / "s1"
    plan = records.read(run / node.name / "plan.json", plans.HostPlan)
    assert plan.search is not None and [r.window_ms for r in plan.search.rungs] == [first, second]
    rows = json.loads((run / "summary.json").read_text())["rows"]
    measured = [(r["variant"], r["repetition"]) for r in rows]
    assert len(measured) == len(set(measured)) <= 16
    names = {f"i{i}_d{d}" for i in (1, 4) for d in (100, 4000)}
    assert {(n, r) for n in names for r in (1, 2)} <= set(measured)  # rung 1: every candidate, twice
    assert all(r["load"] == 8 and r["status"] == "ok" for r in rows), rows
    # the argv of rung 2 used the longer window
    for n, r in measured:
        if r > 2:
            lrec = records.read(run / node.name / n / f"c8_r{r}" / "level.json", records.LevelRecord)
            argv = lrec.attempts[0].argv
            assert argv[argv.index("--measurement-interval") + 1] == str(second)
    md = (run / "report.md").read_text()
    section = md.split("\n## Search\n", 1)[1].split("\n## ", 1)[0]
    assert "| candidate | rung | n |" in section and all(f"`{n}`" in section for n in names)
    assert "**Winner**: " in section or "**Result**: a tie of" in section, section
    assert records.read(run / node.name / "host.json", records.HostRecord).baseline_restored
    # the same run id again: the search is decided from what it measured, nothing is measured again
    stamps = {p: p.stat().st_mtime for p in (run / node.name).glob("*/*/level.json")}
    again = run_playbook("../experiments/mnist_cpu_sweep.yml", cluster.inventory, *args, limit=node.name)
    assert again.rc == 0, again.tail(80)
    assert "search decided" in again.flat and "rung 1 of 2" not in again.flat, again.tail(80)
    assert {p: p.stat().st_mtime for p in (run / node.name).glob("*/*/level.json")} == stamps


def test_a_halving_search_sharded_over_both_nodes(rehearsal_cluster, tmp_path: Path,
                                                  windows: Windows) -> None:  # type: ignore[no-untyped-def]
    """The same short search with ``shard:``: each candidate on one node, the reference (the first
    candidate) on both in every rung, the nodes measuring at once, one search decided on both nodes'
    records, and one Search section in the run's report."""
    cluster = rehearsal_cluster
    names = sorted(n.name for n in cluster.nodes)
    path = _spec(tmp_path, windows)
    spec = yaml.safe_load(path.read_text())
    spec["shard"] = {"reference": "first"}
    spec["search"]["budget"] = {"runs": 24}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    results = tmp_path / "results"
    args = ("-e", f"experiment_spec={path}", "-e", f"experiment_results_dir={results}", "-e", "run_id=sh1")
    res = run_playbook("../experiments/mnist_cpu_sweep.yml", cluster.inventory, *args, limit=",".join(names))
    assert res.rc == 0, res.tail(80)
    assert "search decided" in res.flat, res.tail(80)
    run = results / "mnist_cpu_sweep" / "sh1"
    manifest = json.loads((run / "manifest.json").read_text())
    shard = manifest["shard"]
    reference = shard["reference"]
    home = {c: h for h, cs in shard["assignment"].items() for c in cs}
    assert reference == "i1_d100" and sorted(home) == ["i1_d4000", "i4_d100", "i4_d4000"]
    rows = json.loads((run / "summary.json").read_text())["rows"]
    assert all(r["load"] == 8 for r in rows), rows
    for r in rows:  # a candidate only where the shard put it
        assert r["variant"] == reference or r["host"] == home[r["variant"]], r
    reps = {r["repetition"] for r in rows}
    assert {(r["host"], r["repetition"]) for r in rows if r["variant"] == reference} == {
        (h, rep) for h in names for rep in reps}  # the reference on both nodes in every rung measured
    assert {(r["variant"], r["repetition"]) for r in rows if r["variant"] != reference} >= {
        (c, rep) for c in home for rep in (1, 2)}  # rung 1: every candidate, twice
    spans = {}
    for h in names:  # the nodes measure rung 1 at once
        lv = [records.read(p, records.LevelRecord) for p in (run / h).glob("*/c8_r[12]/level.json")]
        spans[h] = (min(x.start for x in lv), max(x.end for x in lv))
    (a0, a1), (b0, b1) = spans.values()
    assert a0 < b1 and b0 < a1, f"the nodes measured in turn: {spans}"
    md = (run / "report.md").read_text()
    section = md.split("\n## Search\n", 1)[1].split("\n## ", 1)[0]
    assert section.count("### ") == 1 and "### sharded over 2 hosts: halving" in section, section
    assert f"| `{reference}` | every host |" in section
    assert all(f"| `{c}` | {h} |" in section for c, h in home.items()), section
    assert "**Winner**: " in section or "**Result**: a tie of" in section, section
    for h in names:
        assert records.read(run / h / "host.json", records.HostRecord).baseline_restored
