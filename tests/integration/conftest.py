"""Shared rehearsal nodes for every integration test (one set per pytest session).

Fixture API (other test modules use these; do not start nodes of your own; the one exception is
test_upstream_path.py, which needs a node without Docker and starts one of its own):

``rehearsal_cluster`` (session) -> :class:`RehearsalCluster` with

* ``inventory``: Path of an inventory file (group ``serve_nodes``) written with serve_system.provision.nodes;
* ``known_hosts``: Path of its known_hosts file;
* ``nodes``: list[serve_system.provision.nodes.Node] (2 nodes, ``<prefix>-1`` and ``<prefix>-2``, no GPUs);
* ``site``: the PlaybookResult of the one ``playbooks/site.yml`` run on both nodes (already
  succeeded when the fixture returns: Triton serves food_classifier and food_classifier_onnx, the
  latter through the ONNX shim, with stand-in weights);
* ``playbook(name, *args, limit=None)``: run another playbook of playbooks/ on this inventory;
* ``host(node)``: a testinfra host (ssh, sudo) for a Node or a node name;
* ``exec(node, *argv)``: run a command on a node as root through ``podman exec`` (no SSH).

``windows`` -> :class:`~.windows.Windows`: the perf_analyzer windows of the test's
``@pytest.mark.windows(KIND)`` marker (every integration test has one; windows.py decides the windows).

The session's setups (the cluster, and the prestartable module fixtures of test_upstream_path.py and
test_runner_local.py) start in the background as soon as the tests are collected, while the unit,
bad-input and fuzz tests run first (prestart.py).

Node 1 has a pre-seeded /etc/docker/daemon.json holding an ``nvidia`` runtime entry before site.yml
runs (to prove the docker role merges rather than overwrites). On node 2 a process holds dpkg's locks
(as apt and dpkg take them) for ``DPKG_HOLD_S`` seconds from just before site.yml starts, as
unattended-upgrades does on a first boot: the play waits for it (role apt_guard); ``dpkg_hold`` says who
held it and what apt said meanwhile.

Environment: ``SERVE_SYSTEM_IT_PREFIX`` sets the node-name prefix (default ``it-<random>``);
``SERVE_SYSTEM_IT_KEEP=1`` leaves the nodes running after the session (for debugging).
Images are built once per recipe hash and cached in ``~/.cache/serve-system`` (or
``$SERVE_SYSTEM_CACHE``), so only the first session on a machine pays for them.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from serve_system.podman import podman
from serve_system.provision.base import LaunchRequest, finish, quiet, server_names
from serve_system.provision.local import LocalProvider
from serve_system.provision.nodes import Node

from .ansible_run import PlaybookResult, run_playbook
from .prestart import BACKGROUND, order, prestartable, wanted
from .windows import BY_KIND, Windows

NODE_COUNT = 2
#: daemon.json on node 1 before site.yml: what nvidia-ctk writes on a GPU node
PRESEEDED_DAEMON_JSON = {
    "runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}},
}
#: seconds node 2's dpkg locks are held from just before site.yml starts (apt's own wait is 60 s)
DPKG_HOLD_S = 120
#: where the holder lives on the node; it takes dpkg's locks as apt and dpkg do (fcntl write lock on the
#: whole file: `flock(1)` would not keep apt out), says so, and sleeps
DPKG_HOLDER = "/run/serve-system-it-hold-dpkg-lock"
_DPKG_HOLDER_PY = """\
import fcntl, os, sys, time
paths = ("/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock")
fds = [os.open(p, os.O_RDWR | os.O_CREAT, 0o640) for p in paths]
for fd in fds:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("locked", flush=True)
time.sleep(float(sys.argv[1]))
"""


@dataclass(frozen=True)
class DpkgHold:
    """dpkg's locks held on ``node`` by process ``pid`` for ``seconds`` from just before site.yml ran;
    ``apt_said``: what ``apt-get check`` said meanwhile (apt's own refusal, naming the holder)."""

    node: str
    pid: int
    seconds: int
    apt_said: str


@dataclass
class RehearsalCluster:
    inventory: Path
    known_hosts: Path
    nodes: list[Node]
    site: PlaybookResult
    dpkg_hold: DpkgHold | None = None

    def playbook(self, name: str, *args: str, limit: str | None = None) -> PlaybookResult:
        return run_playbook(name, self.inventory, *args, limit=limit)

    def node(self, name_or_node: str | Node) -> Node:
        name = name_or_node.name if isinstance(name_or_node, Node) else name_or_node
        return next(n for n in self.nodes if n.name == name)

    def host(self, node: str | Node) -> Any:
        import testinfra

        n = self.node(node)
        return testinfra.get_host(
            f"ssh://{n.user}@{n.address}:{n.port}",
            ssh_identity_file=n.key_path,
            ssh_extra_args=f"-o UserKnownHostsFile={self.known_hosts} -o StrictHostKeyChecking=yes",
            sudo=True,
            controlpersist=120,
        )

    def exec(self, node: str | Node, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return podman("exec", self.node(node).name, *argv, check=check, timeout=300)


def _preseed_daemon_json(node: Node) -> None:
    podman("exec", "-i", node.name, "sh", "-c", "mkdir -p /etc/docker && cat > /etc/docker/daemon.json",
           input=json.dumps(PRESEEDED_DAEMON_JSON, indent=2), timeout=60)


def _hold_dpkg_lock(node: Node, seconds: int) -> DpkgHold:
    """Start the holder on ``node`` (detached, it outlives this exec), wait until it holds the locks,
    and ask apt whether it can lock: one podman exec."""
    script = (
        f"set -e; cat > {DPKG_HOLDER}; "
        f"nohup python3 {DPKG_HOLDER} {seconds} </dev/null >{DPKG_HOLDER}.out 2>&1 & pid=$!; "
        f"n=0; until grep -q locked {DPKG_HOLDER}.out; do n=$((n+1)); "
        f"if [ $n -gt 300 ]; then cat {DPKG_HOLDER}.out >&2; exit 3; fi; sleep 0.1; done; "
        "echo \"holder $pid\"; apt-get check 2>&1 || true")
    done = podman("exec", "-i", node.name, "sh", "-c", script, input=_DPKG_HOLDER_PY, timeout=60)
    first, _, apt_said = done.stdout.partition("\n")
    return DpkgHold(node.name, int(first.removeprefix("holder ")), seconds, apt_said.strip())


@prestartable(scope="session")
def rehearsal_cluster(workdir: Path) -> Iterator[RehearsalCluster]:
    """The shared rehearsal nodes, site.yml run on them (set up in the background: prestart.py)."""
    prefix = os.environ.get("SERVE_SYSTEM_IT_PREFIX") or f"it-{secrets.token_hex(3)}"
    inventory = workdir / "hosts.yml"
    known_hosts = workdir / "known_hosts"
    provider = LocalProvider(prefix, inventory)
    try:
        nodes = provider.launch(LaunchRequest(tuple(server_names(prefix, NODE_COUNT))), quiet)
        finish(nodes, inventory, known_hosts, quiet)
        _preseed_daemon_json(nodes[0])
        hold = _hold_dpkg_lock(nodes[1], DPKG_HOLD_S)
        site = run_playbook("site.yml", inventory)
        if site.rc != 0:
            pytest.fail(f"site.yml failed on the rehearsal nodes (rc {site.rc}):\n{site.tail(80)}")
        yield RehearsalCluster(inventory, known_hosts, nodes, site, hold)
    finally:
        if os.environ.get("SERVE_SYSTEM_IT_KEEP") != "1":
            provider.teardown()


@pytest.fixture
def windows(request: pytest.FixtureRequest) -> Windows:
    """The windows this test measures with, from its ``windows`` marker (windows.py)."""
    mark = request.node.get_closest_marker("windows")
    kind = mark.args[0] if mark is not None and mark.args else None
    if kind not in BY_KIND:
        pytest.fail(f"{request.node.nodeid}: mark it @pytest.mark.windows(KIND), KIND one of "
                    f"{sorted(BY_KIND)}")
    return BY_KIND[kind]


def _is_integration(item: pytest.Item) -> bool:
    return Path(__file__).parent in Path(str(item.fspath)).parents


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test under tests/integration carries the ``integration`` marker, and runs after every
    other test (prestart.py: their setups run in the background meanwhile)."""
    for item in items:
        if _is_integration(item):
            item.add_marker(pytest.mark.integration)
    order(items, _is_integration)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The collected integration tests' shared setups start in the background."""
    if session.config.option.collectonly or os.environ.get("SERVE_SYSTEM_IT_PRESTART") == "0":
        return
    BACKGROUND.start(wanted(session.items))


def pytest_sessionfinish(session: pytest.Session) -> None:
    BACKGROUND.finish()
