"""The engine against a real CPU Triton and the real perf_analyzer 2.60.0 (no rehearsal node).

One spec, three variants of a small Python-backend model: the baseline, a dynamic-batching variant
and a variant that passes local validation but that Triton refuses. Each is loaded through the
repository API with its rendered config as an override, measured with the perf_analyzer command
the plan built (CSV export), with stats before/after; the raw files go into the same results tree
the Ansible role writes, and the report is computed from them. The baseline is restored after.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
import yaml

from serve_system import experiment as exp
from serve_system import perf as perfmod
from serve_system import report, results

from .engine_local import LocalTriton, perf_client_image, run_perf, start_triton

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def triton(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    if shutil.which("podman") is None:
        pytest.fail("podman is missing: run scripts/bootstrap.sh")
    server = start_triton(tmp_path_factory.mktemp("engine-triton"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def image() -> str:
    return perf_client_image()


SPEC = {
    "name": "engine_local",
    "model": "engine_echo",
    "base_config": "model_repository/engine_echo/config.pbtxt",
    "on_missing_gpus": "refuse",
    "load": {"mode": "concurrency", "levels": [1, 8]},
    "perf": {"batch_size": 1, "input_data": "input.json", "measurement_interval_ms": 1000,
             "stability_percentage": 100, "max_trials": 6, "retries": 1},
    "warmup": {"requests": 10},
    "variants": [
        {"name": "baseline"},
        {"name": "dynbatch", "config": {"dynamic_batching": {"preferred_batch_size": [4, 8],
                                                               "max_queue_delay_microseconds": 2000}}},
        # valid for our checks, refused by Triton: the default priority level is out of range
        {"name": "bad_priority", "config": {"dynamic_batching": {"priority_levels": 2, "default_priority_level": 5}}},
    ],
    "objectives": [{"name": "most_throughput_at_8", "metric": "throughput", "goal": "max", "at_load": 8}],
}


def _stats(t: LocalTriton) -> dict:  # type: ignore[type-arg]
    return requests.get(f"{t.url}/v2/models/engine_echo/versions/1/stats", timeout=10).json()


def _config(t: LocalTriton) -> dict:  # type: ignore[type-arg]
    return requests.get(f"{t.url}/v2/models/engine_echo/config", timeout=10).json()


def test_variants_through_the_repository_api(triton: LocalTriton, image: str, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "model_repository").symlink_to(triton.repo)
    (work / "input.json").write_text(json.dumps({"data": [{"INPUT0": [1.0, 2.0, 3.0, 4.0]}]}))
    spec_path = work / "spec.yml"
    spec_path.write_text(yaml.safe_dump(SPEC, sort_keys=False))
    node = tmp_path / "node"  # what the client container sees as /work/<experiment>/<run>
    node.mkdir()
    shutil.copy(work / "input.json", node / "input.json")
    spec = exp.load_spec(spec_path)
    plans = exp.plan(spec, 0, url=f"127.0.0.1:{triton.http}", node_work_dir=str(node))
    run_dir = tmp_path / "results" / "engine_local" / "r1"
    (run_dir / "local").mkdir(parents=True)
    (run_dir / "manifest.json").write_text(json.dumps({"experiment": "engine_local", "run_id": "r1",
                                                       "objectives": SPEC["objectives"]}))
    for v in plans:
        vdir = run_dir / "local" / v.name
        vdir.mkdir()
        t0 = time.time()
        r = requests.post(f"{triton.url}/v2/repository/models/{v.model}/load", json=v.load_body, timeout=120)
        if v.name == "bad_priority":
            assert r.status_code in (400, 500)
            assert "error" in r.json()
            assert "default priority level must be in range" in triton.log.read_text()
            (vdir / "variant.json").write_text(json.dumps({"status": "refused", "model": v.model,
                                                           "error": r.json()["error"]}))
            # a refused load leaves the previous variant serving
            assert requests.get(f"{triton.url}/v2/models/engine_echo/ready", timeout=10).status_code == 200
            continue
        assert r.status_code == 200, r.text
        assert time.time() - t0 < 60
        live = _config(triton)
        assert ("dynamic_batching" in live and live["dynamic_batching"]["preferred_batch_size"] == [4, 8]) == (
            v.name == "dynbatch")
        (vdir / "variant.json").write_text(json.dumps({"status": "measured", "model": v.model}))
        warm = run_perf(image, v.warmup_argv, node)
        assert "engine_echo" in warm.stdout + warm.stderr or warm.returncode == 0
        for lv in v.levels:
            ldir = vdir / lv.id
            ldir.mkdir()
            Path(node / v.name / lv.id).mkdir(parents=True, exist_ok=True)
            before = _stats(triton)
            start = time.time()
            proc = run_perf(image, lv.argv, node)
            attempts = [{"argv": lv.argv, "rc": proc.returncode}]
            if perfmod.is_unstable(proc.stdout + proc.stderr):
                proc = run_perf(image, lv.retry_argv[0], node)
                attempts.append({"argv": lv.retry_argv[0], "rc": proc.returncode, "reason": "unstable"})
            after = _stats(triton)
            (ldir / "perf.stdout").write_text(proc.stdout + "\n" + proc.stderr)
            csv_src = node / v.name / lv.id / "perf.csv"
            if csv_src.exists():
                shutil.copy(csv_src, ldir / "perf.csv")
            (ldir / "stats_before.json").write_text(json.dumps(before))
            (ldir / "stats_after.json").write_text(json.dumps(after))
            (ldir / "level.json").write_text(json.dumps({"mode": lv.mode, "load": lv.load, "repetition": 1,
                                                         "batch_size": 1, "start": start, "end": time.time(),
                                                         "attempts": attempts}))
    # restore: unload + load reads the repository's config.pbtxt again (a bare load keeps the override)
    assert requests.post(f"{triton.url}/v2/repository/models/engine_echo/unload", json={}, timeout=60).ok
    assert requests.post(f"{triton.url}/v2/repository/models/engine_echo/load", json={}, timeout=120).ok
    restored = _config(triton)
    assert "dynamic_batching" not in restored and restored["max_batch_size"] == 8

    rows = results.collect(run_dir)
    by = {(r["variant"], r["load"]): r for r in rows}
    assert by[("bad_priority", None)]["status"] == "refused"
    measured = [r for r in rows if r["status"] == "ok"]
    assert len(measured) >= 3, [(r["variant"], r["load"], r["status"], r["error"]) for r in rows]
    for r in measured:
        assert r["throughput"] > 0 and r["p99_us"] >= r["p50_us"] > 0
        assert r["inference_count"] > 0 and r["execution_count"] > 0
        csv_file = run_dir / "local" / r["variant"] / exp.level_id("concurrency", r["load"], 1) / "perf.csv"
        csv_levels = perfmod.parse_csv(csv_file.read_text())
        assert csv_levels[0].throughput == r["throughput"]  # the row is the CSV's number
    base8, dyn8 = by.get(("baseline", 8)), by.get(("dynbatch", 8))
    assert base8 is not None and base8["status"] == "ok" and base8["avg_batch_size"] == 1.0
    assert dyn8 is not None and dyn8["status"] == "ok" and dyn8["avg_batch_size"] > 1.5
    assert set(map(int, dyn8["batch_size_histogram"])) - {1}
    out = report.write_report(run_dir)
    assert (run_dir / "summary.csv").read_text().count("\n") == len(rows) + 1
    assert json.loads((run_dir / "summary.json").read_text())[0]["experiment"] == "engine_local"
    assert all(Path(p).stat().st_size > 5000 for p in out["plots"]) and len(out["plots"]) >= 3
    md = (run_dir / "report.md").read_text()
    assert "most_throughput_at_8" in md and "bad_priority" in md and "refused" in md
    cli = subprocess.run([sys.executable, "-m", "serve_system.cli", "report", str(run_dir)],
                         check=False, capture_output=True, text=True)
    assert cli.returncode == 0 and "best most_throughput_at_8" in cli.stdout


def test_metrics_sampler_against_real_triton(triton: LocalTriton, tmp_path: Path) -> None:
    from serve_system import stats

    sampler = Path(__file__).resolve().parents[2] / "roles" / "triton_experiment" / "files" / "metrics_sampler.py"
    out, stop = tmp_path / "metrics.jsonl", tmp_path / "stop"
    proc = subprocess.Popen([sys.executable, str(sampler), "--url", f"http://127.0.0.1:{triton.metrics}/metrics",
                             "--out", str(out), "--stop-file", str(stop), "--interval", "0.3"])
    time.sleep(1.5)
    stop.touch()
    assert proc.wait(timeout=10) == 0
    samples = stats.read_samples(out)
    assert len(samples) >= 3
    assert stats.mean_gpu_util(samples) is None  # a CPU-only Triton reports no GPU
    assert 0.0 <= stats.mean_cpu_util(samples) <= 1.0  # type: ignore[operator]
