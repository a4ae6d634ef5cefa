#!/usr/bin/env python3
"""Orchestration overhead of experiments/dynbatch.yml on a rehearsal node: wall time vs perf_analyzer time.

Runs the dynbatch playbook (fresh run id) on one node of an inventory and prints the playbook's wall
time, the summed perf_analyzer time of its levels (each level record's start..end, retries
included) and the overhead share. With ``--before-repo PATH`` it first runs the same playbook from
another checkout (e.g. main before a change to the engine, its package put first on PYTHONPATH; the
older ``triton_experiment`` role or the ``experiment`` one), so both are measured side by side on the
same node in one run. ``--run-dir`` only reads runs
already made (each with its ``wall_s`` in bench.json or manifest start..host end).

    .venv/bin/python bench/orchestration_overhead.py -i inventory/hosts.yml --limit NODE \\
        [--before-repo /work/main] [--shipped] [--pairs 3]

``--shipped`` runs the spec as shipped (``repetitions: auto``: every round and decision it takes, the
issue's "fixed cost" form); ``--pairs N`` alternates before and after N times and prints each side's
median fixed cost (wall - perf_analyzer - warm-ups - Triton's loads and restore) with its spread.
Every load counts: an interleaved run loads each variant once per repetition (the variant records list
every load's switch and warm-up seconds; an older checkout's records keep only the last, counted once
per load read off its level timeline, and the line says so).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from playbook_run import HERE, dynbatch_copy, run_playbook, write


def _blocks(host_dir: Path) -> dict[str, int]:
    """How many times each variant was loaded, read off the level timeline: its contiguous runs of
    levels of one repetition in start order (the runner loads a variant afresh for every repetition,
    the same variant's next one included)."""
    order = []
    for lj in host_dir.glob("*/*/level.json"):
        meta = json.loads(lj.read_text())
        order.append((float(meta["start"]), lj.parent.parent.name, meta.get("repetition")))
    order.sort()
    blocks: dict[str, int] = {}
    for i, (_, name, rep) in enumerate(order):
        if i == 0 or order[i - 1][1:] != (name, rep):
            blocks[name] = blocks.get(name, 0) + 1
    return blocks


def _every_load(host_dir: Path, field: str, every: str) -> tuple[float, bool] | None:
    """The seconds of every load's ``field`` (``switch_seconds``/``warmup_seconds``) summed over the
    variants, and whether any was estimated: a record with the list of every load (``every``) is read
    as it is; an older record keeps only its last load, counted once per load of the timeline
    (None where a record lacks even that)."""
    blocks = _blocks(host_dir)
    total, estimated = 0.0, False
    for vj in host_dir.glob("*/variant.json"):
        v = json.loads(vj.read_text())
        if v.get(every):
            total += float(sum(v[every]))
        elif v.get(field) is None:
            return None
        else:
            total += float(v[field]) * max(1, blocks.get(vj.parent.name, 1))
            estimated = estimated or blocks.get(vj.parent.name, 1) > 1
    return total, estimated


def perf_seconds(host_dir: Path) -> tuple[float, int, float | None]:
    """Summed perf_analyzer seconds and level count under a host folder (old and new level records),
    and every load's warm-up seconds (None: not recorded)."""
    total, n = 0.0, 0
    for lj in host_dir.glob("*/*/level.json"):
        meta = json.loads(lj.read_text())
        total += float(meta["end"]) - float(meta["start"])
        n += 1
    warm = _every_load(host_dir, "warmup_seconds", "warmups")
    return total, n, None if warm is None else warm[0]


def triton_seconds(host_dir: Path) -> tuple[float, bool] | None:
    """Triton's own work the spec asks for: every load of every variant until READY (an interleaved
    run loads each variant once per repetition) and the final restore, and whether a load's seconds
    were estimated (an older record keeps only its last load: counted once per load). None where the
    records do not have them."""
    loads = _every_load(host_dir, "switch_seconds", "switches")
    host = host_dir / "host.json"
    restore = json.loads(host.read_text()).get("restore_seconds") if host.is_file() else None
    if loads is None or restore is None:
        return None
    return loads[0] + float(restore), loads[1]


def fixed_spec(dest: Path, short: bool, shipped: bool = False) -> Path:
    """The shipped dynbatch spec with one repetition (what an older checkout can run too: the same
    levels on both sides); ``short``: 2 s windows and a 60 % stability band; ``shipped``: as shipped
    (``repetitions: auto`` with its budget: every round it takes)."""
    spec, path = dynbatch_copy(dest, **({"measurement_interval_ms": 2000, "stability_percentage": 60}
                                        if short else {}))
    if not shipped:
        spec["repetitions"] = 1
        spec.pop("budget", None)
    return write(spec, path)


def runner_calls(log: Path) -> int:
    """How many times a playbook run started the runner (``repetitions: auto`` adds a call a round:
    fixed costs compare between runs with as many calls)."""
    return sum(1 for line in log.read_text().splitlines()
               if line.startswith("TASK [") and ": Start the runner on the node" in line)


def measure(label: str, repo: Path, var: str, run_id: str, args: argparse.Namespace,
            spec: Path) -> tuple[float, int] | None:
    """One playbook run of ``repo``'s engine, its times printed; its fixed cost (wall - perf_analyzer
    - warm-ups - Triton's loads and restore; None where the records lack them) and its runner calls."""
    wall = run_playbook(repo, "dynbatch.yml", args.inventory.resolve(), args.limit, args.results, run_id,
                        ["-e", f"{var}_results_dir={args.results}", "-e", "fresh=true",
                         "-e", f"{var}_spec={spec}"])
    host_dir = args.results / "dynbatch" / run_id / args.limit
    perf, n, warm = perf_seconds(host_dir)
    calls = runner_calls(args.results / f"{run_id}.log")
    print(f"{label:>6} ({repo}): wall {wall:.1f} s, {calls} runner call(s), "
          f"perf_analyzer {perf:.1f} s over {n} levels, "
          f"overhead {wall - perf:.1f} s = {(wall - perf) / wall * 100:.1f} % of the wall time",
          flush=True)
    if warm is None:
        return None
    # the spec's warm-up requests are perf_analyzer runs too (not part of any level)
    print(f"{'':>6}  with the warm-ups' perf_analyzer runs ({warm:.1f} s) counted as measurement: "
          f"overhead {wall - perf - warm:.1f} s = {(wall - perf - warm) / wall * 100:.1f} %", flush=True)
    found = triton_seconds(host_dir)
    if found is None:
        return None
    loads, estimated = found
    # Triton loading each variant (once per repetition) and the baseline again: the spec's own work
    print(f"{'':>6}  and Triton's own loads and restore ({loads:.1f} s"
          f"{'; older records: each load taken as its variant last' if estimated else ''}) too: "
          f"orchestration {wall - perf - warm - loads:.1f} s (Ansible, the controller's commands, transfers)",
          flush=True)
    return wall - perf - warm - loads, calls


def role_prefix(repo: Path) -> str:
    """The variable prefix of the role that runs dynbatch in a checkout (the engine's, or the older one's)."""
    return "experiment" if (repo / "roles" / "experiment").is_dir() else "triton_experiment"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-i", "--inventory", type=Path, required=True)
    ap.add_argument("--limit", required=True, help="the rehearsal node to run on")
    ap.add_argument("--before-repo", type=Path, help="another checkout to measure first (the old engine)")
    ap.add_argument("--results", type=Path, default=Path("/tmp/serve-system-bench-overhead"))
    ap.add_argument("--short", action="store_true",
                    help="2 s windows and a 60 %% stability band (a quicker, noisier comparison)")
    ap.add_argument("--shipped", action="store_true",
                    help="the spec as shipped (repetitions: auto, every round it takes) instead of one "
                         "repetition")
    ap.add_argument("--pairs", type=int, default=1,
                    help="before/after pairs, alternating (the spread of each side is printed)")
    args = ap.parse_args()
    args.results.mkdir(parents=True, exist_ok=True)
    spec = fixed_spec(args.results / "spec", args.short, args.shipped)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    engines = ([("before", args.before_repo.resolve(), role_prefix(args.before_repo.resolve()))]
               if args.before_repo else []) + [("after", HERE, "experiment")]
    fixed: dict[str, list[float]] = {label: [] for label, _, _ in engines}
    by_calls: dict[str, dict[int, list[float]]] = {label: {} for label, _, _ in engines}
    for pair in range(args.pairs):  # alternating: before, after, before, after, ...
        for label, repo, var in engines:
            got = measure(label, repo, var, f"bench-{label}-{stamp}-{pair}", args, spec)
            if got is not None:
                fixed[label].append(got[0])
                by_calls[label].setdefault(got[1], []).append(got[0])
    for label, costs in fixed.items():
        if costs:
            print(f"{label:>6}: fixed cost median {statistics.median(costs):.1f} s (min {min(costs):.1f}, "
                  f"max {max(costs):.1f}; {len(costs)} run(s))")
            for calls, some in sorted(by_calls[label].items()):
                print(f"{'':>6}  with {calls} runner call(s): median {statistics.median(some):.1f} s "
                      f"(min {min(some):.1f}, max {max(some):.1f}; {len(some)} run(s))")
    if all(fixed.get(k) for k in ("before", "after")):
        b, a = statistics.median(fixed["before"]), statistics.median(fixed["after"])
        print(f"fixed cost: {b:.1f} s -> {a:.1f} s ({a / b:.2f}x; target <= 8 s: "
              f"{'PASS' if a <= 8 else 'MISS'})")
        for calls in sorted(set(by_calls["before"]) & set(by_calls["after"])):
            b, a = (statistics.median(by_calls[k][calls]) for k in ("before", "after"))
            print(f"  at {calls} runner call(s) on both sides: {b:.1f} s -> {a:.1f} s ({a / b:.2f}x)")
        if not set(by_calls["before"]) & set(by_calls["after"]):
            print("  (no runs with as many runner calls on both sides: repetitions: auto decided "
                  "differently; each auto round adds its own fetch, decide and start)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
