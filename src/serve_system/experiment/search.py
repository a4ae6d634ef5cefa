"""Searches over a spec's candidates (its variants, usually a sweep's grid), the planning half (stage 3):
the candidates, each rung's window and repetitions, the search record a host plan keeps, and the
lease guard's estimate. How a search decides on what was measured is stage 4's
(:mod:`serve_system.results.searchdecide`).

``search: {strategy: ...}`` in a spec picks how its variants are measured:

- ``grid`` (the default): every variant at every load level, every planned repetition;
- ``halving`` (successive halving): every candidate is measured at the search objective's load level
  (``at_load``) only, ``repetitions`` times with a short window (rung 1); then the candidates are ranked
  by the mean of the objective over all their measurements, and of the *worse half* those are dropped
  whose difference from the rung's leader is decided (the drop rule); ties survive. The survivors
  get the next rung: ``repetitions`` more measurements with twice the window. Last rung, or budget
  spent: the winner is named when its lead over the runner-up has a 95 % interval that excludes zero
  (:func:`~serve_system.results.intervals.lead`), otherwise the leaders are reported as a tie;
- ``optuna``: trials drawn by optuna's TPE sampler (seeded) from the sweep's grid, ``batch`` per runner
  call, each measured ``repetitions`` times at the objective's load level with the spec's window,
  until the budget is spent or every candidate is measured.

**The budget** (``runs``: perf_analyzer runs; ``minutes``: measured minutes, the levels' own time):
a batch starts only if it fits what is left (a halving rung as a whole; optuna trims its batch); the
lease guard (:func:`estimate_seconds`, :func:`fit_runs`) bounds a search's wall time by its budget.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Collection
from dataclasses import replace
from typing import Any

from ..node import defaults
from ..node.plans import ParamValue, SearchBudgetRecord, SearchCandidate, SearchPlan, SearchRung, SearchShard
from . import perfargv
from .shard import Shard
from .spec.models import Search, SearchBudget, TritonSpec
from .spec.sweeps import variant_name

HALVING, OPTUNA = "halving", "optuna"
#: the first rung's window is at least this long (ms) when the spec does not name one
MIN_WINDOW_MS = 500
#: seconds a measurement takes beyond its windows: a fresh load, READY, warm-up, perf_analyzer's start
LOAD_OVERHEAD_S = 5.0
RUN_OVERHEAD_S = 2.0
#: perf_analyzer measures at least this many windows (its stability check)
WINDOWS = defaults.STABILITY_WINDOWS


# ------------------------------------------------------------------------------------ the plan side

def _choice(value: Any) -> ParamValue:
    """A grid value as optuna's categorical choice (plain values as they are, others as JSON text)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return json.dumps(value, sort_keys=True)


def candidates(spec: TritonSpec) -> list[SearchCandidate]:
    """The spec's candidates in plan order: the listed variants (no parameters), then each sweep
    variant with its grid values (``params``)."""
    out = [SearchCandidate(v.name) for v in spec.variants]
    if spec.sweep is not None:
        keys = list(spec.sweep.grid)
        for values in itertools.product(*(spec.sweep.grid[k] for k in keys)):
            env = dict(zip(keys, values, strict=True))
            out.append(SearchCandidate(variant_name(spec.sweep.name, env),
                                       {k: _choice(v) for k, v in env.items()}))
    return out


def rung_windows(search: Search, perf: perfargv.PerfSettings) -> list[int]:
    """Each rung's measurement window (ms): halving doubles it per rung, up to the spec's by default;
    optuna measures with the spec's window (one rung)."""
    base = perf.window_ms
    if search.strategy != HALVING:
        return [base]
    first = search.window_ms or max(MIN_WINDOW_MS, base // 2 ** (search.rungs - 1))
    return [first * 2 ** k for k in range(search.rungs)]


def schedule(spec: TritonSpec, levels: list[float], perf: perfargv.PerfSettings
             ) -> list[tuple[int, list[float], perfargv.PerfSettings]]:
    """The planned measurements of one variant: (repetition, its load levels, its perf settings).

    A grid: every level, every repetition, the spec's settings. A search: its objective's load level
    only; halving's repetitions are numbered rung after rung (rung 1: 1..r, rung 2: r+1..2r, ...), each
    rung's with its window."""
    search = spec.searching
    goal = spec.search_objective()
    if search is None or goal is None or goal.at_load is None:
        return [(rep, levels, perf) for rep in range(1, spec.max_repetitions + 1)]
    out = []
    for k, window in enumerate(rung_windows(search, perf)):
        p = replace(perf, measurement_interval_ms=window) if perf.timed else perf
        for i in range(search.repetitions):
            out.append((k * search.repetitions + i + 1, [goal.at_load], p))
    return out


def plan_record(spec: TritonSpec, perf: perfargv.PerfSettings, smallest: float,
                only: Collection[str] = (), shard: Shard | None = None,
                share: int | None = None) -> SearchPlan | None:
    """What a host plan keeps of a search (``HostPlan.search``), read by
    :func:`serve_system.results.searchdecide.step`; None for a grid. ``only`` (``-e variants``) narrows
    the search to those candidates. ``shard``: the search spans every host of the shard (each host's
    share of the candidates, the reference on every host), decided on all their records; ``share``:
    this host's variants (its estimate's)."""
    search, goal = spec.searching, spec.search_objective()
    if search is None or goal is None:
        return None
    cands = [c for c in candidates(spec) if not only or c.name in only]
    windows = rung_windows(search, perf)
    reps = search.repetitions
    rungs = [SearchRung(list(range(k * reps + 1, (k + 1) * reps + 1)), w) for k, w in enumerate(windows)]
    budget = search.budget or SearchBudget()
    if search.strategy == HALVING:
        calls = len(rungs) + 1
    else:
        trials = len(cands) if budget.runs is None else min(len(cands), budget.runs // reps)
        calls = math.ceil(trials / search.batch) + 1
    return SearchPlan(
        strategy=search.strategy, objective=goal.record(), smallest_effect=smallest, candidates=cands,
        rungs=rungs, budget=SearchBudgetRecord(runs=budget.runs, minutes=budget.minutes), seed=search.seed,
        startup=search.startup, batch=search.batch, calls=calls, timed=perf.timed,
        shard=SearchShard(reference=shard.reference, hosts=shard.hosts,
                          assignment={h: list(cs) for h, cs in shard.assignment.items()}) if shard else None,
        share=share if shard else None)


def _run_seconds(window_ms: int, timed: bool) -> float:
    """One measurement's rough wall time: a fresh load and warm-up, perf_analyzer's windows."""
    window = window_ms / 1000 if timed else 2.0
    return LOAD_OVERHEAD_S + RUN_OVERHEAD_S + window * WINDOWS


def _worst_runs(rec: SearchPlan) -> list[float]:
    """Each run's seconds, in order, if nothing is ever dropped (ties survive) and the budget's runs
    are all spent (sharded: this host's share)."""
    n = rec.share or len(rec.candidates)
    out: list[float] = []
    for rung in rec.rungs:
        out += [_run_seconds(rung.window_ms, rec.timed)] * (n * len(rung.repetitions))
    runs = rec.budget.runs
    return out if runs is None else out[:runs]


def estimate_seconds(rec: SearchPlan) -> float:
    """The longest a search may take on one host (the lease guard): its budget's runs, all candidates
    surviving; with a ``minutes`` budget, those minutes plus each run's load and start-up."""
    runs = _worst_runs(rec)
    total = sum(runs)
    minutes = rec.budget.minutes
    if minutes is not None and runs:
        mean = total / len(runs)
        measured = mean - LOAD_OVERHEAD_S - RUN_OVERHEAD_S
        total = min(total, minutes * 60 * mean / max(measured, 0.1) + mean)
    return round(total, 1)


def fit_runs(rec: SearchPlan, seconds: float) -> int:
    """The most runs of the search that end within ``seconds`` (its budget shrunk to a lease)."""
    used, n = 0.0, 0
    for s in _worst_runs(rec):
        if used + s > seconds:
            break
        used, n = used + s, n + 1
    return n


def first_batch_runs(rec: SearchPlan) -> int:
    """The runs of the first batch: halving's first rung, or one optuna trial."""
    reps = len(rec.rungs[0].repetitions)
    return reps * (len(rec.candidates) if rec.strategy == HALVING else 1)
