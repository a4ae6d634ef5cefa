"""An optuna search's decisions (stage 4): batches of trials drawn by TPE from the study rebuilt on what
is measured (seeded, trials added in the order drawn), until every candidate is measured or the budget
stops it; its standing as a halving search's (:mod:`.searchrule`)."""

from __future__ import annotations

import logging
import statistics
import warnings
from typing import Any

from .. import metrics
from ..node.plans import SearchPlan
from .row import Row
from .searchrule import Entry, Outcome, budget_left, result_text, standing, summarised
from .searchview import SearchView


def _study(rec: SearchPlan, view: SearchView, done: list[str], reps: set[int]) -> Any:
    """The TPE study rebuilt from the measured trials (in the order they were drawn), seeded."""
    import optuna  # the strategy's own import: plan, report and decide of other specs stay fast

    optuna.logging.set_verbosity(logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    keys = list(rec.candidates[0].params)
    choices = {k: list(dict.fromkeys(c.params[k] for c in rec.candidates)) for k in keys}
    dists: dict[str, optuna.distributions.BaseDistribution] = {
        str(k): optuna.distributions.CategoricalDistribution(v) for k, v in choices.items()}
    goal = view.goal.goal
    sampler = optuna.samplers.TPESampler(seed=rec.seed, constant_liar=True, n_startup_trials=rec.startup)
    study = optuna.create_study(direction="maximize" if metrics.wants_higher(goal) else "minimize",
                                sampler=sampler)
    params = {c.name: c.params for c in rec.candidates}
    for n in done:
        xs = view.samples(n, reps)
        ok = bool(xs) and view.violated(n, reps) is None
        study.add_trial(optuna.trial.create_trial(
            params=params[n], distributions=dists, value=statistics.fmean(xs) if ok else None,
            state=optuna.trial.TrialState.COMPLETE if ok else optuna.trial.TrialState.FAIL))
    return study, dists, keys


def _draw(rec: SearchPlan, view: SearchView, done: list[str], reps: set[int], k: int) -> list[str]:
    """``k`` new candidates drawn by TPE (a drawn point measured already is drawn again; after many
    tries the first unmeasured ones in plan order)."""
    import optuna

    study, dists, keys = _study(rec, view, done, reps)
    by_point = {tuple(c.params[x] for x in keys): c.name for c in rec.candidates}
    picked: list[str] = []
    for _ in range(50 * k):
        if len(picked) == k:
            break
        trial = study.ask(dists)
        name = by_point.get(tuple(trial.params[x] for x in keys))
        if name is None or name in done or name in picked:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            picked.append(name)  # left running: the constant liar keeps the batch spread out
    rest = [n for n in view.names if n not in done and n not in picked]
    return picked + rest[:k - len(picked)]


def decide(rec: SearchPlan, rows: list[Row]) -> Outcome:
    """An optuna search's next batch on what is measured (``rows``: the host's summary rows), or its end
    (the standing: :mod:`.searchrule`)."""
    view = SearchView(rec, rows)
    reps = set(rec.rungs[0].repetitions)
    batch = rec.batch
    budget = rec.budget
    done: list[str] = []
    path: dict[str, Entry] = {}
    spent_runs, spent_min = 0, 0.0
    b = 0
    while len(done) < len(view.names):
        b += 1
        per_trial = len(reps)
        left = len(view.names) - len(done)
        k = min(batch, left)
        if budget.runs is not None:
            k = min(k, (budget.runs - spent_runs) // per_trial)
        runs_done = spent_runs
        per_run = spent_min / runs_done if runs_done else None
        if budget.minutes is not None and per_run is not None:
            k = min(k, int((budget.minutes - spent_min) / (per_run * per_trial)))
        why = None
        if k < 1:
            why = budget_left(view, spent_runs, spent_min, per_trial, per_run) or "the budget is spent"
            return _optuna_end(view, done, path, reps, f"the budget stops batch {b}: {why}")
        picks = _draw(rec, view, done, reps, k)
        pending = [(n, r) for n in picks for r in sorted(reps) if not view.has(n, r)]
        if pending:
            started = any(view.has(n, r) for n in picks for r in reps)
            names = list(dict.fromkeys(n for n, _ in pending))
            out = Outcome(False, f"optuna batch {b}: {len(picks)} trial(s) x {len(reps)} measurement(s)"
                                 + (" (resumed)" if started else ""),
                          names, sorted({r for _, r in pending}), runs=spent_runs, minutes=spent_min)
            out.path = [summarised(view, path[n], reps) for n in done]
            return out
        for n in picks:
            path[n] = Entry(n, b)
            if n in view.refused:
                path[n].dropped, path[n].why = b, view.refused[n]
            elif not view.samples(n, reps):
                path[n].dropped, path[n].why = b, "no measurement succeeded"
            elif (bad := view.violated(n, reps)) is not None:
                path[n].dropped, path[n].why = b, f"constraint: {bad}"
            else:
                path[n].why = f"trial of batch {b}"
        done += picks
        r, m = view.spent(set(picks), reps)
        spent_runs, spent_min = spent_runs + r, spent_min + m
    return _optuna_end(view, done, path, reps, f"all {len(view.names)} candidates are measured")


def _optuna_end(view: SearchView, done: list[str], path: dict[str, Entry], reps: set[int],
                why: str) -> Outcome:
    runs, minutes = view.spent(set(done), reps)
    out = Outcome(True, "", runs=runs, minutes=minutes)
    alive = [n for n in done if path[n].dropped is None]
    judge = standing(view, alive, reps, out, pooled=True)
    if judge.pool is not None and judge.pool.df >= 1:
        wide = ", ".join(f"`{n}`" for n in judge.wide)
        out.rule = (f"Decided by a pooled run-to-run spread: s = {judge.pool.sd * 100:.1f} % on the log "
                    f"scale, df = {judge.pool.df}, over the {len(done)} trials; the lead's interval "
                    "two-sided 95 %" + (f"; judged by Welch's t on their own spread: {wide}" if wide else "")
                    + ".")
    out.path = [summarised(view, path[n], reps) for n in done]
    out.text = f"search decided ({why}): {result_text(out)}; {runs} run(s), {minutes:.1f} measured min"
    return out
