#!/usr/bin/env python3
"""The shipped dynbatch, with a CPU hog started on the node during one level of its second repetition.

On one rehearsal node of an inventory: runs ``experiments/dynbatch.yml`` as shipped (``repetitions:
auto``), watches the node's progress file, starts busy loops on the node (more of them than the
node's CPUs, named so they can be found and stopped) when the chosen level of repetition 2 starts,
and stops them when that level ends. Then it reads the run's records and prints, with PASS/MISS:

1. the hogged level is flagged (its ``contention.cause`` set) and the hog is named among the
   processes that took the CPU;
2. the report lists the level under "Measured under contention";
3. that variant was measured again (a repetition past the hogged one) within the budget.

    .venv/bin/python bench/hog_run.py -i inventory/hosts.yml --limit NODE [--load 8]

About 4 minutes on a rehearsal node; run it alone (the hog must be the only other work).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import threading
import time
from pathlib import Path

import yaml
from playbook_run import HERE, run_playbook

from serve_system.node import records

HOG = "serve-system-bench-hog"


def node_container(inventory: Path, host: str) -> str:
    doc = yaml.safe_load(inventory.read_text())
    hosts = doc["all"]["children"]["serve_nodes"]["hosts"]
    return str(hosts[host]["serve_provider_ids"]["container"])


def node_exec(container: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", "exec", container, *argv], capture_output=True, text=True,
                          check=False)


def progress(container: str, run_id: str) -> tuple[str, str]:
    out = node_exec(container, "cat", "/opt/serve-system/work/progress.json").stdout
    try:
        doc = json.loads(out)
    except ValueError:
        return "", ""
    if doc.get("run_id") != run_id:
        return "", ""
    return str(doc.get("variant") or ""), str(doc.get("level") or "")


def hog_one_level(container: str, run_id: str, level: str, done: threading.Event,
                  seen: dict[str, str]) -> None:
    """Start the hog when ``level`` starts (any variant), stop it when that level ends."""
    while not done.is_set():
        variant, lv = progress(container, run_id)
        if lv == level:
            node_exec(container, "sh", "-c", "for i in 1 2 3 4 5 6 7 8; do setsid nohup sh -c "
                      f"'while :; do :; done # {HOG}' >/dev/null 2>&1 & done")
            seen.update(variant=variant, level=lv, started=time.strftime("%H:%M:%S"))
            try:
                while not done.is_set() and progress(container, run_id) == (variant, lv):
                    time.sleep(0.5)
            finally:
                node_exec(container, "pkill", "-f", HOG)
                seen["stopped"] = time.strftime("%H:%M:%S")
            return
        time.sleep(0.5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-i", "--inventory", type=Path, required=True)
    ap.add_argument("--limit", required=True, help="the rehearsal node to run on")
    ap.add_argument("--load", type=int, default=8, help="the load level to hog (repetition 2)")
    ap.add_argument("--results", type=Path, default=Path("/tmp/serve-system-bench-hog"))
    args = ap.parse_args()
    args.results.mkdir(parents=True, exist_ok=True)
    inv = args.inventory.resolve()
    container = node_container(inv, args.limit)
    run_id = "hog-" + time.strftime("%Y%m%dT%H%M%S")
    level = f"c{args.load}_r2"
    done, seen = threading.Event(), dict[str, str]()
    watcher = threading.Thread(target=hog_one_level, args=(container, run_id, level, done, seen))
    watcher.start()
    try:
        wall = run_playbook(HERE, "dynbatch.yml", inv, args.limit, args.results, run_id,
                            ["-e", f"experiment_results_dir={args.results}"])
    finally:
        done.set()
        watcher.join()
        node_exec(container, "pkill", "-f", HOG)
    run = args.results / "dynbatch" / run_id
    print(f"run {run} in {wall:.0f} s; hog: {seen or 'never started (the level was not reached)'}")
    if "variant" not in seen:
        return 1
    lrec = records.read(run / args.limit / seen["variant"] / level / "level.json", records.LevelRecord)
    c = lrec.contention
    flagged = c is not None and c.cause is not None
    named = c is not None and any(t.startswith("sh (") for t in c.top)
    print(f"1. {'PASS' if flagged and named else 'MISS'}: {seen['variant']}/{level} "
          f"cause={c.cause if c else None}; top={list(c.top) if c else []}")
    report = (run / "report.md").read_text()
    listed = "Measured under contention" in report and f"{args.limit}/{seen['variant']} " in report
    print(f"2. {'PASS' if listed else 'MISS'}: the report lists it under 'Measured under contention'")
    rows = json.loads((run / "summary.json").read_text())["rows"]
    reps = sorted({r["repetition"] for r in rows if r["variant"] == seen["variant"]})
    budget = yaml.safe_load((HERE / "experiments" / "specs" / "dynbatch.yml").read_text())["budget"]
    log = " ".join((args.results / f"{run_id}.log").read_text().split())  # Ansible folds long lines
    said = f"`{seen['variant']}` measured under contention" in log
    again = said and max(reps) > 2 and max(reps) <= budget["repetitions"]
    print(f"3. {'PASS' if again else 'MISS'}: {seen['variant']}'s repetitions {reps} (budget "
          f"{budget['repetitions']}); the decision {'names' if said else 'does not name'} it as "
          "measured under contention")
    for f in json.loads((run / "summary.json").read_text())["findings"]:
        print(f"   finding {f['key']}: {f['verdict']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
