"""The lab's claims, checked against a run's measurements: the report's ``## Findings``.

Each claim gets one verdict, exactly one of :data:`VERDICTS` (held / did not hold / inconclusive /
not measurable here, defined in :mod:`.intervals`), and the numbers behind it: every comparison is
an effect with its interval and the repetitions per side ("throughput +30 % [+24 %, +36 %] (90 %
interval), n = 3 per side"), judged against the spec's smallest effect of interest (``smallest_effect``,
5 % by default). A claim's verdict is one-sided (held: at least the smallest effect; did not hold:
less), so each end of its interval is a one-sided 95 % bound: the 90 % interval, 5 % error per claim;
the best variant's lead is two-sided, its interval 95 % (:mod:`.sequential`). One repetition per side
gives no interval: such a claim is inconclusive and says so.
Whether a claim applies is decided from the data (which variants and loads exist, and the
configurations that were actually sent), never from the experiment's name:

- ``queue_delay``: on one instance without dynamic batching, Triton's queue delay grows with the
  number of concurrent clients (the lab: at concurrency 8 the delay is about 8x the inference time):
  the queue at the highest concurrency against the lowest, and no step falling by the smallest
  effect or more;
- ``dynamic_batching``: two variants whose configurations differ only by ``dynamic_batching``, at
  the same load: the batched one forms larger batches and serves more requests per second (with a
  request rate the throughput is the rate, so only the batch is compared);
- ``instances``: variants that differ only by their instance groups, at the same load: throughput
  rises with the instance count until the CPU or GPU saturates (utilisation >= 85 %, or as many CPU
  instances as the host has CPUs);
- ``poisson``: the same configuration at the same request rate with constant and with Poisson
  arrivals: Poisson arrivals raise the tail latency (p99; p95 where p99 is missing);
- ``onnx_backend``: ONNX (the ``onnxruntime`` backend, or the FastAPI ``onnx`` runtime) against the
  Python backend (or the FastAPI ``pytorch`` runtime) at the same load and instance count: higher
  throughput and lower latency;
- ``best_variant``: for each objective of the spec, the best variant, named only when its lead over
  the next variant has a 95 % interval that excludes zero (otherwise the two are tied): :mod:`.best`,
  which also ranks the levels for the report.

A claim made of several comparisons did not hold when one of them did not hold, held when all held,
and is inconclusive otherwise. Inputs: the summary rows (:func:`serve_system.results.tree.collect`) and
the set-ups (:func:`serve_system.results.tree.variant_setups`); each claim builds its finding as
:mod:`.claim` says.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import cast

from .. import metrics
from ..experiment.spec.models import DEFAULT_SMALLEST_EFFECT
from ..node import plans
from . import best
from . import claim as cl
from . import intervals as iv
from . import reasons as why_
from . import sequential as sq
from .claim import Finding, Split, against, as_evidence, finish, judge, ms
from .claim import holm as claim_holm
from .row import Row, value
from .setups import Setup, VariantSetup, is_shim, make_setup
from .status import Status

HELD, NOT_HELD, INCONCLUSIVE, NOT_MEASURABLE = iv.HELD, iv.NOT_HELD, iv.INCONCLUSIVE, iv.NOT_MEASURABLE
VERDICTS = iv.VERDICTS
#: utilisation (0..1) from which a processor counts as saturated
SATURATED = 0.85

# -- measurements: each level's repetitions -----------------------------------------------------

METRICS = metrics.select("throughput", "latency_avg_us", "p50_us", "p95_us", "p99_us", "queue_us",
                         "compute_infer_us", "avg_batch_size", "gpu_util", "gpu_util_max", "cpu_util")


@dataclass(frozen=True)
class Level:
    """One (host, variant, mode, load)'s ok repetitions: each metric of :data:`METRICS`'s mean over
    them (None where none has it), its values (``samples``, one per repetition that has it), and how
    many there are. A metric named at run time is read with :meth:`mean`."""

    repetitions: int
    samples: dict[str, list[float]]
    throughput: float | None
    latency_avg_us: float | None
    p50_us: float | None
    p95_us: float | None
    p99_us: float | None
    queue_us: float | None
    compute_infer_us: float | None
    avg_batch_size: float | None
    gpu_util: float | None
    gpu_util_max: float | None
    cpu_util: float | None

    @classmethod
    def of(cls, rows: list[Row]) -> Level:
        """The level of ``rows`` (its ok repetitions)."""
        samples = {k: [float(value(r, k)) for r in rows if value(r, k) is not None] for k in METRICS}
        return cls(len(rows), samples, *(statistics.fmean(v) if v else None for v in samples.values()))

    def mean(self, metric: str) -> float | None:
        """The mean of ``metric``, one of :data:`METRICS`."""
        if metric not in METRICS:
            raise KeyError(f"{metric!r} is not a metric of the findings' levels; known: {', '.join(METRICS)}")
        return cast(float | None, getattr(self, metric))


Levels = dict[tuple[str, str, str, float], Level]


def levels(rows: list[Row]) -> Levels:
    """(host, variant, mode, load) -> the :class:`Level` of its ok repetitions."""
    groups: dict[tuple[str, str, str, float], list[Row]] = {}
    for r in rows:
        if r.get("status") == Status.OK and r.get("load") is not None:
            key = (r["host"], r["variant"], r.get("mode") or "concurrency", float(r["load"]))
            groups.setdefault(key, []).append(r)
    return {key: Level.of(rs) for key, rs in groups.items()}


def _judge(a: Level, b: Level, metric: str, looks: sq.Looks | None, direction: iv.Direction,
           smallest: float, split: Split | None) -> tuple[iv.Effect, iv.Verdict]:
    """B against A on a metric, judged as one comparison of a claim (:func:`.claim.judge`: held at the
    claim's level, did not hold at its Holm step's)."""
    return judge(a.samples[metric], b.samples[metric], looks, direction, smallest, split)


def _load(mode: str, load: float) -> str:
    return f"{'concurrency' if mode == 'concurrency' else mode.replace('_', ' ')} {load:g}"


def _unmeasured(setups: dict[tuple[str, str], Setup], rows: Rows, pred: Callable[[Setup], bool]) -> str:
    """' Not measured: `v`: why; ...' for variants that would have taken part but measured nothing
    (refused, unavailable, every level failed), each with its own reason."""
    ok = why_.measured(rows)
    gone = [s for k, s in sorted(setups.items()) if k not in ok and pred(s)]
    return (" " + why_.failed(gone, rows, "Not measured")) if gone else ""


def _suffix(v: iv.Verdict, failed: str) -> str:
    """What a comparison's text ends with: nothing when held, ``failed`` when it did not hold, and why
    it is undecided (the one-repetition reason is said once, for the whole finding)."""
    if v.word == NOT_HELD:
        return f" - {failed}"
    if v.word == INCONCLUSIVE and v.reason != iv.ONE_REPETITION:
        return " - " + iv.explain(v)
    return ""


def _both(*vs: iv.Verdict) -> iv.Verdict:
    """One comparison judged on several metrics: :func:`iv.combine`, keeping an undecided one's reason."""
    word = iv.combine([v.word for v in vs])
    if word == INCONCLUSIVE:
        return next(v for v in vs if v.word == INCONCLUSIVE)
    return iv.Verdict(word)


# -- why a claim is not measurable: the causes of :mod:`.reasons`, then what differed -------------

Rows = list[Row]


def _loads(means: Levels, s: Setup, mode: str | None = None) -> set[tuple[str, float]]:
    """(mode, load) of a variant's ok levels (of one mode)."""
    return {(m, load) for (h, v, m, load) in means if (h, v) == (s.host, s.variant) and mode in (None, m)}


def _candidates(need: why_.Need, setups: dict[tuple[str, str], Setup], rows: Rows) -> list[Setup]:
    """The variants that ran as ``need`` says and measured something."""
    ok = why_.measured(rows)
    return [s for k, s in sorted(setups.items()) if need.ran_as(s) and k in ok]


def _triton(s: Setup) -> bool:
    return s.rest != "fastapi"


def _queue_why(means: Levels, setups: dict[tuple[str, str], Setup], rows: Rows) -> str:
    what = "Triton variant with one instance and no dynamic batching"
    need = why_.Need(what, lambda s: _triton(s) and s.instances == 1 and not s.dynamic_batching)
    found = why_.why([need], setups, rows)
    if found:
        return found
    cands = _candidates(need, setups, rows)
    few = [(s, _loads(means, s), why_.failed_at(rows, s.host, s.variant)) for s in cands
           if len(_loads(means, s, "concurrency")) < 2]
    if few:
        return why_.single_levels(few, f"{what} was measured at two or more concurrency levels")
    return why_.no_metric("queue time", cands, "Triton's statistics were not recorded at these levels")


def _batching_why(means: Levels, setups: dict[tuple[str, str], Setup], rows: Rows) -> str:
    with_ = why_.Need("Triton variant with dynamic batching", lambda s: _triton(s) and s.dynamic_batching)
    without = why_.Need("Triton variant without dynamic batching",
                        lambda s: _triton(s) and not s.dynamic_batching)
    found = why_.why([with_, without], setups, rows)
    if found:
        return found
    twins = [(setups[(h, b)], setups[(h, d)]) for h, b, d in _twins(setups)]
    if not twins:
        pairs = [(a, b, why_.differences(a, b, configs=True)) for a in _candidates(without, setups, rows)
                 for b in _candidates(with_, setups, rows)]
        return why_.not_alike(pairs, "dynamic batching") + _unmeasured(setups, rows,
                                                                        lambda s: s.dynamic_batching)
    parts = []
    for a, b in twins:
        la, lb = _loads(means, a), _loads(means, b)
        common = la & lb
        if not common:
            parts.append(why_.no_common_load([(a, la, b, lb)], rows))
        elif all(m == "concurrency" and x * a.batch_size <= 1 for m, x in common):
            parts.append(f"`{a.variant}` and `{b.variant}` share only {why_.loads_text(common)}: one request "
                         "outstanding, nothing to batch")
        else:
            parts.append(f"`{a.variant}` and `{b.variant}` at {why_.loads_text(common)}: Triton's statistics "
                         "gave no average batch")
    return ("No two variants differing only by dynamic batching were measured at a common load above one "
            "outstanding request: " + "; ".join(parts) + "."
            + _unmeasured(setups, rows, lambda s: s.dynamic_batching))


def _instances_why(means: Levels, setups: dict[tuple[str, str], Setup], rows: Rows) -> str:
    need = why_.Need("Triton variant", _triton)
    found = why_.why([need], setups, rows)
    if found:
        return found
    cands = _candidates(need, setups, rows)
    pairs = [(a, b, why_.differences(a, b, configs=True)) for i, a in enumerate(cands) for b in cands[i + 1:]
             if a.host == b.host and a.instances != b.instances]
    if not pairs:
        return ("All the Triton variants measured ran the same instance count: "
                + "; ".join(f"`{s.variant}` {s.instances}x {s.instance_kind}{why_.adaptation(s)}"
                            for s in cands[:why_.NAMED]) + ".")
    alike = [(a, b) for a, b, d in pairs if len(d) == 1]
    if not alike:
        return why_.not_alike(pairs, "their instance count")
    return ("No variants differing only by their instance count were measured at a common concurrency: "
            + why_.no_common_load([(a, _loads(means, a, "concurrency"), b, _loads(means, b, "concurrency"))
                                   for a, b in alike], rows) + ".")


def _poisson_why(means: Levels, setups: dict[tuple[str, str], Setup], rows: Rows) -> str:
    rated = {(r["host"], r["variant"]) for r in rows if r.get("mode") == "request_rate"}
    poisson_ = why_.Need("variant with Poisson arrivals", lambda s: s.distribution == "poisson")
    constant = why_.Need("variant with constant arrivals at a request rate",
                         lambda s: s.distribution == "constant" and (s.host, s.variant) in rated)
    found = why_.why([poisson_, constant], setups, rows)
    if found:
        return found
    pairs = [(c, p, [d for d in why_.differences(c, p, _loads(means, c, "request_rate"),
                                                   _loads(means, p, "request_rate"), configs=True)
                     if not d.startswith("arrivals ")])
             for c in _candidates(constant, setups, rows) for p in _candidates(poisson_, setups, rows)]
    return why_.apart(pairs, "variants with constant and Poisson arrivals") + _unmeasured(
        setups, rows, lambda s: True)


def _onnx_why(means: Levels, setups: dict[tuple[str, str], Setup], rows: Rows) -> str:
    onnx_ = why_.Need("variant on Triton's onnxruntime backend or FastAPI's onnx runtime",
                      lambda s: s.planned_backend == "onnxruntime", lambda s: s.backend == "onnxruntime")
    python = why_.Need("variant on Triton's Python backend or FastAPI's pytorch runtime",
                       lambda s: s.backend == "python" and not is_shim(s.served_by))
    found = why_.why([onnx_, python], setups, rows)
    if found:
        return found
    pairs = [(p, o, why_.differences(p, o, _loads(means, p), _loads(means, o)))
             for p in _candidates(python, setups, rows) for o in _candidates(onnx_, setups, rows)
             if _triton(p) == _triton(o)]
    return why_.apart(pairs, "ONNX and Python-backend variants") + _unmeasured(
        setups, rows, lambda s: s.planned_backend in ("onnxruntime", "python"))


# -- the claims ---------------------------------------------------------------------------------


def queue_delay(means: Levels, setups: dict[tuple[str, str], Setup], rows: Rows,
                smallest: float = DEFAULT_SMALLEST_EFFECT,
                looks: sq.Looks | None = None, split: Split | None = None) -> Finding:
    claim = "Queue delay grows with concurrency on one instance"
    parts: list[str] = []
    verdicts: list[iv.Verdict] = []
    evidence: list[cl.Evidence] = []
    for (host, variant), s in sorted(setups.items()):
        if s.instances != 1 or s.dynamic_batching:
            continue
        pts = sorted((load, m) for (h, v, mode, load), m in means.items()
                     if (h, v, mode) == (host, variant, "concurrency") and m.queue_us is not None)
        if len(pts) < 2:
            continue
        grows, v = _judge(pts[0][1], pts[-1][1], "queue_us", looks, "up", smallest, split)
        # a step whose queue falls by the smallest effect or more (decided) contradicts the claim: each
        # step is one more test that could fail the claim (Holm over them all)
        falls = [(a, b) for (a, ma), (b, mb) in pairwise(pts)
                 if against(ma.samples["queue_us"], mb.samples["queue_us"], looks, "down", smallest,
                            split)]
        if falls:
            v = iv.Verdict(NOT_HELD)
        verdicts.append(v)
        steps = ", ".join(f"{load:g} -> {ms(m.queue_us)} (infer {ms(m.compute_infer_us)})"
                          for load, m in pts)
        failed = "does not grow" + ("".join(f"; falls from {a:g} to {b:g}" for a, b in falls))
        parts.append(f"`{variant}` on {host} (1 {s.instance_kind} instance, no dynamic batching): queue at "
                     f"concurrency {steps}; concurrency {pts[-1][0]:g} against {pts[0][0]:g}: "
                     f"{iv.describe('queue', grows)}" + _suffix(v, failed))
        evidence.append(cl.QueueEvidence(host, variant, v.word, as_evidence(grows),
                                         tuple(cl.QueueLevel(load, m.queue_us, m.compute_infer_us,
                                                             m.repetitions) for load, m in pts)))
    if not verdicts:
        return Finding("queue_delay", claim, NOT_MEASURABLE, _queue_why(means, setups, rows))
    return finish("queue_delay", claim, verdicts, parts, evidence)


def _twins(setups: dict[tuple[str, str], Setup]) -> list[tuple[str, str, str]]:
    """(host, without, with) for variants differing only by dynamic batching."""
    out = []
    for (host, base_v), base in sorted(setups.items()):
        if base.dynamic_batching:
            continue
        for (h2, dyn_v), dyn in sorted(setups.items()):
            if h2 == host and dyn.dynamic_batching and dyn.without_batching == base.without_batching \
                    and (dyn.distribution, dyn.batch_size, dyn.instances) == (
                        base.distribution, base.batch_size, base.instances):
                out.append((host, base_v, dyn_v))
    return out


def dynamic_batching(means: Levels, setups: dict[tuple[str, str], Setup], rows: Rows,
                     batches: dict[tuple[str, str, str, float], float] | None = None,
                     smallest: float = DEFAULT_SMALLEST_EFFECT,
                     looks: sq.Looks | None = None, split: Split | None = None) -> Finding:
    claim = "Dynamic batching raises the average batch and throughput at the same load"
    parts: list[str] = []
    verdicts: list[iv.Verdict] = []
    evidence: list[cl.Evidence] = []
    for host, base_v, dyn_v in _twins(setups):
        base = setups[(host, base_v)]
        for (hh, v, mode, load), bm in sorted(means.items()):
            if (hh, v) != (host, base_v):
                continue
            dm = means.get((host, dyn_v, mode, load))
            if dm is None or (mode == "concurrency" and load * base.batch_size <= 1):
                continue  # one request at a time: nothing to batch
            if bm.avg_batch_size is None or dm.avg_batch_size is None:
                continue
            batch, vb = _judge(bm, dm, "avg_batch_size", looks, "up", smallest, split)
            text = (f"{_load(mode, load)} on {host}: average batch {bm.avg_batch_size:.2f} "
                    f"(`{base_v}`) -> "
                    f"{dm.avg_batch_size:.2f} (`{dyn_v}`), {iv.effect_text(batch)}")
            ev = cl.BatchingEvidence(host, base_v, dyn_v, mode, load, bm.avg_batch_size, dm.avg_batch_size,
                                     as_evidence(batch))
            if mode == "concurrency" and bm.throughput and dm.throughput is not None:
                thr, vt = _judge(bm, dm, "throughput", looks, metrics.improves("throughput"), smallest, split)
                text += (f"; throughput {bm.throughput:.1f} -> {dm.throughput:.1f}/s, "
                         f"{iv.effect_text(thr)}")
                ev = replace(ev, throughput_without=bm.throughput, throughput_with=dm.throughput,
                             throughput_effect=as_evidence(thr))
                vd = _both(vb, vt)
                failed = " and ".join(w for w, bad in (("batch not larger", vb.word == NOT_HELD),
                                                       ("throughput not higher", vt.word == NOT_HELD)) if bad)
            else:
                vd = vb
                failed = "batch not larger"
                text += (f"; p95 {ms(bm.p95_us)} -> {ms(dm.p95_us)} (request rate: the "
                         "throughput is the rate, so only the batch is judged)")
            verdicts.append(vd)
            parts.append(text + _suffix(vd, failed))
            evidence.append(replace(ev, verdict=vd.word))
    if not verdicts:
        # Triton's statistics still say which batches formed where perf_analyzer measured nothing stable
        seen = []
        for (host, bv, mode, load), bb in sorted((batches or {}).items()):
            for h2, b2, dv in _twins(setups):
                db = (batches or {}).get((host, dv, mode, load))
                if (h2, b2) == (host, bv) and db is not None:
                    seen.append(f"{_load(mode, load)}: {bb:.2f} (`{bv}`) -> {db:.2f} (`{dv}`)")
        told = (" Triton's statistics alone (no throughput to compare) give average batches "
                + "; ".join(seen) + ".") if seen else ""
        return Finding("dynamic_batching", claim, NOT_MEASURABLE,
                       _batching_why(means, setups, rows) + told, evidence)
    return finish("dynamic_batching", claim, verdicts, parts, evidence)


def _busy(m: Level, s: Setup) -> tuple[bool, str]:
    gpu = m.gpu_util_max if m.gpu_util_max is not None else m.gpu_util
    util = gpu if gpu is not None else m.cpu_util
    what = "busiest GPU" if gpu is not None else "CPU"
    if util is not None and util >= SATURATED:
        return True, f"{what} {util * 100:.0f} %"
    if "CPU" in s.instance_kind and s.host_cpus and s.instances >= s.host_cpus:
        return True, f"{s.instances} CPU instances on {s.host_cpus} CPUs"
    return False, f"{what} {util * 100:.0f} %" if util is not None else "utilisation not reported"


def instances(means: Levels, setups: dict[tuple[str, str], Setup], rows: Rows,
              smallest: float = DEFAULT_SMALLEST_EFFECT,
              looks: sq.Looks | None = None, split: Split | None = None) -> Finding:
    claim = "More instances raise throughput until the CPU or GPU saturates"
    groups: dict[tuple[str, str, str, int], list[Setup]] = {}
    for s in setups.values():
        if s.model and not s.model.startswith("fastapi:"):
            groups.setdefault((s.host, s.without_instances, s.distribution, s.batch_size), []).append(s)
    parts: list[str] = []
    verdicts: list[iv.Verdict] = []
    evidence: list[cl.Evidence] = []
    for (host, _, _, _), ss in sorted(groups.items(), key=lambda kv: kv[0]):
        if len({s.instances for s in ss}) < 2:
            continue
        loads = sorted({(mode, load) for (h, v, mode, load) in means
                        if h == host and any(v == s.variant for s in ss)})
        for mode, load in loads:
            pts = sorted(((s, lv) for s in ss
                          if (lv := means.get((host, s.variant, mode, load))) is not None and lv.throughput),
                         key=lambda p: p[0].instances)
            if len({p[0].instances for p in pts}) < 2 or mode != "concurrency":
                continue
            step_verdicts: list[iv.Verdict] = []
            steps: list[str] = []
            step_ev: list[cl.InstanceStep] = []
            for (sa, ma), (sb, mb) in pairwise(pts):
                if sb.instances == sa.instances:
                    continue
                rise, v = _judge(ma, mb, "throughput", looks, "up", smallest, split)
                busy, util = _busy(ma, sa)
                if v.word == NOT_HELD and busy:
                    v, how = iv.Verdict(HELD), "flat/falls, already saturated"
                else:
                    how = {HELD: "rises", NOT_HELD: "flat/falls while not saturated"}.get(v.word, "")
                    if v.word == INCONCLUSIVE:
                        how = "rise undecided" + ("" if v.reason == iv.ONE_REPETITION else
                                                  " (" + iv.explain(v) + ")")
                step_verdicts.append(v)
                steps.append(f"{sa.instances} -> {sb.instances} instances: {ma.throughput:.1f} -> "
                             f"{mb.throughput:.1f}/s ({iv.effect_text(rise)}; at {sa.instances}: {util}) "
                             f"{how}")
                step_ev.append(cl.InstanceStep(sa.instances, sb.instances, as_evidence(rise), v.word, busy))
            verdicts.append(_both(*step_verdicts))
            word = verdicts[-1].word
            parts.append(f"{_load(mode, load)} on {host} ("
                         + ", ".join(f"`{s.variant}` {s.instances}x {s.instance_kind}" for s, _ in pts)
                         + "): " + "; ".join(steps))
            evidence.append(cl.InstancesEvidence(
                host, mode, load, word, tuple(step_ev),
                tuple(cl.InstancePoint(s.variant, s.instances, m.throughput, m.repetitions, m.gpu_util,
                                       m.gpu_util_max, m.cpu_util) for s, m in pts)))
    if not verdicts:
        return Finding("instances", claim, NOT_MEASURABLE, _instances_why(means, setups, rows))
    return finish("instances", claim, verdicts, parts, evidence)


def poisson(means: Levels, setups: dict[tuple[str, str], Setup], rows: Rows,
            smallest: float = DEFAULT_SMALLEST_EFFECT,
            looks: sq.Looks | None = None, split: Split | None = None) -> Finding:
    claim = "Poisson arrivals raise tail latency over constant arrivals at the same rate"
    parts: list[str] = []
    verdicts: list[iv.Verdict] = []
    evidence: list[cl.Evidence] = []
    for (host, cv), c in sorted(setups.items()):
        if c.distribution != "constant":
            continue
        for (h2, pv), p in sorted(setups.items()):
            if h2 != host or p.distribution != "poisson" or (p.rest, p.without_instances, p.batch_size) != (
                    c.rest, c.without_instances, c.batch_size) or p.instances != c.instances:
                continue
            for (hh, v, mode, load), cm in sorted(means.items()):
                pm = means.get((host, pv, mode, load))
                if (hh, v) != (host, cv) or mode != "request_rate" or pm is None:
                    continue
                tail = "p99_us" if cm.p99_us is not None and pm.p99_us is not None else "p95_us"
                c_tail, p_tail = cm.mean(tail), pm.mean(tail)
                if c_tail is None or p_tail is None:
                    continue
                e, verdict = _judge(cm, pm, tail, looks, "up", smallest, split)
                verdicts.append(verdict)
                parts.append(f"{load:g} requests/s on {host}: {tail[:3]} {ms(c_tail)} constant "
                             f"(`{cv}`) -> {ms(p_tail)} Poisson (`{pv}`), {iv.effect_text(e)}; queue "
                             f"{ms(cm.queue_us)} -> {ms(pm.queue_us)}"
                             + _suffix(verdict, "not higher"))
                evidence.append(cl.PoissonEvidence(host, cv, pv, load, tail, c_tail, p_tail, as_evidence(e),
                                                   verdict.word))
    if not verdicts:
        return Finding("poisson", claim, NOT_MEASURABLE, _poisson_why(means, setups, rows))
    return finish("poisson", claim, verdicts, parts, evidence)


def onnx_backend(means: Levels, setups: dict[tuple[str, str], Setup], rows: Rows,
                 smallest: float = DEFAULT_SMALLEST_EFFECT,
                 looks: sq.Looks | None = None, split: Split | None = None) -> Finding:
    claim = "ONNX (ONNX Runtime) serves faster than the Python backend (PyTorch)"
    parts: list[str] = []
    verdicts: list[iv.Verdict] = []
    evidence: list[cl.Evidence] = []
    for (host, pyv), py in sorted(setups.items()):
        if py.backend != "python":
            continue
        for (h2, ov), ox in sorted(setups.items()):
            same = (ox.instances, ox.dynamic_batching, ox.batch_size, ox.distribution) == (
                py.instances, py.dynamic_batching, py.batch_size, py.distribution)
            if h2 != host or ox.backend != "onnxruntime" or not same or (ox.rest == "fastapi") != (
                    py.rest == "fastapi"):
                continue
            for (hh, v, mode, load), pm in sorted(means.items()):
                om = means.get((host, ov, mode, load))
                if (hh, v) != (host, pyv) or om is None or not pm.throughput or om.throughput is None:
                    continue
                lat = "latency_avg_us" if pm.latency_avg_us and om.latency_avg_us else "p50_us"
                p_lat, o_lat = pm.mean(lat), om.mean(lat)
                if not p_lat or o_lat is None:
                    continue
                thr, vt = _judge(pm, om, "throughput", looks, metrics.improves("throughput"), smallest, split)
                lt, vl = _judge(pm, om, lat, looks, metrics.improves(lat), smallest, split)
                verdict = _both(vt, vl)
                verdicts.append(verdict)
                what = "FastAPI" if py.rest == "fastapi" else "Triton"
                name = lat.split("_")[0]
                parts.append(f"{what} {_load(mode, load)} on {host}: `{pyv}` {pm.throughput:.1f}/s, "
                             f"{name} {ms(p_lat)} vs `{ov}` {om.throughput:.1f}/s, {ms(o_lat)}: "
                             f"{iv.describe('throughput', thr)}; {iv.describe(name, lt)}"
                             + _suffix(verdict, "ONNX not faster"))
                evidence.append(cl.OnnxEvidence(host, pyv, ov, mode, load, pm.throughput, om.throughput,
                                                lat, p_lat, o_lat, as_evidence(thr), as_evidence(lt),
                                                verdict.word))
    if not verdicts:
        return Finding("onnx_backend", claim, NOT_MEASURABLE, _onnx_why(means, setups, rows), evidence)
    return finish("onnx_backend", claim, verdicts, parts, evidence)


def evaluate(rows: list[Row], raw_setups: dict[tuple[str, str], VariantSetup],
             objectives: list[plans.ObjectiveRecord], smallest: float = DEFAULT_SMALLEST_EFFECT,
             looks: sq.Looks | None = None, control: bool = True) -> list[Finding]:
    """Every claim's finding for a run, in the lab's order, judged against ``smallest`` (the spec's
    smallest effect of interest).

    A claim not measurable here says why (:mod:`.reasons`: the first cause in its fixed order that
    applies, or what differed between the variants it would compare), from the run's records.
    Each claim controls its error over its own comparisons, the best variant over its objectives
    (Holm, :func:`.claim.holm`); ``control`` false judges every comparison at its own 5 % instead (the
    rule before: ``bench/sequential.py``'s reference column).
    """
    setups = {k: s for k, r in raw_setups.items() if (s := make_setup(k[0], k[1], r)) is not None}
    means = levels(rows)
    batches = {(r["host"], r["variant"], r.get("mode") or "concurrency", float(r["load"])):
               float(r["avg_batch_size"])
               for r in rows if r.get("status") != Status.CONTENDED and r.get("load") is not None
               and r.get("avg_batch_size") is not None}
    def holm(build: Callable[[Split | None], Finding]) -> Finding:
        return claim_holm(build) if control else build(None)

    # each claim controls its own error over its comparisons (Holm, :func:`.claim.holm`)
    return [holm(lambda s: queue_delay(means, setups, rows, smallest, looks, s)),
            holm(lambda s: dynamic_batching(means, setups, rows, batches, smallest, looks, s)),
            holm(lambda s: instances(means, setups, rows, smallest, looks, s)),
            holm(lambda s: poisson(means, setups, rows, smallest, looks, s)),
            holm(lambda s: onnx_backend(means, setups, rows, smallest, looks, s)),
            best.best_variant(rows, objectives, smallest, looks, None, control)]


def markdown(findings: list[Finding], stand_in: str | None = None,
             smallest: float = DEFAULT_SMALLEST_EFFECT, looks: sq.Looks | None = None) -> list[str]:
    """The report's ``## Findings`` section, as lines: what the verdict words mean, then each claim
    (saying so when a stand-in model was measured)."""
    lines = ["## Findings", "",
             "Each of the lab's claims checked against this run's measurements: each comparison is an "
             "effect (the ratio of the two sides' geometric means) with its interval and the "
             "repetitions per side (a claim's verdict is one-sided, so its interval is 90 %: each end a "
             "one-sided 95 % bound; the best variant's lead is two-sided, 95 %), "
             f"judged against the smallest effect of interest, {smallest * 100:g} % "
             "(`smallest_effect` in the spec)"
             + (", measured on a stand-in model: the numbers are real for this model, not the lab's."
                if stand_in else "."), "",
             (f"**Error**: each claim errs at most {sq.ALPHA * 100:g} % of the time over all its "
             "comparisons: *held* needs every comparison to hold (an intersection-union test, no split), "
             "*did not hold* is read by Holm over the comparisons that could fail it (`family` in "
             "summary.json); the "
             f"best variant names a false best at most {sq.ALPHA * 100:g} % of the time over the spec's "
             "objectives (the first is primary, each next one judged only once the ones before it named a "
             "winner). The family is the claim: the report's claims together are not controlled (six "
             f"claims at {sq.ALPHA * 100:g} % each)."), ""]
    if looks is not None and looks.sequential:
        lines += [looks.text() + " The verdicts below read each interval as this repeated interval.", ""]
    lines += [f"- *{w}*: {iv.MEANINGS[w]}." for w in VERDICTS] + [""]
    for f in findings:
        lines.append(f"- **{f.claim}**: **{f.verdict}**. {f.detail}")
    return lines + [""]
