#!/usr/bin/env python3
"""Variant switch on a rehearsal node: the lab's rebuild cycle vs a repository-API reload (one run).

Two configurations of the food classifier (as the node serves it, and the same with dynamic
batching) are alternated N times each way, on the node itself (timed there, no SSH in the numbers):

* lab cycle: the model baked into an image (``COPY models /models``): write config.pbtxt ->
  ``docker compose build`` -> ``docker compose up -d --force-recreate`` -> READY (a second Triton on
  127.0.0.1:18000, its own compose project, next to the serve stack);
* API reload, as the runner switches variants: ``POST /v2/repository/models/NAME/load``
  with the config as an override (Triton's own model load: the time of that call) -> READY.

Prints medians, the lab cycle / reload ratio and the reload's switch / Triton's own load ratio
(target: <= 1.2). ``--run-dir`` adds the same ratio from a run's variant records.

    .venv/bin/python bench/variant_switch.py NODE [N] [--run-dir results/dynbatch/RUN]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

NODE_SCRIPT = r'''
import json, os, shutil, subprocess, sys, time, urllib.request
N = int(sys.argv[1])
ROOT = "/opt/serve-system/bench_switch"
API = "http://127.0.0.1:8000"
MODEL = "food_classifier"
def call(method, url, body=None, timeout=120):
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError as e:
        return -1, str(e).encode()
def ready(base, deadline=180):
    end = time.time() + deadline
    while time.time() < end:
        if call("GET", f"{base}/v2/models/{MODEL}/ready", timeout=2)[0] == 200:
            return
        time.sleep(0.05)
    raise SystemExit(f"{base}: {MODEL} not READY")
def sh(*argv):
    subprocess.run(argv, check=True, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
image = subprocess.run(["docker", "inspect", "--format", "{{.Config.Image}}", "triton_server"], check=True,
                       capture_output=True, text=True).stdout.strip()
args = json.loads(subprocess.run(["docker", "inspect", "--format", "{{json .Config.Cmd}}", "triton_server"],
                                 check=True, capture_output=True, text=True).stdout)
backend = next(a for a in args if a.startswith("--backend-directory"))
shutil.rmtree(ROOT, ignore_errors=True)
shutil.copytree(f"/opt/serve-system/model_repository/{MODEL}", f"{ROOT}/models/{MODEL}")
base_txt = open(f"{ROOT}/models/{MODEL}/config.pbtxt").read()
texts = [base_txt, base_txt + "\ndynamic_batching {\n  preferred_batch_size: [4, 8]\n"
                              "  max_queue_delay_microseconds: 100\n}\n"]
open(f"{ROOT}/Dockerfile", "w").write(f"FROM {image}\nCOPY models /models\n")
open(f"{ROOT}/compose.yml", "w").write(json.dumps({"services": {"triton_bench": {
    "build": ".", "image": "serve-system-bench-switch:latest", "container_name": "triton_bench",
    "command": ["tritonserver", "--model-repository=/models", backend, "--model-control-mode=explicit",
                f"--load-model={MODEL}"], "ports": ["127.0.0.1:18000:8000"], "shm_size": "1g"}}}))
lab = []
try:
    for i in range(2 * N + 1):
        open(f"{ROOT}/models/{MODEL}/config.pbtxt", "w").write(texts[i % 2])
        t0 = time.time()
        sh("docker", "compose", "-p", "benchswitch", "build", "-q")
        sh("docker", "compose", "-p", "benchswitch", "up", "-d", "--force-recreate")
        ready("http://127.0.0.1:18000")
        if i:  # the first one only builds the cache
            lab.append(time.time() - t0)
finally:
    subprocess.run(["docker", "compose", "-p", "benchswitch", "down"], cwd=ROOT, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
_, raw = call("GET", f"{API}/v2/models/{MODEL}/config")
base = json.loads(raw)
configs = [dict(base),
           dict(base, dynamic_batching={"preferred_batch_size": [4, 8], "max_queue_delay_microseconds": 100})]
configs[0].pop("dynamic_batching", None)
own, switch = [], []
for i in range(2 * N):
    t0 = time.time()
    code, body = call("POST", f"{API}/v2/repository/models/{MODEL}/load",
                      {"parameters": {"config": json.dumps(configs[i % 2])}})
    t1 = time.time()
    if code != 200:
        raise SystemExit(f"load refused: {body[:300]!r}")
    ready(API)
    own.append(t1 - t0)
    switch.append(time.time() - t0)
call("POST", f"{API}/v2/repository/models/{MODEL}/unload", {})
call("POST", f"{API}/v2/repository/models/{MODEL}/load", {})
ready(API)
print(json.dumps({"lab": lab, "own": own, "switch": switch}))
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("node", help="rehearsal node (its podman container name) with the serve stack up")
    ap.add_argument("n", nargs="?", type=int, default=3, help="switches each way (default 3)")
    ap.add_argument("--run-dir", type=Path, help="also read switch/load seconds from a run's variant records")
    args = ap.parse_args()
    proc = subprocess.run(["podman", "exec", "-i", args.node, "python3", "-", str(args.n)], input=NODE_SCRIPT,
                          capture_output=True, text=True, check=False, timeout=3600)
    if proc.returncode != 0:
        print(proc.stderr[-2000:], file=sys.stderr)
        return 1
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    lab, own, switch = (statistics.median(data[k]) for k in ("lab", "own", "switch"))
    print(f"lab cycle (edit, compose build, up --force-recreate, READY): median {lab:.2f} s "
          f"over {len(data['lab'])}")
    print(f"API reload until READY (the runner's switch):           median {switch:.2f} s "
          f"over {len(data['switch'])}")
    print(f"Triton's own model load (the load call):               median {own:.2f} s")
    print(f"lab cycle / API reload = {lab / switch:.2f}x; "
          f"switch / Triton's own load = {switch / own:.2f}x (target <= 1.2)")
    if args.run_dir:
        for vj in sorted(args.run_dir.glob("*/*/variant.json")):
            v = json.loads(vj.read_text())
            if v.get("load_seconds") and v.get("switch_seconds"):
                print(f"run {vj.parent.parent.name}/{v['name']}: switch {v['switch_seconds']:.2f} s, "
                      f"Triton's load {v['load_seconds']:.2f} s, "
                      f"ratio {v['switch_seconds'] / v['load_seconds']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
