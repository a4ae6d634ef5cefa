"""Small run trees, laid out as the experiment roles write them, from real outputs.

The perf_analyzer outputs are the lab notebook's (tests/unit/fixtures/perf/notebook_*.txt, measured
on the lab's 2x P100 node) and this project's perf_analyzer 2.60 runs (fixtures/perf260); the
statistics snapshot is the notebook's (after its dynamic batching run). Where a test needs a value
the lab did not print (GPU utilisation samples, a constant-arrivals twin of a Poisson run), the
helper that makes it says so.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from serve_system.node import records
from serve_system.triton.pbtxt import apply_overrides, load_pbtxt, render_pbtxt

FIX = Path(__file__).parent / "fixtures"
NB = FIX / "perf"
P260 = FIX / "perf260"

FOOD = load_pbtxt(FIX / "model_repository" / "food_classifier" / "config.pbtxt")
FOOD_ONNX = load_pbtxt(FIX / "model_repository" / "food_classifier_onnx" / "config.pbtxt")
DYN = {"preferred_batch_size": [4, 6, 8, 10], "max_queue_delay_microseconds": 100}


def config(base: Any = FOOD, **overrides: Any) -> str:
    """config.pbtxt text of a variant, rendered as `serve-system plan` renders it."""
    return render_pbtxt(apply_overrides(base, overrides, "test"))


def instances(*counts: int) -> list[dict[str, Any]]:
    """An instance_group of ``count`` instances on each GPU in turn."""
    return [{"count": c, "kind": "KIND_GPU", "gpus": [i]} for i, c in enumerate(counts)]


def stats_snapshot(batched: bool) -> dict[str, Any]:
    """The notebook's statistics after its dynamic-batching run; unbatched: the same requests one by one."""
    snap = json.loads((FIX / "notebook_stats_after.json").read_text())
    if not batched:
        m = snap["model_stats"][0]
        m["execution_count"] = m["inference_count"]
        first = dict(m["batch_stats"][0])
        for k in ("compute_input", "compute_infer", "compute_output"):
            first[k] = {"count": m["inference_count"], "ns": m["inference_stats"][k]["ns"]}
        m["batch_stats"] = [first]
    return snap


def gpu_metrics(utils: dict[str, float], mem_mib: dict[str, float]) -> str:
    """A Triton :8002/metrics page for the given GPUs (values made up by the test: the lab printed none)."""
    lines = ["# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)", "# TYPE nv_gpu_utilization gauge"]
    lines += [f'nv_gpu_utilization{{gpu_uuid="{g}"}} {u}' for g, u in utils.items()]
    lines += [f'nv_gpu_memory_used_bytes{{gpu_uuid="{g}"}} {m * 2**20:.0f}' for g, m in mem_mib.items()]
    lines += [f'nv_gpu_memory_total_bytes{{gpu_uuid="{g}"}} {16280 * 2**20}' for g in mem_mib]
    lines += ["nv_cpu_utilization 0.31"]
    return "\n".join(lines) + "\n"


#: per repetition, how much faster than the recorded output a repeated level runs (made up by the
#: tests: the lab measured each level once); the spread is about 3 %, like a quiet node's
SPREAD = (1.0, 0.97, 1.03, 0.99, 1.01)


def scaled(text: str, speed: float) -> str:
    """A perf_analyzer stdout as if the server ran ``speed`` times as fast: throughput times ``speed``,
    every time in microseconds divided by it."""
    text = re.sub(r"throughput: ([0-9.]+)", lambda m: f"throughput: {float(m.group(1)) * speed:.4f}", text)
    return re.sub(r"([0-9]+) usec", lambda m: f"{round(int(m.group(1)) / speed)} usec", text)


def level(run: Path, host: str, variant: str, lid: str, *, mode: str = "concurrency", load: float,
          stdout: Path | None = None, csv: Path | None = None, stats: dict[str, Any] | None = None,
          metrics: list[str] | None = None, t0: float = 1000.0, distribution: str | None = None,
          batch_size: int = 1, repetition: int = 1, speed: float = 1.0, cpus: int | None = None) -> Path:
    """A level folder; ``speed`` scales its perf_analyzer stdout (:func:`scaled`); ``cpus``: the host's
    CPU count as the runner keeps it (the level's provenance)."""
    d = run / host / variant / lid
    d.mkdir(parents=True)
    argv = ["perf_analyzer", "-m", "food_classifier", "-b", str(batch_size)]
    argv += (["--concurrency-range", f"{load:g}"] if mode == "concurrency" else
             ["--request-rate-range", f"{load:g}", "--request-distribution", distribution or "constant"])
    records.write(d / "level.json", records.LevelRecord(
        variant=variant, level=lid, mode=mode, load=load, repetition=repetition, status=records.OK,
        batch_size=batch_size, start=t0, end=t0 + 10,
        attempts=[records.Attempt(argv=argv, rc=0, start=t0, end=t0 + 10)],
        provenance={} if cpus is None else {"cpus": cpus}))
    if stdout is not None:
        text = stdout.read_text()
        (d / "perf.stdout").write_text(scaled(text, speed) if speed != 1 else text)
    if csv is not None:
        (d / "perf.csv").write_text(csv.read_text())
    if stats is not None:
        (d / "stats_after.json").write_text(json.dumps(stats))
    if metrics:
        (d / "metrics.jsonl").write_text("".join(json.dumps({"t": t0 + i, "text": m}) + "\n"
                                                 for i, m in enumerate(metrics)))
    return d


def variant(run: Path, host: str, name: str, cfg: str | None, **meta: Any) -> Path:
    d = run / host / name
    d.mkdir(parents=True, exist_ok=True)
    if cfg is not None:
        (d / "config.pbtxt").write_text(cfg)
    fields = {"model": "food_classifier", "version": "1", "status": records.MEASURED, **meta}
    records.write(d / "variant.json", records.VariantRecord(name=name, **fields))
    return d


def manifest(run: Path, experiment: str, objectives: list[dict[str, Any]], **extra: Any) -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / "manifest.json").write_text(json.dumps({"experiment": experiment, "run_id": run.name,
                                                   "objectives": objectives, **extra}))


def lab_run(run: Path, repetitions: int = 1, spread: tuple[float, ...] = SPREAD) -> Path:
    """The lab notebook's Triton measurements as one run on one 2-GPU host.

    baseline (Python backend, 1 instance on GPU 0) at concurrency 1, 8, 16; dynbatch (the same with
    dynamic batching) at 8; 2+2 and 4+4 instances over two GPUs at 8; ONNX (1 instance) at 1. With
    more than one repetition, repetition r is the notebook's output sped up by ``spread[r - 1]``.
    """
    for r in range(1, repetitions + 1):
        _lab_repetition(run, r, spread[r - 1])
    return run


def _lab_repetition(run: Path, r: int, speed: float) -> None:
    def lv(variant_: str, load: int, nb: str, t0: float, **kw: Any) -> None:
        level(run, h, variant_, f"c{load}_r{r}", load=load, stdout=NB / nb, t0=t0 + 1000 * (r - 1),
              repetition=r, speed=speed, cpus=56, **kw)

    h = "node-1"
    if r == 1:
        manifest(run, "lab", [{"name": "most_throughput_at_8", "metric": "throughput", "goal": "max",
                               "at_load": 8}])
        (run / h).mkdir(parents=True)
    low = gpu_metrics({"GPU-aaaa": 0.22, "GPU-bbbb": 0.0}, {"GPU-aaaa": 1900, "GPU-bbbb": 300})
    variant(run, h, "baseline", config(instance_group=instances(1), dynamic_batching=None),
            model="food_classifier")
    for i, (load, nb) in enumerate(((1, "notebook_01.txt"), (8, "notebook_02.txt"), (16, "notebook_03.txt"))):
        lv("baseline", load, nb, 1000 + 20 * i, stats=stats_snapshot(False), metrics=[low] * 3)
    variant(run, h, "dynbatch", config(instance_group=instances(1), dynamic_batching=DYN),
            model="food_classifier")
    lv("dynbatch", 8, "notebook_05.txt", 1100, stats=stats_snapshot(True), metrics=[low] * 3)
    half = gpu_metrics({"GPU-aaaa": 0.46, "GPU-bbbb": 0.41}, {"GPU-aaaa": 3900, "GPU-bbbb": 3800})
    variant(run, h, "gpus01_2x2", config(instance_group=instances(2, 2)), model="food_classifier")
    lv("gpus01_2x2", 8, "notebook_06.txt", 1200, metrics=[half] * 3)
    variant(run, h, "gpus01_4x2", config(instance_group=instances(4, 4)), model="food_classifier")
    lv("gpus01_4x2", 8, "notebook_07.txt", 1300, metrics=[half] * 3)
    variant(run, h, "onnx", config(FOOD_ONNX), model="food_classifier_onnx")
    lv("onnx", 1, "notebook_08.txt", 1400, metrics=[low] * 3)


def fastapi_run(run: Path) -> Path:
    """A FastAPI benchmark run: the onnx and pytorch runtimes at 1 and 16 senders, every latency kept."""
    manifest(run, "fastapi", [{"name": "most_throughput_at_16", "metric": "throughput", "goal": "max",
                               "at_load": 16}])
    h = "node-1"
    for rt, base_ms in (("onnx", 9.0), ("pytorch", 21.0)):
        variant(run, h, rt, None, runtime=rt, model=f"fastapi:{rt}")
        for senders, n in ((1, 100), (16, 400)):
            d = run / h / rt / f"c{senders}_r1"
            d.mkdir(parents=True)
            per = base_ms * (1 if senders == 1 else senders / 2)  # queueing behind the one worker
            lat = [(per + (i % 17) * 0.37 + (9 * per if i % 50 == 0 else 0)) / 1000 for i in range(n)]
            us = sorted(x * 1e6 for x in lat)
            wall = sum(lat) / (1 if senders == 1 else senders)
            phase = {"phase": "sequential" if senders == 1 else "concurrent", "mode": "concurrency",
                     "load": senders, "requests": n, "ok": n, "errors": 0, "throughput": n / wall,
                     "latency_avg_us": sum(us) / n,
                     "p50_us": us[n // 2], "p90_us": us[int(n * 0.9)], "p95_us": us[int(n * 0.95)],
                     "p99_us": us[int(n * 0.99)], "start": 2000.0, "end": 2000.0 + wall, "latencies_s": lat,
                     "error_samples": []}
            (d / "bench.json").write_text(json.dumps({"tool": "fastapi_bench", "phases": [phase]}))
            records.write(d / "level.json", records.LevelRecord(
                variant=rt, level=d.name, mode="concurrency", load=senders, requests=n, repetition=1,
                tool="fastapi_bench", start=2000.0, end=2000.0 + wall, status=records.OK, attempts=[]))
    return run


def rehearsal_backends_run(run: Path, tmp: Path) -> Path:
    """``experiments/specs/backends.yml`` as a rehearsal node runs it: the committed repository rendered
    for a host without GPU whose Triton has no onnxruntime backend (the ONNX models through the Python
    shim), the spec planned on it (the configs and notes the runner records), and each level the lab
    notebook's output (python: notebook_01-03; the ONNX variants: notebook_08-10; python_batch16:
    notebook_04): python and onnx both at concurrency 1, 8 and 16."""
    from serve_system import modelrepo
    from serve_system.experiment import plan
    from serve_system.experiment.spec.reader import load_spec

    root = Path(__file__).resolve().parents[2]
    repo = tmp / "rendered"
    modelrepo.render(root / "model_repository", repo, models=["food_classifier", "food_classifier_onnx"],
                     gpus=0, onnx_serving="python_shim",
                     standin=["food_classifier", "food_classifier_onnx"])  # a rehearsal node's stand-ins
    h = "node-1"
    manifest(run, "backends", [{"name": "most_throughput_at_8", "metric": "throughput", "goal": "max",
                                "at_load": 8}])
    (run / h).mkdir(parents=True)
    outputs = {"python": {1: "notebook_01.txt", 8: "notebook_02.txt", 16: "notebook_03.txt"},
               "python_batch16": {1: "notebook_04.txt"}, "onnx_batch16": {1: "notebook_08.txt"},
               "onnx": {1: "notebook_08.txt", 8: "notebook_09.txt", 16: "notebook_10.txt"},
               "onnx_2gpus": {8: "notebook_09.txt", 16: "notebook_10.txt"}}
    for i, v in enumerate(plan.plan(load_spec(root / "experiments" / "specs" / "backends.yml"), 0,
                                    repository=repo)):
        variant(run, h, v.name, v.config_pbtxt, model=v.model, notes=v.notes)
        for j, lv in enumerate(v.levels):
            level(run, h, v.name, lv.id, load=lv.load, stdout=NB / outputs[v.name][int(lv.load)],
                  batch_size=int(v.perf.get("batch_size", 1)), t0=1000.0 + 100 * i + 20 * j, cpus=4)
    return run
