"""One claim's finding, as every claim builds it: its comparisons' effects, their combined verdict, and
the evidence kept.

Shared by the lab's claims (:mod:`.findings`) and the best variant (:mod:`.best`): a comparison is an
effect with its interval at the claim's level (:func:`compare`), kept as evidence
(:func:`as_evidence`); a claim made of several comparisons gets one verdict (:func:`finish`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from . import intervals as iv
from . import sequential as sq


@dataclass
class Finding:
    key: str
    claim: str
    verdict: str
    detail: str
    evidence: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def compare(a: list[float], b: list[float], looks: sq.Looks | None = None, sides: int = sq.BEST) -> iv.Effect:
    """:func:`iv.effect` at the level of ``sides`` (:data:`.sequential.BEST`: the two-sided 95 %
    interval; :data:`.sequential.CLAIM`: the 90 % one, each end a one-sided 95 % bound), or at a
    sequential look, that of the look (:mod:`.sequential`)."""
    if looks is None or not looks.sequential:
        return iv.effect(a, b, sq.fixed_quantile(sides))
    return iv.effect(a, b, looks.quantile(min(len(a), len(b)), sides))


def ms(us: float | None) -> str:
    """Microseconds as a claim's text gives them: milliseconds, ``-`` for none."""
    return "-" if us is None else f"{us / 1000:.2f} ms"


def as_evidence(e: iv.Effect) -> dict[str, Any]:
    """An effect as a finding's evidence keeps it."""
    return {"change": e.change, "ci_low": e.low, "ci_high": e.high, "n": [e.n_a, e.n_b],
            "level": e.level, "detectable": iv.detectable(e)}


def finish(key: str, claim: str, verdicts: list[iv.Verdict], parts: list[str],
           evidence: list[dict[str, Any]]) -> Finding:
    """A finding from its comparisons: the combined verdict, a count where they differ, the reason a
    one-repetition run is inconclusive."""
    words = [v.word for v in verdicts]
    word = iv.combine(words)
    lead = ""
    if len(set(words)) > 1:
        lead = f"Held at {words.count(iv.HELD)} of {len(words)} comparisons. "
    if word == iv.INCONCLUSIVE and any(v.reason == iv.ONE_REPETITION for v in verdicts):
        lead = f"Inconclusive: {iv.ONE_REPETITION}. " + lead
    return Finding(key, claim, word, lead + "; ".join(parts) + ".", evidence)
