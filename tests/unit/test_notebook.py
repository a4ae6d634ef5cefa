"""notebooks/serve_system_lab.ipynb, headless: its Chameleon steps against the HTTP-level fake site.

The shape, the cheapest honest one: the notebook's own cells run unchanged in a real IPython kernel
(nbclient; tests/notebook_exec.py). Its Chameleon steps (lease, launch with the status board, teardown)
need a site, not a node: they run here, against the fake Chameleon (tests/fakes/chameleon.py) served
inside the kernel by a harness cell put before them, at the HTTP level, as tests/unit/chi_command.py
serves it to a command in a process of its own (the real python-chi and OpenStack clients run); the SSH
waits are answered by loopback listeners (chi_harness.py). Its node steps (configure, experiment,
report) need a node and no site: tests/integration/test_notebook.py runs them with provider local on the
session's shared rehearsal nodes. Parameters are set as papermill sets them (a cell after "parameters").
"""

from __future__ import annotations

import json
from pathlib import Path

import notebook_exec  # tests/, on the path through chi_harness
import yaml
from chi_harness import ADDRESSES, LoopbackListener
from fakes.chameleon import FakeChameleon

TESTS = Path(__file__).resolve().parents[1]
PREFIX = "node-serve-system-tester"

#: served inside the kernel, before the notebook's first cell: the fake's state from the test, through
#: requests-mock, before python-chi is imported (it reads CHI_RESOURCE_API_URL once, at import)
BEFORE = """
import sys
sys.path.insert(0, {tests!r})
import requests_mock
from fakes.chameleon import FakeChameleon
_fake = FakeChameleon.load(__import__("pathlib").Path({state!r}))
_mocker = requests_mock.Mocker()
_fake.install(_mocker)
_mocker.start()
"""
AFTER = """
_mocker.stop()
_fake.dump(__import__("pathlib").Path({state!r}))
"""


def test_lease_launch_and_teardown_cells_against_the_fake_site(chi_env: Path) -> None:
    work = chi_env
    state = work / "fake.json"
    site = FakeChameleon(fip_pool=list(ADDRESSES))
    site.lease_status_script["serve_system_tester"] = ["PENDING", "ACTIVE"]  # Blazar starts it a moment later
    site.dump(state)
    sshd = LoopbackListener(ADDRESSES)
    inventory = work / "hosts.yml"
    try:
        nb = notebook_exec.run(
            ("lease", "launch", "teardown"),
            {"KEY_NAME": "mykey", "KEY_PATH": str(work / "id_test"), "INVENTORY": str(inventory), "COUNT": 2,
             "LAUNCH_OPTIONS": {"ssh_port": sshd.port, "ssh_timeout": 5, "poll": 0.01, "server_timeout": 5}},
            work, before=BEFORE.format(tests=str(TESTS), state=str(state)),
            after=AFTER.format(state=str(state)), timeout=300)
    finally:
        sshd.close()
    fake = FakeChameleon.load(state)

    # lease: one lease of two gpu_p100 nodes, c11-13 excluded (the parameters cell's default), shown
    assert len(fake.lease_create_bodies) == 1
    body = fake.lease_create_bodies[0]
    (res,) = body["reservations"]
    assert body["name"] == "serve_system_tester" and res["min"] == res["max"] == 2
    assert json.loads(res["resource_properties"]) == [
        "and", ["!=", "$node_name", "c11-13"], ["==", "$node_type", "gpu_p100"]]
    assert "serve_system_tester" in notebook_exec.text(nb, "lease")

    # launch: two servers on the lease, the inventory written with their floating IPs, the board shown
    assert sorted(b["server"]["name"] for b in fake.server_create_bodies) == [f"{PREFIX}-1", f"{PREFIX}-2"]
    hosts = yaml.safe_load(inventory.read_text())["all"]["children"]["serve_nodes"]["hosts"]
    assert sorted(hosts) == [f"{PREFIX}-1", f"{PREFIX}-2"]
    assert {h["ansible_host"] for h in hosts.values()} <= set(ADDRESSES)
    launched = notebook_exec.text(nb, "launch")
    assert f"{PREFIX}-1" in launched and "node(s) healthy" in launched

    # teardown: servers, floating IPs and the lease gone
    assert fake.servers == {} and fake.floatingips == {} and fake.leases == {}
