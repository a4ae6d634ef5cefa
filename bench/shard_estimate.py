#!/usr/bin/env python3
"""A sharded run's per-run times, and what sharding the same sweep would take on N nodes.

Reads a run folder a sharded experiment wrote (``results/<experiment>/<run id>``, e.g. the one
``tests/integration/test_shard.py`` makes on the two rehearsal nodes) and prints:

1. every variant's measured time on its node: its levels (perf_analyzer's start to end), plus one
   load (switch to READY) and one warm-up per repetition (each repetition is a fresh load);
2. each node's own time: its first level's start to its last level's end (on the rehearsal nodes
   both share this machine's two cores, so these overlap and say nothing of the gain);
3. the estimate for N separate nodes, side by side: one node measuring every variant (what a run
   without sharding costs on each node) against N nodes sharing the candidates (the shard rule of
   ``serve_system.experiment.shard`` with the measured times as costs), each also measuring the
   reference; ``--candidates M`` scales the sweep to M candidates (their times cycle through the
   measured ones).

    .venv/bin/python bench/shard_estimate.py RUN_DIR [--nodes 1,2,5,10,20] [--candidates M]

The estimate leaves out what does not shrink with N (the playbook's own tasks, the report: the same
per node, in parallel) and what grows with it (Ansible's forks: 5 by default; set ``forks`` to the
node count).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from serve_system.experiment import shard as shardmod
from serve_system.experiment.manifest import Manifest
from serve_system.node import records


def variant_seconds(vdir: Path) -> tuple[float, list[str]]:
    """(the variant's measured time on its node, a line per level)."""
    levels = [records.read(ld / "level.json", records.LevelRecord)
              for ld in sorted(vdir.iterdir()) if ld.is_dir() and records.level_done(ld)]
    vrec = records.read(vdir / "variant.json", records.VariantRecord)
    loads = len({lv.repetition for lv in levels}) or 1
    per_load = (vrec.switch_seconds or 0.0) + (vrec.warmup_seconds or 0.0)
    total = sum(lv.end - lv.start for lv in levels) + loads * per_load
    text = [f"{lv.level} {lv.end - lv.start:.1f}" for lv in levels]
    return total, [f"switch {vrec.switch_seconds or 0:.1f} + warm-up {vrec.warmup_seconds or 0:.1f} per load "
                   f"x {loads}; levels " + ", ".join(text)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--nodes", default="1,2,5,10,20")
    ap.add_argument("--candidates", type=int, default=0, help="scale the sweep to this many candidates")
    args = ap.parse_args()
    shard = shardmod.from_record(records.read(args.run / records.MANIFEST_FILE, Manifest).shard)
    if shard is None:
        print(f"{args.run}: not a sharded run (no shard in manifest.json)", file=sys.stderr)
        return 1
    cost: dict[str, float] = {}
    refs: dict[str, float] = {}
    print(f"per-run times ({args.run}):")
    for host in shard.hosts:
        starts, ends = [], []
        for name in shard.variants_of(host):
            vdir = args.run / host / name
            secs, lines = variant_seconds(vdir)
            if name == shard.reference:
                refs[host] = secs
            else:
                cost[name] = secs
            for ld in vdir.iterdir():
                if ld.is_dir() and records.level_done(ld):
                    lv = records.read(ld / "level.json", records.LevelRecord)
                    starts.append(lv.start)
                    ends.append(lv.end)
            print(f"  {host} {name}: {secs:.1f} s ({lines[0]})")
        print(f"  {host}: first level to last {max(ends) - min(starts):.1f} s")
    ref = statistics.median(refs.values())
    measured = list(cost.values())
    m = args.candidates or len(measured)
    costs = {f"c{i}": measured[i % len(measured)] for i in range(m)}
    one = ref + sum(costs.values())
    print(f"\nestimate: {m} candidates (mean {statistics.fmean(costs.values()):.1f} s), reference "
          f"{ref:.1f} s (median over the nodes)")
    print(f"{'nodes':>6} {'wall s':>9} {'vs 1 node':>10} {'candidates per node':>20}")
    for n in [int(x) for x in args.nodes.split(",") if x]:
        s = shardmod.assign(["ref", *costs], [f"n{i:03d}" for i in range(n)], "ref", costs)
        wall = ref + max(sum(costs[c] for c in cs) for cs in s.assignment.values())
        counts = sorted(len(cs) for cs in s.assignment.values())
        print(f"{n:>6} {wall:>9.1f} {one / wall:>9.2f}x {f'{counts[0]}-{counts[-1]}':>20}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
