"""``serve-system compare``: reported runs side by side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from serve_system.cli import main
from serve_system.results.compare import compare


def _run(tmp: Path, experiment: str, rows: list[dict]) -> Path:
    run = tmp / experiment / "r1"
    run.mkdir(parents=True)
    full = [{"experiment": experiment, "run_id": "r1", "host": "n1", "mode": "concurrency", "status": "ok",
             "error": None, "errors": None, **r} for r in rows]
    (run / "summary.json").write_text(json.dumps(full))
    return run


def test_fastapi_beside_triton_at_one_load(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    fastapi = _run(tmp_path, "fastapi", [
        {"variant": "onnx", "load": 1, "repetition": 1, "throughput": 20.0, "p50_us": 50_000,
         "p95_us": 60_000, "p99_us": 70_000, "errors": 0},
        {"variant": "onnx", "load": 16, "repetition": 1, "throughput": 40.0, "p50_us": 400_000,
         "p95_us": 500_000, "p99_us": 600_000, "errors": 2},
        {"variant": "onnx", "load": 16, "repetition": 2, "throughput": 44.0, "p50_us": 380_000,
         "p95_us": 480_000, "p99_us": 580_000, "errors": 0},
        {"variant": "pytorch", "load": None, "status": "unavailable", "error": "torch cannot be imported"},
    ])
    triton = _run(tmp_path, "dynbatch", [
        {"variant": "batch16", "load": 16, "repetition": 1, "throughput": 168.0, "p50_us": 90_000,
         "p95_us": 110_000, "p99_us": 130_000},
    ])
    rows = compare([fastapi, triton], [16])
    assert [(r["experiment"], r["variant"], r["load"]) for r in rows] == [
        ("fastapi", "onnx", 16), ("dynbatch", "batch16", 16), ("fastapi", "pytorch", None)]
    onnx, batch, torch = rows
    assert onnx["throughput"] == pytest.approx(42.0) and onnx["repetitions"] == 2 and onnx["errors"] == 1
    assert batch["ratio"] == pytest.approx(4.0) and onnx["ratio"] == 1.0
    assert torch["status"] == "unavailable" and "torch" in torch["note"]
    out = tmp_path / "cmp.md"
    assert main(["compare", str(fastapi), str(triton), "--load", "16", "--out", str(out),
                 "--csv", str(tmp_path / "c.csv")]) == 0
    text = capsys.readouterr().out
    assert ("| fastapi (r1) | n1 | onnx | concurrency 16 | ok | 42.0 | 390.00 | 490.00 | 590.00 | 1 | 1.00 "
            "|") in text
    assert "| dynbatch (r1) | n1 | batch16 | concurrency 16 | ok | 168.0 |" in text and "4.00" in text
    assert "unavailable: torch cannot be imported" in text
    assert out.read_text() == text
    assert (tmp_path / "c.csv").read_text().splitlines()[0].startswith("experiment,run_id,host,variant")


def test_a_run_without_summary_says_what_to_do(tmp_path: Path,
                                               capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["compare", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "no summary; run `serve-system report" in err and len(err.strip().splitlines()) == 1
