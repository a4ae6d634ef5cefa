"""A halving search's decisions (stage 4): rung by rung, each rung's candidates measured, the worse half
dropped by the drop rule (:mod:`.searchrule`), until one is left, the rungs are measured or the budget
stops it."""

from __future__ import annotations

import math

from ..node.plans import SearchPlan
from .row import Row
from .searchrule import (
    FAMILY_LEVEL,
    Entry,
    Judge,
    Outcome,
    budget_left,
    result_text,
    rung_family_level,
    rung_share,
    standing,
    summarised,
)
from .searchview import SearchView, best_first


def decide(rec: SearchPlan, rows: list[Row], split: bool = True) -> Outcome:
    """A halving search's next rung on what is measured (``rows``: the host's summary rows), or its end
    (the drop rule and the standing: :mod:`.searchrule`; ``split`` false: the rule before, there)."""
    view = SearchView(rec, rows, split)
    alive = list(view.names)
    path = {n: Entry(n, 1) for n in view.names}
    seen: set[int] = set()  # the repetitions of the rungs done so far
    last_mean: float | None = None  # the measured minutes of one run in the last rung
    dropped_last: list[str] = []  # those the last rung dropped (the runner-up of a lone survivor)
    ranks: list[str] = []  # each ranked rung's critical value: the report's line
    left = FAMILY_LEVEL  # the search's level not yet spent on drops (:func:`rung_share`)
    rungs = rec.rungs
    for k, rung in enumerate(rungs, 1):
        reps = set(rung.repetitions)
        for n in list(alive):
            if n in view.refused:
                alive.remove(n)
                path[n].dropped, path[n].why = k, view.refused[n]
        # sharded: the reference is measured in every rung on every host, dropped or not (the hosts'
        # corrections come from it)
        measure = alive + [n for n in [view.reference] if n is not None and n not in alive
                           and n not in view.refused]
        pending = [(n, r) for n in measure for r in sorted(reps) if not view.has(n, r)]
        if pending:
            runs, minutes = view.spent(set(view.names))
            started = view.spent(set(measure), reps)[0] > 0
            per_run = None if last_mean is None else last_mean * 2
            need = sum(view.missing(n, r) for n, r in pending)
            why = None if started else budget_left(view, runs, minutes, need, per_run)
            if why is None:
                names = list(dict.fromkeys(n for n, _ in pending))
                out = Outcome(False, f"rung {k} of {len(rungs)}: {len(names)} candidate(s) x "
                                     f"{len(reps)} measurement(s), {rung.window_ms} ms windows"
                                     + (" (resumed)" if started else ""),
                              names, sorted({r for _, r in pending}), runs=runs, minutes=minutes)
                out.path = [summarised(view, path[n]) for n in view.names]
                if seen:
                    out.rule = Judge(view, seen, True).rule(ranks)
                return out
            return _end(view, alive, path, seen, f"the budget stops rung {k}: {why}", dropped_last, ranks)
        seen |= reps
        runs_k, min_k = view.spent(set(alive), reps)
        last_mean = min_k / runs_k if runs_k else last_mean
        for n in alive:
            path[n].rung = k
        before = alive
        alive, spent = _drop(view, alive, k, seen, path, ranks, left)
        left -= spent
        dropped_last = [n for n in before if n not in alive]
        if len(alive) <= 1:
            return _end(view, alive, path, seen, f"one candidate is left after rung {k}", dropped_last, ranks)
    return _end(view, alive, path, seen, f"all {len(rungs)} rungs are measured", dropped_last, ranks)


def _drop(view: SearchView, alive: list[str], k: int, seen: set[int], path: dict[str, Entry],
          ranks: list[str], left: float = FAMILY_LEVEL) -> tuple[list[str], float]:
    """The rung's survivors (the drop rule of the module's text) and the level it spent, ``left`` of
    the search's not yet spent; ``ranks`` gets its critical value."""
    keep = []
    for n in alive:
        if not view.samples(n, seen):
            path[n].dropped, path[n].why = k, "no measurement succeeded"
        elif (bad := view.violated(n, seen)) is not None:
            path[n].dropped, path[n].why = k, f"constraint: {bad}"
        else:
            keep.append(n)
    ranked = best_first(view, keep, seen)
    split = view.split
    level = (rung_share(view.rec, k, len(ranked), view.spent(set(view.names))[0], left) if split
             else rung_family_level(view.rec))
    judge = Judge(view, seen, True, level)
    ranks.append(f"rung {k}: {judge.critical(len(ranked))}")
    if not ranked:
        return [], 0.0
    by = (view.rec.smallest_effect or 0.0) if split else 0.0
    leader = ranked[0]
    half = math.ceil(len(ranked) / 2)
    path[leader].why = f"leader of rung {k}"
    for n in ranked[1:half]:
        path[n].why = f"better half of rung {k}"
    for n in ranked[half:]:
        worse, text = judge.worse(leader, n, len(ranked), by=by)
        if worse:
            path[n].dropped, path[n].why = k, f"decidedly worse than `{leader}`: {text}"
        else:
            path[n].why = f"worse half of rung {k}, but a tie with `{leader}`: {text}"
    return [n for n in ranked if path[n].dropped is None], (level if split else 0.0)


def _end(view: SearchView, alive: list[str], path: dict[str, Entry], reps: set[int], why: str,
         dropped_last: list[str], ranks: list[str]) -> Outcome:
    runs, minutes = view.spent(set(view.names))
    out = Outcome(True, "", runs=runs, minutes=minutes)
    out.rule = standing(view, alive, reps or None, out, dropped_last, pooled=True).rule(ranks)
    out.path = [summarised(view, path[n]) for n in view.names if view.measured(n) or n in view.refused]
    out.text = f"search decided ({why}): {result_text(out)}; {runs} run(s), {minutes:.1f} measured min"
    return out
