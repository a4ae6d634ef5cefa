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
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG
from typing import Any

from .. import safeio
from ..errors import ServeSystemError

DURATIONS = ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output")


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

    def to_json(self) -> dict[str, Any]:
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


def load_snapshot(path: str | Path, within: str | Path | None = None) -> dict[str, Any]:
    """Read a stats JSON file (as Triton returns it; :func:`safeio.read_json`: a regular file, bounded,
    inside ``within``) and check its shape: every counter a non-negative whole number, every model
    named. Errors name the file and the field."""
    p = Path(path)
    data = safeio.read_json(p, kind="stats", within=within, fix="save the body of GET /v2/models/NAME/stats")
    if not isinstance(data, dict) or not isinstance(data.get("model_stats"), list):
        raise ServeSystemError(f"{p}: not a Triton stats document (no 'model_stats' list): save the body of "
                               "GET /v2/models/NAME/stats")
    seen: set[tuple[str, str]] = set()
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
        for counter in ("inference_count", "execution_count"):
            _counter(model, counter, where)
        stats = model.get("inference_stats")
        if stats is not None:
            if not isinstance(stats, dict):
                raise ServeSystemError(f"{where}.inference_stats: not an object")
            for phase, stat in stats.items():
                if not isinstance(stat, dict):
                    raise ServeSystemError(
                        f"{where}.inference_stats.{phase}: not an object with count and ns")
                for counter in ("count", "ns"):
                    _counter(stat, counter, f"{where}.inference_stats.{phase}")
        batches = model.get("batch_stats")
        if batches is not None:
            if not isinstance(batches, list):
                raise ServeSystemError(f"{where}.batch_stats: not a list")
            for j, entry in enumerate(batches):
                if not isinstance(entry, dict):
                    raise ServeSystemError(f"{where}.batch_stats[{j}]: not an object")
                _counter(entry, "batch_size", f"{where}.batch_stats[{j}]")
                infer = entry.get("compute_infer")
                if infer is not None:
                    if not isinstance(infer, dict):
                        raise ServeSystemError(f"{where}.batch_stats[{j}].compute_infer: not an object")
                    _counter(infer, "count", f"{where}.batch_stats[{j}].compute_infer")
    return data


def _counter(obj: dict[str, Any], key: str, where: str) -> None:
    """``obj[key]`` is absent or a non-negative whole number (Triton's gRPC JSON writes them as strings)."""
    if key not in obj:
        return
    value = obj[key]
    # ASCII digits only: str.isdigit() accepts superscripts and other digits int() refuses
    if isinstance(value, bool) or not isinstance(value, (int, str)) or (
            isinstance(value, str) and not (value.isascii() and value.isdigit()
                                            and len(value) <= safeio.MAX_INT_DIGITS)) or (
            isinstance(value, int) and value < 0):
        raise ServeSystemError(
            f"{where}.{key}: {json.dumps(value)[:30]} is not a counter (a whole number >= 0)")


def _by_model(snapshot: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(m.get("name", "?"), str(m.get("version", ""))): m for m in snapshot.get("model_stats", [])}


def _histogram(model: dict[str, Any]) -> dict[int, int]:
    out: dict[int, int] = {}
    for entry in model.get("batch_stats") or []:
        size = int(entry.get("batch_size", 0))
        out[size] = int((entry.get("compute_infer") or {}).get("count", 0))
    return out


def _phase(model: dict[str, Any], phase: str) -> tuple[int, int]:
    stat = (model.get("inference_stats") or {}).get(phase) or {}
    return int(stat.get("count", 0)), int(stat.get("ns", 0))


def _counters(model: dict[str, Any]) -> dict[str, int]:
    """Every cumulative counter of a model's statistics, by name."""
    out = {k: int(model.get(k, 0)) for k in ("inference_count", "execution_count")}
    for phase in DURATIONS:
        out[f"{phase}.count"], out[f"{phase}.ns"] = _phase(model, phase)
    for size, n in _histogram(model).items():
        out[f"batch {size}"] = n
    return out


def went_backwards(old: dict[str, Any], cur: dict[str, Any]) -> list[str]:
    """The counters that are lower in ``cur`` than in ``old``: the server restarted or the model was
    reloaded in between (Triton's counters only ever grow while a model stays loaded)."""
    before = _counters(old)
    return [k for k, v in _counters(cur).items() if v < before.get(k, 0)]


def delta(before: dict[str, Any] | None, after: dict[str, Any]) -> list[ModelDelta]:
    """Per model (and version) in ``after``: the difference to ``before`` (None: since load).

    A model whose counters went backwards was reloaded (or the server restarted) in between: its
    delta is the "after" snapshot alone, marked ``reset``.
    """
    prev = _by_model(before or {"model_stats": []})
    out: list[ModelDelta] = []
    for key, cur in _by_model(after).items():
        old = prev.get(key, {})
        reset = bool(old) and bool(went_backwards(old, cur))
        if reset:
            old = {}
        d = ModelDelta(
            name=key[0], version=key[1],
            inference_count=int(cur.get("inference_count", 0)) - int(old.get("inference_count", 0)),
            execution_count=int(cur.get("execution_count", 0)) - int(old.get("execution_count", 0)),
            success_count=_phase(cur, "success")[0] - _phase(old, "success")[0],
            fail_count=_phase(cur, "fail")[0] - _phase(old, "fail")[0],
            reset=reset,
        )
        for phase in DURATIONS:
            c1, n1 = _phase(cur, phase)
            c0, n0 = _phase(old, phase)
            d.counts[phase], d.ns[phase] = c1 - c0, n1 - n0
        h1, h0 = _histogram(cur), _histogram(old)
        for size in sorted(set(h1) | set(h0)):
            n = h1.get(size, 0) - h0.get(size, 0)
            if n:
                d.histogram[size] = n
        out.append(d)
    return out


def delta_files(before: str | Path, after: str | Path) -> list[ModelDelta]:
    """The delta of two snapshot files; every model of "after" must be in "before" too."""
    old, new = load_snapshot(before), load_snapshot(after)
    prev = _by_model(old)
    for i, (name, version) in enumerate(_by_model(new)):
        if (name, version) not in prev:
            raise ServeSystemError(
                f"{after}: model_stats[{i}]: model {name!r} version {version!r} is not in {before}: take "
                "both snapshots of the same models (GET /v2/models/NAME/stats before and after the run)")
    if not _by_model(new):
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


def utilisation(text: str) -> dict[str, Any]:
    """One metrics sample summarised: per-GPU utilisation (0..1) and memory, CPU utilisation."""
    gpus: dict[str, dict[str, float]] = {}
    cpu: dict[str, float] = {}
    for name, labels, value in parse_metrics(kept_families(text)):
        if name in GPU_METRICS:
            gpu = labels.get("gpu_uuid") or labels.get("gpu") or "gpu"
            gpus.setdefault(gpu, {})[name] = value
        elif name in CPU_METRICS:
            cpu[name] = value
    return {"gpus": gpus, "cpu": cpu}


#: samples already read, by regular file: its path, the folder it was read within, and what it is
#: (device, inode, size, modification and change times); a file changed, replaced or turned into a link
#: is read again, through safeio. The report asks for each level's samples twice (its row, then the plots over
#: time): a page of Triton's metrics is parsed once.
_SAMPLES: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
_SAMPLES_KEPT = 20000


def read_samples(path: str | Path, within: str | Path | None = None) -> list[dict[str, Any]]:
    """A sampler's JSON-lines file: one ``{"t": epoch_seconds, "text": metrics}`` per line, read through
    :mod:`safeio` (a regular file, bounded, inside ``within``; anything else is one line naming it).

    Returns ``{"t", "gpus", "cpu"}`` per sample (the same file read again: the same samples, not to be
    changed); lines that are not such a sample are skipped (a torn last line, a sample without a time).
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


def _read_samples(p: Path, within: str | Path | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
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
        u = utilisation(rec["text"])
        out.append({"t": float(t), **u})
    return out


def mean_gpu_util(samples: list[dict[str, Any]]) -> float | None:
    """Mean GPU utilisation (0..1) over samples and GPUs; None where no GPU was reported."""
    vals = [g["nv_gpu_utilization"] for s in samples for g in s["gpus"].values() if "nv_gpu_utilization" in g]
    return sum(vals) / len(vals) if vals else None


def busiest_gpu_util(samples: list[dict[str, Any]]) -> float | None:
    """The busiest GPU's mean utilisation (0..1): each GPU averaged over the samples, then the highest."""
    per: dict[str, list[float]] = {}
    for s in samples:
        for gpu, g in s["gpus"].items():
            if "nv_gpu_utilization" in g:
                per.setdefault(gpu, []).append(g["nv_gpu_utilization"])
    return max(sum(v) / len(v) for v in per.values()) if per else None


def max_gpu_mem(samples: list[dict[str, Any]]) -> float | None:
    vals = [g["nv_gpu_memory_used_bytes"] for s in samples for g in s["gpus"].values()
            if "nv_gpu_memory_used_bytes" in g]
    return max(vals) if vals else None


def mean_cpu_util(samples: list[dict[str, Any]]) -> float | None:
    vals = [s["cpu"]["nv_cpu_utilization"] for s in samples if "nv_cpu_utilization" in s["cpu"]]
    return sum(vals) / len(vals) if vals else None
