#!/usr/bin/env python3
"""Orchestration overhead of an experiment run: wall time vs the sum of perf_analyzer time.

Reads a run folder written by the triton_experiment role (results/<experiment>/<run-id>): per host,
the wall time from the run's start (manifest.json) to the host's end (host.json), and the sum of
its levels' perf_analyzer durations (level.json start/end). Prints both and their ratio.
Usage: .venv/bin/python bench/orchestration_overhead.py results/dynbatch/<run-id>
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path


def _ts(s: str) -> float:
    return datetime.fromisoformat(s).timestamp()  # Python 3.11 reads a trailing Z


def main() -> int:
    run = Path(sys.argv[1])
    manifest = json.loads((run / "manifest.json").read_text())
    start = _ts(manifest["start"])
    for host in sorted(p for p in run.iterdir() if (p / "host.json").exists()):
        end = _ts(json.loads((host / "host.json").read_text())["end"])
        perf = 0.0
        for lj in host.glob("*/*/level.json"):
            meta = json.loads(lj.read_text())
            perf += float(meta["end"]) - float(meta["start"])
        wall = end - start
        print(f"{host.name}: wall {wall:.1f} s, perf_analyzer {perf:.1f} s, wall/perf = {wall / perf:.2f}x "
              f"(overhead {wall - perf:.1f} s: validate, load, READY, warm-up, stats, fetch, restore)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
