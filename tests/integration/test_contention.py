"""A level measured while a CPU hog runs on the rehearsal node: the runner records the hog (from the
node's /proc, mounted at /host/proc in the client container), the report flags the level with the
hog named, and ``repetitions: auto`` does not count it but measures that variant again within its
budget. Heavy (a rehearsal node, real Triton): run it alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from serve_system.experiment import records

from .ansible_run import REPO
from .test_experiments import FOOD_INPUT, SHORT, _common, _progress, _start_playbook, _wait_for, _write

pytestmark = pytest.mark.integration

HOG = "serve-system-hog"


def test_a_level_under_a_cpu_hog_is_flagged_and_measured_again(rehearsal_cluster, tmp_path: Path
                                                                ) -> None:  # type: ignore[no-untyped-def]
    cluster = rehearsal_cluster
    node = cluster.nodes[0]
    spec = yaml.safe_load((REPO / "experiments" / "specs" / "noise.yml").read_text())
    spec["load"]["levels"] = [8]
    spec["perf"].update(input_data=FOOD_INPUT, **SHORT)
    spec["warmup"] = {"requests": 10}
    spec["budget"] = {"repetitions": 5}
    spec["smallest_effect"] = 0.25  # the A/A claims decide on their own; only the hog asks for more
    path = _write(tmp_path, "noise", spec)
    log = tmp_path / "play.log"
    proc = _start_playbook("noise.yml", cluster.inventory, *_common(path, tmp_path / "r", "hog1"),
                           limit=node.name, log=log)
    hogged: set[str] = set()
    try:
        _wait_for(lambda: _progress(cluster, node).get("level") == "c8_r2"
                  and _progress(cluster, node).get("run_id") == "hog1", 1200, "repetition 2 to start")
        hogged.add(str(_progress(cluster, node).get("variant")))
        # two busy loops (the node has 2 CPUs), named so the report can name them
        cluster.exec(node, "sh", "-c", f"for i in 1 2; do (exec -a {HOG} sh -c 'while :; do :; done') "
                                      ">/dev/null 2>&1 & done")
        _wait_for(lambda: _progress(cluster, node).get("level") != "c8_r2"
                  or _progress(cluster, node).get("variant") not in hogged, 600, "the hogged level to end")
    finally:
        cluster.exec(node, "pkill", "-f", f"^{HOG}", check=False)
    assert proc.wait(timeout=1800) == 0, log.read_text()[-4000:]
    run = tmp_path / "r" / "noise" / "hog1"
    (variant,) = hogged
    lrec = records.read(run / node.name / variant / "c8_r2" / "level.json", records.LevelRecord)
    assert lrec.contention is not None and lrec.contention.others is not None, lrec.contention
    assert lrec.contention.others >= records.CONTENDED_OTHERS
    assert any(t.startswith("sh (") for t in lrec.contention.top), lrec.contention.top  # the hog, named
    report = (run / "report.md").read_text()
    assert "Measured under contention" in report and f"{node.name}/{variant} " in report
    rows = json.loads((run / "summary.json").read_text())["rows"]
    reps = {r["repetition"] for r in rows if r["variant"] == variant}
    assert 4 in reps, reps  # measured again in the hogged level's place, within the budget of 5
