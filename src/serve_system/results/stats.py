"""Triton statistics: deltas between two ``/v2/models/<m>/versions/<v>/stats`` snapshots, and
Prometheus metrics from ``:8002/metrics`` (GPU utilisation and memory; absent on a CPU-only host).

A snapshot's counters are cumulative since the model was loaded; the delta of two snapshots is what
happened in between (one perf_analyzer run). The batch-size histogram is the number of executions
per batch size, from ``batch_stats[].compute_infer.count``. When a model was reloaded between the
snapshots (counters went down), the "after" snapshot alone is the delta.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG

from .. import safeio
from ..errors import ServeSystemError

DURATIONS = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output")


@dataclass(frozen=True, slots=True)
class PhaseStat:
    """One phase of a model's ``inference_stats`` (success, queue, compute_infer, ...): requests and total
    nanoseconds, cumulative."""

    count: int = 0
    ns: int = 0


_NO_PHASE = PhaseStat()


@dataclass(frozen=True)
class ModelStats:
    """One model's cumulative statistics in a snapshot (an entry of ``model_stats``), checked by
    :func:`load_snapshot`; a counter Triton left out is 0."""

    name: str
    version: str
    inference_count: int = 0
    execution_count: int = 0
    #: ``inference_stats`` by phase name
    phases: Mapping[str, PhaseStat] = field(default_factory=dict)
    #: batch size -> executions with that size (``batch_stats[].compute_infer.count``)
    histogram: Mapping[int, int] = field(default_factory=dict)

    def phase(self, name: str) -> PhaseStat:
        """The phase ``name`` (zero where Triton did not report it)."""
        return self.phases.get(name, _NO_PHASE)

    def counters(self) -> dict[str, int]:
        """Every cumulative counter, by name."""
        out = {"inference_count": self.inference_count, "execution_count": self.execution_count}
        for name in DURATIONS:
            p = self.phase(name)
            out[f"{name}.count"], out[f"{name}.ns"] = p.count, p.ns
        for size, n in self.histogram.items():
            out[f"batch {size}"] = n
        return out


@dataclass(frozen=True)
class Snapshot:
    """A statistics document (``GET /v2/models/NAME/stats``) as :func:`load_snapshot` checked it: its
    models in the document's order, each (name, version) once."""

    models: tuple[ModelStats, ...] = ()

    def by_model(self) -> dict[tuple[str, str], ModelStats]:
        return {(m.name, m.version): m for m in self.models}


@dataclass
class ModelDelta:
    """What one model did between two snapshots."""

    name: str
    version: str
    inference_count: int
    execution_count: int
    success_count: int
    fail_count: int
    #: total nanoseconds per phase, and counts, over the interval
    ns: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    #: batch size -> executions with that size
    histogram: dict[int, int] = field(default_factory=dict)
    reset: bool = False

    @property
    def avg_batch_size(self) -> float | None:
        """Inferences per execution (the dynamic batcher's average batch)."""
        if self.execution_count <= 0:
            return None
        return self.inference_count / self.execution_count

    def avg_us(self, phase: str) -> float | None:
        """Average microseconds per request of a phase (queue, compute_infer, ...)."""
        count = self.counts.get(phase, 0)
        if count <= 0:
            return None
        return self.ns.get(phase, 0) / count / 1000.0

    def to_json(self) -> dict[str, object]:
        """The delta as ``serve-system stats --json`` writes it (a JSON object, for writing)."""
        return {
            "model": self.name,
            "version": self.version,
            "inference_count": self.inference_count,
            "execution_count": self.execution_count,
            "success_count": self.success_count,
            "fail_count": self.fail_count,
            "avg_batch_size": None if self.avg_batch_size is None else round(self.avg_batch_size, 4),
            "batch_size_histogram": {str(k): v for k, v in sorted(self.histogram.items())},
            "avg_queue_us": _round(self.avg_us("queue")),
            "avg_compute_infer_us": _round(self.avg_us("compute_infer")),
            "counters_reset": self.reset,
        }


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def load_snapshot(path: str | Path, within: str | Path | None = None) -> Snapshot:
    """Read a stats JSON file (as Triton returns it; :func:`safeio.read_json`: a regular file, bounded,
    inside ``within``), check its shape (every counter a non-negative whole number, every model named)
    and parse it into a :class:`Snapshot`. Errors name the file and the field."""
    p = Path(path)
    data = safeio.read_json(p, kind="stats", within=within, fix="save the body of GET /v2/models/NAME/stats")
    if not isinstance(data, dict) or not isinstance(data.get("model_stats"), list):
        raise ServeSystemError(f"{p}: not a Triton stats document (no 'model_stats' list): save the body of "
                               "GET /v2/models/NAME/stats")
    seen: set[tuple[str, str]] = set()
    models = []
    for i, model in enumerate(data["model_stats"]):
        where = f"{p}: model_stats[{i}]"
        if not isinstance(model, dict):
            raise ServeSystemError(f"{where}: {json.dumps(model)[:40]} is not a model's statistics object "
                                   "(expected {\"name\": ..., \"version\": ..., \"inference_count\": ...})")
        if not isinstance(model.get("name"), str) or not model["name"]:
            raise ServeSystemError(f"{where}.name: missing or not a string: every model's statistics name it")
        key = (model["name"], str(model.get("version", "")))
        if key in seen:
            raise ServeSystemError(f"{where}: model {key[0]!r} version {key[1]!r} is listed twice")
        seen.add(key)
        inferences = _counter(model, "inference_count", where)
        executions = _counter(model, "execution_count", where)
        models.append(ModelStats(key[0], key[1], inferences, executions, _phases(model, where),
                                 _histogram(model, where)))
    return Snapshot(tuple(models))


def _phases(model: dict[str, object], where: str) -> dict[str, PhaseStat]:
    """A model's ``inference_stats``, checked: an object of phases, each with a count and ns."""
    stats = model.get("inference_stats")
    if stats is None:
        return {}
    if not isinstance(stats, dict):
        raise ServeSystemError(f"{where}.inference_stats: not an object")
    out = {}
    for phase, stat in stats.items():
        if not isinstance(stat, dict):
            raise ServeSystemError(f"{where}.inference_stats.{phase}: not an object with count and ns")
        at = f"{where}.inference_stats.{phase}"
        out[phase] = PhaseStat(_counter(stat, "count", at), _counter(stat, "ns", at))
    return out


def _histogram(model: dict[str, object], where: str) -> dict[int, int]:
    """A model's ``batch_stats``, checked: batch size -> ``compute_infer.count`` (the last entry of a
    size listed twice)."""
    batches = model.get("batch_stats")
    if batches is None:
        return {}
    if not isinstance(batches, list):
        raise ServeSystemError(f"{where}.batch_stats: not a list")
    out: dict[int, int] = {}
    for j, entry in enumerate(batches):
        if not isinstance(entry, dict):
            raise ServeSystemError(f"{where}.batch_stats[{j}]: not an object")
        size = _counter(entry, "batch_size", f"{where}.batch_stats[{j}]")
        infer = entry.get("compute_infer")
        count = 0
        if infer is not None:
            if not isinstance(infer, dict):
                raise ServeSystemError(f"{where}.batch_stats[{j}].compute_infer: not an object")
            count = _counter(infer, "count", f"{where}.batch_stats[{j}].compute_infer")
        out[size] = count
    return out


def _counter(obj: dict[str, object], key: str, where: str) -> int:
    """``obj[key]`` as a non-negative whole number (Triton's gRPC JSON writes them as strings); 0 where it
    is absent."""
    if key not in obj:
        return 0
    value = obj[key]
    # ASCII digits only: str.isdigit() accepts superscripts and other digits int() refuses
    if isinstance(value, bool) or not isinstance(value, (int, str)) or (
            isinstance(value, str) and not (value.isascii() and value.isdigit()
                                            and len(value) <= safeio.MAX_INT_DIGITS)) or (
            isinstance(value, int) and value < 0):
        raise ServeSystemError(
            f"{where}.{key}: {json.dumps(value)[:30]} is not a counter (a whole number >= 0)")
    return int(value)


def went_backwards(old: ModelStats, cur: ModelStats) -> list[str]:
    """The counters that are lower in ``cur`` than in ``old``: the server restarted or the model was
    reloaded in between (Triton's counters only ever grow while a model stays loaded)."""
    before = old.counters()
    return [k for k, v in cur.counters().items() if v < before.get(k, 0)]


def delta(before: Snapshot | None, after: Snapshot) -> list[ModelDelta]:
    """Per model (and version) in ``after``: the difference to ``before`` (None: since load).

    A model whose counters went backwards was reloaded (or the server restarted) in between: its
    delta is the "after" snapshot alone, marked ``reset``.
    """
    prev = {} if before is None else before.by_model()
    out: list[ModelDelta] = []
    for key, cur in after.by_model().items():
        found = prev.get(key)
        reset = found is not None and bool(went_backwards(found, cur))
        old = ModelStats(*key) if found is None or reset else found
        d = ModelDelta(
            name=key[0], version=key[1],
            inference_count=cur.inference_count - old.inference_count,
            execution_count=cur.execution_count - old.execution_count,
            success_count=cur.phase("success").count - old.phase("success").count,
            fail_count=cur.phase("fail").count - old.phase("fail").count,
            reset=reset,
        )
        for phase in DURATIONS:
            p1, p0 = cur.phase(phase), old.phase(phase)
            d.counts[phase], d.ns[phase] = p1.count - p0.count, p1.ns - p0.ns
        h1, h0 = cur.histogram, old.histogram
        for size in sorted(set(h1) | set(h0)):
            n = h1.get(size, 0) - h0.get(size, 0)
            if n:
                d.histogram[size] = n
        out.append(d)
    return out


def delta_files(before: str | Path, after: str | Path) -> list[ModelDelta]:
    """The delta of two snapshot files; every model of "after" must be in "before" too."""
    old, new = load_snapshot(before), load_snapshot(after)
    prev = old.by_model()
    for i, m in enumerate(new.models):
        if (m.name, m.version) not in prev:
            raise ServeSystemError(
                f"{after}: model_stats[{i}]: model {m.name!r} version {m.version!r} is not in {before}: take "
                "both snapshots of the same models (GET /v2/models/NAME/stats before and after the run)")
    if not new.models:
        raise ServeSystemError(f"{after}: model_stats is empty: no model to compare (was the model loaded?)")
    return delta(old, new)


# --------------------------------------------------------------------------------- Prometheus

#: metrics kept from each sample (GPU ones are simply absent on a CPU-only Triton)
GPU_METRICS = ("nv_gpu_utilization", "nv_gpu_memory_used_bytes", "nv_gpu_memory_total_bytes",
               "nv_gpu_power_usage")
CPU_METRICS = ("nv_cpu_utilization", "nv_cpu_memory_used_bytes", "nv_cpu_memory_total_bytes")


def parse_metrics(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Prometheus text exposition -> (name, labels, value) triples, with prometheus_client's parser. A
    scrape torn mid-line keeps the samples before the tear: one bad sample never stops a report."""
    from prometheus_client.parser import text_string_to_metric_families

    out: list[tuple[str, dict[str, str], float]] = []
    try:
        for family in text_string_to_metric_families(text):
            out.extend((s.name, dict(s.labels), float(s.value)) for s in family.samples
                       if math.isfinite(float(s.value)))
    except (ValueError, TypeError, IndexError, KeyError):
        return out
    return out


#: the metric families a sample is summarised from
KEPT_METRICS = frozenset(GPU_METRICS + CPU_METRICS)


def kept_families(text: str) -> str:
    """The lines of a Prometheus exposition that belong to :data:`KEPT_METRICS` (their samples and their
    ``# HELP``/``# TYPE`` lines): Triton exposes a few hundred series a scrape, a summary needs seven, and
    parsing only these keeps reading a run's samples about ten times quicker."""
    kept = []
    for line in text.splitlines():
        if line.startswith("#"):
            words = line.split(None, 3)
            name = words[2] if len(words) > 2 else ""
        else:
            name = line.split("{", 1)[0].split(None, 1)[0] if line.strip() else ""
        if name in KEPT_METRICS:
            kept.append(line)
    return "\n".join(kept) + "\n" if kept else ""


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU in a metrics sample; a metric Triton did not report is None."""

    #: nv_gpu_utilization (0..1)
    util: float | None = None
    #: nv_gpu_memory_used_bytes, nv_gpu_memory_total_bytes
    memory_used: float | None = None
    memory_total: float | None = None
    #: nv_gpu_power_usage (watts)
    power: float | None = None


@dataclass(frozen=True, slots=True)
class CpuSample:
    """The host's CPU in a metrics sample; a metric Triton did not report is None."""

    #: nv_cpu_utilization (0..1)
    util: float | None = None
    #: nv_cpu_memory_used_bytes, nv_cpu_memory_total_bytes
    memory_used: float | None = None
    memory_total: float | None = None


@dataclass(frozen=True, slots=True)
class Sample:
    """One metrics sample summarised: when (``t``, epoch seconds), each GPU by its UUID (none on a
    CPU-only host), the CPU."""

    t: float
    gpus: Mapping[str, GpuSample]
    cpu: CpuSample


def utilisation(text: str, t: float = 0.0) -> Sample:
    """One metrics scrape summarised (taken at ``t``): per-GPU utilisation (0..1) and memory, CPU
    utilisation and memory."""
    gpus: dict[str, dict[str, float]] = {}
    cpu: dict[str, float] = {}
    for name, labels, value in parse_metrics(kept_families(text)):
        if name in GPU_METRICS:
            gpu = labels.get("gpu_uuid") or labels.get("gpu") or "gpu"
            gpus.setdefault(gpu, {})[name] = value
        elif name in CPU_METRICS:
            cpu[name] = value
    return Sample(t, {gpu: GpuSample(m.get("nv_gpu_utilization"), m.get("nv_gpu_memory_used_bytes"),
                                     m.get("nv_gpu_memory_total_bytes"), m.get("nv_gpu_power_usage"))
                      for gpu, m in gpus.items()},
                  CpuSample(cpu.get("nv_cpu_utilization"), cpu.get("nv_cpu_memory_used_bytes"),
                            cpu.get("nv_cpu_memory_total_bytes")))


#: samples already read, by regular file: its path, the folder it was read within, and what it is
#: (device, inode, size, modification and change times); a file changed, replaced or turned into a link
#: is read again, through safeio. The report asks for each level's samples twice (its row, then the plots over
#: time): a page of Triton's metrics is parsed once.
_SAMPLES: dict[tuple[str, str | None, int, int, int, int, int], list[Sample]] = {}
_SAMPLES_KEPT = 20000


def read_samples(path: str | Path, within: str | Path | None = None) -> list[Sample]:
    """A sampler's JSON-lines file: one ``{"t": epoch_seconds, "text": metrics}`` per line, read through
    :mod:`safeio` (a regular file, bounded, inside ``within``; anything else is one line naming it).

    Returns a :class:`Sample` per line (the same file read again: the same samples, in a new list);
    lines that are not such a sample are skipped (a torn last line, a sample without a time).
    """
    p = Path(path)
    try:
        st = os.lstat(p)
    except (OSError, ValueError):  # as os.path.lexists: missing (or not to be looked at) is no samples
        return []
    if not S_ISREG(st.st_mode):  # a link or anything else: the safe reader says what it is, every time
        return _read_samples(p, within)
    key = (str(p), None if within is None else str(within), st.st_dev, st.st_ino, st.st_size,
           st.st_mtime_ns, st.st_ctime_ns)
    if key not in _SAMPLES:
        if len(_SAMPLES) >= _SAMPLES_KEPT:
            _SAMPLES.clear()
        _SAMPLES[key] = _read_samples(p, within)
    return list(_SAMPLES[key])


def _read_samples(p: Path, within: str | Path | None) -> list[Sample]:
    out: list[Sample] = []
    for n, line in enumerate(safeio.read_text(p, kind="metrics", within=within).splitlines(), 1):
        try:
            rec = safeio.loads_json(line, f"{p}:{n}")
        except safeio.UnsafeFile:
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("text"), str):
            continue
        t = rec.get("t", 0.0)
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(float(t)):
            continue
        out.append(utilisation(rec["text"], float(t)))
    return out


def mean_gpu_util(samples: list[Sample]) -> float | None:
    """Mean GPU utilisation (0..1) over samples and GPUs; None where no GPU was reported."""
    vals = [g.util for s in samples for g in s.gpus.values() if g.util is not None]
    return sum(vals) / len(vals) if vals else None


def busiest_gpu_util(samples: list[Sample]) -> float | None:
    """The busiest GPU's mean utilisation (0..1): each GPU averaged over the samples, then the highest."""
    per: dict[str, list[float]] = {}
    for s in samples:
        for gpu, g in s.gpus.items():
            if g.util is not None:
                per.setdefault(gpu, []).append(g.util)
    return max(sum(v) / len(v) for v in per.values()) if per else None


def max_gpu_mem(samples: list[Sample]) -> float | None:
    """The most GPU memory used (bytes) by any GPU in any sample; None where none was reported."""
    vals = [g.memory_used for s in samples for g in s.gpus.values() if g.memory_used is not None]
    return max(vals) if vals else None


def mean_cpu_util(samples: list[Sample]) -> float | None:
    """Mean CPU utilisation (0..1) over the samples that report it; None where none does."""
    vals = [s.cpu.util for s in samples if s.cpu.util is not None]
    return sum(vals) / len(vals) if vals else None
