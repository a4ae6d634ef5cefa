"""The best variant by each of the spec's objectives: the measured levels ranked (:func:`rank`), the
best's lead over the next variant (:func:`standing`), and the claim that names it
(:func:`best_variant`, the last of the report's ``## Findings``).

A level qualifies for an objective when it meets the objective's constraints (each a mean over the
level's ok repetitions) at its ``at_load``, if any; the levels are ranked by the mean of the
objective's metric. The best is named only when its lead over the next variant has a two-sided
95 % interval (:data:`.sequential.BEST`; at a sequential look, its repeated interval) that excludes
zero; otherwise the two are tied, as they are when the interval lies within the spec's smallest
effect of interest either way (:func:`.intervals.lead`). Used by the findings (:mod:`.findings`)
and the report's best-variant lines (:mod:`.report`).
"""

from __future__ import annotations

import statistics
from typing import Any

from .. import metrics
from ..experiment.spec.models import DEFAULT_SMALLEST_EFFECT
from ..node import plans
from . import intervals as iv
from . import reasons as why_
from . import sequential as sq
from .claim import BestEvidence, Evidence, Finding, Ranked, Split, as_evidence, compare, finish, ms
from .row import Row, value
from .status import Status


def _within(b: plans.BoundRecord, v: float) -> bool:
    return not (b.max is not None and v > b.max) and not (b.min is not None and v < b.min)


def rank(rows: list[Row], objective: plans.ObjectiveRecord) -> list[Ranked]:
    """Every (host, variant, mode, load) that qualifies for an objective, best first (by the mean over
    the repetitions; ``samples`` keeps each repetition's value)."""
    metric, at_load, cons = objective.metric, objective.at_load, objective.constraints
    groups: dict[tuple[str, str, Any, Any], list[Row]] = {}
    for r in rows:
        if r.get("status") != Status.OK or r.get("load") is None:
            continue
        if at_load is not None and float(r["load"]) != float(at_load):
            continue
        groups.setdefault((r["host"], r["variant"], r["mode"], r["load"]), []).append(r)
    cands = []
    for key, rs in groups.items():
        vals: dict[str, float] = {}
        for m in {metric, *cons}:
            nums = [float(value(r, m)) for r in rs if value(r, m) is not None]
            if nums:
                vals[m] = statistics.fmean(nums)
        if metric not in vals:
            continue
        if all(m in vals and _within(b, vals[m]) for m, b in cons.items()):
            cands.append(Ranked(objective.name, metric, objective.goal, key[0], key[1], key[2], key[3],
                                vals[metric], len(rs),
                                [float(value(r, metric)) for r in rs if value(r, metric) is not None],
                                at_load, cons))
    cands.sort(key=lambda c: c.value, reverse=metrics.wants_higher(objective.goal))
    return cands


def _fmt_metric(metric: str, v: float) -> str:
    return ms(v) if metrics.is_time(metric) else f"{v:,.2f}"


def standing(ranked: list[Ranked], smallest: float = DEFAULT_SMALLEST_EFFECT,
             looks: sq.Looks | None = None, k: int = 1
             ) -> tuple[Ranked, Ranked, iv.Effect, iv.Verdict] | None:
    """(best, next variant, the best's lead over it, the lead's verdict: held = a winner), or None
    when fewer than two variants qualify; ``k``: the lead's error divided by ``k``."""
    top = ranked[0] if ranked else None
    second = next((c for c in ranked if top and c.variant != top.variant), None)
    if top is None or second is None:
        return None
    e = compare(second.samples, top.samples, looks, sq.BEST, k)
    return top, second, e, iv.lead(e, top.goal, smallest)


#: an objective's verdict when the ones before it named no winner: its lead is shown, not judged
NOT_JUDGED = "not judged"
#: why, in the report's words
NOT_JUDGED_WHY = "an objective before it named no winner: the objectives are judged in the spec's order"


def best_variant(rows: list[Row], objectives: list[plans.ObjectiveRecord],
                 smallest: float = DEFAULT_SMALLEST_EFFECT, looks: sq.Looks | None = None,
                 split: Split | None = None, control: bool = True) -> Finding:
    """The ``best_variant`` claim: for each objective, the best variant and its lead over the next one,
    or why fewer than two variants qualify.

    A winner named is a rejection of "they are tied". Over the objectives that is controlled by a fixed
    sequence (hierarchical testing): the spec's first objective is the primary one, judged at the full
    5 %; each next one is judged, at 5 % too, only once every objective before it named a winner, and
    otherwise its lead is shown, not judged (:data:`NOT_JUDGED`). A false best among all the objectives
    then needs a false winner at the first objective whose "tied" is true, so it happens at most 5 % of
    the time, and the primary objective keeps its power. The finding is decided only when every judged
    objective is (:func:`.intervals.combine_all`). ``control`` false: every objective judged at its own
    5 % (the rule before, for ``bench/sequential.py``). ``split`` is unused: the objectives are not
    split (:func:`.claim.holm` finds no tests)."""
    del split
    claim = "The sweep's objective picks one best variant"
    parts, verdicts = [], []
    evidence: list[Evidence] = []
    gate: str | None = None  # the first judged objective that named no winner: the later ones are not judged
    for o in objectives:
        ranked = rank(rows, o)
        name = o.name
        found = standing(ranked, smallest, looks)
        if found is None:
            parts.append(f"**{name}**: " + ("no measured level qualifies" if not ranked else
                                              f"only `{ranked[0].variant}` qualifies, nothing to compare")
                         + why_.unqualified(o, rows, {c.variant for c in ranked}))
            continue
        top, second, e, v = found
        where = "" if o.at_load is not None else f" at {top.mode} {top.load:g}"
        head = (f"**{name}** ({o.goal} {top.metric}): `{top.variant}`{where} "
                f"{_fmt_metric(top.metric, top.value)} vs next `{second.variant}` "
                f"{_fmt_metric(second.metric, second.value)}: lead {iv.effect_text(e)}: ")
        if gate is not None:
            parts.append(head + f"not judged (**{gate}**, before it, named no winner)")
            evidence.append(BestEvidence(name, top, second, as_evidence(e), NOT_JUDGED, None))
            continue
        if control and v.word != iv.HELD:
            gate = name
        verdicts.append(v)
        outcome = {iv.HELD: f"`{top.variant}` is the best",
                   iv.NOT_HELD: "a tie: they differ by less than the smallest effect "
                                f"({smallest * 100:g} %)"}.get(
            v.word, "a tie: the lead's interval includes zero"
            + ("" if v.reason == iv.ONE_REPETITION or not iv.explain(v) else f" ({iv.explain(v)})"))
        if v.word == iv.INCONCLUSIVE and v.reason == iv.ONE_REPETITION:
            outcome = "no winner named: one repetition gives no interval"
        parts.append(head + outcome)
        evidence.append(BestEvidence(name, top, second, as_evidence(e), v.word,
                                     top.variant if v.word == iv.HELD else None))
    if not verdicts:
        if not why_.measured(rows):
            return Finding("best_variant", claim, iv.NOT_MEASURABLE, why_.nothing_measured(rows))
        return Finding("best_variant", claim, iv.NOT_MEASURABLE,
                       "Fewer than two variants qualify for any objective"
                       + (": " + "; ".join(parts) if parts else "") + ".")
    f = finish("best_variant", claim, verdicts, parts, evidence, every=True)
    order = (" The objectives are judged in the spec's order, each at 5 % once every one before it named "
             "a winner, so that a false best is named at most 5 % of the time over them all."
             if len(evidence) > 1 and control else "")
    f.detail = ("A best variant is named when its lead over the next variant has a 95 % interval that "
                "excludes zero; otherwise they are tied." + order + " " + f.detail)
    return f
