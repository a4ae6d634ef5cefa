"""``serve-system compare --class`` over four real runs on the rehearsal nodes, naming the outlier.

Four students' runs of the shipped dynbatch spec, short (concurrency 1, one repetition), each in its
own run folder, one node at a time: node 1, node 2, node 2 again, then node 1 with its Triton slowed
down (a node with a faulty accelerator, made real: the rehearsal nodes serve on CPU).

The slowdown must be the node's own. Busy loops (tried first) slow the whole machine, since the
rehearsal nodes share its two cores, and cgroup CPU quotas cannot be set here (the cgroup file
system is read-only). So Triton is duty-cycled: stopped (SIGSTOP) for 180 ms of every 200 ms, so it
serves about a tenth of the time.

What it relies on: where the slowed value s lies beyond all three healthy ones a <= b <= c (the
lowest throughput; the highest average, p95 and p99 latency), the median is (a + b) / 2 and the MAD
(c - a) / 2, so no healthy node can be named there, and s is named once it lies 2.6 x (c - a) beyond
the median. Throughput at concurrency 1 is too close to call that way: the healthy runs of different
nodes at different times spread by about a third (171-237/s in one run of this test), so a tenth of
the throughput is only just named (z = -3.5 in that run). The tail is far beyond: Triton's stops put
p95 near 190 ms against 5-7 ms. So the test asks for the slowed node to be the one suspect, named by
its tail in both variants, with less than half of every healthy run's throughput; and for healthy
nodes to be named nowhere except the median (p50), which the stops barely move.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from serve_system.cli import main

from .ansible_run import run_playbook
from .test_experiments import _common, _dynbatch, _write
from .windows import Windows

pytestmark = [pytest.mark.integration, pytest.mark.windows("measurement")]

#: Triton stopped, then running, in each period (seconds): it runs a tenth of the time
STOPPED_S, RUNNING_S = 0.18, 0.02
#: the most the duty cycle may last if the test dies without stopping it
CYCLE_LIMIT_S = 900
#: how long Triton may take to be ready again after its restart (seconds)
READY_S = 180


def _fresh_triton(cluster, node) -> None:  # type: ignore[no-untyped-def]
    """Node 1's Triton restarted and ready again, for the tests after this one.

    Stops can wedge Triton for good: in one CI run the run's last load (the baseline restored) began
    during the duty cycle, the old instance was unloaded, the new Python stub never initialised, and
    Triton answered no load and was never ready again, failing every later test on node 1 after a
    180 s wait each. A restart brings back the repository's own configuration.
    """
    cluster.exec(node, "docker", "restart", "triton_server")
    wait = ("import time, urllib.request\n"
            f"end = time.time() + {READY_S}\n"
            "while True:\n"
            "    try:\n"
            "        urllib.request.urlopen('http://127.0.0.1:8000/v2/health/ready', timeout=5)\n"
            "        break\n"
            "    except OSError:\n"
            "        if time.time() > end:\n"
            "            raise SystemExit('Triton not ready')\n"
            "        time.sleep(1)\n")
    res = cluster.exec(node, "python3", "-c", wait, check=False)
    assert res.returncode == 0, f"Triton on {node.name} not ready {READY_S} s after its restart: {res.stderr}"


def test_compare_class_names_the_slowed_node(rehearsal_cluster, tmp_path: Path,
                                             windows: Windows) -> None:  # type: ignore[no-untyped-def]
    cluster = rehearsal_cluster
    one, two = cluster.nodes[0], cluster.nodes[1]
    spec = _dynbatch(tmp_path, windows, levels=[1])
    for objective in spec["objectives"]:  # the best variants, at the one load measured
        objective["at_load"] = 1
    path = _write(tmp_path, "dynbatch", spec)
    results = tmp_path / "results"
    for run_id, node in (("cls-a", one), ("cls-b", two), ("cls-c", two)):
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
        res = run_playbook("../experiments/dynbatch.yml", cluster.inventory, *_common(path, results, "cls-d"),
                           limit=one.name)
    finally:
        cluster.exec(one, "kill", pid, check=False)
        cluster.exec(one, "pkill", "-CONT", "-x", "tritonserver", check=False)
        _fresh_triton(cluster, one)
    assert res.rc == 0, res.tail(80)

    runs = [results / "dynbatch" / r for r in ("cls-a", "cls-b", "cls-c", "cls-d")]
    out = tmp_path / "class"
    assert main(["compare", "--class", *map(str, runs), "--out", str(out)]) == 0
    doc = json.loads((out / "class.json").read_text())
    slowed = f"cls-d/{one.name}"
    healthy = {f"cls-a/{one.name}", f"cls-b/{two.name}", f"cls-c/{two.name}"}
    assert sorted(n["node"] for n in doc["nodes"]) == sorted([*healthy, slowed])
    cells = {(c["variant"], c["metric"]): c for c in doc["cells"]}
    for variant in ("baseline", "dynbatch"):
        # the fault's marks: far less served, a far longer tail (Triton waits out its stops)
        served = cells[(variant, "throughput")]["values"]
        assert served[slowed] < 0.5 * min(served[h] for h in healthy), served
        assert slowed in cells[(variant, "p95_us")]["outliers"], cells[(variant, "p95_us")]
    # named: the slowed node is a suspect (an outlier in more than half of its variants), the only one
    assert [s["node"] for s in doc["suspects"]] == [slowed], doc["suspects"]
    # where the fault puts it at one end (throughput lowest; average, p95, p99 latency highest) no
    # healthy node can be named; the median (p50) it barely moves, so there the rule judges the
    # healthy nodes among themselves
    assert all(o["metric"] == "p50_us" for o in doc["outliers"] if o["node"] != slowed), doc["outliers"]
    md = (out / "class.md").read_text()
    assert f"**{slowed}**: outlier in 2 of 2 variants" in md
    assert (out / "plots" / "box_throughput_concurrency_1.png").stat().st_size > 0
    assert doc["pooled_nodes"] == sorted(healthy) and doc["findings"]
