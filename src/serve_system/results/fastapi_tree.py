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
from pathlib import Path
from typing import Any

from .. import safeio
from ..node import records

#: summary columns this module fills
FIELDS = ("throughput", "latency_avg_us", "p50_us", "p90_us", "p95_us", "p99_us", "errors")


def _read(path: Path) -> Any:
    """bench.json through :mod:`safeio` (a regular file, bounded, inside its folder, finite numbers)."""
    return safeio.read_json(path, kind="output", within=path.parent)


def _number(value: Any) -> float | int | None:
    """A finite number of the client's output; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return value


def bench_fields(level_dir: Path) -> dict[str, Any] | None:
    """Summary fields of a level folder holding ``bench.json``; None when it holds none.

    Adds ``status`` (``ok``; ``failed`` when no request succeeded or the file is unreadable),
    ``error`` (the first error seen, with the count), ``duration_s`` and ``tool``.
    """
    path = level_dir / "bench.json"
    if not os.path.lexists(path):
        return None
    try:
        data = _read(path)
    except safeio.UnsafeFile as exc:
        return {"status": records.FAILED, "error": str(exc)}
    phases = data.get("phases") if isinstance(data, dict) else None
    if not isinstance(phases, list) or not all(isinstance(ph, dict) for ph in phases):
        return {"status": records.FAILED,
                "error": f"{path}: phases: not a list of objects (the client's output)"}
    if len(phases) != 1:
        return {"status": records.FAILED,
                "error": f"{path}: expected one phase per level, found {len(phases)}"}
    ph = phases[0]
    out: dict[str, Any] = {k: _number(ph.get(k)) for k in FIELDS}
    out["tool"] = data.get("tool") if isinstance(data.get("tool"), str) else None
    start, end = _number(ph.get("start")), _number(ph.get("end"))
    if start is not None and end is not None:
        out["duration_s"] = round(float(end) - float(start), 3)
    errs = ph.get("error_samples")
    samples = [str(x) for x in errs] if isinstance(errs, list) else []
    requests = _number(ph.get("requests"))
    if not ph.get("ok"):
        out["status"] = records.FAILED
        out["error"] = f"all {requests} requests failed" + (f": {samples[0]}" if samples else "")
        for k in FIELDS[:-1]:
            out[k] = None
    else:
        out["status"] = records.OK
        out["error"] = (f"{out['errors']} of {requests} requests failed: {samples[0]}"
                        if out["errors"] and samples else None)
    return out


def latencies_s(level_dir: Path) -> list[float]:
    """Every successful request's latency (seconds) kept in a level's ``bench.json``; [] when none (a
    file that is not the client's is one line, :class:`safeio.UnsafeFile`)."""
    data = _read(level_dir / "bench.json")
    phases = data.get("phases") if isinstance(data, dict) else None
    if not isinstance(phases, list):
        return []
    return [float(x) for ph in phases if isinstance(ph, dict) and isinstance(ph.get("latencies_s"), list)
            for x in ph["latencies_s"] if _number(x) is not None]
