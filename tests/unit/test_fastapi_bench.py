"""The benchmark client against a real uvicorn server on 127.0.0.1 (bounded request counts)."""

from __future__ import annotations

import csv
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import requests

from serve_system.node import fastapi_bench as fb

BENCH = Path(fb.__file__)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real endpoint (ONNX stand-in, CPU) under uvicorn on a free loopback port."""
    port = free_port()
    tmp = tmp_path_factory.mktemp("fastapi")
    env = {**os.environ, "SERVE_FASTAPI_STANDIN_DIR": str(tmp),
           "SERVE_FASTAPI_MODEL": str(tmp / "absent.onnx")}
    log = (tmp / "uvicorn.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "serve_system.fastapi_app", "--host", "127.0.0.1",
                             "--port", str(port), "--log-level", "warning"],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"uvicorn did not come up: {(tmp / 'uvicorn.log').read_text()}")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def run_bench(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict, list[dict]]:
    out, csv_path = tmp_path / "bench.json", tmp_path / "bench.csv"
    proc = subprocess.run([sys.executable, str(BENCH), *args, "--out", str(out), "--csv", str(csv_path)],
                          check=False, capture_output=True, text=True, timeout=300)
    result = json.loads(out.read_text()) if out.exists() else {}
    rows = list(csv.DictReader(csv_path.open())) if csv_path.exists() else []
    return proc, result, rows


def test_the_labs_two_measurements_and_their_statistics(server: str, tmp_path: Path) -> None:
    proc, result, rows = run_bench(tmp_path, "--url", f"{server}/predict", "--sequential", "20",
                                   "--concurrent", "48", "--senders", "8")
    assert proc.returncode == 0, proc.stderr
    seq, conc = result["phases"]
    assert (seq["phase"], seq["load"], seq["requests"], seq["ok"], seq["errors"]) == \
        ("sequential", 1, 20, 20, 0)
    assert (conc["phase"], conc["load"], conc["requests"], conc["ok"], conc["errors"]) == \
        ("concurrent", 8, 48, 48, 0)
    for ph in (seq, conc):
        lat_us = np.array(ph["latencies_s"]) * 1e6
        assert len(lat_us) == ph["ok"] and np.all(lat_us > 0)
        # the lab's statistics: numpy median / percentiles, reported in microseconds
        assert ph["p50_us"] == pytest.approx(np.median(lat_us), abs=0.1)
        assert ph["p95_us"] == pytest.approx(np.percentile(lat_us, 95), abs=0.1)
        assert ph["p99_us"] == pytest.approx(np.percentile(lat_us, 99), abs=0.1)
        assert ph["latency_avg_us"] == pytest.approx(lat_us.mean(), abs=0.1)
        assert ph["p50_us"] <= ph["p95_us"] <= ph["p99_us"]
        assert ph["end"] > ph["start"]
    # throughput as the lab computes it: sequential over the summed latencies, concurrent over wall time
    assert seq["throughput"] == pytest.approx(20 / sum(seq["latencies_s"]), rel=1e-3)
    assert conc["throughput"] == pytest.approx(48 / conc["wall_s"], rel=1e-3)
    # the 8 senders really overlapped: the summed latencies exceed the wall time several times
    assert sum(conc["latencies_s"]) / conc["wall_s"] > 3
    assert seq["wall_s"] >= sum(seq["latencies_s"])
    assert [r["phase"] for r in rows] == ["sequential", "concurrent"]
    assert float(rows[1]["p99_us"]) == conc["p99_us"] and rows[1]["load"] == "8"
    assert "Median inference time" in proc.stderr and "Throughput" in proc.stderr


def test_refused_requests_are_counted_as_errors(server: str, tmp_path: Path) -> None:
    not_an_image = tmp_path / "notes.txt"
    not_an_image.write_text("not a picture")
    proc, result, _ = run_bench(tmp_path, "--url", f"{server}/predict", "--image", str(not_an_image),
                                "--sequential", "3", "--concurrent", "5", "--senders", "2")
    assert proc.returncode == 1  # no request succeeded
    for ph, n in zip(result["phases"], (3, 5), strict=True):
        assert (ph["ok"], ph["errors"], ph["p50_us"]) == (0, n, None)
        assert all(e.startswith("HTTP 400:") and "not a picture" in e for e in ph["error_samples"])


class _Flaky(http.server.BaseHTTPRequestHandler):
    """Answers 500 to every third POST: a server whose error count we know."""

    count = 0
    lock = threading.Lock()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        with self.lock:
            type(self).count += 1
            n = type(self).count
        code = 500 if n % 3 == 0 else 200
        body = b'{"prediction": "Soup", "probability": 0.5}'
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


def test_errors_are_counted_exactly_and_a_dead_server_does_not_stop_the_run(tmp_path: Path) -> None:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/predict"
        proc, result, _ = run_bench(tmp_path, "--url", url, "--sequential", "9", "--concurrent", "12",
                                    "--senders", "4")
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert proc.returncode == 0, proc.stderr
    seq, conc = result["phases"]
    assert (seq["ok"], seq["errors"]) == (6, 3) and (conc["ok"], conc["errors"]) == (8, 4)
    assert all(e.startswith("HTTP 500") for e in seq["error_samples"] + conc["error_samples"])
    # throughput counts every request sent, as the lab's formula does
    assert seq["throughput"] == pytest.approx(9 / sum(seq["latencies_s"]), rel=1e-3)
    # nothing listens any more: every request is a connection error, counted, and the run ends
    proc, result, _ = run_bench(tmp_path, "--url", url, "--sequential", "2", "--concurrent", "0",
                                "--timeout", "5")
    assert proc.returncode == 1
    (seq,) = result["phases"]
    assert seq["errors"] == 2 and "ConnectionError" in seq["error_samples"][0]


@pytest.mark.parametrize("n", [1, 2, 5, 100, 1000])
def test_percentile_is_numpys_linear_percentile(n: int) -> None:
    values = list(np.random.default_rng(n).exponential(50_000, size=n))
    for q in (50, 90, 95, 99, 100, 0):
        assert fb.percentile(values, q) == pytest.approx(np.percentile(values, q), rel=1e-12)
    assert np.isnan(fb.percentile([], 50))


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    for args in (["--senders", "0"], ["--sequential", "-1"]):
        proc = subprocess.run([sys.executable, str(BENCH), *args], check=False, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 2 and "must be" in proc.stderr


def test_the_script_imports_nothing_from_the_project() -> None:
    """It is copied alone to the node's client container."""
    text = BENCH.read_text()
    assert "serve_system" not in text.replace("serve-system", "")
    assert "from ." not in text and "import numpy" not in text
