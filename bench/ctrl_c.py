"""How long ``serve-system status --watch`` takes to end after Ctrl-C with its SSH probes in flight
(goal: within 2 s, exit status 130); prints each run's seconds and the worst run's ratio to the goal.

    .venv/bin/python bench/ctrl_c.py [--runs 20] [--nodes 2] [--to group|process]

Each run starts the real command in a process of its own (``tests/unit/chi_command.py`` serves the
HTTP-level fake Chameleon there), with ``--nodes`` servers whose "sshd" is a loopback listener that
accepts and never answers (real ssh waits for a banner: a probe that hangs). Once every probe is
connected, SIGINT goes to the command's process group (what a terminal's Ctrl-C does) or, with
``--to process``, to the command alone (``kill -INT``); the time until the process has exited is
measured, and the probes' connections must be closed by then (killed, not waited for).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "unit"))
os.environ["CHI_RESOURCE_API_URL"] = "http://resources.chi.fake"  # before python-chi is imported
for _name in [n for n in os.environ if n.startswith("OS_")]:
    del os.environ[_name]
os.environ.update(OS_APPLICATION_CREDENTIAL_ID="bench", OS_APPLICATION_CREDENTIAL_SECRET="bench",
                  USER="bench")

from chi_harness import SilentListener
from fakes.chameleon import FakeChameleon

from serve_system.provision.nodes import Node, write_inventory

GOAL_S = 2.0
HARNESS = REPO / "tests" / "unit" / "chi_command.py"


def one_run(work: Path, nodes: int, to: str) -> tuple[float, int, int]:
    """(seconds from SIGINT to exit, exit status, probe connections still open after it)."""
    addresses = [f"127.0.0.{i}" for i in range(1, nodes + 1)]
    silent = SilentListener(addresses)
    try:
        fake = FakeChameleon(fip_pool=[])
        fake.add_lease("serve_system_bench")
        inventory = []
        for i, addr in enumerate(addresses, start=1):
            s = fake.add_server(f"node-serve-system-bench-{i}", floating_ip=addr)
            inventory.append(Node(s["name"], addr, "cc", str(work / "nokey"), port=silent.port))
        write_inventory(inventory, work / "hosts.yml")
        fake.dump(work / "fake.json")
        proc = subprocess.Popen(
            [sys.executable, str(HARNESS), str(work / "fake.json"), "status", "--watch", "1",
             "--lease", "serve_system_bench", "-i", str(work / "hosts.yml"), "--ssh-port", str(silent.port),
             "--probe-timeout", "120"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while silent.accepted() < nodes and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            if proc.poll() is not None or silent.accepted() < nodes:
                raise SystemExit(f"the probes never connected (exit {proc.poll()})")
            sent = time.monotonic()
            if to == "group":
                os.killpg(proc.pid, signal.SIGINT)
            else:
                os.kill(proc.pid, signal.SIGINT)
            rc = proc.wait(timeout=120)
            seconds = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        return seconds, rc, silent.open_peers(wait=1.0)
    finally:
        silent.close()


def main() -> int:
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:  # started as a background job: the commands it
        signal.signal(signal.SIGINT, signal.default_int_handler)  # times would ignore their Ctrl-C too
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--to", choices=("group", "process"), default="group")
    args = ap.parse_args()
    results = []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            seconds, rc, still_open = one_run(Path(tmp), args.nodes, args.to)
        results.append((seconds, rc, still_open))
        print(f"run {i + 1:2d}: exit {rc} after {seconds:5.2f} s, probes left open: {still_open}  "
              f"(load {os.getloadavg()[0]:.1f})", flush=True)
    times = [r[0] for r in results]
    within = sum(1 for s, rc, o in results if s <= GOAL_S and rc == 130 and o == 0)
    print(f"SIGINT to the {args.to}, {args.nodes} probes in flight: median {statistics.median(times):.2f} s, "
          f"worst {max(times):.2f} s; {within} of {len(results)} runs ended within {GOAL_S:g} s with 130 "
          f"and no probe left; worst / goal = {max(times) / GOAL_S:.2f}x")
    return 0 if within == len(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
