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

import json
from pathlib import Path
from typing import Any

#: summary columns this module fills
FIELDS = ("throughput", "latency_avg_us", "p50_us", "p90_us", "p95_us", "p99_us", "errors")


def bench_fields(level_dir: Path) -> dict[str, Any] | None:
    """Summary fields of a level folder holding ``bench.json``; None when it holds none.

    Adds ``status`` (``ok``; ``failed`` when no request succeeded or the file is unreadable),
    ``error`` (the first error seen, with the count), ``duration_s`` and ``tool``.
    """
    path = level_dir / "bench.json"
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        phases = data["phases"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return {"status": "failed", "error": f"{path}: unreadable benchmark output ({exc})"}
    if len(phases) != 1:
        return {"status": "failed", "error": f"{path}: expected one phase per level, found {len(phases)}"}
    ph = phases[0]
    out: dict[str, Any] = {k: ph.get(k) for k in FIELDS}
    out["tool"] = data.get("tool")
    if ph.get("start") is not None and ph.get("end") is not None:
        out["duration_s"] = round(float(ph["end"]) - float(ph["start"]), 3)
    samples = ph.get("error_samples") or []
    if not ph.get("ok"):
        out["status"] = "failed"
        out["error"] = f"all {ph.get('requests')} requests failed" + (f": {samples[0]}" if samples else "")
        for k in FIELDS[:-1]:
            out[k] = None
    else:
        out["status"] = "ok"
        out["error"] = (f"{ph['errors']} of {ph['requests']} requests failed: {samples[0]}"
                        if ph.get("errors") and samples else None)
    return out


def latencies_s(level_dir: Path) -> list[float]:
    """Every successful request's latency (seconds) kept in a level's ``bench.json``; [] when none."""
    try:
        data = json.loads((level_dir / "bench.json").read_text(encoding="utf-8"))
        phases = data["phases"]
        return [float(x) for ph in phases for x in ph.get("latencies_s") or []]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []
