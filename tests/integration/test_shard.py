"""One sweep sharded over both rehearsal nodes (real Triton on CPU, real perf_analyzer): every
candidate measured on exactly one node, the reference on each, one merged report.

The per-level times of the run are printed (``pytest -s``) and kept in the test's folder; the
estimate for N nodes is bench/shard_estimate.py's (it reads such a run folder).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from serve_system.experiment import shard as shardmod
from serve_system.experiment.manifest import Manifest
from serve_system.node import plans, records

from .ansible_run import run_playbook
from .test_experiments import FOOD_INPUT, _common, _write
from .windows import Windows

pytestmark = [pytest.mark.integration, pytest.mark.windows("behaviour")]

CANDIDATES = {"d100_i1", "d100_i2", "d2000_i1", "d2000_i2"}


def _spec(windows: Windows) -> dict:  # type: ignore[type-arg]
    return {
        "name": "sharded",
        "description": "A small dynamic-batching sweep spread over the nodes.",
        "model": "food_classifier",
        "base_config": "model_repository/food_classifier/config.pbtxt",
        "on_missing_gpus": "adapt",
        "load": {"mode": "concurrency", "levels": [4]},
        "perf": windows.spec_perf({"batch_size": 1, "input_data": FOOD_INPUT}),
        "warmup": {"requests": windows.warmup},
        "repetitions": 2,
        "variants": [{"name": "baseline", "config": {"dynamic_batching": None}}],
        "sweep": {"name": "d{delay}_i{count}", "grid": {"delay": [100, 2000], "count": [1, 2]},
                  "config": {"instance_group": [{"count": "{count}", "kind": "KIND_CPU"}],
                             "dynamic_batching": {"max_queue_delay_microseconds": "{delay}"}}},
        "shard": {"reference": "baseline"},
        "objectives": [{"name": "most_throughput_at_4", "metric": "throughput", "goal": "max", "at_load": 4}],
    }


def test_sweep_sharded_over_both_nodes(rehearsal_cluster, tmp_path: Path,
                                       windows: Windows) -> None:  # type: ignore[no-untyped-def]
    cluster = rehearsal_cluster
    names = sorted(n.name for n in cluster.nodes)
    path = _write(tmp_path, "sharded", _spec(windows))
    results = tmp_path / "results"
    res = run_playbook("../experiments/dynbatch.yml", cluster.inventory, *_common(path, results, "sh1"),
                       limit=",".join(names))
    assert res.rc == 0, res.tail(80)
    run = results / "sharded" / "sh1"
    shard = shardmod.from_record(records.read(run / "manifest.json", Manifest).shard)
    assert shard is not None and shard.hosts == names and shard.reference == "baseline"
    # the plan's own deal: every candidate on one host, two each (equal costs: round-robin)
    assert sorted(c for cs in shard.assignment.values() for c in cs) == sorted(CANDIDATES)
    assert [len(cs) for cs in shard.assignment.values()] == [2, 2]

    measured: dict[str, list[str]] = {}
    times: list[str] = []
    spans: dict[str, list[float]] = {}  # each host's first level start, last level end
    for host in names:
        plan = records.read(run / host / "plan.json", plans.HostPlan)
        assert plan.shard is not None and plan.shard.candidates == shard.assignment[host]
        assert [v.name for v in plan.variants] == shard.variants_of(host)
        for vdir in sorted(p for p in (run / host).iterdir() if p.is_dir() and not p.name.startswith(".")):
            levels = [records.read(ld / "level.json", records.LevelRecord)
                      for ld in sorted(vdir.iterdir()) if records.level_done(ld)]
            if levels:
                measured.setdefault(vdir.name, []).append(host)
                span = spans.setdefault(host, [float("inf"), float("-inf")])
                span[:] = [min(span[0], *(lv.start for lv in levels)),
                           max(span[1], *(lv.end for lv in levels))]
                # every level recorded (a busy 2-core machine may fail one: recorded with its reason)
                assert {lv.level for lv in levels} == {"c4_r1", "c4_r2"}
                assert any(lv.status == "ok" for lv in levels), [(lv.level, lv.error) for lv in levels]
                vrec = records.read(vdir / "variant.json", records.VariantRecord)
                times.append(f"{host} {vdir.name}: switch {vrec.switch_seconds or 0:.1f} s, warm-up "
                             f"{vrec.warmup_seconds or 0:.1f} s, levels "
                             + ", ".join(f"{lv.level} {lv.end - lv.start:.1f} s" for lv in levels))
    # every candidate exactly once across the hosts, the reference on each
    assert measured == {"baseline": names, **{c: [shard.host_of(c)] for c in CANDIDATES}}
    # the hosts measure at once, not in turn (the role's calls are the same include on every host)
    (a0, a1), (b0, b1) = spans[names[0]], spans[names[1]]
    assert a0 < b1 and b0 < a1, f"the hosts measured in turn: {spans}"
    print("\n".join(["", "per-run times (s):", *times]))
    (tmp_path / "times.txt").write_text("\n".join(times) + "\n")

    # one merged report at the run's root, with the shard's view in summary.json
    assert sorted(p.relative_to(run).as_posix() for p in run.rglob("report.md")) == ["report.md"]
    view = json.loads((run / "summary.json").read_text())["shard"]
    assert view["reference"] == "baseline" and view["hosts"] == names
    assert {(m["variant"], m["host"]) for m in view["measured"]} == {
        (c, shard.host_of(c)) for c in CANDIDATES}
    refs = {(n["host"], n["load"]) for n in view["nodes"] if n["metric"] == "throughput"}
    assert refs == {(h, float(load)) for h in names for load in (4,)}
    assert all(1 <= n["n"] <= 2 and n["factor"] > 0 for n in view["nodes"])
    for c in view["candidates"]:  # each against its own node's reference, normalised to the median node
        assert c["vs_reference"]["n_reference"] >= 1 and c["normalised"] > 0
    md = (run / "report.md").read_text()
    assert "## Sharded over 2 nodes" in md and "### Best across nodes (normalised)" in md
    for c in CANDIDATES:
        assert f"| {c} | {shard.host_of(c)} | throughput |" in md
