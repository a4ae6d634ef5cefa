#!/usr/bin/env python3
"""Variant switch: Triton repository-API reload with a config override vs a server restart.

Runs a real CPU Triton (the integration tests' tritonserver from nvidia-pytriton and its small
Python-backend model), then alternates two configurations N times each way:

* reload: POST /v2/repository/models/NAME/load with the config as an override, until READY;
* restart: write the config to config.pbtxt, stop tritonserver, start it again, until READY.

The restart is a lower bound of the labs' cycle (docker compose build + up --force-recreate + wait
ready adds an image build and a container recreate on top). Prints seconds and the ratio.
Usage: .venv/bin/python bench/variant_switch.py [N]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
from engine_local import start_triton

from serve_system import tritonconfig as tc

VARIANTS = [
    {"instance_group": [{"count": 1, "kind": "KIND_CPU"}], "dynamic_batching": None},
    {"instance_group": [{"count": 2, "kind": "KIND_CPU"}], "dynamic_batching": {"preferred_batch_size": [4, 8]}},
]


def _ready(url: str, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if requests.get(f"{url}/v2/models/engine_echo/ready", timeout=2).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.05)
    raise RuntimeError("not ready")


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    with tempfile.TemporaryDirectory(prefix="engine-bench-") as tmp:
        server = start_triton(Path(tmp))
        base = tc.load_pbtxt(server.repo / "engine_echo" / "config.pbtxt")
        cfgs = [tc.apply_overrides(base, v, "bench") for v in VARIANTS]
        reload_s, restart_s = [], []
        try:
            for i in range(2 * n):
                cfg = cfgs[i % 2]
                t0 = time.perf_counter()
                r = requests.post(f"{server.url}/v2/repository/models/engine_echo/load", json=tc.load_api_body(cfg),
                                  timeout=120)
                r.raise_for_status()
                _ready(server.url)
                reload_s.append(time.perf_counter() - t0)
            for i in range(2 * n):
                (server.repo / "engine_echo" / "config.pbtxt").write_text(tc.render_pbtxt(cfgs[i % 2]))
                t0 = time.perf_counter()
                server.stop()
                server = start_triton_again(server, Path(tmp))
                restart_s.append(time.perf_counter() - t0)
        finally:
            server.stop()
    r, s = statistics.median(reload_s), statistics.median(restart_s)
    print(f"variant switch, median of {2 * n}: repository-API reload {r:.2f} s, server restart {s:.2f} s, "
          f"restart/reload = {s / r:.1f}x (the labs' compose build + recreate costs more than a restart)")
    return 0


def start_triton_again(old, tmp: Path):  # type: ignore[no-untyped-def]
    """A new tritonserver on the old one's repository (with the edited config.pbtxt)."""
    fresh = tmp / f"restart-{time.time_ns()}"
    fresh.mkdir()
    return start_triton(fresh, models=old.repo)


if __name__ == "__main__":
    raise SystemExit(main())
