#!/usr/bin/env python3
"""How often do the shipped adaptive policies err? ``repetitions: auto`` and halving, simulated.

Synthetic repetitions, log-normal (each measurement ``exp(mu + noise)``, ``--cv`` the run-to-run spread
on the log scale; ``--drift`` adds a shift per round shared by every variant, none by default: the
unpaired intervals count such a shift as noise, so it lowers every rate), judged by the shipped code
paths themselves, thousands of times per cell:

- **auto** (``experiments/specs/dynbatch.yml``: its variants, their configurations, its two objectives
  and its budget, looks after 3 to 5 repetitions): every look is
  :func:`serve_system.results.findings.evaluate` on the rows measured so far, with the plan's looks,
  and the run goes on as :func:`serve_system.results.adaptive.still_open` (``next_round``'s stop rule)
  says: one more repetition of the variants of the undecided comparisons, until none is left or the
  budget's last round. Scenarios: A/A on both objectives (*false best*: a winner named for either);
  the ``dynamic_batching`` claim over loads 8 and 16 with a true +5 % in batch and throughput at both
  (the boundary: *false did not hold*); power at +10 % (the batched variant's throughput +10 % at
  load 8, its p95 -9.1 % as Little's law has it at a fixed concurrency, or unchanged).
- **halving** (``experiments/specs/mnist_cpu_sweep.yml``'s ``search:``: its rungs and repetitions):
  :func:`serve_system.results.searchdecide.step` on synthetic rows until it decides, every candidate
  alike (*a tied best dropped*: any candidate dropped, each being tied for the best), 4 candidates
  without a runs budget, 28 with the plan's (100 runs) and without one.

Columns: **shipped** first (each claim's error controlled over its comparisons, the best variant's over
its objectives, by Holm; halving's 5 % split over the pairs it ranks), then **per comparison** (no
Holm: every comparison, objective and candidate at its own 5 %, the rule before issue 40; halving 5 %
a rung over the k - 1 comparisons with the leader). Every cell is a rate with its 95 % Wilson interval.
``## Targets`` prints PASS or MISS (the issue's targets); a miss is printed, not an error.

    .venv/bin/python bench/sequential.py [--runs 4000] [--cv 0.05,0.10] [--drift 0]
    .venv/bin/python bench/sequential.py --from results/dynbatch/RUN   # the noise of a recorded run

CPU-bound (one core); ``--runs 200`` for a short look. Its numbers are exact for the model simulated;
they do not depend on the machine's load, only its run time does.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "src"))

from serve_system.experiment import perfargv, search
from serve_system.experiment.spec.models import Budget
from serve_system.experiment.spec.reader import load_spec
from serve_system.node import plans
from serve_system.results import adaptive, searchdecide
from serve_system.results import findings as fnd
from serve_system.results import intervals as iv
from serve_system.results import sequential as sq
from serve_system.results.claim import BestEvidence
from serve_system.results.setups import VariantSetup
from serve_system.triton.pbtxt import apply_overrides, load_pbtxt, render_pbtxt

SHIPPED, PER_COMPARISON = "shipped", "per comparison (the rule before)"
#: today's power of naming the better variant at +10 %, CV 5 % (the issue's measurement at 7ab54d5)
TODAY_POWER = 0.694
MOST_ERROR, LEAST_POWER = 0.05, 0.8


class Dynbatch:
    """dynbatch.yml as the findings read it: its variants' set-ups, objectives, looks, smallest effect."""

    def __init__(self) -> None:
        spec = load_spec(HERE / "experiments" / "specs" / "dynbatch.yml")
        base = load_pbtxt(HERE / spec.base_config)
        self.setups = {("h", v.name): VariantSetup(config_pbtxt=render_pbtxt(apply_overrides(base, v.config,
                                                                                          v.name)),
                                                   distribution="constant")
                       for v in spec.variants}
        self.names = [v.name for v in spec.variants]
        self.objectives = [o.record() for o in spec.goals()]
        budget = getattr(spec, "budget", None) or Budget()
        self.looks = sq.Looks(min(3, budget.repetitions), budget.repetitions)
        self.smallest = float(spec.smallest_effect)


Truth = dict[tuple[str, float], dict[str, float]]  # (variant, load) -> metric -> true mean


def auto_run(rng: np.random.Generator, d: Dynbatch, truth: Truth, cv: float, drift: float,
             control: bool) -> list[fnd.Finding]:
    """One ``repetitions: auto`` run: the first looks' repetitions of every variant, then one more of
    the undecided ones per look, judged by :func:`fnd.evaluate`; the findings it stopped at."""
    last = d.looks.last
    shift = rng.normal(0.0, drift, last + 1) if drift > 0 else np.zeros(last + 1)
    # every repetition's draw made up front, so that the policies see the same data
    draws = {k: {m: np.exp(math.log(mu) + shift + rng.normal(0.0, cv, last + 1)) for m, mu in ms.items()}
             for k, ms in truth.items()}
    reps = dict.fromkeys(d.names, d.looks.first)
    while True:
        rows = [{"host": "h", "variant": v, "mode": "concurrency", "load": load, "status": "ok",
                 "repetition": r, **{m: float(xs[r]) for m, xs in ms.items()}}
                for (v, load), ms in draws.items() for r in range(1, reps[v] + 1)]
        found = fnd.evaluate(rows, d.setups, d.objectives, d.smallest, d.looks, control=control)
        _, undecided = adaptive.still_open(found, set(d.names))
        grow = [v for v in undecided if reps[v] < last]
        if not grow:
            return found
        for v in grow:
            reps[v] += 1


def _best(found: list[fnd.Finding], objective: str) -> str | None:
    f = next(f for f in found if f.key == "best_variant")
    return next((ev.winner for ev in f.evidence
                 if isinstance(ev, BestEvidence) and ev.objective == objective), None)


Count = tuple[int, int]  # (hits, runs)


def _wilson(hits: int, runs: int, z: float = 1.96) -> tuple[float, float]:
    p = hits / runs
    centre = (p + z * z / (2 * runs)) / (1 + z * z / runs)
    half = z * math.sqrt(p * (1 - p) / runs + z * z / (4 * runs * runs)) / (1 + z * z / runs)
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(c: Count) -> str:
    """``6.0 % [5.7, 6.4]`` (a 95 % Wilson interval)."""
    hits, runs = c
    if not runs:
        return "-"
    lo, hi = _wilson(hits, runs)
    return f"{hits / runs * 100:.1f} % [{lo * 100:.1f}, {hi * 100:.1f}]"


def error_target(name: str, c: Count) -> str:
    lo, hi = _wilson(*c)
    word = "PASS" if c[0] / c[1] <= MOST_ERROR else "MISS"
    sure = "" if (hi <= MOST_ERROR or lo > MOST_ERROR) else " (its interval reaches 5 %)"
    return f"- {word}: {name}: {rate(c)} <= {MOST_ERROR * 100:g} %{sure}"


def power_target(name: str, c: Count) -> str:
    lo, hi = _wilson(*c)
    least = LEAST_POWER * TODAY_POWER
    word = "PASS" if c[0] / c[1] >= least else "MISS"
    sure = "" if (lo >= least or hi < least) else f" (its interval reaches {least * 100:.1f} %)"
    return (f"- {word}: {name}: {rate(c)} >= {LEAST_POWER} x {TODAY_POWER * 100:.1f} % = "
            f"{least * 100:.1f} %{sure}")


Cells = dict[str, dict[str, Count]]


def _cell(cells: Cells, row: str, policy: str, value: Count) -> None:
    cells.setdefault(row, {})[policy] = value


def _table(title: str, cells: Cells) -> list[str]:
    policies = list(next(iter(cells.values())))
    return [title, "", "| measure | " + " | ".join(policies) + " |", "|---|" + "---|" * len(policies),
            *[f"| {k} | " + " | ".join(rate(v) for v in row.values()) + " |" for k, row in cells.items()], ""]


def auto_tables(runs: int, cvs: list[float], drift: float, seed: int) -> tuple[list[str], list[str]]:
    d = Dynbatch()
    dyn = d.names[1]
    s = d.smallest
    scenarios: dict[str, tuple[Truth, Callable[[list[fnd.Finding]], bool]]] = {
        "A/A, both objectives at load 8: a best named for either (false best)": (
            {(v, 8.0): {"throughput": 100.0, "p95_us": 80_000.0} for v in d.names},
            lambda f: any(_best(f, o.name) for o in d.objectives)),
        f"dynamic_batching at loads 8 and 16, batch and throughput +{s * 100:g} % at both: did not hold "
        "(false did not hold)": (
            {(v, load): {"throughput": 100.0 * (1 + s if v == dyn else 1),
                         "avg_batch_size": 4.0 * (1 + s if v == dyn else 1)}
             for v in d.names for load in (8.0, 16.0)},
            lambda f: next(x for x in f if x.key == "dynamic_batching").verdict == iv.NOT_HELD),
        "+10 % throughput at load 8, p95 -9.1 %: the better named best on throughput (power)": (
            {(v, 8.0): {"throughput": 100.0 * (1.1 if v == dyn else 1),
                        "p95_us": 80_000.0 / (1.1 if v == dyn else 1)} for v in d.names},
            lambda f: _best(f, d.objectives[0].name) == dyn),
        "+10 % throughput at load 8, p95 unchanged: the better named best on throughput (power)": (
            {(v, 8.0): {"throughput": 100.0 * (1.1 if v == dyn else 1), "p95_us": 80_000.0}
             for v in d.names},
            lambda f: _best(f, d.objectives[0].name) == dyn),
    }
    lines = [(f"## repetitions: auto (dynbatch.yml: looks after {d.looks.first}..{d.looks.last} "
              f"repetitions, smallest effect {s * 100:g} %, drift {drift * 100:g} %, {runs} runs a cell)"),
             ""]
    targets: list[str] = []
    for cv in cvs:
        cells: Cells = {}
        for name, (truth, hit) in scenarios.items():
            if name.startswith("+10 %") and cv != 0.05:
                continue
            for policy, control in ((SHIPPED, True), (PER_COMPARISON, False)):
                rng = np.random.default_rng(seed)
                hits = sum(hit(auto_run(rng, d, truth, cv, drift, control)) for _ in range(runs))
                _cell(cells, name, policy, (hits, runs))
            got = cells[name][SHIPPED]
            targets.append(power_target(f"auto, CV {cv * 100:g} %, {name}", got) if "(power)" in name
                           else error_target(f"auto, CV {cv * 100:g} %, {name}", got))
        lines += _table(f"### CV {cv * 100:g} %", cells)
    return lines, targets


def halving_run(rng: np.random.Generator, rec: plans.SearchPlan, cv: float, drift: float,
                split: bool = True) -> bool:
    """One halving search of candidates all alike: whether any was dropped (``split`` false: by the rule
    before)."""
    reps = max(r for rung in rec.rungs for r in rung.repetitions)
    shift = rng.normal(0.0, drift, reps + 1) if drift > 0 else np.zeros(reps + 1)
    rows: list[dict[str, Any]] = []
    for _ in range(len(rec.rungs) + 2):
        out = searchdecide.step(rec, rows, split)
        if out.decided:
            return any(e.dropped is not None for e in out.path)
        for n in out.variants:
            for r in out.repetitions:
                rows.append({"host": "h", "variant": n, "mode": "concurrency", "load": 8.0, "status": "ok",
                             "repetition": r, "duration_s": 1.0,
                             "throughput": float(np.exp(math.log(100.0) + shift[r] + rng.normal(0.0, cv)))})
    raise AssertionError("halving did not decide within its rungs")


def halving_tables(runs: int, cvs: list[float], drift: float, seed: int) -> tuple[list[str], list[str]]:
    spec = load_spec(HERE / "experiments" / "specs" / "mnist_cpu_sweep.yml")
    base = search.plan_record(spec, perfargv.PerfSettings(), float(spec.smallest_effect))
    assert base is not None
    unbounded = plans.SearchBudgetRecord()
    searches = {"4 candidates, no runs budget": dataclasses.replace(base, candidates=base.candidates[:4],
                                                                 budget=unbounded),
             f"28 candidates, the plan's budget ({base.budget.runs} runs)": base,
             "28 candidates, no runs budget (every rung can run)": dataclasses.replace(
                 base, budget=unbounded)}
    lines = [(f"## halving (mnist_cpu_sweep.yml: {len(base.rungs)} rungs x "
              f"{len(base.rungs[0].repetitions)} repetitions, all candidates alike, drift "
              f"{drift * 100:g} %, {runs} runs a cell)"), ""]
    targets: list[str] = []
    for cv in cvs:
        cells: Cells = {}
        for name, rec in searches.items():
            row = f"{name}: a tied best dropped"
            for policy, split in ((SHIPPED, True), (PER_COMPARISON, False)):
                rng = np.random.default_rng(seed)
                _cell(cells, row, policy, (sum(halving_run(rng, rec, cv, drift, split) for _ in range(runs)),
                                           runs))
            targets.append(error_target(f"halving, CV {cv * 100:g} %, {row}", cells[row][SHIPPED]))
        lines += _table(f"### CV {cv * 100:g} %", cells)
    return lines, targets


def noise_of(run: Path) -> tuple[float, float]:
    """(CV, drift) of a recorded run: the pooled log spread of each level's repetitions, and the spread
    of the rounds' mean log deviations (each level's repetition against its level's mean)."""
    from serve_system.results import tree

    rows = [r for r in tree.collect(run) if r.get("status") == "ok" and r.get("throughput")]
    groups: dict[tuple[Any, ...], dict[int, float]] = {}
    for r in rows:
        key = (r["host"], r["variant"], r.get("mode"), r.get("load"))
        groups.setdefault(key, {})[int(r.get("repetition") or 1)] = math.log(float(r["throughput"]))
    pool = iv.pooled([[math.exp(x) for x in g.values()] for g in groups.values()])
    devs: dict[int, list[float]] = {}
    for g in groups.values():
        if len(g) < 2:
            continue
        m = statistics.fmean(g.values())
        for rep, x in g.items():
            devs.setdefault(rep, []).append(x - m)
    means = [statistics.fmean(d) for d in devs.values() if d]
    drift = statistics.stdev(means) if len(means) >= 2 else 0.0
    if pool.df < 1:
        raise SystemExit(f"{run}: no level has two repetitions: no spread to read")
    return pool.sd, drift


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--runs", type=int, default=4000, help="simulated runs per cell")
    ap.add_argument("--cv", default="0.05,0.10", help="run-to-run spreads (log scale), comma-separated")
    ap.add_argument("--drift", type=float, default=0.0,
                    help="a round-to-round shift shared by all variants (none by default)")
    ap.add_argument("--from", dest="run", type=Path, help="read CV and drift from a recorded run folder")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", choices=("auto", "halving"), help="one policy only")
    args = ap.parse_args()
    cvs = [float(x) for x in args.cv.split(",")]
    drift = args.drift
    if args.run:
        cv, drift = noise_of(args.run)
        cvs = [cv]
        print(f"noise of {args.run}: CV {cv * 100:.1f} %, drift {drift * 100:.1f} %\n")
    t0 = time.monotonic()
    lines: list[str] = []
    targets: list[str] = []
    if args.only in (None, "auto"):
        more, tg = auto_tables(args.runs, cvs, drift, args.seed)
        lines, targets = lines + more, targets + tg
    if args.only in (None, "halving"):
        more, tg = halving_tables(args.runs, cvs, drift, args.seed)
        lines, targets = lines + more, targets + tg
    print("\n".join(lines))
    print("## Targets (the shipped column; 95 % Wilson intervals)\n")
    print("\n".join(targets))
    missed = sum(t.startswith("- MISS") for t in targets)
    print(f"\n{len(targets) - missed} of {len(targets)} targets met"
          + (f", {missed} missed" if missed else ""))
    print(f"({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
