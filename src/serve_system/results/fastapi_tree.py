"""Rows of the summary from the FastAPI benchmark's raw files (``bench.json`` in a level folder).

The FastAPI experiment writes the same tree as the Triton experiments::

    results/fastapi/<run-id>/<host>/<variant>/variant.json     variant = runtime (onnx, pytorch);
                                                               status measured | unavailable (+ error)
    results/fastapi/<run-id>/<host>/<variant>/c<senders>_r<rep>/level.json, bench.json, bench.csv

``bench.json`` is the client's own output (every latency kept); this module maps one of its phases
to the summary's columns: mode ``concurrency``, load = senders (1 = the lab's sequential loop),
throughput = requests/s as the lab computes it, latencies in microseconds, ``errors`` = requests
that did not answer 200.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from .. import safeio
from .row import Row
from .status import Status

#: summary columns this module fills
FIELDS = ("throughput", "latency_avg_us", "p50_us", "p90_us", "p95_us", "p99_us", "errors")

#: a number of the client's output
Number = float | int


@dataclass(frozen=True)
class BenchFields:
    """A level's summary fields from its ``bench.json``: the numbers (:data:`FIELDS`; None where the file
    has none, or no request succeeded), ``status`` (``ok``; ``failed`` when no request succeeded or the file
    is not the client's), ``error`` (the first error seen, with the count), ``duration_s`` (None where the
    file does not say: the level record's stands) and ``tool``."""

    status: Status
    error: str | None
    throughput: Number | None = None
    latency_avg_us: Number | None = None
    p50_us: Number | None = None
    p90_us: Number | None = None
    p95_us: Number | None = None
    p99_us: Number | None = None
    #: requests that did not answer 200
    errors: Number | None = None
    duration_s: float | None = None
    tool: str | None = None

    def fill(self, row: Row) -> None:
        """Set the row's columns these fields give (``duration_s`` only where the file says it)."""
        row["status"], row["error"] = self.status, self.error
        row["throughput"], row["latency_avg_us"] = self.throughput, self.latency_avg_us
        row["p50_us"], row["p90_us"], row["p95_us"], row["p99_us"] = (
            self.p50_us, self.p90_us, self.p95_us, self.p99_us)
        row["errors"] = self.errors
        if self.duration_s is not None:
            row["duration_s"] = self.duration_s


def _read(path: Path) -> object:
    """bench.json through :mod:`safeio` (a regular file, bounded, inside its folder, finite numbers)."""
    return safeio.read_json(path, kind="output", within=path.parent)


def _number(value: object) -> Number | None:
    """A finite number of the client's output; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return value


def bench_fields(level_dir: Path) -> BenchFields | None:
    """Summary fields of a level folder holding ``bench.json`` (:class:`BenchFields`); None when it holds
    none."""
    path = level_dir / "bench.json"
    if not os.path.lexists(path):
        return None
    try:
        data = _read(path)
    except safeio.UnsafeFile as exc:
        return BenchFields(Status.FAILED, str(exc))
    phases = data.get("phases") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(phases, list) or not all(isinstance(ph, dict)
                                                                            for ph in phases):
        return BenchFields(Status.FAILED, f"{path}: phases: not a list of objects (the client's output)")
    if len(phases) != 1:
        return BenchFields(Status.FAILED, f"{path}: expected one phase per level, found {len(phases)}")
    ph = phases[0]
    tool = data.get("tool") if isinstance(data.get("tool"), str) else None
    start, end = _number(ph.get("start")), _number(ph.get("end"))
    duration = round(float(end) - float(start), 3) if start is not None and end is not None else None
    errs = ph.get("error_samples")
    samples = [str(x) for x in errs] if isinstance(errs, list) else []
    requests = _number(ph.get("requests"))
    errors = _number(ph.get("errors"))
    if not ph.get("ok"):
        why = f"all {requests} requests failed" + (f": {samples[0]}" if samples else "")
        return BenchFields(Status.FAILED, why, errors=errors, duration_s=duration, tool=tool)
    return BenchFields(
        Status.OK, f"{errors} of {requests} requests failed: {samples[0]}" if errors and samples else None,
        throughput=_number(ph.get("throughput")), latency_avg_us=_number(ph.get("latency_avg_us")),
        p50_us=_number(ph.get("p50_us")), p90_us=_number(ph.get("p90_us")), p95_us=_number(ph.get("p95_us")),
        p99_us=_number(ph.get("p99_us")), errors=errors, duration_s=duration, tool=tool)


def latencies_s(level_dir: Path) -> list[float]:
    """Every successful request's latency (seconds) kept in a level's ``bench.json``; [] when none (a
    file that is not the client's is one line, :class:`safeio.UnsafeFile`)."""
    data = _read(level_dir / "bench.json")
    phases = data.get("phases") if isinstance(data, dict) else None
    if not isinstance(phases, list):
        return []
    return [float(x) for ph in phases if isinstance(ph, dict) and isinstance(ph.get("latencies_s"), list)
            for x in ph["latencies_s"] if _number(x) is not None]
