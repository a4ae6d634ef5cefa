"""What the real Chameleon site does, against the HTTP-level fake (tests/fakes/chameleon.py):
Nova's asynchronous delete, Neutron's refusals with its own error body, Blazar's 500 for no hosts,
Nova's paginated listing (a class shares its project with other users' servers) and bare-metal
build times. The real python-chi / OpenStack client code runs; only the network is replaced.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from chi_harness import LoopbackListener, launch_args, launch_main, lease_main, status_main, teardown_main

from serve_system.commands.provision import script_main
from serve_system.provision.nodes import read_inventory

PREFIX = "node-serve-system-tester"


def _launch(work: Path, sshd: LoopbackListener, *extra: str) -> int:
    return launch_main(launch_args(work, sshd.port, *extra))


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def _server_ids(work: Path) -> dict[str, str]:
    return {n.name: n.provider_ids["server_id"] for n in read_inventory(work / "hosts.yml")}


# --- Nova's asynchronous delete ------------------------------------------------------------------


def test_relaunch_right_after_teardown_waits_and_creates_a_fresh_server(fake, sshd, chi_env, capsys,
                                                                      monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # the plan's table in full
    fake.add_lease("serve_system_tester")
    fake.delete_polls = 6  # bare metal: the server stays listed, task_state "deleting", for a while
    assert _launch(chi_env, sshd, "--count", "2") == 0
    old = _server_ids(chi_env)
    assert teardown_main(["-i", str(chi_env / "hosts.yml")]) == 0
    assert {s["OS-EXT-STS:task_state"] for s in fake.servers.values()} == {"deleting"}  # still listed
    capsys.readouterr()
    assert _launch(chi_env, sshd, "--count", "2") == 0
    out = capsys.readouterr().out
    assert "create after delete" in out and "is being deleted: waiting for Nova" in out
    new = _server_ids(chi_env)
    assert sorted(new) == sorted(old) and not set(new.values()) & set(old.values())  # fresh servers
    assert set(fake.servers) == set(new.values())  # Nova finished the deletes before the creates
    # nothing leaked: every floating IP of the project is attached to one of the new servers
    assert fake.unbound_floating_ips() == []
    assert sorted(f["floating_ip_address"] for sid in new.values() for f in fake.fip_of_server(sid)) == [
        n.address for n in sorted(read_inventory(chi_env / "hosts.yml"), key=lambda n: n.address)]


def test_a_server_deleted_elsewhere_keeps_no_floating_ip(fake, sshd, chi_env, capsys) -> None:
    """Deleted in Horizon, its floating IP still attached to the port being deleted: not its address
    any more; launch releases it (Neutron would keep it allocated, unbound) and makes a fresh server."""
    fake.add_lease("serve_system_tester")
    fake.delete_polls = 4
    doomed = fake.add_server(PREFIX, floating_ip="127.0.0.1")
    doomed["OS-EXT-STS:task_state"] = "deleting"
    fake.deleting[doomed["id"]] = 4
    assert _launch(chi_env, sshd) == 0
    assert doomed["id"] not in fake.servers
    (fresh,) = fake.servers.values()
    assert _server_ids(chi_env) == {PREFIX: fresh["id"]}
    assert fake.unbound_floating_ips() == []
    (fip,) = fake.floatingips.values()  # the project holds one address: the fresh server's
    assert fake.fip_of_server(fresh["id"]) == [fip]
    assert read_inventory(chi_env / "hosts.yml")[0].address == fip["floating_ip_address"]
    assert "Released floating IP 127.0.0.1" in capsys.readouterr().out


def test_a_live_server_is_reused_beside_its_namesake_being_deleted(fake, sshd, chi_env) -> None:
    fake.add_lease("serve_system_tester")
    fake.delete_polls = 10**6
    doomed = fake.add_server(PREFIX, floating_ip="127.0.0.4")
    doomed["OS-EXT-STS:task_state"] = "deleting"
    fake.deleting[doomed["id"]] = fake.delete_polls
    live = fake.add_server(PREFIX, floating_ip="127.0.0.1")
    assert _launch(chi_env, sshd) == 0  # not "2 servers are named ...": the doomed one is gone
    assert _server_ids(chi_env) == {PREFIX: live["id"]}
    assert fake.fip_of_server(doomed["id"]) == [] and fake.unbound_floating_ips() == []
    assert [f["floating_ip_address"] for f in fake.floatingips.values()] == ["127.0.0.1"]


def test_a_delete_that_does_not_finish_is_refused_in_one_line(fake, sshd, chi_env, capsys) -> None:
    fake.add_lease("serve_system_tester")
    fake.delete_polls = 10**6
    assert _launch(chi_env, sshd) == 0
    (old_id,) = fake.servers
    assert teardown_main(["-i", str(chi_env / "hosts.yml")]) == 0
    capsys.readouterr()
    n_writes = len(fake.writes())
    assert launch_main(launch_args(chi_env, sshd.port) + ["--server-timeout", "0.1"]) == 1
    line = _one_error_line(capsys)
    assert f"waiting for Nova to delete {PREFIX} ({old_id}, ACTIVE (deleting))" in line
    assert "nothing new was created: re-run launch once it is gone" in line
    assert list(fake.servers) == [old_id] and fake.writes()[n_writes:] == []
    assert fake.floatingips == {}  # teardown released it; nothing new was allocated


def test_teardown_during_a_delete_does_not_delete_twice(fake, sshd, chi_env, capsys) -> None:
    fake.add_lease("serve_system_tester")
    fake.delete_polls = 10**6
    assert _launch(chi_env, sshd) == 0
    assert teardown_main([]) == 0
    capsys.readouterr()
    n_writes = len(fake.writes())
    assert teardown_main([]) == 0
    assert "is already being deleted (ACTIVE (deleting))" in capsys.readouterr().out
    assert fake.writes()[n_writes:] == []


def test_dry_run_shows_the_delete_in_progress(fake, sshd, chi_env, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    fake.add_lease("serve_system_tester")
    fake.delete_polls = 10**6
    assert _launch(chi_env, sshd) == 0
    assert teardown_main(["-i", str(chi_env / "hosts.yml")]) == 0
    capsys.readouterr()
    n_writes = len(fake.writes())
    assert _launch(chi_env, sshd, "--dry-run") == 0
    out = capsys.readouterr().out
    assert "create after delete" in out and "ACTIVE (deleting)" in out and "would wait for Nova" in out
    assert fake.writes()[n_writes:] == []


def test_status_and_rebuild_treat_a_server_being_deleted_as_gone(fake, sshd, chi_env, capsys) -> None:
    fake.add_lease("serve_system_tester")
    assert _launch(chi_env, sshd, "--count", "2") == 0
    fake.delete_polls = 10**6
    doomed = fake.server_by_name(f"{PREFIX}-2")[0]
    doomed["OS-EXT-STS:task_state"] = "deleting"
    fake.deleting[doomed["id"]] = fake.delete_polls
    capsys.readouterr()
    status_main(["--json", "--ssh-port", str(sshd.port), "-i", str(chi_env / "hosts.yml"),
                 "--probe-timeout", "2"])
    assert [n["name"] for n in json.loads(capsys.readouterr().out)["nodes"]] == [f"{PREFIX}-1"]
    n_writes = len(fake.writes())
    assert script_main("rebuild", [f"{PREFIX}-2", "-i", str(chi_env / "hosts.yml"), "--poll", "0.01"]) == 1
    line = _one_error_line(capsys)
    assert f"server {PREFIX}-2 at CHI@TACC is being deleted" in line and "run launch" in line
    assert fake.writes()[n_writes:] == [] and fake.server_actions == []


# --- Neutron's own reason --------------------------------------------------------------------------


@pytest.mark.parametrize(("code", "kind", "message"), [
    (404, "ExternalGatewayForFloatingIPNotFound",
     ("External network net-public is not reachable from subnet sub-shared.  Therefore, cannot associate "
      "Port p1 with a Floating IP.")),
    (409, "FloatingIPPortAlreadyAssociated",
     ("Cannot associate floating IP 127.0.0.1 with port p1 using fixed IP 10.52.0.10, as that fixed IP "
      "already has a floating IP on external network net-public.")),
])
def test_neutrons_refusal_is_shown_and_the_new_ip_released(fake, sshd, chi_env, capsys, code, kind,
                                                          message) -> None:
    fake.add_lease("serve_system_tester")
    fake.association_error = (code, kind, message)
    assert _launch(chi_env, sshd) == 1
    line = _one_error_line(capsys)
    assert f"attaching floating IP 127.0.0.1 to {PREFIX}: " in line
    assert " ".join(message.split()) in line and f"HTTP {code}" in line
    assert "None of the ports can route" not in line  # python-chi's own words, which hide Neutron's
    assert fake.floatingips == {}  # the IP allocated for it was released again
    assert not (chi_env / "hosts.yml").exists()


# --- Blazar's 500 -----------------------------------------------------------------------------------


def test_blazar_500_not_enough_hosts(fake, capsys) -> None:
    fake.blazar_refusal = "Not enough hosts available"
    fake.blazar_refusal_status = 500  # what Blazar really answers
    assert lease_main(["create"]) == 1
    line = _one_error_line(capsys)
    assert line.endswith("Blazar refused lease serve_system_tester at CHI@TACC: Not enough hosts available")
    assert fake.leases == {}


# --- Nova's pages ---------------------------------------------------------------------------------


def test_more_servers_in_the_project_than_one_page(fake, sshd, chi_env, capsys) -> None:
    fake.add_lease("serve_system_tester")
    fake.nova_page_size = 3
    assert _launch(chi_env, sshd, "--count", "2") == 0
    ids = _server_ids(chi_env)
    for i in range(7):  # other users of the class's project, newer: ours are on the last page
        fake.add_server(f"someone-else-{i}")
    n_writes = len(fake.writes())
    assert _launch(chi_env, sshd, "--count", "2") == 0  # found, reused: no duplicate created
    assert fake.writes()[n_writes:] == [] and _server_ids(chi_env) == ids
    capsys.readouterr()
    status_main(["--json", "--ssh-port", str(sshd.port), "-i", str(chi_env / "hosts.yml"),
                 "--probe-timeout", "2"])
    assert [n["name"] for n in json.loads(capsys.readouterr().out)["nodes"]] == [f"{PREFIX}-1", f"{PREFIX}-2"]
    pages = [p for m, p in fake.log if m == "GET" and p.endswith("/servers/detail")]
    assert len(pages) >= 4  # 9 servers, 3 a page: every page was read
    assert teardown_main([]) == 0
    assert sorted(s["name"] for s in fake.servers.values()) == [f"someone-else-{i}" for i in range(7)]
    assert fake.floatingips == {}


# --- bare-metal build time -----------------------------------------------------------------------


def test_progress_is_shown_while_a_node_deploys(fake, sshd, chi_env) -> None:
    fake.add_lease("serve_system_tester")
    fake.build_polls = 6
    from test_chameleon_launch import Recorder

    from serve_system.commands.chiargs import connect
    from serve_system.provision.base import LaunchRequest
    from serve_system.provision.chameleon import ChameleonProvider

    class Args:
        site, openrc = "CHI@TACC", None

    provider = ChameleonProvider(site=connect(Args()), prefix=PREFIX,  # type: ignore[arg-type]
                                 lease_name="serve_system_tester", key_name="mykey", key_path="k",
                                 ssh_port=sshd.port, poll=0.01, lease_timeout=5, server_timeout=5,
                                 ssh_timeout=5)
    rec = Recorder()
    provider.launch(LaunchRequest((f"{PREFIX}-1", f"{PREFIX}-2")), rec)
    bars = [(d, done, total) for t, d, done, total in rec.steps if t == "servers"]
    # one bar, updated on every poll with each server's status and Nova's task while it deploys
    assert any(f"{PREFIX}-1 BUILD (scheduling)" in d and done == 0 for d, done, _ in bars)
    assert any(f"{PREFIX}-2 BUILD (spawning)" in d for d, _, _ in bars)
    assert bars[-1][1:] == (2, 2) and len(bars) >= 6
    assert {s["status"] for s in fake.servers.values()} == {"ACTIVE"}
