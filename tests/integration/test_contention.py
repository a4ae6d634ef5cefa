"""A level measured while a CPU hog runs on the rehearsal node: the runner records the hog (from the
node's /proc, mounted at /host/proc in the client container), the report flags the level with the
hog named, and ``repetitions: auto`` does not count it but measures that variant again within its
budget. Heavy (a rehearsal node, real Triton): run it alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from serve_system.node import plans, records

from .ansible_run import REPO
from .test_experiments import FOOD_INPUT, _common, _progress, _start_playbook, _wait_for, _write
from .windows import Windows

pytestmark = [pytest.mark.integration, pytest.mark.windows("measurement")]

HOG = "serve-system-hog"


def test_a_level_under_a_cpu_hog_is_flagged_and_measured_again(rehearsal_cluster, tmp_path: Path,
                                                                windows: Windows) -> None:  # type: ignore[no-untyped-def]
    cluster = rehearsal_cluster
    node = cluster.nodes[0]
    spec = yaml.safe_load((REPO / "experiments" / "specs" / "noise.yml").read_text())
    spec["load"]["levels"] = [8]
    spec["perf"] = windows.spec_perf({**spec["perf"], "input_data": FOOD_INPUT})
    spec["warmup"] = {"requests": windows.warmup}
    spec["budget"] = {"repetitions": 5}
    spec["smallest_effect"] = 0.25  # the A/A claims decide on their own; only the hog asks for more
    path = _write(tmp_path, "noise", spec)
    log = tmp_path / "play.log"
    proc = _start_playbook("noise.yml", cluster.inventory, *_common(path, tmp_path / "r", "hog1"),
                           limit=node.name, log=log)
    run = tmp_path / "r" / "noise" / "hog1"

    def now() -> tuple[str, str]:
        p = _progress(cluster, node)
        return (str(p.get("variant")), str(p.get("level"))) if p.get("run_id") == "hog1" else ("", "")

    try:
        # the hog starts during round 1's last level and runs through round 2's first level whole
        _wait_for(lambda: (run / node.name / "plan.json").is_file(), 600, "the plan")
        rounds = records.read(run / node.name / "plan.json", plans.HostPlan).rounds
        last1, first2 = rounds[0][-1], rounds[1][0]
        _wait_for(lambda: now() == (last1, "c8_r1"), 1200, "round 1's last level to start")
        # busy loops, more than the node's 2 CPUs (this machine is shared): a real CPU hog
        cluster.exec(node, "sh", "-c", f"for i in 1 2 3 4 5 6 7 8; do setsid nohup sh -c "
                                      f"'while :; do :; done # {HOG}' >/dev/null 2>&1 & done")
        _wait_for(lambda: now() == (first2, "c8_r2"), 600, "round 2's first level to start")
        _wait_for(lambda: now() != (first2, "c8_r2"), 600, "round 2's first level to end")
    finally:
        cluster.exec(node, "pkill", "-f", HOG, check=False)
    assert proc.wait(timeout=1800) == 0, log.read_text()[-4000:]
    variant = first2
    lrec = records.read(run / node.name / variant / "c8_r2" / "level.json", records.LevelRecord)
    assert lrec.contention is not None and lrec.contention.others is not None, lrec.contention
    assert lrec.contention.cause is not None, lrec.contention  # flagged, the hog named
    assert any(t.startswith("sh (") for t in lrec.contention.top), lrec.contention.top
    report = (run / "report.md").read_text()
    # said once, before the first section; which level in the Per level table; which processes in the rows
    assert report.count("> **Contention**: ") == 1 and "so `repetitions: auto` did not count them" in report
    per_level = report.split("\n## Per level\n", 1)[1].split("\n## ", 1)[0]
    row = f"| {node.name} | {variant} | conc 8 |"
    hogged = [line for line in per_level.splitlines() if line.startswith(row)]
    assert hogged and hogged[0].rstrip(" |").rsplit("|", 1)[-1].strip() not in ("", "0"), per_level
    rows = json.loads((run / "summary.json").read_text())["rows"]
    assert any(r["contention"] and "sh (" in r["contention"] for r in rows if r["variant"] == variant), rows
    reps = {r["repetition"] for r in rows if r["variant"] == variant}
    assert 4 in reps, reps  # measured again in the hogged level's place, within the budget of 5
    flat = " ".join(log.read_text().split())  # Ansible folds a long message over lines
    assert f"`{variant}` measured under contention" in flat  # why decide asked for it
