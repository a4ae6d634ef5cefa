"""One claim's finding, as every claim builds it: its comparisons' effects, their combined verdict, and
the evidence kept.

Shared by the lab's claims (:mod:`.findings`) and the best variant (:mod:`.best`): a comparison is an
effect with its interval at the claim's level (:func:`compare`), kept as evidence
(:func:`as_evidence`); a claim made of several comparisons gets one verdict (:func:`finish`).

**The error of a claim, not of a comparison** (:class:`Split`, :func:`holm`). A claim of several
comparisons (loads, metrics, steps) says *held* only when every comparison held: an
intersection-union test, so each comparison at the claim's 5 % keeps the claim's false *held* at 5 %,
with no split. It says *did not hold* when any one comparison did not: a union, so each further
comparison is another chance to fail it falsely. That side is controlled over the claim's
comparisons by Holm's step-down: with m tests that could fail the claim, each is first read at
5 % / m; r rejected, the others are read again at 5 % / (m - r), until no more are rejected. The
claim's verdict is *did not hold* when Holm rejects any, so its false *did not hold* is at most 5 %
over all its comparisons, whatever their correlation. The best variant is controlled the same way
over the spec's objectives: a winner named for an objective is a rejection of "they are tied",
read by Holm over the objectives (:mod:`.best`), and the finding is decided only when every
objective is (:func:`serve_system.results.intervals.combine_all`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .. import metrics
from . import intervals as iv
from . import sequential as sq


@dataclass
class Finding:
    key: str
    claim: str
    verdict: str
    detail: str
    evidence: list[dict[str, Any]] = field(default_factory=list)
    #: the claim's family where it has several tests: {"tests", "method": "holm", "alpha"} (:func:`holm`)
    family: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Split:
    """A claim's Holm step (:func:`holm`): the tests that could fail it are read at ``ALPHA / k``;
    ``tests`` counts them as the claim is built, ``rejected`` those rejected at that level."""

    k: int = 1
    tests: int = 0
    rejected: int = 0

    def count(self, rejected: bool) -> None:
        self.tests += 1
        self.rejected += bool(rejected)


def compare(a: list[float], b: list[float], looks: sq.Looks | None = None, sides: int = sq.BEST,
            k: int = 1) -> iv.Effect:
    """:func:`iv.effect` at the level of ``sides`` (:data:`.sequential.BEST`: the two-sided 95 %
    interval; :data:`.sequential.CLAIM`: the 90 % one, each end a one-sided 95 % bound), or at a
    sequential look, that of the look (:mod:`.sequential`: the look's information fraction from both
    sides' repetitions); ``k``: the error divided by ``k`` (a Holm step)."""
    if looks is None or not looks.sequential:
        return iv.effect(a, b, sq.fixed_quantile(sides, sq.ALPHA / k))
    at = looks if k == 1 else dataclasses.replace(looks, alpha=looks.alpha / k)
    return iv.effect(a, b, at.quantile_of(len(a), len(b), sides))


def judge(a: list[float], b: list[float], looks: sq.Looks | None, direction: iv.Direction, smallest: float,
          split: Split | None = None) -> tuple[iv.Effect, iv.Verdict]:
    """One comparison of a claim (one-sided, :data:`.sequential.CLAIM`): its effect at the claim's
    level and its verdict, *did not hold* read at the Holm step's level (``split``; the module's text)."""
    e = compare(a, b, looks, sq.CLAIM)
    far = compare(a, b, looks, sq.CLAIM, split.k) if split is not None and split.k > 1 else None
    v = iv.decide(e, direction, smallest, far)
    if split is not None:
        split.count(v.word == iv.NOT_HELD)
    return e, v


def against(a: list[float], b: list[float], looks: sq.Looks | None, direction: iv.Direction, smallest: float,
            split: Split | None = None) -> bool:
    """Whether B moves the metric ``direction`` by at least ``smallest`` at the Holm step's level: a
    test whose rejection fails the claim (a step that falls where the claim says it grows)."""
    e = compare(a, b, looks, sq.CLAIM, split.k if split is not None else 1)
    out = iv.decide(e, direction, smallest).word == iv.HELD
    if split is not None:
        split.count(out)
    return out


def holm(build: Callable[[Split], Finding]) -> Finding:
    """A claim's finding with Holm's step-down over the tests that could fail it (the module's text):
    ``build`` makes the finding at a step (:class:`Split`), counting its tests."""
    first = Split()
    f = build(first)
    m = first.tests
    k = m
    while m > 1:
        step = Split(k)
        f = build(step)
        left = m - step.rejected
        if step.rejected == 0 or left >= k or left < 1:
            break
        k = left
    if m > 1:
        f.family = {"tests": m, "method": "holm", "alpha": sq.ALPHA}
    return f


def ms(us: float | None) -> str:
    """A stored time as a claim's text gives it (in milliseconds), ``-`` for none."""
    return "-" if us is None else f"{us / metrics.TIME_SCALE:.2f} {metrics.TIME_SHOWN}"


def as_evidence(e: iv.Effect) -> dict[str, Any]:
    """An effect as a finding's evidence keeps it."""
    return {"change": e.change, "ci_low": e.low, "ci_high": e.high, "n": [e.n_a, e.n_b],
            "level": e.level, "detectable": iv.detectable(e)}


def finish(key: str, claim: str, verdicts: list[iv.Verdict], parts: list[str],
           evidence: list[dict[str, Any]], every: bool = False) -> Finding:
    """A finding from its comparisons: the combined verdict (``every``: decided only when every part is,
    :func:`iv.combine_all`; else :func:`iv.combine`), a count where they differ, the reason a
    one-repetition run is inconclusive."""
    words = [v.word for v in verdicts]
    word = iv.combine_all(words) if every else iv.combine(words)
    lead = ""
    if len(set(words)) > 1:
        lead = f"Held at {words.count(iv.HELD)} of {len(words)} comparisons. "
    if word == iv.INCONCLUSIVE and any(v.reason == iv.ONE_REPETITION for v in verdicts):
        lead = f"Inconclusive: {iv.ONE_REPETITION}. " + lead
    return Finding(key, claim, word, lead + "; ".join(parts) + ".", evidence)
