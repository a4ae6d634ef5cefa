#!/usr/bin/env python3
"""The rehearsal images built from nothing (a fresh machine's first `launch`), before vs after, side by side.

Each run builds every rehearsal image (node, Triton, client, FastAPI, with the stack's archives:
``serve_system.images.stack.ensure_all`` of that checkout) into an empty cache and an empty podman
storage of its own (``SERVE_SYSTEM_CACHE`` and ``CONTAINERS_STORAGE_CONF`` under ``--work``), so the
shared ``~/.cache/serve-system`` and podman's default storage are never touched; both are removed
afterwards. The two sides alternate (after, before, before, after, ...) to spread the load of a shared
machine over both. What is *not* fresh: the apt packages and the ``.venv`` of the machine itself; the
builds still download every .deb and wheel they need (debootstrap, pip, apt inside the builds).

Printed: each run's wall time, each side's mean, the ratio after/before, whether both sides built the
same tags (the recipes' hashes), and how long a second run of the after side takes (everything reused).

    .venv/bin/python bench/image_build.py --before-repo /path/to/a/checkout/of/main [--pairs 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
CONTAINERS_CONF = HERE / "src" / "serve_system" / "images" / "containers.conf"
BUILD = ("import sys, time\n"
         "from serve_system.images import stack\n"
         "t0 = time.monotonic()\n"
         "stack.ensure_all(lambda m: print(f'{time.monotonic() - t0:6.1f} s  {m}', flush=True))\n")


def storage_conf(root: Path) -> Path:
    conf = root / "storage.conf"
    root.mkdir(parents=True, exist_ok=True)
    conf.write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{root / "graph"}"\n'
                    f'runroot = "{root / "run"}"\n', encoding="utf-8")
    return conf


def env_for(repo: Path, root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(repo / "src")
    env["SERVE_SYSTEM_CACHE"] = str(root / "cache")
    env["CONTAINERS_STORAGE_CONF"] = str(storage_conf(root))
    env["CONTAINERS_CONF"] = str(CONTAINERS_CONF)
    return env


def build(repo: Path, root: Path, log: Path) -> float:
    """Wall seconds of every image built by ``repo``'s code into ``root``'s cache and storage."""
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as fh:
        proc = subprocess.run([sys.executable, "-c", BUILD], env=env_for(repo, root), cwd=repo,
                              stdout=fh, stderr=subprocess.STDOUT, check=False)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
        raise SystemExit(f"build with {repo} failed (exit {proc.returncode}); log {log}: " + " | ".join(tail))
    return wall


def own_podman(root: Path) -> list[str]:
    """podman on ``root``'s storage only (explicit paths: never the machine's default storage)."""
    return ["podman", "--root", str(root / "graph"), "--runroot", str(root / "run"), "--storage-driver",
            "overlay"]


def check_storage(root: Path, env: dict[str, str]) -> None:
    """The builds' podman (through CONTAINERS_STORAGE_CONF) uses ``root``'s storage, not the default."""
    proc = subprocess.run(["podman", "info", "--format", "{{.Store.GraphRoot}}"], env=env,
                          capture_output=True, text=True, check=True)
    if proc.stdout.strip() != str(root / "graph"):
        raise SystemExit(f"image_build: podman would build into {proc.stdout.strip()}, not {root / 'graph'}")


def tags(root: Path) -> set[str]:
    proc = subprocess.run([*own_podman(root), "images", "--format", "{{.Repository}}:{{.Tag}}"],
                          capture_output=True, text=True, check=True)
    return {ln for ln in proc.stdout.split() if "serve-system-" in ln}


def remove(root: Path) -> None:
    """Remove the run's images (its own storage only), unmount what podman left mounted, delete it."""
    if (root / "graph").is_dir():
        subprocess.run([*own_podman(root), "rmi", "--all", "--force"], capture_output=True, check=False)
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        if point == str(root) or point.startswith(str(root) + "/"):
            mounts.append(point)
    for point in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", point], check=False, capture_output=True)
    shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before-repo", type=Path, required=True, help="a checkout of the code to compare with")
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/serve-system-bench-images"),
                    help="where each run's cache and podman storage go (removed afterwards)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("image_build: the builds need root (debootstrap, podman)")
    sides = {"before": args.before_repo.resolve(), "after": HERE}
    walls: dict[str, list[float]] = {"before": [], "after": []}
    built: dict[str, set[str]] = {}
    args.work.mkdir(parents=True, exist_ok=True)
    logs = args.work / "logs"
    logs.mkdir(exist_ok=True)
    for i in range(args.pairs):
        order = ["after", "before"] if i % 2 == 0 else ["before", "after"]
        for side in order:
            root = args.work / f"{side}-{i}"
            remove(root)
            check_storage(root, env_for(sides[side], root))
            try:
                wall = build(sides[side], root, logs / f"{side}-{i}.log")
                made = tags(root)
                if built.setdefault(side, made) != made:
                    print(f"  note: {side} run {i + 1} built other tags than its first run", flush=True)
                if side == "after" and i == 0:
                    again = build(sides[side], root, logs / f"{side}-{i}-again.log")
                    print(f"  after, second run on the same cache and storage (all reused): {again:.1f} s",
                          flush=True)
            finally:
                remove(root)
            walls[side].append(wall)
            print(f"pair {i + 1} {side:>6}: {wall:6.1f} s  (log {logs / f'{side}-{i}.log'})", flush=True)
    for side in ("before", "after"):
        print(f"{side:>6} ({sides[side]}): " + ", ".join(f"{w:.0f}" for w in walls[side])
              + f" s, mean {statistics.mean(walls[side]):.0f} s")
    b, a = statistics.mean(walls["before"]), statistics.mean(walls["after"])
    print(f"after/before: {a / b:.2f}x  ({b - a:.0f} s saved per fresh build)")
    diff = sorted(built.get("before", set()) ^ built.get("after", set()))
    print("same tags on both sides: " + ("yes" if not diff else f"NO: {diff}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
