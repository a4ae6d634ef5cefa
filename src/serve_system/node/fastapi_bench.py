#!/usr/bin/env python3
"""The lab's FastAPI benchmark as a small closed-loop client (one file; needs only ``requests``).

It runs the lab's two measurements ("Benchmarking FastAPI service") with the lab's method:

* ``sequential``: N requests one after another (default 100); throughput = N / sum of the
  latencies of the successful requests, as the lab computes it;
* ``concurrent``: M requests (default 1000) through a ``ThreadPoolExecutor`` of K senders
  (default 16), each sender sending its next request as soon as the last one answered;
  throughput = M / wall time of the whole phase, as the lab computes it.

Each request is a fresh ``requests.post(url, json={"image": <base64>})`` (no session), timed
around the call; a request counts as an error unless it answers HTTP 200 (a connection error or a
time-out counts too, instead of stopping the run as the lab's loop would). Median, p95 and p99 use
numpy's default (linear) percentile; p90 and the mean are added. Every latency is kept in the
output, so statistics can be recomputed later.

This file is copied to the node and run inside the Jupyter/client container, so it imports nothing
from the project. Usage::

    python3 fastapi_bench.py --url http://fastapi_server:8000/predict --image food.jpg \
        --sequential 100 --concurrent 1000 --senders 16 --out bench.json --csv bench.csv
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import csv
import io
import json
import math
import platform
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOOL = "serve-system fastapi_bench 1"
#: columns of the CSV file (one row per phase), in the summary's units (microseconds, requests/s)
CSV_COLUMNS = ("phase", "mode", "load", "requests", "ok", "errors", "throughput", "throughput_basis",
               "latency_avg_us", "p50_us", "p90_us", "p95_us", "p99_us", "wall_s")


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile with linear interpolation (numpy's default method)."""
    if not values:
        return math.nan
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@dataclass
class Phase:
    """One measurement: what was sent, every latency (seconds) and every error."""

    phase: str
    senders: int
    requests: int
    latencies_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    start: float = 0.0
    end: float = 0.0

    def record(self, result: tuple[float, str | None]) -> None:
        """Keep one request's outcome: its latency, or its error."""
        elapsed, error = result
        if error is None:
            self.latencies_s.append(elapsed)
        else:
            self.errors.append(error)

    @property
    def throughput_basis(self) -> str:
        return "sum_latency" if self.phase == "sequential" else "wall_time"

    def summary(self) -> dict[str, Any]:
        """The lab's statistics, in the summary's units (microseconds; requests per second)."""
        lat = self.latencies_s
        basis = sum(lat) if self.throughput_basis == "sum_latency" else self.wall_s
        us = [x * 1e6 for x in lat]
        return {
            "phase": self.phase,
            "mode": "concurrency",
            "load": self.senders,
            "requests": self.requests,
            "ok": len(lat),
            "errors": len(self.errors),
            "throughput": round(self.requests / basis, 4) if basis > 0 else None,
            "throughput_basis": self.throughput_basis,
            "latency_avg_us": round(sum(us) / len(us), 1) if us else None,
            "p50_us": round(percentile(us, 50), 1) if us else None,
            "p90_us": round(percentile(us, 90), 1) if us else None,
            "p95_us": round(percentile(us, 95), 1) if us else None,
            "p99_us": round(percentile(us, 99), 1) if us else None,
            "wall_s": round(self.wall_s, 4),
        }


Sender = Callable[[], tuple[float, str | None]]


def make_sender(url: str, payload: dict[str, str], timeout: float) -> Sender:
    """A function sending one request: (latency in seconds, error text or None)."""
    import requests

    def send() -> tuple[float, str | None]:
        start = time.perf_counter()
        try:
            response = requests.post(url, json=payload, timeout=timeout)
        except requests.RequestException as exc:
            return time.perf_counter() - start, f"{type(exc).__name__}: {exc}"
        elapsed = time.perf_counter() - start
        if response.status_code == 200:
            return elapsed, None
        return elapsed, f"HTTP {response.status_code}: {response.text[:300]}"

    return send


def run_sequential(send: Sender, n: int) -> Phase:
    """The lab's first measurement: ``n`` requests, one at a time."""
    phase = Phase("sequential", 1, n, start=time.time())
    t0 = time.perf_counter()
    for _ in range(n):
        phase.record(send())
    phase.wall_s = time.perf_counter() - t0
    phase.end = time.time()
    return phase


def run_concurrent(send: Sender, n: int, senders: int) -> Phase:
    """The lab's second measurement: ``n`` requests from ``senders`` threads (closed loop)."""
    phase = Phase("concurrent", senders, n, start=time.time())
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=senders) as pool:
        futures = [pool.submit(send) for _ in range(n)]
        for future in concurrent.futures.as_completed(futures):
            phase.record(future.result())
    phase.wall_s = time.perf_counter() - t0
    phase.end = time.time()
    return phase


def synthetic_jpeg() -> bytes:
    """A 512x384 JPEG with some structure (needs Pillow), for when no image file is given."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (512, 384), (214, 170, 110))
    draw = ImageDraw.Draw(img)
    for i in range(12):
        draw.ellipse((20 + 37 * i, 30 + 19 * i, 120 + 31 * i, 140 + 17 * i),
                     fill=(40 + 17 * i, 120, 200 - 13 * i))
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def run(args: argparse.Namespace) -> dict[str, Any]:
    image = Path(args.image).read_bytes() if args.image else synthetic_jpeg()
    payload = {"image": base64.b64encode(image).decode("ascii")}
    send = make_sender(args.url, payload, args.timeout)
    for _ in range(args.warmup):
        send()
    phases: list[Phase] = []
    if args.sequential > 0:
        phases.append(run_sequential(send, args.sequential))
    if args.concurrent > 0:
        phases.append(run_concurrent(send, args.concurrent, args.senders))
    return {
        "tool": TOOL,
        "url": args.url,
        "image": args.image or "synthetic 512x384 JPEG",
        "image_bytes": len(image),
        "warmup": args.warmup,
        "timeout_s": args.timeout,
        "client_host": socket.gethostname(),
        "python": platform.python_version(),
        "phases": [{**p.summary(), "start": p.start, "end": p.end, "latencies_s": p.latencies_s,
                    "error_samples": p.errors[:20]} for p in phases],
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="fastapi_bench.py")
    p.add_argument("--url", default="http://fastapi_server:8000/predict", help="the /predict URL")
    p.add_argument("--image", help="image file to send (default: a synthetic JPEG, needs Pillow)")
    p.add_argument("--sequential", type=int, default=100, help="requests sent one at a time (0: skip)")
    p.add_argument("--concurrent", type=int, default=1000,
                   help="requests sent by the concurrent senders (0: skip)")
    p.add_argument("--senders", type=int, default=16, help="concurrent senders (threads)")
    p.add_argument("--warmup", type=int, default=0,
                   help="requests sent before measuring (the lab sends none)")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds before one request counts as an error")
    p.add_argument("--out", type=Path, help="JSON result file (default: print it)")
    p.add_argument("--csv", type=Path, help="CSV file, one row per phase")
    args = p.parse_args(argv)
    for name in ("sequential", "concurrent", "warmup"):
        if getattr(args, name) < 0:
            p.error(f"--{name} must be >= 0")
    if args.senders < 1:
        p.error("--senders must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(args)
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    if args.csv:
        write_csv(args.csv, result["phases"])
    for ph in result["phases"]:
        print(f"{ph['phase']}: {ph['requests']} requests, {ph['load']} sender(s), {ph['errors']} errors",
              file=sys.stderr)
        if ph["ok"]:
            print(f"  Median inference time: {ph['p50_us'] / 1000:.4f} ms\n"
                  f"  95th percentile: {ph['p95_us'] / 1000:.4f} ms\n"
                  f"  99th percentile: {ph['p99_us'] / 1000:.4f} ms\n"
                  f"  Throughput: {ph['throughput']:.2f} requests/sec", file=sys.stderr)
    if not args.out:
        print(text)
    return 0 if all(ph["ok"] for ph in result["phases"]) else 1


if __name__ == "__main__":
    sys.exit(main())
