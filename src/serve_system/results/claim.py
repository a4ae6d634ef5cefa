"""One claim's finding, as every claim builds it: its comparisons' effects, their combined verdict, and
the evidence kept.

Shared by the lab's claims (:mod:`.findings`) and the best variant (:mod:`.best`): a comparison is an
effect with its interval at the claim's level (:func:`compare`), kept as evidence
(:func:`as_evidence`, in the claim's own record of a comparison, one of :data:`Evidence`, whose
``to_json()`` writes it into summary.json and class.json); a claim made of several comparisons gets one
verdict (:func:`finish`).

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

from .. import metrics
from ..node import plans
from . import intervals as iv
from . import sequential as sq

#: a record's written form (summary.json, class.json): made by its ``to_json()`` only for writing
JsonObject = dict[str, object]


@dataclass(frozen=True)
class Ranked:
    """A measured (host, variant, mode, load) that qualifies for an objective: the mean of the
    objective's metric over its ok repetitions (``value``), each repetition's value (``samples``), and
    the objective it was ranked by (its name, metric, goal, load and constraints)."""

    objective: str
    metric: str
    goal: str
    host: str
    variant: str
    mode: str | None
    #: the level's load, as its rows give it
    load: float
    value: float
    repetitions: int
    samples: list[float]
    at_load: float | None
    constraints: dict[str, plans.BoundRecord]

    def to_json(self) -> dict[str, object]:
        """As summary.json and a finding's evidence keep it."""
        return {"objective": self.objective, "metric": self.metric, "goal": self.goal, "host": self.host,
                "variant": self.variant, "mode": self.mode, "load": self.load, "value": self.value,
                "repetitions": self.repetitions, "samples": list(self.samples), "at_load": self.at_load,
                "constraints": {m: b.to_json() for m, b in self.constraints.items()}}


def _json(x: object) -> object:
    """A record's field as its JSON writes it: a record (a ranked entry too) by its ``to_json()``, a tuple
    as a list."""
    if isinstance(x, _Record | Ranked):
        return x.to_json()
    if isinstance(x, tuple):
        return [_json(i) for i in x]
    return x


class _Record:
    """A frozen evidence record written as JSON: its fields in order, a trailing ``_`` dropped from a
    name (``with_`` writes ``with``)."""

    def to_json(self) -> JsonObject:
        assert dataclasses.is_dataclass(self)
        return {f.name.removesuffix("_"): _json(getattr(self, f.name)) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class EffectRecord(_Record):
    """An effect as a finding's evidence keeps it (:func:`as_evidence`): the change, its interval, the
    repetitions per side, the interval's level and the minimal detectable effect."""

    change: float | None
    ci_low: float | None
    ci_high: float | None
    n: tuple[int, int]
    level: float
    detectable: float | None


@dataclass(frozen=True)
class QueueLevel(_Record):
    """One concurrency level of the queue delay's evidence: the level's means."""

    load: float
    queue_us: float | None
    compute_infer_us: float | None
    repetitions: int


@dataclass(frozen=True)
class QueueEvidence(_Record):
    """The queue delay's comparison for one variant: the highest concurrency against the lowest."""

    host: str
    variant: str
    verdict: str
    effect: EffectRecord
    levels: tuple[QueueLevel, ...]

    def variants(self) -> tuple[str, ...]:
        return (self.variant,)


@dataclass(frozen=True)
class BatchingEvidence(_Record):
    """Dynamic batching's comparison at one load: the average batch without and with it, and at a
    concurrency the throughput (None at a request rate, and then not written)."""

    host: str
    without: str
    with_: str
    mode: str
    load: float
    avg_batch_without: float
    avg_batch_with: float
    batch_effect: EffectRecord
    throughput_without: float | None = None
    throughput_with: float | None = None
    throughput_effect: EffectRecord | None = None
    verdict: str = ""

    def to_json(self) -> JsonObject:
        out = super().to_json()
        if self.throughput_effect is None:
            for k in ("throughput_without", "throughput_with", "throughput_effect"):
                del out[k]
        return out

    def variants(self) -> tuple[str, ...]:
        return (self.without, self.with_)


@dataclass(frozen=True)
class InstanceStep(_Record):
    """One step of the instances' comparison: from one instance count to the next."""

    from_: int
    to: int
    effect: EffectRecord
    verdict: str
    saturated: bool


@dataclass(frozen=True)
class InstancePoint(_Record):
    """One variant of the instances' comparison: its instance count and its level's means."""

    variant: str
    instances: int
    throughput: float | None
    repetitions: int
    gpu_util: float | None
    gpu_util_max: float | None
    cpu_util: float | None


@dataclass(frozen=True)
class InstancesEvidence(_Record):
    """The instances' comparison at one load: each step and each variant's point."""

    host: str
    mode: str
    load: float
    verdict: str
    steps: tuple[InstanceStep, ...]
    points: tuple[InstancePoint, ...]

    def variants(self) -> tuple[str, ...]:
        return tuple(p.variant for p in self.points)


@dataclass(frozen=True)
class PoissonEvidence(_Record):
    """Poisson against constant arrivals at one request rate: the tail latency (p99, else p95)."""

    host: str
    constant: str
    poisson: str
    load: float
    tail: str
    constant_us: float
    poisson_us: float
    effect: EffectRecord
    verdict: str

    def variants(self) -> tuple[str, ...]:
        return (self.constant, self.poisson)


@dataclass(frozen=True)
class OnnxEvidence(_Record):
    """ONNX against the Python backend at one load: throughput and latency (average, else p50)."""

    host: str
    python: str
    onnx: str
    mode: str
    load: float
    throughput_python: float
    throughput_onnx: float
    latency_metric: str
    latency_python_us: float
    latency_onnx_us: float
    throughput_effect: EffectRecord
    latency_effect: EffectRecord
    verdict: str

    def variants(self) -> tuple[str, ...]:
        return (self.python, self.onnx)


@dataclass(frozen=True)
class BestEvidence(_Record):
    """One objective of the best variant: the best and the next (ranked entries, :func:`.best.rank`),
    the best's lead, its verdict and the winner named (None for a tie)."""

    objective: str
    best: Ranked
    next: Ranked
    lead: EffectRecord
    verdict: str
    winner: str | None

    def variants(self) -> tuple[str, ...]:
        return (self.best.variant, self.next.variant)


#: one comparison of a finding as kept (written to summary.json's and class.json's ``findings``)
Evidence = (QueueEvidence | BatchingEvidence | InstancesEvidence | PoissonEvidence | OnnxEvidence
            | BestEvidence)


@dataclass(frozen=True)
class Family:
    """A claim's family where it has several tests (:func:`holm`)."""

    tests: int
    method: str = "holm"
    alpha: float = sq.ALPHA

    def to_json(self) -> JsonObject:
        return asdict(self)


@dataclass
class Finding:
    """One claim's finding: its verdict, the text the report gives, each comparison's evidence and, where
    it has several tests, its family."""

    key: str
    claim: str
    verdict: str
    detail: str
    evidence: list[Evidence] = field(default_factory=list)
    family: Family | None = None

    def to_json(self) -> JsonObject:
        return {"key": self.key, "claim": self.claim, "verdict": self.verdict, "detail": self.detail,
                "evidence": [e.to_json() for e in self.evidence],
                "family": self.family.to_json() if self.family is not None else None}


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
        f.family = Family(m)
    return f


def ms(us: float | None) -> str:
    """A stored time as a claim's text gives it (in milliseconds), ``-`` for none."""
    return "-" if us is None else f"{us / metrics.TIME_SCALE:.2f} {metrics.TIME_SHOWN}"


def as_evidence(e: iv.Effect) -> EffectRecord:
    """An effect as a finding's evidence keeps it."""
    return EffectRecord(e.change, e.low, e.high, (e.n_a, e.n_b), e.level, iv.detectable(e))


def finish(key: str, claim: str, verdicts: list[iv.Verdict], parts: list[str],
           evidence: list[Evidence], every: bool = False) -> Finding:
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
