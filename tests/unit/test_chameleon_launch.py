"""chi_scripts/launch.py, teardown.py and status.py against the HTTP-level fake Chameleon.

The real python-chi / OpenStack client code runs; only the network is replaced (requests-mock).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from chi_harness import LoopbackListener, launch_args, launch_main, status_main, teardown_main

from serve_system.provision.nodes import read_inventory


def _launch(work: Path, sshd: LoopbackListener, *extra: str) -> int:
    return launch_main(launch_args(work, sshd.port, *extra))


def test_fresh_launch_creates_server_ip_and_inventory(fake, sshd, chi_env, capsys) -> None:
    fake.add_lease("serve_system_tester")
    assert _launch(chi_env, sshd) == 0
    servers = fake.server_by_name("node-serve-system-tester")
    assert len(servers) == 1 and servers[0]["status"] == "ACTIVE"
    # the server was created on the lease's *reservation* id, with the image and the explicit key
    lease = next(iter(fake.leases.values()))
    assert servers[0]["reservation"] == lease["reservations"][0]["id"]
    assert servers[0]["key_name"] == "mykey"
    body = fake.server_create_bodies[0]["server"]
    assert body["imageRef"] == "img-0" and body["networks"] == [{"uuid": "net-shared"}]
    fips = fake.fip_of_server(servers[0]["id"])
    assert [f["floating_ip_address"] for f in fips] == ["127.0.0.1"]
    # the application credential was not given a project scope (Keystone refuses that)
    auth = fake.auth_bodies[-1]["auth"]
    assert auth["identity"]["methods"] == ["application_credential"]
    assert "scope" not in auth
    out = capsys.readouterr().out
    assert "node-serve-system-tester" in out and "127.0.0.1" in out


def test_inventory_content(fake, sshd, chi_env) -> None:
    fake.add_lease("serve_system_tester")
    assert _launch(chi_env, sshd) == 0
    inv = chi_env / "hosts.yml"
    doc = yaml.safe_load(inv.read_text())
    hosts = doc["all"]["children"]["serve_nodes"]["hosts"]
    assert list(hosts) == ["node-serve-system-tester"]
    hv = hosts["node-serve-system-tester"]
    server = fake.server_by_name("node-serve-system-tester")[0]
    assert hv["ansible_host"] == "127.0.0.1"
    assert hv["ansible_port"] == sshd.port
    assert hv["ansible_user"] == "cc"
    assert hv["ansible_ssh_private_key_file"] == str(chi_env / "id_test")
    assert hv["serve_gpus"] == 2  # gpu_p100: two P100s
    assert hv["serve_provider"] == "chameleon"
    assert hv["serve_node_type"] == "gpu_p100"
    assert hv["serve_provider_ids"]["server_id"] == server["id"]
    assert hv["serve_provider_ids"]["site"] == "CHI@TACC"
    assert "UserKnownHostsFile=" + str((chi_env / "known_hosts").resolve()) in (
        doc["all"]["children"]["serve_nodes"]["vars"]["ansible_ssh_common_args"])
    assert (chi_env / "known_hosts").exists()
    # no secret in the inventory
    assert "appcred-secret" not in inv.read_text()
    assert [n.name for n in read_inventory(inv)] == ["node-serve-system-tester"]


def test_relaunch_is_a_noop(fake, sshd, chi_env) -> None:
    fake.add_lease("serve_system_tester")
    assert _launch(chi_env, sshd) == 0
    first = (chi_env / "hosts.yml").read_text()
    n_writes = len(fake.writes())
    assert _launch(chi_env, sshd) == 0
    assert len(fake.servers) == 1
    assert len(fake.floatingips) == 1
    assert fake.writes()[n_writes:] == []  # the second run changed nothing at Chameleon
    assert (chi_env / "hosts.yml").read_text() == first


def test_count_three(fake, sshd, chi_env) -> None:
    fake.add_lease("serve_system_tester")
    assert _launch(chi_env, sshd, "--count", "3") == 0
    names = sorted(s["name"] for s in fake.servers.values())
    assert names == ["node-serve-system-tester-1", "node-serve-system-tester-2", "node-serve-system-tester-3"]
    addrs = sorted(f["floating_ip_address"] for f in fake.floatingips.values())
    assert addrs == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    assert all(f["port_id"] for f in fake.floatingips.values())
    nodes = read_inventory(chi_env / "hosts.yml")
    assert sorted(n.name for n in nodes) == names
    assert len({n.address for n in nodes}) == 3


class Recorder:
    """A Progress that keeps what it is told (the CLI renders the same calls as rich bars)."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, str, int, int | None]] = []
        self.notes: list[str] = []

    def step(self, task: str, description: str, completed: int, total: int | None) -> None:
        self.steps.append((task, description, completed, total))

    def note(self, message: object) -> None:
        self.notes.append(str(message))


def test_lease_pending_then_active(fake, sshd, chi_env) -> None:
    start = datetime.now(UTC).replace(tzinfo=None) + timedelta(minutes=3)
    fake.add_lease("serve_system_tester", status="PENDING", start=start)
    fake.lease_status_script["serve_system_tester"] = ["PENDING", "STARTING", "ACTIVE"]
    from serve_system.commands.chiargs import connect  # the CLI's own session set-up
    from serve_system.provision.base import LaunchRequest
    from serve_system.provision.chameleon import ChameleonProvider

    class Args:
        site, openrc = "CHI@TACC", None

    provider = ChameleonProvider(site=connect(Args()), prefix="node-serve-system-tester",  # type: ignore[arg-type]
                                 lease_name="serve_system_tester", key_name="mykey", key_path="k",
                                 ssh_port=sshd.port, poll=0.01, lease_timeout=5, server_timeout=5,
                                 ssh_timeout=5)
    rec = Recorder()
    nodes = provider.launch(LaunchRequest(("node-serve-system-tester",)), rec)
    lease_steps = [d for t, d, _, _ in rec.steps if t == "lease"]
    # one bar for the whole wait, showing the status and the start time, not a line per poll
    assert f"lease serve_system_tester PENDING, starts {start:%Y-%m-%d %H:%M} UTC" in lease_steps
    assert any("STARTING" in d for d in lease_steps) and lease_steps[-1] == "lease serve_system_tester ACTIVE"
    assert [t for t, *_ in rec.steps if t == "ssh"] and rec.steps[-1][2:] == (1, 1)
    assert len(fake.servers) == 1 and [n.name for n in nodes] == ["node-serve-system-tester"]
    assert nodes[0].vars["serve_lease_end"].endswith("Z")


@pytest.mark.parametrize("status", ["ERROR", "TERMINATED"])
def test_lease_error_or_terminated_stops(fake, sshd, chi_env, capsys, status) -> None:
    fake.add_lease("serve_system_tester", status=status)
    assert _launch(chi_env, sshd) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"is {status}, not ACTIVE" in err[0]
    assert fake.writes() == []


def test_lease_pending_timeout(fake, sshd, chi_env, capsys) -> None:
    fake.add_lease("serve_system_tester", status="PENDING")
    assert launch_main(launch_args(chi_env, sshd.port) + ["--lease-timeout", "0.05"]) == 1
    err = capsys.readouterr().err
    assert "timed out" in err and "still PENDING" in err
    assert fake.servers == {}


def test_lease_ending_within_margin(fake, sshd, chi_env, capsys) -> None:
    fake.add_lease("serve_system_tester", hours=0.25)
    assert _launch(chi_env, sshd, "--margin", "30m") == 1
    assert "less than the --margin" in capsys.readouterr().err
    assert fake.servers == {}


def test_duplicate_lease_names(fake, sshd, chi_env, capsys) -> None:
    a = fake.add_lease("serve_system_tester")
    b = fake.add_lease("serve_system_tester", status="PENDING")
    assert _launch(chi_env, sshd) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert a["id"] in err and b["id"] in err and "2 leases are named" in err
    assert fake.writes() == []


def test_terminated_duplicate_is_ignored(fake, sshd, chi_env) -> None:
    fake.add_lease("serve_system_tester", status="TERMINATED")
    fake.add_lease("serve_system_tester")
    assert _launch(chi_env, sshd) == 0
    assert len(fake.servers) == 1


def test_unknown_lease(fake, sshd, chi_env, capsys) -> None:
    assert _launch(chi_env, sshd) == 1
    assert "no lease named 'serve_system_tester' at CHI@TACC" in capsys.readouterr().err


def test_server_error_without_replace(fake, sshd, chi_env, capsys) -> None:
    fake.add_lease("serve_system_tester")
    fake.server_status["node-serve-system-tester"] = "ERROR"
    assert _launch(chi_env, sshd) == 1
    err = capsys.readouterr().err
    assert "went to ERROR: No valid host was found." in err and "--replace-failed" in err
    assert fake.floatingips == {}
    # a re-run reports the failed server and does not create a second one
    assert _launch(chi_env, sshd) == 1
    err = capsys.readouterr().err
    assert "server in ERROR" in err and "--replace-failed" in err
    assert len(fake.servers) == 1


def test_server_error_with_replace_failed(fake, sshd, chi_env) -> None:
    fake.add_lease("serve_system_tester")
    fake.server_status["node-serve-system-tester"] = "ERROR"
    assert _launch(chi_env, sshd) == 1
    failed_id = next(iter(fake.servers))
    fake.server_status.clear()
    assert _launch(chi_env, sshd, "--replace-failed") == 0
    assert failed_id not in fake.servers
    servers = list(fake.servers.values())
    assert len(servers) == 1 and servers[0]["status"] == "ACTIVE"
    assert ("DELETE", f"https://chi.tacc.fake:8774/v2.1/servers/{failed_id}") in fake.log


def test_floating_ip_exhaustion_leaks_nothing(fake, sshd, chi_env, capsys) -> None:
    fake.add_lease("serve_system_tester")
    fake.fip_pool[:] = ["127.0.0.1"]
    assert _launch(chi_env, sshd, "--count", "2") == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "allocating a floating IP" in err and "No more IP addresses available" in err
    # one server got the only IP; nothing was allocated and left unattached
    assert all(f["port_id"] for f in fake.floatingips.values())
    assert len(fake.floatingips) == 1


def test_failed_association_releases_the_new_ip(fake, sshd, chi_env, capsys) -> None:
    fake.add_lease("serve_system_tester")
    fake.refuse_association = True
    assert _launch(chi_env, sshd) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "attaching floating IP 127.0.0.1 to node-serve-system-tester" in err
    assert fake.floatingips == {}  # the IP we allocated was released again
    assert [m for m, p in fake.log if p.endswith("/floatingips") and m == "POST"] == ["POST"]


def test_quota_error_on_server_create(fake, sshd, chi_env, capsys) -> None:
    fake.add_lease("serve_system_tester")
    fake.server_create_error = (403, "Quota exceeded for instances: Requested 1, but already used 10 of 10")
    assert _launch(chi_env, sshd) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "creating server node-serve-system-tester: Quota exceeded for instances" in err
    assert fake.servers == {} and fake.floatingips == {}


def test_unbound_ip_of_the_project_is_not_taken(fake, sshd, chi_env) -> None:
    """An unattached IP the project holds (someone else's) is left alone: we allocate our own."""
    fake.add_lease("serve_system_tester")
    fake.floatingips["theirs"] = {
        "id": "theirs", "floating_ip_address": "127.0.0.9", "port_id": None, "fixed_ip_address": None,
        "floating_network_id": "net-public", "status": "DOWN", "router_id": None,
        "project_id": "p", "tenant_id": "p", "description": "", "tags": []}
    assert _launch(chi_env, sshd) == 0
    assert fake.floatingips["theirs"]["port_id"] is None
    server = next(iter(fake.servers.values()))
    assert [f["floating_ip_address"] for f in fake.fip_of_server(server["id"])] == ["127.0.0.1"]


def test_dry_run_makes_no_write_calls(fake, sshd, chi_env, capsys) -> None:
    fake.add_lease("serve_system_tester")
    assert _launch(chi_env, sshd, "--dry-run", "--count", "2") == 0
    assert fake.writes() == []
    assert not [m for m, _ in fake.log if m in ("PUT", "DELETE", "PATCH")]
    assert [p for m, p in fake.log if m == "POST"] == ["https://chi.tacc.fake:5000/v3/auth/tokens"]
    out = capsys.readouterr().out
    assert "node-serve-system-tester-1" in out and "create" in out and "nothing was changed" in out
    assert not (chi_env / "hosts.yml").exists()


def test_unknown_image_and_key(fake, sshd, chi_env, capsys) -> None:
    fake.add_lease("serve_system_tester")
    assert _launch(chi_env, sshd, "--image", "NoSuchImage") == 1
    assert "unknown image 'NoSuchImage' at CHI@TACC" in capsys.readouterr().err
    assert launch_main(launch_args(chi_env, sshd.port) + ["--key-name", "nokey"]) == 1
    assert "unknown key pair 'nokey'" in capsys.readouterr().err
    assert fake.servers == {}


def test_unknown_site(fake, sshd, chi_env, capsys) -> None:
    assert _launch(chi_env, sshd, "--site", "CHI@NOWHERE") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "CHI@TACC" in err
    assert "--site 'CHI@NOWHERE' is not a known Chameleon GPU site: use one of CHI@TACC, CHI@UC" in err


def test_ssh_timeout(fake, chi_env, capsys) -> None:
    fake.add_lease("serve_system_tester")
    closed = LoopbackListener(["127.0.0.1"])
    port = closed.port
    closed.close()  # nothing listens there any more
    assert launch_main(launch_args(chi_env, port) + ["--ssh-timeout", "0.2"]) == 1
    assert "timed out after 0 s waiting for SSH" in capsys.readouterr().err


def test_teardown_is_idempotent(fake, sshd, chi_env, capsys) -> None:
    fake.add_lease("serve_system_tester")
    assert _launch(chi_env, sshd, "--count", "2") == 0
    capsys.readouterr()
    assert teardown_main(["--delete-lease"]) == 0
    out = capsys.readouterr().out
    assert "Deleted server node-serve-system-tester-1" in out and "Released floating IP" in out
    assert "Deleted lease serve_system_tester" in out
    assert fake.servers == {} and fake.floatingips == {} and fake.leases == {}
    n_writes = len(fake.writes())
    assert teardown_main(["--delete-lease"]) == 0
    assert "Removed 0 resource(s)" in capsys.readouterr().out
    assert fake.writes()[n_writes:] == []


def test_teardown_leaves_other_servers(fake, sshd, chi_env) -> None:
    fake.add_lease("serve_system_tester")
    assert _launch(chi_env, sshd, "--prefix", "other-node") == 0
    assert _launch(chi_env, sshd) == 0
    assert teardown_main([]) == 0
    assert [s["name"] for s in fake.servers.values()] == ["other-node"]
    assert len(fake.floatingips) == 1 and len(fake.leases) == 1


def _listings(fake, since: int) -> dict[str, int]:
    calls = [p for m, p in fake.log[since:] if m == "GET"]
    return {what: sum(1 for p in calls if p.endswith(what))
            for what in ("/floatingips", "/ports", "/servers/detail")}


def test_status_json_one_listing_and_serve_lease_end(fake, sshd, chi_env, capsys) -> None:
    fake.add_lease("serve_system_tester")
    assert _launch(chi_env, sshd, "--count", "3") == 0
    lease = next(iter(fake.leases.values()))
    inv = yaml.safe_load((chi_env / "hosts.yml").read_text())["all"]["children"]["serve_nodes"]["hosts"]
    assert {hv["serve_lease_end"] for hv in inv.values()} == {lease["end_date"][:19] + "Z"}
    capsys.readouterr()
    n_writes, n_log = len(fake.writes()), len(fake.log)
    rc = status_main(["--json", "--ssh-port", str(sshd.port), "-i", str(chi_env / "hosts.yml"),
                      "--probe-timeout", "2"])
    st = json.loads(capsys.readouterr().out)
    # the loopback "sshd" accepts and closes: SSH fails, so nobody is healthy and the exit code says so
    assert rc == 1 and st["healthy"] is False
    assert [n["name"] for n in st["nodes"]] == [f"node-serve-system-tester-{i}" for i in (1, 2, 3)]
    assert all(n["machine"] == "ACTIVE" and n["problem"].startswith("SSH") for n in st["nodes"])
    assert st["lease"]["status"] == "ACTIVE" and 150 <= st["lease"]["minutes_left"] <= 170
    assert {n["lease_minutes_left"] for n in st["nodes"]} == {st["lease"]["minutes_left"]}
    # one server, one port and one floating-IP listing for three servers, and nothing written
    assert _listings(fake, n_log) == {"/floatingips": 1, "/ports": 1, "/servers/detail": 1}
    assert fake.writes()[n_writes:] == []


def test_status_exits_nonzero_with_a_server_in_error(fake, sshd, chi_env, capsys) -> None:
    fake.add_lease("serve_system_tester")
    assert _launch(chi_env, sshd, "--count", "2") == 0
    next(s for s in fake.servers.values() if s["name"].endswith("-2")).update(
        status="ERROR", fault={"code": 500, "message": "No valid host was found."})
    capsys.readouterr()
    assert status_main(["--json", "--ssh-port", str(sshd.port), "-i", str(chi_env / "hosts.yml")]) == 1
    rows = {n["name"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    bad = rows["node-serve-system-tester-2"]
    assert bad["healthy"] is False and bad["problem"] == "machine ERROR: No valid host was found."


def test_status_warns_when_the_lease_runs_out(fake, sshd, chi_env, capsys) -> None:
    fake.add_lease("serve_system_tester", start=datetime.now(UTC).replace(tzinfo=None)
                   - timedelta(hours=2.7))
    fake.servers.clear()
    assert status_main(["--margin", "30m", "--ssh-port", str(sshd.port),
                        "-i", str(chi_env / "hosts.yml")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert any(line.startswith("warning: lease serve_system_tester ends") and "lease extend" in line
               for line in err)
    assert err[-1].startswith("status.py: error: no nodes named node-serve-system-tester")


def test_teardown_dry_run_and_status_table(fake, sshd, chi_env, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # the board's table in full
    fake.add_lease("serve_system_tester")
    assert _launch(chi_env, sshd) == 0
    capsys.readouterr()
    n_writes = len(fake.writes())
    assert teardown_main(["--dry-run", "--delete-lease"]) == 0
    out = capsys.readouterr().out
    assert "[dry run] would delete server node-serve-system-tester" in out
    assert "[dry run] would delete lease serve_system_tester" in out
    assert fake.writes()[n_writes:] == [] and len(fake.servers) == 1
    closed = LoopbackListener(["127.0.0.1"])
    port = closed.port
    closed.close()
    assert status_main(["--ssh-port", str(port), "-i", str(chi_env / "hosts.yml"),
                        "--probe-timeout", "2"]) == 1
    out = capsys.readouterr().out
    assert "Lease serve_system_tester" in out and "ACTIVE" in out and "min left" in out
    assert "node-serve-system-tester" in out and "127.0.0.1" in out and "unhealthy" in out
    assert "0 of 1 node(s) healthy" in out


def test_status_watch_redraws_a_bounded_number_of_times(fake, sshd, chi_env, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    fake.add_lease("serve_system_tester")
    assert _launch(chi_env, sshd, "--count", "2") == 0
    capsys.readouterr()
    n_log = len(fake.log)
    rc = status_main(["--watch", "0.05", "--times", "3", "--ssh-port", str(sshd.port), "-i",
                      str(chi_env / "hosts.yml"), "--probe-timeout", "2"])
    out = capsys.readouterr().out
    assert rc == 1  # the last board's exit code: SSH fails on the accept-and-close "sshd"
    assert [ln.split(",")[0] for ln in out.splitlines() if ln.startswith("serve-system status")] == [
        f"serve-system status {i}/3" for i in (1, 2, 3)]
    assert out.count("0 of 2 node(s) healthy") == 3
    # each refresh is one listing of servers, ports and floating IPs, however many nodes
    assert _listings(fake, n_log) == {"/floatingips": 3, "/ports": 3, "/servers/detail": 3}


def test_status_times_without_watch_is_refused(fake, chi_env, capsys) -> None:
    n_log = len(fake.log)
    assert status_main(["--times", "2", "-i", str(chi_env / "hosts.yml")]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--times N counts the refreshes of --watch" in err
    assert fake.log[n_log:] == []
