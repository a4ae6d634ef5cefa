"""``serve-system compare --class`` over three real runs on the rehearsal nodes, naming the outlier.

No session fixture keeps run folders (every experiment test writes its runs under its own
tmp_path), so this test measures its own: the shipped dynbatch spec, short (one load, one
repetition), run three times, one node at a time, each into its own run folder, as three students
would: node 1, node 2, then node 1 again while busy loops hold the CPUs it shares with Triton (a
node with a faulty accelerator, made real: the rehearsal nodes serve on CPU). The third run is the
outlier; ``compare --class`` names it (``cls-c/<node 1>``: the same host appears in two runs) and no
other node.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from serve_system.cli import main

from .ansible_run import run_playbook
from .test_experiments import _common, _dynbatch, _write

pytestmark = pytest.mark.integration

#: busy loops per CPU the node sees, while the outlier run measures (Triton keeps about a quarter)
BURNERS_PER_CPU = 3


def test_compare_class_names_the_busy_node(rehearsal_cluster,
                                            tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cluster = rehearsal_cluster
    one, two = cluster.nodes[0], cluster.nodes[1]
    spec = _dynbatch(tmp_path, levels=[8])
    path = _write(tmp_path, "dynbatch", spec)
    results = tmp_path / "results"
    for run_id, node in (("cls-a", one), ("cls-b", two)):
        res = run_playbook("../experiments/dynbatch.yml", cluster.inventory, *_common(path, results, run_id),
                           limit=node.name)
        assert res.rc == 0, res.tail(80)
    started = cluster.exec(one, "sh", "-c",
                           f"for i in $(seq $(( $(nproc) * {BURNERS_PER_CPU} ))); do "
                           "setsid timeout 900 sh -c 'while :; do :; done' >/dev/null 2>&1 & echo $!; done")
    pids = started.stdout.split()
    assert pids, started.stderr
    try:
        res = run_playbook("../experiments/dynbatch.yml", cluster.inventory, *_common(path, results, "cls-c"),
                           limit=one.name)
    finally:
        cluster.exec(one, "kill", *pids, check=False)
    assert res.rc == 0, res.tail(80)

    runs = [results / "dynbatch" / r for r in ("cls-a", "cls-b", "cls-c")]
    out = tmp_path / "class"
    assert main(["compare", "--class", *map(str, runs), "--out", str(out)]) == 0
    doc = json.loads((out / "class.json").read_text())
    busy = f"cls-c/{one.name}"
    assert sorted(n["node"] for n in doc["nodes"]) == sorted([f"cls-a/{one.name}", two.name, busy])
    slow = {(o["variant"], o["metric"]) for o in doc["outliers"] if o["node"] == busy}
    assert {("baseline", "throughput"), ("dynbatch", "throughput")} <= slow, doc["cells"]
    assert {o["node"] for o in doc["outliers"]} == {busy}, doc["outliers"]
    md = (out / "class.md").read_text()
    thr = next(o for o in doc["outliers"] if (o["variant"], o["metric"]) == ("baseline", "throughput"))
    assert thr["value"] < thr["median"]
    assert f"{busy}: {thr['value']:,.1f}/s vs class median {thr['median']:,.1f}/s" in md
    assert (out / "plots" / "box_throughput_concurrency_8.png").stat().st_size > 0
    # three nodes pooled (or two, without the suspect): n counts nodes
    assert len(doc["findings"]) == 6 and doc["pooled_nodes"]
