#!/usr/bin/env python3
"""How often do the shipped adaptive policies err? ``repetitions: auto`` and halving, simulated.

Synthetic repetitions, log-normal (each measurement ``exp(mu + round drift + noise)``: ``--cv`` the
run-to-run spread on the log scale, ``--drift`` a shift shared by every variant of one round, as
interleaved rounds are), judged by the project's own functions, thousands of times per cell:

- **auto** (``experiments/specs/dynbatch.yml``'s budget: looks after 3, 4 and 5 repetitions): a claim
  "B raises throughput by at least the smallest effect" (:func:`serve_system.results.intervals.decide`
  on :func:`serve_system.results.claim.compare`) and the best variant of the two
  (:func:`serve_system.results.best.standing` on :func:`~serve_system.results.best.rank`);
  after each look both are judged and the run stops when both are decided, as
  :func:`serve_system.results.adaptive.next_round` does. Rows: *false best* (a winner named under
  A/A), *false held* / *false did not hold* (a true effect exactly at the smallest effect, read as
  held or as did not hold), *power* (held, and the right winner, at true effects of 5, 10, 20 %), and
  the repetitions a side spent;
- **halving** (``experiments/specs/mnist_cpu_sweep.yml``'s ``search:``: its rungs and repetitions,
  ``--candidates`` candidates, no runs budget so every rung can run): :func:`serve_system.results
  .searchdecide.step` on synthetic rows until it decides. Rows: *tied-best dropped* (all candidates alike:
  the share of candidates dropped, each one tied for the best), *false best* (a winner named under
  A/A), *power* (one candidate better by 5/10/20 %: named the winner).

Each row side by side: **before** (4ad88af's policies: auto judged every claim and the best with a
fixed two-sided 95 % interval at every look; halving spent 5 % in every rung) and **after** (as
shipped: claims one-sided, each end of their interval a one-sided bound spending 5 % over the looks,
the best variant's lead two-sided 95 %, both by O'Brien-Fleming-type alpha spending; halving's 5 %
split over the rungs), with auto's last stop (two-sided claims) and one fixed look for reference.
The ``## Targets`` section prints PASS or MISS per target: false held / false did not hold / false best /
tied-best dropped <= 5 % after; power at 10 and 20 % not lower by more than a fifth (after >= 0.8 x
before), each with its 95 % interval (Wilson for a rate; the delta method for a ratio). A missed
target is printed, not an error: the script exits non-zero only when it fails.

    .venv/bin/python bench/sequential.py [--runs 4000] [--cv 0.05,0.10] [--drift 0.02]
    .venv/bin/python bench/sequential.py --from results/dynbatch/RUN   # the noise of a recorded run

CPU-bound (one core); ``--runs 200`` for a short look. Its numbers are exact for the model simulated;
they do not depend on the machine's load, only its run time does.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "src"))

from serve_system.experiment import search
from serve_system.experiment.spec.models import Budget
from serve_system.experiment.spec.reader import load_spec
from serve_system.results import best, searchdecide
from serve_system.results import claim as cl
from serve_system.results import intervals as iv
from serve_system.results import sequential as sq

EFFECTS = (0.05, 0.10, 0.20)
OBJECTIVE = {"name": "most_throughput_at_8", "metric": "throughput", "goal": "max", "at_load": 8.0}


def shipped_auto() -> tuple[int, int, float]:
    """(first look, last look, smallest effect) of the shipped dynbatch spec."""
    spec = load_spec(HERE / "experiments" / "specs" / "dynbatch.yml")
    budget = getattr(spec, "budget", None) or Budget()
    return min(3, budget.repetitions), budget.repetitions, float(spec.smallest_effect)


def shipped_search() -> dict[str, Any]:
    """The shipped sweep's halving record (its rungs, repetitions, objective)."""
    spec = load_spec(HERE / "experiments" / "specs" / "mnist_cpu_sweep.yml")
    rec = search.plan_record(spec, {}, float(spec.smallest_effect))
    assert rec is not None
    return rec


def _rows(xs: dict[str, list[float]]) -> list[dict[str, Any]]:
    return [{"host": "h", "variant": v, "mode": "concurrency", "load": 8.0, "status": "ok", "throughput": x,
             "repetition": r} for v, vals in xs.items() for r, x in enumerate(vals, 1)]


def auto_run(rng: np.random.Generator, policy: tuple[sq.Looks, int], smallest: float, cv: float,
             drift: float, effect: float) -> tuple[str, str | None, int]:
    """One ``repetitions: auto`` run of two variants A, B (B = A x (1 + effect)) under ``policy`` (the
    looks, and the sides a claim's interval spends its error on): (the claim's verdict, the winner
    named or None, repetitions a side)."""
    looks, claim_sides = policy
    n_max = looks.last
    shift = rng.normal(0.0, drift, n_max) if drift > 0 else np.zeros(n_max)
    a = np.exp(math.log(100.0) + shift + rng.normal(0.0, cv, n_max))
    b = np.exp(math.log(100.0 * (1 + effect)) + shift + rng.normal(0.0, cv, n_max))
    word, winner = iv.INCONCLUSIVE, None
    n = looks.first
    for n in range(looks.first, n_max + 1):
        xa, xb = [float(x) for x in a[:n]], [float(x) for x in b[:n]]
        word = iv.decide(cl.compare(xa, xb, looks, claim_sides), "up", smallest).word
        found = best.standing(best.rank(_rows({"A": xa, "B": xb}), OBJECTIVE), smallest, looks)
        assert found is not None
        top, _, _, lead = found
        winner = top["variant"] if lead.word == iv.HELD else None
        if word != iv.INCONCLUSIVE and lead.word != iv.INCONCLUSIVE:
            break
    return word, winner, n


def halving_run(rng: np.random.Generator, rec: dict[str, Any], cv: float, drift: float, effect: float
                ) -> tuple[list[str], str | None]:
    """One halving search (candidate 0 better by ``effect``, the rest alike): (dropped, winner)."""
    names = [c["name"] for c in rec["candidates"]]
    true = {n: math.log(100.0 * (1 + effect if i == 0 else 1)) for i, n in enumerate(names)}
    reps = max(r for rung in rec["rungs"] for r in rung["repetitions"])
    shift = rng.normal(0.0, drift, reps + 1) if drift > 0 else np.zeros(reps + 1)
    rows: list[dict[str, Any]] = []
    for _ in range(len(rec["rungs"]) + 2):
        out = searchdecide.step(rec, rows)
        if out.decided:
            return [e.name for e in out.path if e.dropped is not None], out.winner
        for n in out.variants:
            for r in out.repetitions:
                rows.append({"host": "h", "variant": n, "mode": "concurrency", "load": 8.0, "status": "ok",
                             "repetition": r, "duration_s": 1.0,
                             "throughput": float(np.exp(true[n] + shift[r] + rng.normal(0.0, cv)))})
    raise AssertionError("halving did not decide within its rungs")


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


def ratio(after: Count, before: Count) -> tuple[float, float, float] | None:
    """after / before of two rates with a 95 % interval (the delta method on the log ratio, the two
    taken as independent: they share the seed, so the true interval is narrower)."""
    (ha, na), (hb, nb) = after, before
    if not ha or not hb:
        return None
    r = (ha / na) / (hb / nb)
    se = math.sqrt((1 - ha / na) / ha + (1 - hb / nb) / hb)
    return r, r * math.exp(-1.96 * se), r * math.exp(1.96 * se)


#: the most a verdict may err under the null, per claim (the issue's target)
MOST_ERROR = 0.05
#: the least share of before's power at 10 and 20 % that after keeps (the issue's target)
LEAST_POWER = 0.8


def error_target(name: str, c: Count) -> str:
    lo, hi = _wilson(*c)
    p = c[0] / c[1]
    word = "PASS" if p <= MOST_ERROR else "MISS"
    sure = "" if (hi <= MOST_ERROR or lo > MOST_ERROR) else " (its interval reaches 5 %)"
    return f"- {word}: {name}: {rate(c)} <= {MOST_ERROR * 100:g} %{sure}"


def power_target(name: str, after: Count, before: Count) -> str:
    r = ratio(after, before)
    if r is None:
        return f"- n/a: {name}: {rate(after)} vs {rate(before)} (no hits to compare)"
    word = "PASS" if r[0] >= LEAST_POWER else "MISS"
    sure = "" if (r[1] >= LEAST_POWER or r[2] < LEAST_POWER) else " (its interval reaches 0.8x)"
    return (f"- {word}: {name}: {rate(before)} -> {rate(after)}, {r[0]:.2f}x [{r[1]:.2f}, {r[2]:.2f}] "
            f">= {LEAST_POWER}x{sure}")


BEFORE_AUTO, AFTER_AUTO = "before (4ad88af: 95 % at every look)", "after (one-sided claims, O'Brien-Fleming)"


def auto_policies(first: int, last: int) -> dict[str, tuple[sq.Looks, int]]:
    """The policies compared: (looks, the sides a claim's interval spends its error on)."""
    return {BEFORE_AUTO: (sq.Looks(first, last, sq.NONE), sq.BEST),
            "last stop (two-sided claims, O'Brien-Fleming)": (sq.Looks(first, last, sq.OBRIEN_FLEMING),
                                                               sq.BEST),
            AFTER_AUTO: (sq.Looks(first, last, sq.OBRIEN_FLEMING), sq.CLAIM),
            f"one look at {last}, one-sided claims": (sq.Looks(last, last, sq.NONE), sq.CLAIM)}


def auto_table(runs: int, cvs: list[float], drift: float, seed: int) -> tuple[list[str], list[str]]:
    first, last, smallest = shipped_auto()
    policies = auto_policies(first, last)
    lines = [(f"## repetitions: auto (looks after {first}..{last} repetitions, smallest effect "
             f"{smallest * 100:g} %, drift {drift * 100:g} %, {runs} runs a cell)"), ""]
    targets: list[str] = []
    for cv in cvs:
        lines += [f"### CV {cv * 100:g} %", "", "| measure | " + " | ".join(policies) + " |",
                  "|---|" + "---|" * len(policies)]
        cells: dict[str, dict[str, Any]] = {}
        for pname, policy in policies.items():
            rng = np.random.default_rng(seed)
            aa = [auto_run(rng, policy, smallest, cv, drift, 0.0) for _ in range(runs)]
            edge = [auto_run(rng, policy, smallest, cv, drift, smallest) for _ in range(runs)]

            def add(row: str, value: Any, p: str = pname, into: dict[str, dict[str, Any]] = cells) -> None:
                into.setdefault(row, {})[p] = value

            add("A/A: a best variant named (false best)", (sum(w is not None for _, w, _ in aa), runs))
            add("A/A: the claim held (false held)", (sum(v == iv.HELD for v, _, _ in aa), runs))
            add(f"true +{smallest * 100:g} %: held (false held at the boundary)",
                (sum(v == iv.HELD for v, _, _ in edge), runs))
            add(f"true +{smallest * 100:g} %: did not hold (false did not hold)",
                (sum(v == iv.NOT_HELD for v, _, _ in edge), runs))
            add("A/A: mean repetitions a side", f"{statistics.fmean(n for _, _, n in aa):.2f}")
            for e in EFFECTS:
                rs = edge if e == smallest else [auto_run(rng, policy, smallest, cv, drift, e)
                                                 for _ in range(runs)]
                add(f"true +{e * 100:g} %: the claim held (power)",
                    (sum(v == iv.HELD for v, _, _ in rs), runs))
                add(f"true +{e * 100:g} %: B named best (power)", (sum(w == "B" for _, w, _ in rs), runs))
                add(f"true +{e * 100:g} %: mean repetitions a side",
                    f"{statistics.fmean(n for _, _, n in rs):.2f}")
        lines += [f"| {k} | " + " | ".join(v if isinstance(v, str) else rate(v) for v in row.values()) + " |"
                  for k, row in cells.items()] + [""]
        for k, row in cells.items():
            if "false" in k:
                targets.append(error_target(f"auto, CV {cv * 100:g} %, {k}", row[AFTER_AUTO]))
        for e in (0.10, 0.20):
            for what in ("the claim held", "B named best"):
                k = f"true +{e * 100:g} %: {what} (power)"
                targets.append(power_target(f"auto, CV {cv * 100:g} %, {k}", cells[k][AFTER_AUTO],
                                            cells[k][BEFORE_AUTO]))
    return lines, targets


BEFORE_HALVING, AFTER_HALVING = "before (5 % in every rung)", "after (5 % split over the rungs)"


def halving_table(runs: int, cvs: list[float], drift: float, seed: int, k: int
                  ) -> tuple[list[str], list[str]]:
    base = shipped_search()
    rec = {**base, "candidates": [{"name": f"c{i}", "params": {}} for i in range(k)],
           "budget": {"runs": None, "minutes": None}}
    policies = {BEFORE_HALVING: {**rec, searchdecide.SPLIT_KEY: False}, AFTER_HALVING: rec}
    reps = len(rec["rungs"][0]["repetitions"])
    lines = [(f"## halving ({len(rec['rungs'])} rungs x {reps} repetitions, {k} candidates, no runs "
             f"budget, drift {drift * 100:g} %, {runs} runs a cell)"), ""]
    targets: list[str] = []
    for cv in cvs:
        lines += [f"### CV {cv * 100:g} %", "", "| measure | " + " | ".join(policies) + " |",
                  "|---|" + "---|" * len(policies)]
        cells: dict[str, dict[str, Count]] = {}
        for pname, p in policies.items():
            rng = np.random.default_rng(seed)
            aa = [halving_run(rng, p, cv, drift, 0.0) for _ in range(runs)]

            def add(row: str, value: Count, p_: str = pname,
                    into: dict[str, dict[str, Count]] = cells) -> None:
                into.setdefault(row, {})[p_] = value

            add("A/A: a candidate tied for the best dropped (share of candidates)",
                (sum(len(d) for d, _ in aa), runs * k))
            add("A/A: any candidate dropped", (sum(bool(d) for d, _ in aa), runs))
            add("A/A: a winner named (false best)", (sum(w is not None for _, w in aa), runs))
            for e in EFFECTS:
                rs = [halving_run(rng, p, cv, drift, e) for _ in range(runs)]
                add(f"c0 better by {e * 100:g} %: named the winner (power)",
                    (sum(w == "c0" for _, w in rs), runs))
                add(f"c0 better by {e * 100:g} %: c0 dropped", (sum("c0" in d for d, _ in rs), runs))
        lines += [f"| {k_} | " + " | ".join(rate(v) for v in row.values()) + " |"
                  for k_, row in cells.items()]
        lines.append("")
        for k_ in ("A/A: a candidate tied for the best dropped (share of candidates)",
                   "A/A: a winner named (false best)"):
            targets.append(error_target(f"halving, CV {cv * 100:g} %, {k_}", cells[k_][AFTER_HALVING]))
        for e in (0.10, 0.20):
            k_ = f"c0 better by {e * 100:g} %: named the winner (power)"
            targets.append(power_target(f"halving, CV {cv * 100:g} %, {k_}", cells[k_][AFTER_HALVING],
                                        cells[k_][BEFORE_HALVING]))
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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=4000, help="simulated runs per cell")
    ap.add_argument("--cv", default="0.05,0.10", help="run-to-run spreads (log scale), comma-separated")
    ap.add_argument("--drift", type=float, default=0.02, help="round-to-round shift shared by all variants")
    ap.add_argument("--from", dest="run", type=Path, help="read CV and drift from a recorded run folder")
    ap.add_argument("--candidates", type=int, default=8, help="halving: candidates")
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
        more, tg = auto_table(args.runs, cvs, drift, args.seed)
        lines, targets = lines + more, targets + tg
    if args.only in (None, "halving"):
        more, tg = halving_table(args.runs, cvs, drift, args.seed, args.candidates)
        lines, targets = lines + more, targets + tg
    print("\n".join(lines))
    print("## Targets (after, as shipped; power: after / before, 95 % intervals)\n")
    print("\n".join(targets))
    missed = sum(t.startswith("- MISS") for t in targets)
    print(f"\n{len(targets) - missed} of {len(targets)} targets met"
          + (f", {missed} missed" if missed else ""))
    print(f"({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
