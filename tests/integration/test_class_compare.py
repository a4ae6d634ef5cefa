"""``serve-system compare --class`` over three real runs on the rehearsal nodes, naming the outlier.

Three students' runs of the shipped dynbatch spec, short (concurrency 1, one repetition), each in its
own run folder, one node at a time: node 1, node 2, then node 1 again with its Triton slowed down
(a node with a faulty accelerator, made real: the rehearsal nodes serve on CPU).

The slowdown must be the node's own, and deterministic. Busy loops (tried first) slow the whole
machine, since the rehearsal nodes share its two cores, and cgroup CPU quotas cannot be set here (the
cgroup file system is read-only). So Triton is duty-cycled: stopped (SIGSTOP) for 150 ms of every
200 ms, so it serves about a quarter of the time. Concurrency 1 keeps the healthy runs close (they
agree within a few per cent there); with three nodes the median is always a healthy one, so a healthy
node can never be named, and the slowed one is named once it is further from the median than about
five times the healthy nodes' difference.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from serve_system.cli import main

from .ansible_run import run_playbook
from .test_experiments import _common, _dynbatch, _write

pytestmark = pytest.mark.integration

#: Triton stopped, then running, in each period (seconds): it runs a quarter of the time
STOPPED_S, RUNNING_S = 0.15, 0.05
#: the most the duty cycle may last if the test dies without stopping it
CYCLE_LIMIT_S = 900


def test_compare_class_names_the_slowed_node(rehearsal_cluster,
                                             tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cluster = rehearsal_cluster
    one, two = cluster.nodes[0], cluster.nodes[1]
    spec = _dynbatch(tmp_path, levels=[1])
    path = _write(tmp_path, "dynbatch", spec)
    results = tmp_path / "results"
    for run_id, node in (("cls-a", one), ("cls-b", two)):
        res = run_playbook("../experiments/dynbatch.yml", cluster.inventory, *_common(path, results, run_id),
                           limit=node.name)
        assert res.rc == 0, res.tail(80)
    cycle = (f"end=$(( $(date +%s) + {CYCLE_LIMIT_S} )); while [ $(date +%s) -lt $end ]; do "
             f"pkill -STOP -x tritonserver; sleep {STOPPED_S}; "
             f"pkill -CONT -x tritonserver; sleep {RUNNING_S}; done; pkill -CONT -x tritonserver")
    started = cluster.exec(one, "sh", "-c", f"setsid sh -c '{cycle}' >/dev/null 2>&1 & echo $!")
    pid = started.stdout.strip()
    assert pid.isdigit(), started.stdout + started.stderr
    try:
        res = run_playbook("../experiments/dynbatch.yml", cluster.inventory, *_common(path, results, "cls-c"),
                           limit=one.name)
    finally:
        cluster.exec(one, "kill", pid, check=False)
        cluster.exec(one, "pkill", "-CONT", "-x", "tritonserver", check=False)
    assert res.rc == 0, res.tail(80)

    runs = [results / "dynbatch" / r for r in ("cls-a", "cls-b", "cls-c")]
    out = tmp_path / "class"
    assert main(["compare", "--class", *map(str, runs), "--out", str(out)]) == 0
    doc = json.loads((out / "class.json").read_text())
    slowed = f"cls-c/{one.name}"
    assert sorted(n["node"] for n in doc["nodes"]) == sorted([f"cls-a/{one.name}", two.name, slowed])
    named = {(o["variant"], o["metric"]) for o in doc["outliers"] if o["node"] == slowed}
    assert {("baseline", "throughput"), ("dynbatch", "throughput")} <= named, doc["cells"]
    assert {o["node"] for o in doc["outliers"]} == {slowed}, doc["outliers"]
    md = (out / "class.md").read_text()
    thr = next(o for o in doc["outliers"] if (o["variant"], o["metric"]) == ("baseline", "throughput"))
    assert thr["value"] < 0.8 * thr["median"]
    assert f"{slowed}: {thr['value']:,.1f}/s vs class median {thr['median']:,.1f}/s" in md
    assert (out / "plots" / "box_throughput_concurrency_1.png").stat().st_size > 0
    assert doc["pooled_nodes"] and len(doc["findings"]) > 0
