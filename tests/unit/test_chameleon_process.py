"""Provisioning commands as a terminal runs them: in a process of their own (tests/unit/chi_command.py,
the HTTP-level fake served in that process), with real ssh probes against loopback listeners.

Ctrl-C: SIGINT to the command's process group (what a terminal sends) or to the command alone (``kill
-INT``) while its SSH probes wait on nodes that never answer must end it with exit status 130, and its
probes must be killed, not waited for (in CI the status board once ran on for over 60 s). The bounds
below catch a hang; they are not timings. And what reaches stderr: the one error line, never the
OpenStack libraries' deprecation warnings (unless ``-v``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from chi_harness import ADDRESSES, SilentListener, launch_args
from fakes.chameleon import FakeChameleon

from serve_system.provision.nodes import Node, write_inventory

HARNESS = Path(__file__).with_name("chi_command.py")
PREFIX = "node-serve-system-tester"
#: a hung command fails the test after this long (the promise is about 2 s, bench/ctrl_c.py measures it;
#: this is no timing: a loaded 2-core machine took over 10 s to end the interpreter)
HANG_S = 60


def _start(work: Path, fake: FakeChameleon, command: str, *args: str) -> subprocess.Popen[str]:
    state = work / "fake.json"
    fake.dump(state)
    return subprocess.Popen([sys.executable, str(HARNESS), str(state), command, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, COLUMNS="200"), start_new_session=True)


def _run(work: Path, fake: FakeChameleon, command: str, *args: str) -> tuple[int, str, str, FakeChameleon]:
    proc = _start(work, fake, command, *args)
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return proc.returncode, out, err, FakeChameleon.load(work / "fake.json")


def _class_of_two(fake: FakeChameleon, work: Path, port: int) -> Path:
    """Two servers with floating IPs on an active lease, and the inventory launch would have written."""
    fake.add_lease("serve_system_tester")
    nodes = []
    for i, addr in enumerate(ADDRESSES[:2], start=1):
        s = fake.add_server(f"{PREFIX}-{i}", floating_ip=addr)
        nodes.append(Node(name=s["name"], address=addr, user="cc", key_path=str(work / "id_test"), port=port,
                          provider="chameleon", provider_ids={"server_id": s["id"]}))
    write_inventory(nodes, work / "hosts.yml")
    return work / "hosts.yml"


@pytest.mark.parametrize("to", ["process group", "process"])
def test_ctrl_c_ends_status_watch_with_probes_in_flight(fake, chi_env, to) -> None:
    silent = SilentListener(ADDRESSES[:2])
    try:
        inventory = _class_of_two(fake, chi_env, silent.port)
        proc = _start(chi_env, fake, "status", "--watch", "1", "--ssh-port", str(silent.port),
                      "-i", str(inventory), "--probe-timeout", "120")
        try:
            deadline = time.monotonic() + 120  # the interpreter's start on a busy machine, not a timing
            while silent.accepted() < 2 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert proc.poll() is None and silent.accepted() == 2, "both probes should wait for a banner"
            if to == "process group":  # Ctrl-C in a terminal
                os.killpg(proc.pid, signal.SIGINT)
            else:  # kill -INT PID: the probes get no signal of their own
                os.kill(proc.pid, signal.SIGINT)
            out, err = proc.communicate(timeout=HANG_S)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
        assert proc.returncode == 130, err
        assert err.strip().splitlines() == ["status.py: interrupted"]
        assert "serve-system status, every 1 s (Ctrl-C to stop)" in out
        # the probes were killed, not waited for: the SSH clients closed their connections
        assert silent.open_peers(wait=5) == 0
    finally:
        silent.close()


def test_launch_and_teardown_print_no_library_warnings(fake, chi_env, sshd) -> None:
    fake.add_lease("serve_system_tester")
    rc, out, err, after = _run(chi_env, fake, "launch", *launch_args(chi_env, sshd.port, "--count", "2"))
    assert rc == 0, err
    assert err.strip() == ""  # neutronclient's "The python binding code ... is deprecated" stays off
    assert "node-serve-system-tester-2" in out and len(after.servers) == 2
    rc, out, err, after = _run(chi_env, after, "teardown", "-i", str(chi_env / "hosts.yml"))
    assert rc == 0 and err.strip() == ""
    assert after.servers == {} and after.floatingips == {}


def test_refusals_are_one_line_on_stderr(fake, chi_env, sshd) -> None:
    fake.blazar_refusal, fake.blazar_refusal_status = "Not enough hosts available", 500
    rc, _, err, after = _run(chi_env, fake, "lease", "create")
    assert rc == 1 and err.strip().splitlines() == [
        "lease.py: error: Blazar refused lease serve_system_tester at CHI@TACC: Not enough hosts available"]
    after.blazar_refusal = None
    after.add_lease("serve_system_tester")
    after.association_error = (404, "ExternalGatewayForFloatingIPNotFound",
                               "External network net-public is not reachable from subnet sub-shared.")
    rc, _, err, after = _run(chi_env, after, "launch", *launch_args(chi_env, sshd.port))
    assert rc == 1 and len(err.strip().splitlines()) == 1, err
    assert "External network net-public is not reachable from subnet sub-shared. (HTTP 404)" in err
    assert after.floatingips == {}


def test_verbose_shows_library_warnings(fake, chi_env) -> None:
    fake.add_lease("serve_system_tester")
    fake.add_server(PREFIX, floating_ip=ADDRESSES[0])
    rc, _, err, after = _run(chi_env, fake, "teardown", "-v", "-i", str(chi_env / "hosts.yml"))
    assert rc == 0 and after.servers == {}
    assert "WARNING neutronclient.v2_0.client: The python binding code in neutronclient is deprecated" in err


def test_ctrl_c_ends_launch_waiting_for_ssh_and_a_rerun_resumes(fake, chi_env, sshd) -> None:
    import threading

    from chi_harness import LoopbackListener

    fake.add_lease("serve_system_tester")
    closed = LoopbackListener(["127.0.0.1"])
    port = closed.port
    closed.close()  # nothing answers there: launch waits for SSH (up to --ssh-timeout 600)
    proc = _start(chi_env, fake, "launch", *launch_args(chi_env, port), "--ssh-timeout", "600")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120  # a bound for a hung start, not a timing
        while (not any("Attached new floating IP" in ln for ln in lines) and proc.poll() is None
               and time.monotonic() < deadline):
            time.sleep(0.05)
        assert proc.poll() is None, "launch ended before it waited for SSH"
        time.sleep(0.5)  # in the SSH wait now
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=HANG_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    reader.join(timeout=5)
    err = proc.stderr.read() if proc.stderr else ""
    assert proc.returncode == 130 and err.strip().splitlines()[-1] == "launch.py: interrupted", err
    assert "Traceback" not in err
    after = FakeChameleon.load(chi_env / "fake.json")
    (server,) = after.servers.values()  # what it made is kept: a re-run resumes with it
    assert after.fip_of_server(server["id"]) and after.unbound_floating_ips() == []
    rc, _, err, again = _run(chi_env, after, "launch", *launch_args(chi_env, sshd.port))
    assert rc == 0, err
    assert list(again.servers) == [server["id"]] and len(again.floatingips) == 1
