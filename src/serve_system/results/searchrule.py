"""How a search decides (stage 4), for halving (:mod:`.searchhalving`) and optuna (:mod:`.searchoptuna`)
alike: the search path's entries, the outcome of a step, the drop rule and its level over the whole
search, the judge that compares two candidates, the standing at the end, the budget.

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
but valid whatever their correlation. (``split=False`` to :func:`.searchdecide.step` drops by the
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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .. import metrics
from ..node.plans import SearchPlan
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


def summarised(view: SearchView, e: Entry, reps: set[int] | None = None) -> Entry:
    """``e`` with the candidate's samples summarized (n, mean, 95 % interval) and its host."""
    s = iv.summarize(view.samples(e.name, reps), floor=iv.METRIC_FLOOR)
    e.n, e.mean, e.low, e.high = s.n, s.mean, s.ci_low, s.ci_high
    e.host = view.home.get(e.name, "every host" if e.name == view.reference and view.sharded else "")
    return e


#: the drop rule's familywise level over the whole search: the chance of dropping a candidate tied
#: for the best, at most
FAMILY_LEVEL = 0.05


def rung_family_level(rec: SearchPlan) -> float:
    """0.05 split over ``rec``'s planned rungs (:func:`serve_system.results.sequential.rung_level`): the
    level the end's standing reads a tie at, and a rung's drops where the view's ``split`` is false (the
    rule before issue 40: 5 % over the planned rungs, Bonferroni over the k - 1 comparisons with the
    leader, per candidate; the shipped drops spend :func:`rung_share`)."""
    return rung_level(len(rec.rungs) or 1, FAMILY_LEVEL)


def pairs(k: int) -> int:
    """The ordered pairs of ``k`` ranked candidates: the comparisons a rung's drops stand on."""
    return k * (k - 1)


def reachable(rec: SearchPlan, rung: int, k: int, runs_spent: int) -> list[int]:
    """The candidates each later rung could still rank after rung ``rung`` (1-based) ranks ``k``: at
    most half of them survive a rung (the fewest, the cheapest), and a rung counts only when the
    search's runs budget could pay for it that way and it ranks two or more."""
    budget = rec.budget.runs
    out, spent = [], runs_spent
    for later in rec.rungs[rung:]:
        k = math.ceil(k / 2)
        spent += k * (len(later.repetitions) or 1)
        if k < 2 or (budget is not None and spent > budget):
            break
        out.append(k)
    return out


def rung_share(rec: SearchPlan, rung: int, k: int, runs_spent: int, left: float) -> float:
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


class Judge:
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
        self.split = view.split
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
        better = metrics.goal_direction(self.view.goal.goal)
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


def standing(view: SearchView, alive: list[str], reps: set[int] | None, out: Outcome,
              dropped_last: list[str] | None = None, pooled: bool = False) -> Judge:
    """The winner, or the tie: the leader and every survivor not decidedly worse than it. With one
    survivor, its lead is over the best of those the last rung dropped (``dropped_last``). The lead's
    interval is two-sided 95 %; the tie's members pass the drop rule against the leader."""
    judge = Judge(view, reps, pooled)
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
    v = iv.lead(e, view.goal.goal, view.rec.smallest_effect or 0.05)
    out.lead = f"lead over `{runner}` {iv.effect_text(e)}" + (f" ({why})" if why else "")
    if v.word == iv.HELD:
        out.winner = best
    elif v.word == iv.NOT_HELD:  # decided, but by less than the smallest effect of interest
        out.tie = [best, runner]
        out.lead += f": they differ by less than the smallest effect ({view.rec.smallest_effect})"
    else:
        k = len(others) + 1
        out.tie = [best] + [n for n in others if not judge.worse(best, n, k, iv.TWO_SIDED)[0]]
    return judge


def budget_left(view: SearchView, spent_runs: int, spent_min: float, need: int, per_run_min: float | None
                 ) -> str | None:
    """Why a batch of ``need`` runs does not fit the budget (None: it does)."""
    runs, minutes = view.rec.budget.runs, view.rec.budget.minutes
    if runs is not None and spent_runs + need > runs:
        return f"it needs {need} run(s), {runs - spent_runs} of {runs} are left"
    if minutes is not None:
        if spent_min >= minutes:
            return f"{spent_min:.1f} of {minutes:g} measured minutes are spent"
        if per_run_min is not None and spent_min + need * per_run_min > minutes:
            return (f"it would take about {need * per_run_min:.1f} measured minutes, "
                    f"{minutes - spent_min:.1f} of {minutes:g} are left")
    return None


def result_text(out: Outcome) -> str:
    if out.winner:
        return f"`{out.winner}` wins ({out.lead})"
    if out.tie:
        return f"a tie of {', '.join(f'`{n}`' for n in out.tie)} ({out.lead})"
    return out.lead
