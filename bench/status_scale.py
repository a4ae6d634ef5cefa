"""``serve-system status`` of 40 nodes vs 1 node on the fake Chameleon; prints the ratio (target <= 2x).

    .venv/bin/python bench/status_scale.py [--nodes 40] [--probe-delay 1.0] [--repeat 3]

The fake answers Chameleon's API at the HTTP level (tests/fakes/chameleon.py: the real python-chi
and OpenStack clients run). Each node's "sshd" is a loopback listener that holds the connection for
``--probe-delay`` seconds and closes it, standing in for a node that takes that long to answer the
SSH probe (SSH then fails, so every node shows as unhealthy: the bench times the board, not health).
Also prints the API calls one status call makes (one server, one port and one floating-IP listing).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import queue
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
os.environ["CHI_RESOURCE_API_URL"] = "http://resources.chi.fake"  # before python-chi is imported
for _name in [n for n in os.environ if n.startswith("OS_")]:
    del os.environ[_name]
os.environ.update(OS_APPLICATION_CREDENTIAL_ID="bench", OS_APPLICATION_CREDENTIAL_SECRET="bench",
                  USER="bench")

import requests_mock
from fakes.chameleon import FakeChameleon
from fakes.loopback import listen_all

from serve_system.commands.provision import script_main
from serve_system.provision.nodes import Node, write_inventory


class SlowSshd:
    """Accept on every address, hold each connection ``delay`` s, close (one port for all).

    One thread closes every held connection when its time is up (not a timer thread per
    connection: the stand-in's own costs must not grow with the node count it times)."""

    def __init__(self, addresses: list[str], delay: float) -> None:
        self.delay = delay
        self.socks, self.port = listen_all(addresses, backlog=64)
        self.stop = threading.Event()
        self.held: queue.Queue[tuple[float, socket.socket]] = queue.Queue()
        threading.Thread(target=self._close_when_due, daemon=True).start()
        for s in self.socks:
            threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, s: socket.socket) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = s.accept()
            except OSError:
                continue
            self.held.put((time.monotonic() + self.delay, conn))

    def _close_when_due(self) -> None:
        # connections arrive in deadline order (one delay for all): close each when its time comes
        while not self.stop.is_set():
            try:
                due, conn = self.held.get(timeout=0.2)
            except queue.Empty:
                continue
            time.sleep(max(0.0, due - time.monotonic()))
            conn.close()


def one_status(n: int, delay: float, work: Path) -> tuple[float, int, dict[str, int]]:
    addresses = [f"127.0.0.{i + 1}" for i in range(n)]
    sshd = SlowSshd(addresses, delay)
    fake = FakeChameleon(fip_pool=list(addresses))
    fake.add_lease("serve_system_bench")
    nodes = []
    with requests_mock.Mocker() as m:
        fake.install(m)
        net = "net-shared"
        for i, addr in enumerate(addresses):
            name = "node-serve-system-bench" if n == 1 else f"node-serve-system-bench-{i + 1}"
            sid, pid, fid = f"s{i}", f"p{i}", f"f{i}"
            fake.servers[sid] = {"id": sid, "name": name, "status": "ACTIVE", "key_name": "k", "fault": None,
                                 "image": {"id": "img-0", "links": []}, "flavor": {}, "metadata": {},
                                 "created": "2026-01-01T00:00:00Z", "updated": None, "tenant_id": "p",
                                 "user_id": "u", "hostId": "h", "OS-EXT-STS:vm_state": "active",
                                 "OS-EXT-STS:task_state": None, "locked": False, "tags": [],
                                 "description": None}
            fake.ports[pid] = {"id": pid, "device_id": sid, "network_id": net,
                               "mac_address": "fa:16:3e:00:00:01",
                               "fixed_ips": [{"subnet_id": "sub-shared", "ip_address": f"10.52.0.{i + 10}"}],
                               "status": "ACTIVE", "device_owner": "compute:nova"}
            fake.floatingips[fid] = {"id": fid, "floating_ip_address": addr, "port_id": pid,
                                     "status": "ACTIVE", "fixed_ip_address": f"10.52.0.{i + 10}",
                                     "floating_network_id": "net-public"}
            nodes.append(Node(name, addr, "cc", str(work / "nokey"), port=sshd.port))
        inv = work / f"hosts-{n}.yml"
        (work / "known_hosts").touch()
        write_inventory(nodes, inv, work / "known_hosts")
        before = len(fake.log)
        started = time.monotonic()
        with contextlib.redirect_stdout(io.StringIO()):
            rc = script_main("status", ["--json", "-i", str(inv), "--ssh-port", str(sshd.port),
                                        "--lease", "serve_system_bench", "--probe-timeout", "5"])
        seconds = time.monotonic() - started
        calls = [p for meth, p in fake.log[before:] if meth == "GET"]
    sshd.stop.set()
    assert rc == 1  # every probe fails against the stand-in sshd: the board says so
    counts = {k: sum(1 for p in calls if p.endswith(k))
              for k in ("/servers/detail", "/ports", "/floatingips")}
    return seconds, len(calls), counts


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=40)
    ap.add_argument("--probe-delay", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        one_status(1, args.probe_delay, work)  # warm-up: imports, python-chi session
        ones, manys = [], []
        for _ in range(args.repeat):
            ones.append(one_status(1, args.probe_delay, work))
            manys.append(one_status(args.nodes, args.probe_delay, work))
    t1 = statistics.median(r[0] for r in ones)
    tn = statistics.median(r[0] for r in manys)
    print(f"status, 1 node          : {t1:6.2f} s  "
          f"(median of {args.repeat}; GET calls {ones[0][1]}: {ones[0][2]})")
    print(f"status, {args.nodes} nodes        : {tn:6.2f} s  "
          f"(median of {args.repeat}; GET calls {manys[0][1]}: {manys[0][2]})")
    print(f"ratio {args.nodes} nodes / 1 node: {tn / t1:.2f}x   "
          f"(target <= 2x; each probe held {args.probe_delay:g} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
