"""bench.json (the FastAPI client's output) -> the summary's columns."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from serve_system.node import fastapi_bench as fb
from serve_system.results.fastapi_tree import bench_fields


def _write(level: Path, phases: list[dict]) -> Path:
    level.mkdir(parents=True)
    (level / "bench.json").write_text(json.dumps({"tool": fb.TOOL, "phases": phases}))
    return level


def _phase(latencies: list[float], errors: list[str], senders: int = 16, wall: float = 2.0) -> dict:
    p = fb.Phase("concurrent" if senders > 1 else "sequential", senders, len(latencies) + len(errors),
                 latencies_s=latencies, errors=errors, wall_s=wall, start=100.0, end=100.0 + wall)
    return {**p.summary(), "start": p.start, "end": p.end, "latencies_s": latencies,
            "error_samples": errors[:20]}


def test_a_measured_level_maps_to_the_summary_columns(tmp_path: Path) -> None:
    lat = [0.010, 0.020, 0.030, 0.040]
    f = bench_fields(_write(tmp_path / "c16_r1", [_phase(lat, ["HTTP 500: boom"], wall=0.5)]))
    assert f is not None
    assert f.status == "ok" and f.errors == 1 and f.error == "1 of 5 requests failed: HTTP 500: boom"
    assert f.throughput == pytest.approx(5 / 0.5)
    assert f.p50_us == pytest.approx(25_000.0) and f.latency_avg_us == pytest.approx(25_000.0)
    assert f.p99_us == pytest.approx(fb.percentile([x * 1e6 for x in lat], 99), abs=0.1)
    assert f.duration_s == 0.5 and f.tool == fb.TOOL


def test_sequential_throughput_is_over_summed_latencies(tmp_path: Path) -> None:
    f = bench_fields(_write(tmp_path / "c1_r1", [_phase([0.1, 0.1, 0.2, 0.1], [], senders=1, wall=9.0)]))
    assert f is not None and f.throughput == pytest.approx(4 / 0.5) and f.error is None


def test_a_level_where_every_request_failed_is_failed_with_the_reason(tmp_path: Path) -> None:
    f = bench_fields(_write(tmp_path / "c16_r1", [_phase([], ["ConnectionError: refused"] * 3)]))
    assert f is not None and f.status == "failed" and f.errors == 3
    assert f.error == "all 3 requests failed: ConnectionError: refused" and f.p50_us is None


def test_missing_or_broken_output(tmp_path: Path) -> None:
    assert bench_fields(tmp_path) is None
    (tmp_path / "bench.json").write_text("{not json")
    f = bench_fields(tmp_path)
    assert f is not None and f.status == "failed" and "bench.json:1:2: not JSON" in f.error


def test_the_clients_real_output_is_read(tmp_path: Path) -> None:
    """The client's file, written by the client itself (against a port nobody listens on)."""
    level = tmp_path / "c2_r1"
    out = subprocess.run([sys.executable, fb.__file__, "--url", "http://127.0.0.1:9/predict", "--sequential",
                          "0", "--concurrent", "3", "--senders", "2", "--timeout", "2", "--out",
                          str(level / "bench.json")], check=False, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1
    f = bench_fields(level)
    assert f is not None and f.status == "failed" and f.errors == 3 and "ConnectionError" in f.error


def test_the_summary_holds_fastapi_rows_in_the_triton_schema(tmp_path: Path) -> None:
    from serve_system.node import records
    from serve_system.results import tree as results
    from serve_system.results.report import write_report

    run = tmp_path / "fastapi" / "r1"
    host = run / "n1"
    (host / "pytorch").mkdir(parents=True)
    records.write(host / "pytorch" / "variant.json", records.VariantRecord(
        name="pytorch", model="fastapi:pytorch", version="1", status="unavailable",
        error="PyTorch runtime unavailable: torch cannot be imported"))
    for lid, senders, lat in (("c1_r1", 1, [0.01, 0.02]), ("c16_r1", 16, [0.1, 0.2, 0.3])):
        level = _write(host / "onnx" / lid, [_phase(lat, [], senders=senders, wall=0.25)])
        records.write(level / "level.json", records.LevelRecord(
            variant="onnx", level=lid, mode="concurrency", load=senders, repetition=1, status="ok", start=1.0,
            end=3.0, attempts=[], tool="fastapi_bench", requests=len(lat)))
    records.write(host / "onnx" / "variant.json", records.VariantRecord(
        name="onnx", model="fastapi:onnx", version="1", status="measured", stand_in="stand-in"))
    (run / "manifest.json").write_text(json.dumps({"experiment": "fastapi", "run_id": "r1"}))
    rows = results.collect(run)
    by = {(r["variant"], r["load"]): r for r in rows}
    torch_row = next(r for r in rows if r["variant"] == "pytorch")
    assert torch_row["status"] == "unavailable" and "torch cannot be imported" in torch_row["error"]
    c16 = by[("onnx", 16)]
    assert c16["status"] == "ok" and c16["mode"] == "concurrency" and c16["errors"] == 0
    assert c16["throughput"] == pytest.approx(3 / 0.25) and c16["p50_us"] == pytest.approx(200_000.0)
    assert by[("onnx", 1)]["throughput"] == pytest.approx(2 / 0.03)
    assert set(results.COLUMNS) >= {"experiment", "host", "variant", "mode", "load", "repetition",
                                    "throughput", "latency_avg_us", "p50_us", "p95_us", "p99_us", "errors"}
    out = write_report(run)
    assert out["rows"] == 3
    text = (run / "report.md").read_text()
    assert "unavailable" in text and "torch cannot be imported" in text
