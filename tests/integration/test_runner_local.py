"""The node-side runner against a real CPU Triton and the real perf_analyzer 2.60.0 (no rehearsal node).

One spec, three variants of a small Python-backend model: the baseline, a dynamic-batching variant
and a variant that passes local validation but that Triton refuses. Each is loaded through the
repository API with its rendered config as an override, measured with the perf_analyzer command
the plan built (CSV export), with stats before/after; the raw files go into the same results tree
the Ansible role writes, and the report is computed from them. The baseline is restored after.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml

from serve_system.experiment import perf as perfmod
from serve_system.experiment import plan as exp
from serve_system.node import events, plans, records
from serve_system.results import report
from serve_system.results import tree as results

from .local_triton import CONTAINERS_CONF, LocalTriton, perf_client_image, start_triton
from .prestart import prestartable
from .windows import BEHAVIOUR

pytestmark = [pytest.mark.integration, pytest.mark.windows("behaviour")]


@prestartable(scope="module")
def triton(workdir: Path):  # type: ignore[no-untyped-def]
    """A local tritonserver (set up in the background while other tests run: prestart.py)."""
    if shutil.which("podman") is None:
        pytest.fail("podman is missing: run scripts/bootstrap.sh")
    server = start_triton(workdir)
    try:
        yield server
    finally:
        server.stop()


@prestartable(scope="module")
def image(workdir: Path) -> Iterator[str]:
    """The perf_analyzer client image (built in the background if missing: prestart.py)."""
    yield perf_client_image()


SPEC = {
    "name": "local_triton",
    "model": "echo_local",
    "base_config": "model_repository/echo_local/config.pbtxt",
    "on_missing_gpus": "refuse",
    "load": {"mode": "concurrency", "levels": [1, 8]},
    "perf": BEHAVIOUR.spec_perf({"batch_size": 1, "input_data": "input.json"}),
    "warmup": {"requests": 10},
    "variants": [
        {"name": "baseline"},
        {"name": "dynbatch", "config": {"dynamic_batching": {"preferred_batch_size": [4, 8],
                                                               "max_queue_delay_microseconds": 2000}}},
        # valid for our checks, refused by the model when Triton loads it
        {"name": "bad_priority", "config": {"parameters": {"echo_local_refuse": {"string_value": "yes"}}}},
    ],
    "objectives": [{"name": "most_throughput_at_8", "metric": "throughput", "goal": "max", "at_load": 8}],
}


def _stats(t: LocalTriton) -> dict:  # type: ignore[type-arg]
    return requests.get(f"{t.url}/v2/models/echo_local/versions/1/stats", timeout=10).json()


def _config(t: LocalTriton) -> dict:  # type: ignore[type-arg]
    return requests.get(f"{t.url}/v2/models/echo_local/config", timeout=10).json()


def _runner(image: str, node: Path, triton: LocalTriton, *args: str,
            stdin: str = "") -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    """The node-side runner in the client image (host network), as the role runs it in the jupyter
    container."""
    env = {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}
    argv = ["podman", "run", "--rm", "-i", "--network", "host", "-v", f"{node}:{node}", image, "python3",
            str(node / ".node.pyz"), "--plan", str(node / "plan.json"), "--triton", triton.url,
            "--metrics", f"http://127.0.0.1:{triton.metrics}/metrics", "--metrics-interval", "0.5",
            "--progress", str(node / "progress.json"), "--perf-memory-mb", "2048", "--perf-timeout", "240",
            *args]
    return subprocess.run(argv, check=False, capture_output=True, text=True, timeout=900, env=env,
                          input=stdin)


def _planned(triton: LocalTriton, tmp_path: Path, spec: dict) -> tuple[Path, Path]:  # type: ignore[type-arg]
    """``spec`` planned for host ``local`` in a copy of the model repository, its node bundle put in
    the node's work folder as the role copies it: (the node's run folder, the controller's)."""
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(triton.repo, work / "model_repository")
    (work / "input.json").write_text(json.dumps({"data": [{"INPUT0": [1.0, 2.0, 3.0, 4.0]}]}))
    (work / "ansible.cfg").write_text("[defaults]\n")
    spec_path = work / "spec.yml"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    # the node's work folder; the run's folder is /work/<experiment>/<run>
    node = tmp_path / "node_work" / spec["name"] / "r1"
    run_dir = tmp_path / "results" / spec["name"] / "r1"
    plan = subprocess.run([sys.executable, "-m", "serve_system.cli", "plan", str(spec_path), "--run-dir",
                           str(run_dir),
                           "--host", "local=0", "--url", f"127.0.0.1:{triton.http}", "--node-work-dir",
                           str(node), "--quiet"], check=False, capture_output=True, text=True)
    assert plan.returncode == 0, plan.stderr
    node.mkdir(parents=True)
    shutil.copyfile(run_dir / "local" / ".node.pyz", node / ".node.pyz")
    return node, run_dir


def test_variants_through_the_runner(triton: LocalTriton, image: str, tmp_path: Path) -> None:
    node, run_dir = _planned(triton, tmp_path, SPEC)
    # one call for two variants (as the role runs a Triton plan), then the refused one on its own
    proc = _runner(image, node, triton, "--variant", "baseline", "--variant", "dynbatch")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got, other = events.read_events(proc.stdout)  # the runner speaks JSON lines only
    levels = [e for e in got if e.kind == "level"]
    assert other == [] and [e.seq for e in levels] == [1, 2, 3, 4]
    assert levels[-1].text.startswith("local dynbatch c8_r1 4/4: ")
    assert got[-1].kind == "end" and got[-1].text == "local: 4 level(s) measured in 2 variant(s)"
    assert got[-1].measured == 4 and not got[-1].host_record
    live = _config(triton)
    assert live["dynamic_batching"]["preferred_batch_size"] == [4, 8]
    proc = _runner(image, node, triton, "--variant", "bad_priority")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert events.summarize_events(proc.stdout)["refused"], proc.stdout
    # as the role does for a refused variant: Triton's log on stdin
    proc = _runner(image, node, triton, "--triton-log", "--variant", "bad_priority",
                   stdin=triton.log.read_text())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    refused = records.read(node / "bad_priority" / "variant.json", records.VariantRecord)
    assert refused.status == "refused" and "echo_local_refuse=yes: refusing to load" in (refused.error or "")
    # a refused load leaves the previous variant serving
    assert requests.get(f"{triton.url}/v2/models/echo_local/ready", timeout=10).status_code == 200
    progress = json.loads((node / "progress.json").read_text())
    assert progress["levels_done"] == progress["levels_total"] == 6 and progress["run_id"] == "r1"
    # repetitions: auto's budget on the call (--restore-past MINUTES): not spent, the call ends as any;
    # spent (the host's level records' own minutes), the runner restores the baseline itself
    unspent = events.summarize_events(_runner(image, node, triton, "--variant", "baseline",
                                               "--restore-past", "1000").stdout)
    assert unspent["end"] and not unspent["host_record"] and "budget" not in unspent["end"], unspent
    spent = events.summarize_events(_runner(image, node, triton, "--variant", "baseline",
                                             "--restore-past", "0.001").stdout)
    assert spent["host_record"] and "; the budget is spent (" in spent["end"], spent
    assert "of 0.001 measured minutes); host record written (baseline restored)" in spent["end"], spent
    assert spent["report"][-1] == spent["end"]
    # a second runner for a measured variant measures nothing again; --restore writes the host record
    again = _runner(image, node, triton, "--variant", "baseline", "--restore")
    said = events.summarize_events(again.stdout)
    assert said["variants"] == ["local baseline: 0 level(s) measured (2 already done)"], again.stdout
    assert said["host_record"] and said["end"].endswith("host record written (baseline restored)")
    with tarfile.open(node / "results.tar.gz") as tar:  # what the role fetches and unpacks
        tar.extractall(run_dir / "local", filter="data")
    host = records.read(run_dir / "local" / "host.json", records.HostRecord)
    assert host.baseline_restored and host.restore_status == [200]
    base = records.read(run_dir / "local" / "dynbatch" / "variant.json", records.VariantRecord)
    assert base.load_started and base.warmup_seconds is not None and base.switch_seconds
    restored = _config(triton)
    assert "dynamic_batching" not in restored and restored["max_batch_size"] == 8

    rows = results.collect(run_dir)
    by = {(r["variant"], r["load"]): r for r in rows}
    assert by[("bad_priority", None)]["status"] == "refused"
    measured = [r for r in rows if r["status"] == "ok"]
    assert len(measured) >= 3, [(r["variant"], r["load"], r["status"], r["error"]) for r in rows]
    for r in measured:
        assert r["throughput"] > 0 and r["p99_us"] >= r["p50_us"] > 0
        assert r["inference_count"] > 0 and r["execution_count"] > 0 and r["cpu_util"] is not None
        ldir = run_dir / "local" / r["variant"] / exp.level_id("concurrency", r["load"], 1)
        csv_levels = perfmod.parse_csv((ldir / "perf.csv").read_text())
        assert csv_levels[0].throughput == r["throughput"]  # the row is the CSV's number
        lrec = records.read(ldir / "level.json", records.LevelRecord)
        assert lrec.provenance["perf_analyzer"] == "2.60.0" and lrec.provenance["triton"]
        assert lrec.attempts[0].max_rss_mb is not None and lrec.end > lrec.start
    base8, dyn8 = by.get(("baseline", 8)), by.get(("dynbatch", 8))
    assert base8 is not None and base8["status"] == "ok" and base8["avg_batch_size"] == 1.0
    assert dyn8 is not None and dyn8["status"] == "ok" and dyn8["avg_batch_size"] > 1.5
    assert set(map(int, dyn8["batch_size_histogram"])) - {1}
    out = report.write_report(run_dir)
    with (run_dir / "summary.csv").open(newline="") as fh:  # cells may hold newlines (Triton's messages)
        assert len(list(csv.DictReader(fh))) == len(rows)
    assert json.loads((run_dir / "summary.json").read_text())["rows"][0]["experiment"] == "local_triton"
    assert all(Path(p).stat().st_size > 5000 for p in out["plots"]) and len(out["plots"]) >= 3
    md = (run_dir / "report.md").read_text()
    assert "most_throughput_at_8" in md and "bad_priority" in md and "refused" in md
    cli = subprocess.run([sys.executable, "-m", "serve_system.cli", "report", str(run_dir)],
                         check=False, capture_output=True, text=True)
    assert cli.returncode == 0 and "best most_throughput_at_8" in cli.stdout


def test_runner_sampler_against_real_triton(triton: LocalTriton, tmp_path: Path) -> None:
    from serve_system.node.nodeproc import Sampler
    from serve_system.results import stats

    sampler = Sampler(f"http://127.0.0.1:{triton.metrics}/metrics", tmp_path / "metrics.jsonl", 0.3)
    sampler.start()
    time.sleep(1.5)
    sampler.stop.set()
    sampler.join(timeout=10)
    samples = stats.read_samples(tmp_path / "metrics.jsonl")
    assert len(samples) >= 3 and sampler.errors == 0
    assert stats.mean_gpu_util(samples) is None  # a CPU-only Triton reports no GPU


def test_two_variants_with_one_config_are_each_loaded_afresh(triton: LocalTriton, image: str,
                                                             tmp_path: Path) -> None:
    """Triton keeps a model as it is when asked to load the config it serves: the runner unloads it
    first, so the second of two identical variants starts from a fresh load (its statistics count only
    its own warm-up), not from the instances the first one warmed."""
    spec = {**SPEC, "name": "local_aa", "load": {"mode": "concurrency", "levels": [1]},
            "warmup": {"requests": 5},
            "variants": [{"name": "first"}, {"name": "again"}], "repetitions": 2, "objectives": []}
    node, run_dir = _planned(triton, tmp_path, spec)
    rounds = records.read(run_dir / "local" / "plan.json", plans.HostPlan).rounds
    assert rounds[0] == rounds[1][::-1]  # counterbalanced: the second round starts where the first ended
    proc = _runner(image, node, triton, "--variant", "first", "--variant", "again")
    assert proc.returncode == 0, proc.stdout + proc.stderr

    def count(name: str, rep: int, when: str) -> int:
        doc = json.loads((node / name / f"c1_r{rep}" / f"stats_{when}.json").read_text())
        (stats,) = [m for m in doc["model_stats"] if m["name"] == "echo_local"]
        return int(stats["inference_count"])

    order = [(name, rep) for rep, names in enumerate(rounds, 1) for name in names]
    for prev, nxt in itertools.pairwise(order):
        # after a fresh load Triton counts from zero: the next level starts below where the last ended
        assert count(*nxt, "before") < count(*prev, "after"), (prev, nxt)


def _runner_while_triton_restarts(image: str, node: Path, first: LocalTriton, tmp_path: Path,
                                  *extra: str) -> str:
    """Run the runner (``extra``: what it does) while ``first``, already stopped, is gone, and bring
    the same server back on its ports, with the same model repository, 8 s later; the runner's stderr once it
    exited 0."""
    env = {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}
    argv = ["podman", "run", "--rm", "--network", "host", "-v", f"{node}:{node}", image, "python3",
            str(node / ".node.pyz"), "--plan", str(node / "plan.json"), "--triton", first.url,
            "--metrics", f"http://127.0.0.1:{first.metrics}/metrics",
            "--progress", str(node / "progress.json"), "--perf-memory-mb", "2048", "--perf-timeout", "240",
            "--ready-timeout", "120", *extra]
    runner = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    again = None
    try:
        time.sleep(8)  # the runner starts and finds no Triton; then the server comes back
        again = start_triton(tmp_path / "triton", first.repo, (first.http, first.grpc, first.metrics),
                             copy=False)
        out, err = runner.communicate(timeout=600)
    finally:
        if runner.poll() is None:
            runner.kill()
        if again is not None:
            again.stop()
    assert runner.returncode == 0, out + err
    return err


def test_a_load_waits_for_triton_to_come_back(image: str, tmp_path: Path) -> None:
    """Triton restarting (after a crash, or restarted by its container's policy) answers nothing for a
    while. The runner's load waits for it to be ready again, then the variant is loaded and measured:
    it is not recorded as refused."""
    first = start_triton(tmp_path / "triton")
    spec = {**SPEC, "name": "local_restart", "load": {"mode": "concurrency", "levels": [1]},
            "warmup": {"requests": 5}, "objectives": [],
            "variants": [{"name": "dynbatch", "config": SPEC["variants"][1]["config"]}]}
    node, _ = _planned(first, tmp_path, spec)
    first.stop()  # Triton is gone when the runner asks for the load
    err = _runner_while_triton_restarts(image, node, first, tmp_path, "--variant", "dynbatch")
    assert "Triton did not answer the load" in err and "waiting for it to be ready again" in err
    vrec = records.read(node / "dynbatch" / "variant.json", records.VariantRecord)
    assert vrec.status == records.MEASURED and vrec.error is None
    assert vrec.switch_seconds is not None and vrec.switch_seconds >= 3  # it waited for the restart
    level = records.read(node / "dynbatch" / "c1_r1" / "level.json", records.LevelRecord)
    assert level.status == records.OK, level.error


def test_a_restore_waits_for_triton_to_come_back(image: str, tmp_path: Path) -> None:
    """Triton restarting while the baseline is restored (seen once on a loaded machine: the restore's
    load got no answer at all) does not leave the baseline unrestored: the restore waits for Triton to be
    ready again and loads the committed config then."""
    first = start_triton(tmp_path / "triton")
    node, _ = _planned(first, tmp_path, {**SPEC, "name": "local_restore_restart"})
    first.stop()  # Triton is gone when the runner restores
    err = _runner_while_triton_restarts(image, node, first, tmp_path, "--restore")
    assert "Triton did not answer the load" in err and "waiting for it to be ready again" in err
    host = records.read(node / "host.json", records.HostRecord)
    assert host.baseline_restored and host.restore_status == [200], host
    assert host.restore_seconds is not None and host.restore_seconds >= 3  # it waited for the restart


def test_a_level_whose_stub_died_is_failed_and_the_next_level_served_afresh(triton: LocalTriton, image: str,
                                                                               tmp_path: Path) -> None:
    """The model's Python stub process dies during the first level (as seen on a GPU node, where
    perf_analyzer then exits 0 having measured nothing): that level is recorded failed with
    perf_analyzer's own words, not ok; the variant is loaded afresh, so the next level is measured."""
    spec = {**SPEC, "name": "local_stub_dies", "objectives": [],
            "variants": [{"name": "dies", "config": {"parameters": {
                "echo_local_die_at": {"string_value": "40"}}}}]}
    node, _ = _planned(triton, tmp_path, spec)
    proc = _runner(image, node, triton, "--variant", "dies", "--restore")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said, _ = events.read_events(proc.stdout)
    levels = {e.level: e for e in said if e.kind == "level"}
    first = records.read(node / "dies" / "c1_r1" / "level.json", records.LevelRecord)
    assert first.status == records.FAILED and levels["c1_r1"].status == records.FAILED, first
    assert first.error is not None and "is not healthy" in first.error, first.error
    assert "loaded afresh for the next level" in first.error
    second = records.read(node / "dies" / "c8_r1" / "level.json", records.LevelRecord)
    assert second.status == records.OK, second.error
    assert (node / "dies" / "c8_r1" / "perf.csv").stat().st_size > 0
