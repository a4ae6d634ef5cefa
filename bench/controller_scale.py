#!/usr/bin/env python3
"""The controller's cost of one decide round against the class size; prints the ratio (target <= 2x).

The ``experiment`` role asks ``serve-system decide RUN --host H`` of every host after every round
(roles/experiment/tasks/more.yml). This times one such round, every host asked (``--forks`` at once, as
Ansible's forks do), at each class size of ``--hosts``, and prints the CPU seconds of the round (the
decide processes' user + system time), per host, and the per-host cost at the largest class over the
smallest. Two kinds of run, both from recorded perf_analyzer output (tests/unit/report_trees.py, the
lab notebook's levels):

* ``auto``: ``repetitions: auto`` (each host judged on its own levels): the lab run's host (5 variants,
  3 repetitions, 21 levels, noisy) copied to every host, each with its own plan;
* ``sharded``: a halving search sharded over the hosts (one search decided on every host's records):
  a grid of 4 candidates per host dealt by ``serve-system plan``, its first rung measured on every host
  (its share and the reference).

Each level also gets ``--samples`` metrics pages (Triton's :8002/metrics as the runner samples it): their
parsing is most of what reading a host's records costs, so they set how heavy a host is.

With ``--before-repo DIR`` (a checkout of the code to compare with, e.g. ``git worktree add
/tmp/before <commit>``) the same rounds are timed with its package first on PYTHONPATH, the sides
alternating from one repeat to the next, each on its own copy of the run; the answers of both sides
are compared host by host (they must be the same).

    .venv/bin/python bench/controller_scale.py [--before-repo /tmp/before] [--hosts 5,20,40] \\
        [--repeat 2] [--kinds auto,sharded] [--forks 8]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "tests" / "unit"))

from report_trees import NB, gpu_metrics, lab_run, level, variant

from serve_system.cli import main as cli
from serve_system.node import plans, records
from serve_system.results import adaptive

GOAL = 2.0
AUTO = plans.AdaptivePlan(start=3, max=4)
#: a CPU model whose candidates vary instances and queue delay (a grid of 4 per host)
SPEC = """\
name: scale
model: m
base_config_text: |
  name: "m"
  platform: "onnxruntime_onnx"
  max_batch_size: 8
  input [ {{ name: "x" data_type: TYPE_FP32 dims: [ 4 ] }} ]
  output [ {{ name: "y" data_type: TYPE_FP32 dims: [ 2 ] }} ]
  instance_group [ {{ kind: KIND_CPU }} ]
load: {{mode: concurrency, levels: [8]}}
perf: {{batch_size: 1}}
sweep:
  name: "i{{instances}}_d{{delay}}"
  grid: {{instances: [1, 2, 3, 4], delay: {delays}}}
  config:
    instance_group: [{{count: "{{instances}}", kind: KIND_CPU}}]
    dynamic_batching: {{max_queue_delay_microseconds: "{{delay}}"}}
objectives:
  - name: most_throughput_at_8
    metric: throughput
    goal: max
    at_load: 8
shard: {{reference: first}}
search: {{strategy: halving, repetitions: 2, rungs: 3, budget: {{runs: 10000}}}}
"""


def metrics_page() -> str:
    """A Triton :8002/metrics page as the runner samples it (made up: GPU gauges from the tests' page, and
    the per-model counters, summaries and GPU power lines of five loaded models)."""
    lines = [gpu_metrics({"GPU-aaaa": 0.46, "GPU-bbbb": 0.41}, {"GPU-aaaa": 3900, "GPU-bbbb": 3800})]
    counters = ("nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
                "nv_inference_exec_count", "nv_inference_request_duration_us",
                "nv_inference_queue_duration_us",
                "nv_inference_compute_input_duration_us", "nv_inference_compute_infer_duration_us",
                "nv_inference_compute_output_duration_us", "nv_inference_pending_request_count")
    for c in counters:
        lines.append(f"# HELP {c} {c.replace('_', ' ')}\n# TYPE {c} counter")
        lines += [f'{c}{{model="model_{m}",version="1"}} {1000 * m + 7}' for m in range(5)]
    for g in ("GPU-aaaa", "GPU-bbbb"):
        lines += [f'nv_gpu_power_usage{{gpu_uuid="{g}"}} 71.2', f'nv_gpu_power_limit{{gpu_uuid="{g}"}} 250',
                  f'nv_energy_consumption{{gpu_uuid="{g}"}} 81234.5']
    lines += ["nv_cpu_memory_total_bytes 270000000000", "nv_cpu_memory_used_bytes 21000000000"]
    return "\n".join(lines) + "\n"


def sample(path: Path, samples: int, t0: float) -> None:
    """Write a level's metrics.jsonl: ``samples`` pages, one a second (the runner's default interval)."""
    page = metrics_page()
    path.write_text("".join(json.dumps({"t": t0 + i, "text": page}) + "\n" for i in range(samples)))


def names(n: int) -> list[str]:
    return [f"node-{i:02d}" for i in range(1, n + 1)]


def auto_run(root: Path, n: int, samples: int) -> Path:
    """``repetitions: auto`` on ``n`` hosts: the lab run's noisy host copied to each, its own plan;
    ``samples`` metrics pages per level."""
    src = lab_run(root / "lab-src" / "r1", repetitions=3, spread=(1.0, 0.7, 1.3))
    for ldir in sorted((src / "node-1").glob("*/*/")):
        if (ldir / "level.json").is_file():
            sample(ldir / "metrics.jsonl", samples, 1000.0)
    run = root / "auto" / "r1"
    run.mkdir(parents=True)
    shutil.copy(src / "manifest.json", run / "manifest.json")
    loads = {"baseline": (1, 8, 16), "dynbatch": (8,), "gpus01_2x2": (8,), "gpus01_4x2": (8,), "onnx": (1,)}
    order = list(loads)
    for i, host in enumerate(names(n)):
        shutil.copytree(src / "node-1", run / host)
        variants = [plans.VariantPlan(
            name=v, model="food_classifier", version="1", config_pbtxt="", load_body={}, notes=[],
            input_data=None, perf={},
            levels=[plans.LevelPlan(id=f"c{load}_r{r}", mode="concurrency", load=load, repetition=r,
                                      argv=["perf_analyzer"], retry_argv=[])
                    for r in range(1, 5) for load in ls]) for v, ls in loads.items()]
        rounds = [order[(r + i) % len(order):] + order[:(r + i) % len(order)] for r in range(4)]
        records.write(run / host / "plan.json", plans.HostPlan(
            host=host, gpus=2, experiment="lab", run_id="r1", variants=variants, rounds=rounds,
            adaptive=AUTO))
    shutil.rmtree(root / "lab-src")
    return run


def sharded_run(root: Path, n: int, samples: int) -> Path:
    """A halving search sharded over ``n`` hosts (4 candidates a host), its first rung measured;
    ``samples`` metrics pages per level."""
    root.mkdir(parents=True)
    spec = root / "spec.yml"
    spec.write_text(SPEC.format(delays=json.dumps([100 * (k + 1) for k in range(n)])))
    run = root / "scale" / "r1"
    args = ["plan", str(spec), "--run-dir", str(run), "--quiet"]
    for host in names(n):
        args += ["--host", f"{host}=0"]
    if cli(args) != 0:
        raise SystemExit("controller_scale: planning the sharded search failed")
    for k, host in enumerate(names(n)):
        call = adaptive.next_round(run, host).call
        assert call is not None, f"{host}: no first call"
        reps = [int(a.split("=")[1]) for a in call.start if a.startswith("--repetition=")]
        for v in call.variants:
            variant(run, host, v, None)
            i, d = (int(x[1:]) for x in v.split("_"))
            for r in reps:  # a hill in the instances, flat in the delay; each host a little faster
                speed = (1.0 + 0.3 * i - 0.06 * i * i + 0.0001 * d) * (1 + 0.01 * (k % 5) + 0.02 * (r % 2))
                ldir = level(run, host, v, f"c8_r{r}", load=8, stdout=NB / "notebook_02.txt", repetition=r,
                             speed=speed, t0=1000.0 + 20 * r)
                sample(ldir / "metrics.jsonl", samples, 1000.0 + 20 * r)
    shutil.rmtree(run / adaptive.KEPT, ignore_errors=True)
    return run


def one_round(repo: Path, run: Path, forks: int) -> tuple[float, float, dict[str, str]]:
    """Every host's decide, ``forks`` at once: (CPU seconds of the round, wall seconds, answers)."""
    shutil.rmtree(run / adaptive.KEPT, ignore_errors=True)  # what a previous timing kept: a new round
    env = {**os.environ, "PYTHONPATH": str(repo / "src")}
    hosts = sorted(p.name for p in run.iterdir() if (p / "plan.json").is_file())

    def ask(host: str) -> tuple[str, str]:
        p = subprocess.run([sys.executable, "-m", "serve_system.cli", "decide", str(run), "--host", host],
                           env=env, capture_output=True, text=True, check=False)
        if p.returncode != 0:
            raise SystemExit(f"controller_scale: decide --host {host} ({repo}) failed: {p.stderr.strip()}")
        return host, p.stdout

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    with ThreadPoolExecutor(forks) as pool:
        answers = dict(pool.map(ask, hosts))
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, answers


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before-repo", type=Path, help="a checkout of the code to compare with")
    ap.add_argument("--hosts", default="5,20,40", help="class sizes, comma-separated (default 5,20,40)")
    ap.add_argument("--kinds", default="auto,sharded", help="auto, sharded or both (default both)")
    ap.add_argument("--repeat", type=int, default=2, help="rounds timed per side and size (default 2)")
    ap.add_argument("--samples", type=int, default=5,
                    help="metrics pages per level (default 5: main's decide then costs about what the issue "
                         "measured on copies of a real run, ~0.1 s more a host for each host of the class)")
    ap.add_argument("--forks", type=int, default=os.cpu_count() or 2,
                    help="decide calls at once (Ansible's forks; default: the CPUs)")
    args = ap.parse_args()
    sizes = sorted({int(x) for x in args.hosts.split(",")})
    kinds = [k for k in ("auto", "sharded") if k in args.kinds.split(",")]
    sides = ({"before": args.before_repo.resolve()} if args.before_repo else {}) | {"after": HERE}
    for side, repo in sides.items():
        if not (repo / "src" / "serve_system" / "cli.py").is_file():
            raise SystemExit(f"controller_scale: {repo}: no src/serve_system/ (not a serve-system checkout)")
    print(f"controller_scale: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start; "
          f"forks {args.forks}; sides: " + ", ".join(f"{s} = {r}" for s, r in sides.items()), flush=True)
    cpu: dict[tuple[str, int, str], list[float]] = {}
    differ = 0
    with tempfile.TemporaryDirectory(prefix="controller-scale-") as tmp:
        for kind in kinds:
            for n in sizes:
                build = auto_run if kind == "auto" else sharded_run
                built = build(Path(tmp) / f"{kind}{n}" / "build", n, args.samples)
                runs = {}
                for side in sides:
                    runs[side] = Path(tmp) / f"{kind}{n}" / side / "r1"
                    shutil.copytree(built, runs[side], symlinks=True)
                said: dict[str, dict[str, str]] = {}
                for i in range(args.repeat):
                    for side in (list(sides) if i % 2 == 0 else list(sides)[::-1]):
                        c, w, said[side] = one_round(sides[side], runs[side], args.forks)
                        cpu.setdefault((kind, n, side), []).append(c)
                        print(f"{kind:>7} {n:3d} hosts {side:>6}: round {c:6.1f} CPU s "
                              f"({c / n:5.2f} a host), wall {w:6.1f} s, "
                              f"load average {os.getloadavg()[0]:.1f}", flush=True)
                first = json.loads(said["after"][min(said["after"])])
                print(f"{kind:>7} {n:3d} hosts: e.g. {first['text'][:100]}", flush=True)
                if "before" in said:
                    bad = [h for h in said["after"] if json.loads(said["after"][h]) != json.loads(
                        said["before"].get(h, "null"))]
                    differ += len(bad)
                    print(f"{kind:>7} {n:3d} hosts: answers " + ("the same on both sides" if not bad else
                          f"DIFFER on {len(bad)} host(s): {', '.join(bad[:5])}"), flush=True)
    print("\nper host at the largest class / per host at the smallest (median CPU seconds of the round), "
          f"target <= {GOAL:g}x:")
    lo, hi = sizes[0], sizes[-1]
    for kind in kinds:
        parts = []
        for side in sides:
            a = statistics.median(cpu[(kind, lo, side)]) / lo
            b = statistics.median(cpu[(kind, hi, side)]) / hi
            parts.append(f"{side} {b:.2f} / {a:.2f} s = {b / a:.2f}x" + (
                "" if side == "before" else f" ({'met' if b / a <= GOAL else 'NOT met'})"))
        print(f"  {kind:>7}: " + "; ".join(parts))
        if "before" in sides:
            b = statistics.median(cpu[(kind, hi, "before")])
            a = statistics.median(cpu[(kind, hi, "after")])
            print(f"  {kind:>7}: one round at {hi} hosts: before {b:.1f} CPU s, after {a:.1f} CPU s "
                  f"({b / a:.1f}x less)")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
