#!/usr/bin/env python3
"""Searching the MNIST sweep instead of measuring it whole: brute force, halving and optuna side by side.

On one rehearsal node (an inventory's host), in one run, ``experiments/specs/mnist_cpu_sweep.yml``:

1. ``grid``: every configuration at every load level (the brute force: 28 x 8 perf_analyzer runs as
   shipped);
2. ``halving``: the shipped search (its ``search:`` block as it is);
3. ``optuna``: TPE over the same grid, the same repetitions, the halving budget's runs (``--optuna-runs``).

For each: the wall time of the playbook, the perf_analyzer runs it made, the candidate it picked (the
winner, or the tie's leader) and that candidate's throughput at concurrency 8 *as the brute force
measured it*, against the brute force's best (target: >= 95 % of it, in <= 20 % of the brute force's
wall time).

    .venv/bin/python bench/sweep_search.py -i inventory/hosts.yml --limit NODE

The full grid takes about an hour on a node. A reduced form for a short look: ``--instances 24,4
--delays 100,1000,4000`` (fewer candidates), ``--scale 2`` (every measurement window divided by 2,
the brute force's and the searches' alike; loads, warm-ups and perf_analyzer's start do not shrink,
so a reduced form favours the brute force). On a rehearsal node the MNIST stand-in is a Python-backend
model: 24 instances are 24 Python processes, which a 2-core machine loads in minutes or not at all,
so a reduced form there keeps the smaller instance counts (``--instances 4,2,1``). Run it in the
background.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import yaml
from playbook_run import HERE, run_playbook, write

from serve_system.node import plans, records
from serve_system.results import searchdecide, searchrule

AT = 8.0


def spec_copy(dest: Path, strategy: str, args: argparse.Namespace) -> Path:
    """The shipped spec with ``strategy`` (and the reduced grid and windows), beside its base config."""
    spec = yaml.safe_load((HERE / "experiments" / "specs" / "mnist_cpu_sweep.yml").read_text())
    (dest / "model_repository" / "onnx-mnist-cpu").mkdir(parents=True, exist_ok=True)
    (dest / "model_repository" / "onnx-mnist-cpu" / "config.pbtxt").write_bytes(
        (HERE / "model_repository" / "onnx-mnist-cpu" / "config.pbtxt").read_bytes())
    if args.instances:
        spec["sweep"]["grid"]["instances"] = [int(x) for x in args.instances.split(",")]
    if args.delays:
        spec["sweep"]["grid"]["delay"] = [int(x) for x in args.delays.split(",")]
    perf = spec.setdefault("perf", {})
    perf["measurement_interval_ms"] = int(int(perf.get("measurement_interval_ms") or 5000) / args.scale)
    if args.stability:  # perf_analyzer's stability rule, for every strategy alike (a noisy machine)
        perf.update(stability_percentage=args.stability, max_trials=args.max_trials)
    found = dict(spec["search"])
    found["window_ms"] = max(100, int(int(found.get("window_ms") or 500) / args.scale))
    if strategy == "grid":
        spec.pop("search")
    elif strategy == "optuna":
        runs = args.optuna_runs or found["budget"].get("runs")
        spec["search"] = {"strategy": "optuna", "objective": found.get("objective"),
                          "repetitions": found.get("repetitions", 3), "seed": args.seed,
                          "startup": args.startup, "batch": args.batch, "budget": {"runs": runs}}
    else:
        spec["search"] = found
    return write(spec, dest / f"mnist_cpu_sweep_{strategy}.yml")


def rows_of(results: Path, run_id: str) -> list[dict[str, Any]]:
    doc = json.loads((results / "mnist_cpu_sweep" / run_id / "summary.json").read_text())
    return doc["rows"]  # type: ignore[no-any-return]


def at8(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Each variant's mean throughput at concurrency 8 (ok levels)."""
    vals: dict[str, list[float]] = {}
    for r in rows:
        if r["status"] == "ok" and r.get("load") is not None and float(r["load"]) == AT \
                and r.get("throughput"):
            vals.setdefault(r["variant"], []).append(float(r["throughput"]))
    return {k: statistics.fmean(v) for k, v in vals.items()}


def split(wall: float, rows: list[dict[str, Any]]) -> str:
    """Where a strategy's wall time went: the levels' own time (perf_analyzer's runs, from the records)
    and the rest (model loads, warm-ups, the playbook, the runner's start, ``decide``), per run."""
    measured = sum(float(r.get("duration_s") or 0) for r in rows)
    rest = wall - measured
    per = f", {rest / len(rows):.1f} s a run" if rows else ""
    return f"{measured:.0f} s measuring, {rest:.0f} s around the measurements{per}"


def pick(results: Path, run_id: str, host: str, rows: list[dict[str, Any]]) -> searchrule.Outcome:
    """The search's outcome (its winner, or its tie), replayed from the run's records."""
    plan = records.read(results / "mnist_cpu_sweep" / run_id / host / "plan.json", plans.HostPlan)
    assert plan.search is not None, f"{run_id}/{host}: not a search"
    return searchdecide.step(plan.search, [r for r in rows if r["host"] == host])


def fate(out: searchrule.Outcome, name: str) -> str:
    """What the search made of ``name`` (the brute force's best): the winner, in the tie, dropped (when,
    why) or never measured. The brute force measures each candidate once, so its best is itself one
    noisy measurement: a search's tie that holds it has not missed it."""
    if name == out.winner:
        return f"the brute force's best `{name}` is the search's winner"
    if name in out.tie:
        return f"the brute force's best `{name}` is in the search's tie"
    e = next((e for e in out.path if e.name == name), None)
    if e is None:
        return f"the brute force's best `{name}` was never measured by the search"
    if e.dropped is None:
        return f"the brute force's best `{name}` is measured, not in the result: {e.why}"
    return f"the brute force's best `{name}` was dropped after rung/batch {e.dropped}: {e.why}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-i", "--inventory", type=Path, required=True)
    ap.add_argument("--limit", required=True, help="the rehearsal node to run on")
    ap.add_argument("--strategies", default="grid,halving,optuna")
    ap.add_argument("--instances", default="", help="a reduced grid: instance counts, e.g. 24,4")
    ap.add_argument("--delays", default="", help="a reduced grid: queue delays (us), e.g. 100,4000")
    ap.add_argument("--scale", type=float, default=1.0, help="divide every measurement window by this")
    ap.add_argument("--stability", type=int, default=0,
                    help="perf_analyzer's stability percentage for every strategy (default: the spec's)")
    ap.add_argument("--max-trials", type=int, default=8, help="with --stability: perf_analyzer's max trials")
    ap.add_argument("--optuna-runs", type=int, default=0, help="optuna's budget (default: halving's runs)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--startup", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--results", type=Path, default=Path("/tmp/serve-system-bench-sweep-search"))
    args = ap.parse_args()
    args.results.mkdir(parents=True, exist_ok=True)
    inv = args.inventory.resolve()
    stamp = time.strftime("%Y%m%dT%H%M%S")
    done: dict[str, tuple[float, str]] = {}
    for strategy in [s.strip() for s in args.strategies.split(",") if s.strip()]:
        spec = spec_copy(args.results / f"spec-{strategy}", strategy, args)
        rid = f"{strategy}-{stamp}"
        wall = run_playbook(HERE, "mnist_cpu_sweep.yml", inv, args.limit, args.results, rid,
                            ["-e", f"experiment_results_dir={args.results}", "-e", f"experiment_spec={spec}"])
        done[strategy] = (wall, rid)
        print(f"{strategy}: {wall:.0f} s, {len(rows_of(args.results, rid))} perf_analyzer runs; "
              f"{split(wall, rows_of(args.results, rid))}", flush=True)

    print()
    grid = done.get("grid")
    brute = at8(rows_of(args.results, grid[1])) if grid else {}
    best = max(brute.values()) if brute else None
    if grid and best is not None:
        top = max(brute, key=lambda k: brute[k])
        print(f"grid (brute force): {grid[0]:.0f} s, {len(rows_of(args.results, grid[1]))} runs "
              f"({split(grid[0], rows_of(args.results, grid[1]))}); best "
              f"`{top}` {best:,.1f} infer/s at concurrency 8")
    for strategy, (wall, rid) in done.items():
        if strategy == "grid":
            continue
        rows = rows_of(args.results, rid)
        out = pick(args.results, rid, args.limit, rows)
        chosen, text = out.winner or (out.tie[0] if out.tie else None), out.text
        own = at8(rows).get(chosen or "")
        line = (f"{strategy}: {wall:.0f} s, {len(rows)} runs ({split(wall, rows)}); picks `{chosen}`"
                + (f" ({own:,.1f} infer/s in its own measurements)" if own else ""))
        if grid and best:
            share = brute.get(chosen or "", 0.0) / best
            line += (f"; brute force measured it at {share:.1%} of the best (target >= 95 %); wall time "
                     f"{wall / grid[0]:.1%} of the brute force's (target <= 20 %); runs "
                     f"{len(rows)} vs {len(rows_of(args.results, grid[1]))}")
        print(line)
        print(f"   {text}")
        if out.rule:
            print(f"   {out.rule}")
        if grid and best is not None:
            print(f"   {fate(out, top)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
