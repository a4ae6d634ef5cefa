"""A search's decisions (stage 4): on what is measured, the next batch of a halving or optuna search, or
its end with a winner or a tie, and its ``### Search`` lines. What each strategy measures, its rungs and
its budget are planned in stage 3 (:mod:`serve_system.experiment.search`).

**One spread for all (halving)**: every candidate of a search is the same model at the same load level
measured the same way, so their run-to-run spread on the log scale is estimated once, pooled over
every candidate measured in the rungs so far (the dropped ones too: their measurements are as good a
sample of the spread): one-way ANOVA's residual variance ``s_p**2``, with ``df = sum(n_i - 1)``
(:func:`~serve_system.results.intervals.pooled`). The effect of candidate C against leader L has the
standard error ``s_p * sqrt(1/n_L + 1/n_C)`` on the log difference, with the pool's df
(:func:`~serve_system.results.intervals.effect_pooled`). With 28 candidates measured twice the pool has
df 28, where each pair's own spread (Welch's t) has df 1 to 2 (t 12.7 to 4.3) and decides little;
so two repetitions per rung decide, and the first rung (every candidate, each measurement a fresh
model load) costs two loads per candidate, not three. Pooling assumes the spreads are alike: a
candidate whose own log variance is far larger than the rest's (an F test: ``s_i**2 / s_rest**2``
above the 0.99 quantile of F(n_i - 1, df_rest), :func:`~serve_system.results.intervals.spread_test`)
is compared by Welch's t on the two candidates' own samples instead (the leader too: then every
comparison of the rung is), and its path says so. It stays in the pool: leaving the largest spreads
out would bias the pool low where the spreads are in fact alike (the F test flags about 1 in 100 such
candidates), while keeping them errs on the wide side. The pool mixes the rungs' windows (a longer
window spreads less), which also errs on the wide side in the later rungs.

**The drop rule** (halving): a candidate of the worse half is dropped when its effect against the rung's
leader is decidedly worse by more than the smallest effect of interest: the one-sided bound of that
effect (goal ``max``: its upper bound, ``min``: its lower bound, on the log scale) lies beyond
``-log(1 + s)``, at the level ``1 - a_r / (k (k - 1))``, k the candidates the rung ranked and ``a_r``
the rung's share of the search's 5 % (:func:`drop_quantile`, :func:`rung_share`). Why so: the guarantee
is per search, "a candidate within the smallest effect of the best is dropped at most 5 % of the time
over the whole search". Such a candidate i is dropped only if some ranked j's sample mean beats its own
by the critical value (its shortfall against the leader, less the true shortfall of at most s, is
noise), so every such drop is one of the k (k - 1) ordered pairs' noise differences reaching the
critical value: Bonferroni over those pairs bounds a rung's chance at ``a_r``, whichever candidate
leads and however many are tied. The search's 5 % is split over what is tested: a rung that ranks k
candidates spends ``left * P(k) / (P(k) + P(k_2) + ...)``, ``P(k) = k (k - 1)``, ``left`` the level
the earlier rungs left, and ``k_2, ...`` the candidates the later rungs could rank at the fewest
(half of each rung's, rounded up) counted only while the runs budget could pay for them and they
rank two or more (:func:`reachable`): a rung that can never run spends nothing, and the last that can
spends all that is left. Bonferroni is conservative (the comparisons share the leader and the pool),
but valid whatever their correlation. (``split_over_rungs: false`` in a search record drops by the
rule before: 5 % over the planned rungs, over the k - 1 comparisons with the leader, no smallest
effect: per candidate, not per search; ``bench/sequential.py``'s reference column.) Where the interval
reaches within the smallest effect the candidate survives (a tie). A candidate whose constraint is
decidedly violated (the 95 % interval of the constrained metric lies wholly beyond its bound) is
dropped at any rank; Triton refusing its configuration, or no measurement succeeding, drops it too.
Measurements of different rungs are pooled per candidate: a throughput or latency averaged over a
window does not depend on its length, only its spread does.

**The standing** (the end of either search): the lead of the winner over the runner-up is a two-sided
95 % interval with the pooled spread (Welch's t where either candidate's own spread is far larger); a
tie lists the leader and every survivor not decidedly worse than it, each judged at the drop rule's
level or at two-sided 95 %, whichever is the stricter, so that a runner-up whose lead interval reaches
zero is always in the tie. Optuna's trials are measured alike (the same model, load and window), so
its standing pools their spread too: with two measurements a trial, each pair's own spread would name
a winner on two samples that happened to agree. The report's ``### Search`` section states the pool
(s, df) and, for halving, each rung's critical value.

**Checkpoints**: every measured level is a record of the run folder, and a search's state is a pure
function of those records: :func:`step` replays the search from the start on what is measured (the
halving rungs; optuna's study rebuilt batch by batch, its sampler seeded, trials added in the same
order), so a re-run with the same run id goes on where it stopped and measures nothing twice. The
role asks ``serve-system decide`` (:mod:`serve_system.results.adaptive`) for each next batch.
"""

from __future__ import annotations

import logging
import math
import statistics
import warnings
from dataclasses import dataclass, field
from typing import Any

from .. import metrics
from ..experiment.search import HALVING, OPTUNA
from . import intervals as iv
from .intervals import Effect, Pool
from .searchview import SearchView, best_first
from .sequential import rung_level


@dataclass
class Entry:
    """One candidate's line of the search path."""

    name: str
    #: halving: the last rung it was measured in; optuna: its batch
    rung: int
    n: int = 0
    mean: float | None = None
    low: float | None = None
    high: float | None = None
    #: the rung (halving) or batch (optuna) after which it was dropped; None: it survived
    dropped: int | None = None
    why: str = ""
    #: a sharded search: the host that measured it ("every host": the reference)
    host: str = ""


@dataclass
class Outcome:
    """What the search does next (``decided``: nothing), and where it stands."""

    decided: bool
    text: str
    variants: list[str] = field(default_factory=list)
    repetitions: list[int] = field(default_factory=list)
    path: list[Entry] = field(default_factory=list)
    #: the winner (its lead over the runner-up excludes zero), else None and ``tie`` holds the leaders
    winner: str | None = None
    tie: list[str] = field(default_factory=list)
    lead: str = ""
    runs: int = 0
    minutes: float = 0.0
    #: how halving decided (the pooled spread, each rung's adjusted critical value): the report's line
    rule: str = ""


def _entry(view: SearchView, e: Entry, reps: set[int] | None = None) -> Entry:
    """``e`` with the candidate's samples summarized (n, mean, 95 % interval) and its host."""
    s = iv.summarize(view.samples(e.name, reps), floor=iv.METRIC_FLOOR)
    e.n, e.mean, e.low, e.high = s.n, s.mean, s.ci_low, s.ci_high
    e.host = view.home.get(e.name, "every host" if e.name == view.reference and view.sharded else "")
    return e


#: the drop rule's familywise level over the whole search: the chance of dropping a candidate tied
#: for the best, at most
FAMILY_LEVEL = 0.05
#: a search record's key that, set false, drops by the rule before issue 40 (5 % split over the planned
#: rungs, Bonferroni over the k - 1 comparisons with the leader: per candidate, not per search;
#: bench/sequential.py's reference column)
SPLIT_KEY = "split_over_rungs"


def rung_family_level(rec: dict[str, Any]) -> float:
    """0.05 split over ``rec``'s planned rungs (:func:`serve_system.results.sequential.rung_level`): the
    level the end's standing reads a tie at, and a rung's drops where ``rec[SPLIT_KEY]`` is false (the
    rule before, per candidate; the shipped drops spend :func:`rung_share`)."""
    return rung_level(len(rec.get("rungs") or [None]), FAMILY_LEVEL)


def pairs(k: int) -> int:
    """The ordered pairs of ``k`` ranked candidates: the comparisons a rung's drops stand on."""
    return k * (k - 1)


def reachable(rec: dict[str, Any], rung: int, k: int, runs_spent: int) -> list[int]:
    """The candidates each later rung could still rank after rung ``rung`` (1-based) ranks ``k``: at
    most half of them survive a rung (the fewest, the cheapest), and a rung counts only when the
    search's runs budget could pay for it that way and it ranks two or more."""
    budget = (rec.get("budget") or {}).get("runs")
    out, spent = [], runs_spent
    for later in (rec.get("rungs") or [])[rung:]:
        k = math.ceil(k / 2)
        spent += k * len(later.get("repetitions") or [1])
        if k < 2 or (budget is not None and spent > budget):
            break
        out.append(k)
    return out


def rung_share(rec: dict[str, Any], rung: int, k: int, runs_spent: int, left: float) -> float:
    """The familywise level rung ``rung`` spends on its drops among ``k`` ranked candidates, ``left``
    of the search's 5 % not yet spent: its share of the pairs still to be compared (its own, and those
    of the later rungs that could run: :func:`reachable`), so that the 5 % is split over what is
    tested, and what a rung never reached never spent it."""
    mine = pairs(k)
    if mine == 0:
        return 0.0
    later = sum(pairs(j) for j in reachable(rec, rung, k, runs_spent))
    return left * mine / (mine + later)


def drop_quantile(k: int, level: float = FAMILY_LEVEL, split: bool = True) -> float:
    """The t quantile of the drop rule among ``k`` ranked candidates: one-sided, Bonferroni-adjusted
    over the k (k - 1) ordered pairs of them (``1 - level / (k (k - 1))``: any drop of a candidate tied
    with the best is one of those pairs' differences reaching the critical value, whichever leads);
    ``split`` false: over the k - 1 comparisons with the leader (the rule before: per candidate)."""
    return 1 - level / max(1, pairs(k) if split else k - 1)


class _Judge:
    """How two candidates are compared on the measurements of ``reps``: halving (``pooled``) with the
    run-to-run spread pooled over every candidate measured (the module's text), a candidate whose own
    spread is far larger than the rest's by Welch's t on its own (``pooled`` false: Welch's t
    throughout)."""

    def __init__(self, view: SearchView, reps: set[int] | None, pooled: bool,
                 level: float | None = None) -> None:
        self.view, self.reps = view, reps
        #: the familywise level of one rung's drops (:func:`rung_share`; the standing's tie:
        #: :func:`rung_family_level`)
        self.level = rung_family_level(view.rec) if level is None else level
        self.split = view.rec.get(SPLIT_KEY, True) is not False
        self.pool: Pool | None = None
        #: candidates whose own spread is far larger than the pool's: why (the F test)
        self.wide: dict[str, str] = {}
        if not pooled:
            return
        groups = view.groups(reps)
        self.pool = iv.pooled(groups.values())
        for key, xs in groups.items():
            test = iv.spread_test(xs, self.pool)
            if test is not None and test.larger:
                n = key.split("@")[0]  # the reference's group on a host: the reference
                self.wide.setdefault(n, f"`{key}`'s own spread is far larger than the others' (F = "
                                        f"{test.f:.1f} > {test.critical:.1f}, F({test.df_own}, "
                                        f"{test.df_rest}) at 99 %): Welch's t")

    def effect(self, a: str, b: str, quantile: float) -> tuple[Effect, str]:
        """B against A (an :class:`~serve_system.results.intervals.Effect`) and, where Welch's t judged
        it instead of the pool, why."""
        xa, xb, extra = self.view.pair(a, b, self.reps)
        if self.pool is None:
            return iv.effect(xa, xb, quantile), ""
        why = "; ".join(self.wide[n] for n in (a, b) if n in self.wide)
        if why:
            return iv.effect(xa, xb, quantile), why
        return iv.effect_pooled(xa, xb, self.pool, quantile, extra), ""

    def worse(self, leader: str, name: str, k: int, at_least: float = 0.0, by: float = 0.0
              ) -> tuple[bool, str]:
        """Whether ``name`` is decidedly worse than ``leader`` among ``k`` ranked candidates (the drop
        rule; its quantile raised to ``at_least``), by more than ``by`` (a share: the drop rule's
        smallest effect), and the effect's text (with why Welch's t judged it, if it did)."""
        e, why = self.effect(leader, name, max(drop_quantile(k, self.level, self.split), at_least))
        text = iv.effect_text(e) + (f" ({why})" if why else "")
        if not e.has_interval:
            return False, text
        assert e.low is not None and e.high is not None
        better = metrics.goal_direction(metrics.goal_of(self.view.goal))
        # on the log scale, so that worse by more than ``by`` reads alike for max and min goals
        low, high = (math.log1p(x) if x > -1 else -math.inf for x in (e.low, e.high))
        return metrics.oriented(better, low, high)[1] < -math.log1p(by), text

    def critical(self, k: int) -> str:
        """The drop rule's critical value among ``k`` ranked candidates, in words (the report's line)."""
        if self.pool is None or self.pool.df < 1 or k < 2:
            return f"k = {k}"
        return (f"k = {k}, {self.level * 100:.2g} % spent, t = "
                f"{iv.t_quantile(self.pool.df, drop_quantile(k, self.level, self.split)):.2f} with df = "
                f"{self.pool.df}")

    def _split(self) -> str:
        """How the search's 5 % is split over what it tests, in words ('' when it is not)."""
        if not self.split:
            return ""
        return (f" (the search's {FAMILY_LEVEL * 100:g} % split over the ordered pairs each rung ranks and "
                "those the later rungs its budget can reach could rank, so that a candidate within the "
                f"smallest effect of the best is dropped at most {FAMILY_LEVEL * 100:g} % of the time over "
                "the whole search)")

    def rule(self, rungs: list[str]) -> str:
        """The report's line on how halving decided (``rungs``: each ranked rung's critical value)."""
        if self.pool is None:
            return ""
        if self.pool.df < 1:
            return "Decided by a pooled run-to-run spread: none yet (no candidate has two measurements)."
        over = ("the rung's k (k - 1) ordered pairs" if self.split
                else "the rung's k - 1 comparisons with its leader (5 % split over the planned rungs)")
        wide = (f"; far wider than the pool at the end (an F test at 99 %), so judged by Welch's t on "
                f"their own spread: {', '.join(f'`{n}`' for n in self.wide)}" if self.wide else "")
        return (f"Decided by a pooled run-to-run spread: s = {self.pool.sd * 100:.1f} % on the log scale, "
                f"df = {self.pool.df}; drops when worse than the leader by more than the smallest effect at "
                f"a Bonferroni-adjusted level over {over}{self._split()} "
                f"({'; '.join(rungs) or 'no rung ranked'}); "
                f"the lead's interval two-sided {iv.LEVEL * 100:.0f} %{wide}.")


def _standing(view: SearchView, alive: list[str], reps: set[int] | None, out: Outcome,
              dropped_last: list[str] | None = None, pooled: bool = False) -> _Judge:
    """The winner, or the tie: the leader and every survivor not decidedly worse than it. With one
    survivor, its lead is over the best of those the last rung dropped (``dropped_last``). The lead's
    interval is two-sided 95 %; the tie's members pass the drop rule against the leader."""
    judge = _Judge(view, reps, pooled)
    ranked = best_first(view, alive, reps)
    if not ranked:
        out.tie = []
        out.lead = "no candidate was measured"
        return judge
    others = best_first(view, dropped_last or [], reps) if len(ranked) == 1 else ranked[1:]
    if not others:
        out.winner = ranked[0]
        out.lead = "the only candidate measured"
        return judge
    best, runner = ranked[0], others[0]
    e, why = judge.effect(runner, best, iv.TWO_SIDED)
    v = iv.lead(e, metrics.goal_of(view.goal), float(view.rec.get("smallest_effect") or 0.05))
    out.lead = f"lead over `{runner}` {iv.effect_text(e)}" + (f" ({why})" if why else "")
    if v.word == iv.HELD:
        out.winner = best
    elif v.word == iv.NOT_HELD:  # decided, but by less than the smallest effect of interest
        out.tie = [best, runner]
        out.lead += f": they differ by less than the smallest effect ({view.rec.get('smallest_effect')})"
    else:
        k = len(others) + 1
        out.tie = [best] + [n for n in others if not judge.worse(best, n, k, iv.TWO_SIDED)[0]]
    return judge


def _budget_left(view: SearchView, spent_runs: int, spent_min: float, need: int, per_run_min: float | None
                 ) -> str | None:
    """Why a batch of ``need`` runs does not fit the budget (None: it does)."""
    budget = view.rec["budget"]
    runs, minutes = budget.get("runs"), budget.get("minutes")
    if runs is not None and spent_runs + need > runs:
        return f"it needs {need} run(s), {runs - spent_runs} of {runs} are left"
    if minutes is not None:
        if spent_min >= minutes:
            return f"{spent_min:.1f} of {minutes:g} measured minutes are spent"
        if per_run_min is not None and spent_min + need * per_run_min > minutes:
            return (f"it would take about {need * per_run_min:.1f} measured minutes, "
                    f"{minutes - spent_min:.1f} of {minutes:g} are left")
    return None


def step(rec: dict[str, Any], rows: list[dict[str, Any]]) -> Outcome:
    """The search's next batch on what is measured (``rows``: the host's summary rows), or its end."""
    if rec["strategy"] == HALVING:
        return _halving(rec, rows)
    if rec["strategy"] == OPTUNA:
        return _optuna(rec, rows)
    raise ValueError(f"search strategy {rec['strategy']!r}: use grid, halving or optuna")


def _halving(rec: dict[str, Any], rows: list[dict[str, Any]]) -> Outcome:
    view = SearchView(rec, rows)
    alive = list(view.names)
    path = {n: Entry(n, 1) for n in view.names}
    seen: set[int] = set()  # the repetitions of the rungs done so far
    last_mean: float | None = None  # the measured minutes of one run in the last rung
    dropped_last: list[str] = []  # those the last rung dropped (the runner-up of a lone survivor)
    ranks: list[str] = []  # each ranked rung's critical value: the report's line
    left = FAMILY_LEVEL  # the search's level not yet spent on drops (:func:`rung_share`)
    rungs = rec["rungs"]
    for k, rung in enumerate(rungs, 1):
        reps = set(rung["repetitions"])
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
            why = None if started else _budget_left(view, runs, minutes, need, per_run)
            if why is None:
                names = list(dict.fromkeys(n for n, _ in pending))
                out = Outcome(False, f"rung {k} of {len(rungs)}: {len(names)} candidate(s) x "
                                     f"{len(reps)} measurement(s), {rung['window_ms']} ms windows"
                                     + (" (resumed)" if started else ""),
                              names, sorted({r for _, r in pending}), runs=runs, minutes=minutes)
                out.path = [_entry(view, path[n]) for n in view.names]
                if seen:
                    out.rule = _Judge(view, seen, True).rule(ranks)
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
    split = view.rec.get(SPLIT_KEY, True) is not False
    level = (rung_share(view.rec, k, len(ranked), view.spent(set(view.names))[0], left) if split
             else rung_family_level(view.rec))
    judge = _Judge(view, seen, True, level)
    ranks.append(f"rung {k}: {judge.critical(len(ranked))}")
    if not ranked:
        return [], 0.0
    by = float(view.rec.get("smallest_effect") or 0.0) if split else 0.0
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
    out.rule = _standing(view, alive, reps or None, out, dropped_last, pooled=True).rule(ranks)
    out.path = [_entry(view, path[n]) for n in view.names if view.measured(n) or n in view.refused]
    out.text = f"search decided ({why}): {_result_text(out)}; {runs} run(s), {minutes:.1f} measured min"
    return out


def _result_text(out: Outcome) -> str:
    if out.winner:
        return f"`{out.winner}` wins ({out.lead})"
    if out.tie:
        return f"a tie of {', '.join(f'`{n}`' for n in out.tie)} ({out.lead})"
    return out.lead


# ------------------------------------------------------------------------------------ optuna

def _study(rec: dict[str, Any], view: SearchView, done: list[str], reps: set[int]) -> Any:
    """The TPE study rebuilt from the measured trials (in the order they were drawn), seeded."""
    import optuna  # the strategy's own import: plan, report and decide of other specs stay fast

    optuna.logging.set_verbosity(logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    keys = list(rec["candidates"][0]["params"])
    choices = {k: list(dict.fromkeys(c["params"][k] for c in rec["candidates"])) for k in keys}
    dists: dict[str, optuna.distributions.BaseDistribution] = {
        str(k): optuna.distributions.CategoricalDistribution(v) for k, v in choices.items()}
    goal = metrics.goal_of(view.goal)
    sampler = optuna.samplers.TPESampler(seed=int(rec.get("seed") or 0), constant_liar=True,
                                         n_startup_trials=int(rec.get("startup") or 4))
    study = optuna.create_study(direction="maximize" if metrics.wants_higher(goal) else "minimize",
                                sampler=sampler)
    params = {c["name"]: c["params"] for c in rec["candidates"]}
    for n in done:
        xs = view.samples(n, reps)
        ok = bool(xs) and view.violated(n, reps) is None
        study.add_trial(optuna.trial.create_trial(
            params=params[n], distributions=dists, value=statistics.fmean(xs) if ok else None,
            state=optuna.trial.TrialState.COMPLETE if ok else optuna.trial.TrialState.FAIL))
    return study, dists, keys


def _draw(rec: dict[str, Any], view: SearchView, done: list[str], reps: set[int], k: int) -> list[str]:
    """``k`` new candidates drawn by TPE (a drawn point measured already is drawn again; after many
    tries the first unmeasured ones in plan order)."""
    import optuna

    study, dists, keys = _study(rec, view, done, reps)
    by_point = {tuple(c["params"][x] for x in keys): c["name"] for c in rec["candidates"]}
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


def _optuna(rec: dict[str, Any], rows: list[dict[str, Any]]) -> Outcome:
    view = SearchView(rec, rows)
    reps = set(rec["rungs"][0]["repetitions"])
    batch = int(rec.get("batch") or 4)
    budget = rec["budget"]
    done: list[str] = []
    path: dict[str, Entry] = {}
    spent_runs, spent_min = 0, 0.0
    b = 0
    while len(done) < len(view.names):
        b += 1
        per_trial = len(reps)
        left = len(view.names) - len(done)
        k = min(batch, left)
        if budget.get("runs") is not None:
            k = min(k, (budget["runs"] - spent_runs) // per_trial)
        runs_done = spent_runs
        per_run = spent_min / runs_done if runs_done else None
        if budget.get("minutes") is not None and per_run is not None:
            k = min(k, int((budget["minutes"] - spent_min) / (per_run * per_trial)))
        why = None
        if k < 1:
            why = _budget_left(view, spent_runs, spent_min, per_trial, per_run) or "the budget is spent"
            return _optuna_end(view, done, path, reps, f"the budget stops batch {b}: {why}")
        picks = _draw(rec, view, done, reps, k)
        pending = [(n, r) for n in picks for r in sorted(reps) if not view.has(n, r)]
        if pending:
            started = any(view.has(n, r) for n in picks for r in reps)
            names = list(dict.fromkeys(n for n, _ in pending))
            out = Outcome(False, f"optuna batch {b}: {len(picks)} trial(s) x {len(reps)} measurement(s)"
                                 + (" (resumed)" if started else ""),
                          names, sorted({r for _, r in pending}), runs=spent_runs, minutes=spent_min)
            out.path = [_entry(view, path[n], reps) for n in done]
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
    judge = _standing(view, alive, reps, out, pooled=True)
    if judge.pool is not None and judge.pool.df >= 1:
        wide = ", ".join(f"`{n}`" for n in judge.wide)
        out.rule = (f"Decided by a pooled run-to-run spread: s = {judge.pool.sd * 100:.1f} % on the log "
                    f"scale, df = {judge.pool.df}, over the {len(done)} trials; the lead's interval "
                    "two-sided 95 %" + (f"; judged by Welch's t on their own spread: {wide}" if wide else "")
                    + ".")
    out.path = [_entry(view, path[n], reps) for n in done]
    out.text = f"search decided ({why}): {_result_text(out)}; {runs} run(s), {minutes:.1f} measured min"
    return out


# ------------------------------------------------------------------------------------ the report

def markdown(host: str, rec: dict[str, Any], out: Outcome) -> list[str]:
    """A host's ``### Search`` lines: the path (each candidate, its rung, value, why dropped or kept),
    then the winner with its interval, or the tie."""
    goal = rec["objective"]
    metric = goal["metric"]
    cons = goal.get("constraints") or {}
    bound = "; ".join(f"{m} {k} {v:g}" for m, b in cons.items() for k, v in b.items())
    budget = ", ".join(f"{v:g} {k}" for k, v in (rec.get("budget") or {}).items() if v is not None)
    unit = "batch" if rec["strategy"] == OPTUNA else "rung"
    lines = [f"### {host}: {rec['strategy']}", "",
             f"{goal['goal']} {metric} at load {float(goal['at_load']):g}"
             + (f" subject to {bound}" if bound else "") + f"; budget {budget or 'none'}; "
             f"{len(rec['candidates'])} candidates; used {out.runs} perf_analyzer run(s), "
             f"{out.minutes:.1f} measured minutes. "
             + ("Status: **decided**." if out.decided else f"Status: under way ({out.text})."), "",
             *([out.rule, ""] if out.rule else [])]
    shard = rec.get("shard")
    if shard:
        lines += [(f"Each candidate measured on one host, the reference `{shard['reference']}` on every "
                   f"host in every rung; a candidate's {metric} is read relative to its own host's reference "
                   "(on the log scale, scaled to the reference's mean over the hosts), and a comparison "
                   "across hosts carries the two references' uncertainty too."), ""]
    lines += [(f"| candidate |{' host |' if shard else ''} {unit} | n | {metric} mean [95 % interval] | "
               "dropped after | why |"), "|---|" + ("---|" if shard else "") + "---|---|---|---|---|"]

    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:,.1f}"

    for e in sorted(out.path, key=lambda e: (e.dropped is not None, -(e.dropped or 0), -e.rung, e.name)):
        ci = f" [{num(e.low)}, {num(e.high)}]" if e.low is not None else ""
        where = f" {e.host} |" if shard else ""
        lines.append(f"| `{e.name}` |{where} {e.rung} | {e.n} | {num(e.mean)}{ci} | "
                     f"{'-' if e.dropped is None else f'{unit} {e.dropped}'} | {e.why.replace('|', '/')} |")
    if out.decided:
        lines += ["", ("**Winner**: " if out.winner else "**Result**: ") + _result_text(out) + "."]
        if out.winner:
            w = next(e for e in out.path if e.name == out.winner)
            lines[-1] += f" Its {metric}: {num(w.mean)} [{num(w.low)}, {num(w.high)}], n = {w.n}."
    return lines + [""]
