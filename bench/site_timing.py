"""site.yml timings on rehearsal nodes, measured side by side in one run; prints ratios.

    .venv/bin/python bench/site_timing.py [--keep]

1. first vs second (idempotent) site.yml on one fresh node;
2. site.yml on one fresh node vs three fresh nodes at once (same play, forks in ansible.cfg).

Images are built (or reused) before any timing starts, so builds are not measured.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from integration.ansible_run import run_playbook

from serve_system.images import stack
from serve_system.provision.base import LaunchRequest, finish, quiet, server_names
from serve_system.provision.local import LocalProvider, teardown_nodes


def cluster(count: int, prefix: str, workdir: Path) -> Path:
    inv = workdir / prefix / "hosts.yml"
    kh = workdir / prefix / "known_hosts"
    nodes = LocalProvider(prefix, inv).launch(LaunchRequest(tuple(server_names(prefix, count))), quiet)
    finish(nodes, inv, kh, quiet)
    return inv


def timed_site(inv: Path) -> float:
    res = run_playbook("site.yml", inv)
    if res.rc != 0:
        raise SystemExit(f"site.yml failed on {inv}:\n{res.tail(40)}")
    return res.seconds


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", action="store_true", help="leave the nodes running")
    ap.add_argument("--only-rerun", action="store_true", help="only the first vs second run on one node")
    args = ap.parse_args()
    tag = secrets.token_hex(2)
    base = os.environ.get("SERVE_SYSTEM_IT_PREFIX") or "bench"
    prefixes = [f"{base}-{tag}-one", f"{base}-{tag}-three"]
    t0 = time.monotonic()
    stack.ensure_all(print)
    print(f"images ready ({time.monotonic() - t0:.0f} s, not part of the timings)")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            one = cluster(1, prefixes[0], work)
            first = timed_site(one)
            second = timed_site(one)
            parallel = None if args.only_rerun else timed_site(cluster(3, prefixes[1], work))
        print(f"site.yml, 1 fresh node        : {first:7.1f} s")
        print(f"site.yml, same node again     : {second:7.1f} s   "
              f"(second/first = {100 * second / first:.0f} %, target <= 25 %)")
        if parallel is not None:
            print(f"site.yml, 3 fresh nodes at once: {parallel:7.1f} s   "
                  f"(3 nodes / 1 node = {parallel / first:.2f}x, per node {parallel / 3:.1f} s)")
    finally:
        if not args.keep:
            for p in prefixes:
                teardown_nodes(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
