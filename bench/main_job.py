#!/usr/bin/env python3
"""The README main job (``bash scripts/rehearse.sh``) as a fresh machine runs it, timed phase by phase.

Each run clones the checkout into ``--work`` and runs the README's first command there, with an empty
image cache (``SERVE_SYSTEM_CACHE``), an empty podman storage of its own (``CONTAINERS_STORAGE_CONF``)
and pip's cache off, so it builds every image and installs the ``.venv`` from the package registry as
a new user's machine does; the shared ``~/.cache/serve-system`` and podman's default storage are never
touched. Afterwards its rehearsal node is torn down and its storage removed. What is *not* fresh: the
machine's apt packages (bootstrap only checks them).

With ``--before-repo`` the same is done for another checkout, the two sides alternating; the ratio is
printed. The goal of the hardening issue: the main job in at most 600 s on a fresh machine.

    .venv/bin/python bench/main_job.py [--before-repo /path/to/a/checkout] [--runs 1]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from image_build import check_storage, env_for, remove

HERE = Path(__file__).resolve().parents[1]
GOAL_S = 600.0
#: the main job's own progress lines ("[rehearse] ...", "[bootstrap] ...", "[images] ..."), without colour
PHASE = re.compile(r"^\s*\[(rehearse|bootstrap|images?|launch)\]\s*(.*)$")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run_once(repo: Path, root: Path, prefix: str, log: Path) -> tuple[float, list[tuple[float, str]], int]:
    """Clone ``repo`` under ``root`` and run its main job there: (wall s, the phase lines with their
    elapsed seconds, exit status)."""
    checkout = root / "checkout"
    subprocess.run(["git", "clone", "-q", str(repo), str(checkout)], check=True)
    env = env_for(checkout, root)
    env.pop("PYTHONPATH", None)  # the clone's own .venv, as a new user has it
    # unbuffered: each progress line is timed when it is written, not when a buffer fills
    env.update(REHEARSE_PREFIX=prefix, PIP_NO_CACHE_DIR="1", REHEARSE_RUN_ID=f"{prefix}-run",
               PYTHONUNBUFFERED="1")
    check_storage(root, env)
    phases: list[tuple[float, str]] = []
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as fh:
        proc = subprocess.Popen(["bash", "scripts/rehearse.sh"], cwd=checkout, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, errors="replace")
        assert proc.stdout is not None
        for line in proc.stdout:
            elapsed = time.monotonic() - started
            fh.write(f"{elapsed:7.1f} {line}")
            fh.flush()
            m = PHASE.match(ANSI.sub("", line))
            if m:
                phases.append((elapsed, f"[{m.group(1)}] {m.group(2)[:90]}"))
        rc = proc.wait()
    wall = time.monotonic() - started
    subprocess.run([str(checkout / ".venv" / "bin" / "python"), "chi_scripts/teardown.py", "--provider",
                    "local", "--prefix", prefix], cwd=checkout, env=env, capture_output=True, check=False,
                   timeout=600)
    return wall, phases, rc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before-repo", type=Path, help="a checkout of the code to compare with")
    ap.add_argument("--runs", type=int, default=1, help="runs per side")
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/serve-system-bench-mainjob"),
                    help="where each run's clone, cache and podman storage go (removed afterwards)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("main_job: the main job needs root (debootstrap, podman)")
    sides = {"after": HERE} | ({"before": args.before_repo.resolve()} if args.before_repo else {})
    walls: dict[str, list[float]] = {s: [] for s in sides}
    args.work.mkdir(parents=True, exist_ok=True)
    logs = args.work / "logs"
    logs.mkdir(exist_ok=True)
    for i in range(args.runs):
        order = list(sides) if i % 2 == 0 else list(sides)[::-1]
        for side in order:
            root = args.work / f"{side}-{i}"
            remove(root)
            log = logs / f"{side}-{i}.log"
            try:
                wall, phases, rc = run_once(sides[side], root, f"mj{side[0]}{i}", log)
            finally:
                remove(root)
            print(f"run {i + 1} {side:>6}: {wall:6.1f} s, exit {rc}  (log {log})", flush=True)
            last = 0.0
            for t, text in phases:
                print(f"   {t:6.1f} s (+{t - last:5.1f})  {text}", flush=True)
                last = t
            if rc != 0:
                print(f"main_job: the {side} main job failed (exit {rc}): see {log}", file=sys.stderr)
                return 1
            walls[side].append(wall)
    for side, ws in walls.items():
        mean = statistics.mean(ws)
        print(f"{side:>6} ({sides[side]}): " + ", ".join(f"{w:.0f}" for w in ws) + f" s, mean {mean:.0f} s; "
              f"goal {GOAL_S:.0f} s: {'met' if mean <= GOAL_S else 'NOT met'}")
    if "before" in walls:
        b, a = statistics.mean(walls["before"]), statistics.mean(walls["after"])
        print(f"after/before: {a / b:.2f}x  ({b - a:.0f} s saved per fresh main job)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
