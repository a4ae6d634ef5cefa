"""Class-scale provisioning against the HTTP-level fake Chameleon: roster, rebuild, lease extend.

The real python-chi / OpenStack client code runs; only the network is replaced (requests-mock).
"""

from __future__ import annotations

import base64
import os
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from chi_harness import launch_args, launch_main, lease_main

from serve_system import ownedtree
from serve_system.commands.provision import script_main
from serve_system.provision import roster
from serve_system.provision.nodes import read_inventory

STUDENTS = ("alice", "bob", "carol")


def _key(tmp: Path, name: str) -> str:
    key = tmp / f"key_{name}"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{name}@class", "-f", str(key)],
                   check=True)
    return key.with_suffix(".pub").read_text().strip()


def _roster(tmp: Path, names: tuple[str, ...] = STUDENTS) -> Path:
    path = tmp / "class.csv"
    rows = ["student,ssh_public_key,email"] + [f"{n},{_key(tmp, n)},{n}@example.org" for n in names]
    path.write_text("\n".join(rows) + "\n")
    return path


def _hosts(work: Path) -> dict:
    return yaml.safe_load((work / "hosts.yml").read_text())["all"]["children"]["serve_nodes"]["hosts"]


def test_roster_launch_gives_one_node_and_one_key_per_student(fake, sshd, chi_env) -> None:
    fake.add_lease("serve_system_tester")
    csv = _roster(chi_env)
    assert launch_main(launch_args(chi_env, sshd.port, "--roster", str(csv))) == 0
    assert sorted(s["name"] for s in fake.servers.values()) == \
        [f"node-serve-system-tester-{n}" for n in STUDENTS]
    hosts = _hosts(chi_env)
    for n in STUDENTS:
        hv = hosts[f"node-serve-system-tester-{n}"]
        assert hv["serve_student"] == n
        assert hv["class_access_keys"] == [(chi_env / f"key_{n}.pub").read_text().strip()]
    assert len({f["floating_ip_address"] for f in fake.floatingips.values()}) == 3
    # re-running the same roster is a no-op at Chameleon and leaves the inventory as it was
    first, n_writes = (chi_env / "hosts.yml").read_text(), len(fake.writes())
    assert launch_main(launch_args(chi_env, sshd.port, "--roster", str(csv))) == 0
    assert fake.writes()[n_writes:] == [] and (chi_env / "hosts.yml").read_text() == first


def test_a_dropped_student_keeps_the_node_without_a_key(fake, sshd, chi_env) -> None:
    fake.add_lease("serve_system_tester")
    assert launch_main(launch_args(chi_env, sshd.port, "--roster", str(_roster(chi_env)))) == 0
    roster = (chi_env / "class.csv").read_text()
    carol = next(line for line in roster.splitlines() if line.startswith("carol"))
    (chi_env / "two.csv").write_text(roster.replace(carol + "\n", ""))
    assert launch_main(launch_args(chi_env, sshd.port, "--roster", str(chi_env / "two.csv"))) == 0
    carol = _hosts(chi_env)["node-serve-system-tester-carol"]
    assert carol["class_access_keys"] == [] and carol["serve_student_dropped"] == "carol"
    assert "serve_student" not in carol
    assert _hosts(chi_env)["node-serve-system-tester-alice"]["serve_student"] == "alice"


def test_rebuild_uses_novas_rebuild_and_keeps_the_floating_ip(fake, sshd, chi_env) -> None:
    fake.add_lease("serve_system_tester")
    assert launch_main(launch_args(chi_env, sshd.port, "--count", "2")) == 0
    before = {s["name"]: (s["id"], [f["floating_ip_address"] for f in fake.fip_of_server(s["id"])])
              for s in fake.servers.values()}
    n_writes = len(fake.writes())
    rc = script_main("rebuild", ["node-serve-system-tester-2", "-i", str(chi_env / "hosts.yml"),
                                 "--ssh-port", str(sshd.port), "--poll", "0.01", "--server-timeout", "5",
                                 "--ssh-timeout", "5"])
    assert rc == 0
    target_id = before["node-serve-system-tester-2"][0]
    assert [(sid, list(body)) for sid, body in fake.server_actions] == [(target_id, ["rebuild"])]
    assert fake.server_actions[0][1]["rebuild"]["imageRef"] == "img-0"  # CC-Ubuntu24.04-CUDA
    after = {s["name"]: (s["id"], [f["floating_ip_address"] for f in fake.fip_of_server(s["id"])])
             for s in fake.servers.values()}
    assert after == before  # same servers, same floating IPs
    writes = fake.writes()[n_writes:]
    assert [m for m, _ in writes] == ["POST"] and writes[0][1].endswith(f"/servers/{target_id}/action")
    assert [n.name for n in read_inventory(chi_env / "hosts.yml")] == [
        "node-serve-system-tester-1", "node-serve-system-tester-2"]


def test_rebuild_refuses_unknown_nodes_before_any_call(fake, sshd, chi_env, capsys) -> None:
    fake.add_lease("serve_system_tester")
    assert launch_main(launch_args(chi_env, sshd.port)) == 0
    n_log = len(fake.log)
    assert script_main("rebuild", ["nope", "-i", str(chi_env / "hosts.yml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no node named nope" in err[0]
    assert fake.log[n_log:] == []


def test_lease_extend_calls_blazar_update_and_updates_the_inventory(fake, sshd, chi_env, capsys) -> None:
    lease = fake.add_lease("serve_system_tester")
    assert launch_main(launch_args(chi_env, sshd.port)) == 0
    old_end = lease["end_date"]
    assert lease_main(["extend", "--by", "1h", "-i", str(chi_env / "hosts.yml")]) == 0
    assert len(fake.lease_update_bodies) == 1 and "end_date" in fake.lease_update_bodies[0]
    assert ("PUT", f"https://chi.tacc.fake:1234/v1/leases/{lease['id']}") in fake.writes()
    assert lease["end_date"] > old_end
    hv = _hosts(chi_env)["node-serve-system-tester"]
    assert hv["serve_lease_end"] == lease["end_date"][:16].replace(" ", "T") + ":00Z"
    assert "now ends at" in capsys.readouterr().out


def test_lease_extend_refused_by_blazar_keeps_the_reason(fake, capsys) -> None:
    fake.add_lease("serve_system_tester")
    fake.blazar_refusal = "Not enough hosts available"
    assert lease_main(["extend", "--by", "2h", "-i", "/nonexistent/hosts.yml"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert "nonexistent" in err[-1]  # the inventory is checked before Blazar is asked
    assert fake.lease_update_bodies == []
    assert lease_main(["extend", "--by", "2h"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Blazar refused to extend lease serve_system_tester" in err[0]
    assert "Not enough hosts available" in err[0]


@pytest.mark.parametrize("argv", [
    ["--exclude-node", "c11-13,c12-01"],
    ["--exclude-node", "c11-13", "--exclude-node", "c12-01"],
    ["--exclude-node", "c11-13, c12-01", "--exclude-node", "c11-13"],
])
def test_exclude_node_lists(fake, argv) -> None:
    import json

    assert lease_main(["create", *argv]) == 0
    props = json.loads(fake.lease_create_bodies[0]["reservations"][0]["resource_properties"])
    # one constraint per node (python-chi adds the node type), never one "c11-13,c12-01" name
    assert props == ["and", ["!=", "$node_name", "c11-13"], ["!=", "$node_name", "c12-01"],
                     ["==", "$node_type", "gpu_p100"]]


def test_access_sheets_are_private_and_hold_no_secret(fake, sshd, chi_env, capsys) -> None:
    fake.add_lease("serve_system_tester")
    assert launch_main(launch_args(chi_env, sshd.port, "--roster", str(_roster(chi_env)))) == 0
    out = chi_env / "sheets"
    assert script_main("access", ["-i", str(chi_env / "hosts.yml"), "--out", str(out)]) == 0
    sheets = sorted(p.name for p in out.iterdir() if p.name != ownedtree.MARKER)
    assert sheets == [f"{n}.txt" for n in STUDENTS]
    for n in STUDENTS:
        p = out / f"{n}.txt"
        assert stat.S_IMODE(p.stat().st_mode) == 0o600
        text = p.read_text()
        assert f"node-serve-system-tester-{n}" in text and f"-p {sshd.port} cc@" in text
        assert "-L 8888:127.0.0.1:8888" in text
        assert "appcred" not in text and "PRIVATE KEY" not in text
    assert stat.S_IMODE(out.stat().st_mode) == 0o700


def test_access_refuses_results_folder(chi_env, capsys) -> None:
    repo = Path(__file__).resolve().parents[2]
    (chi_env / "hosts.yml").write_text("all: {children: {serve_nodes: {hosts: {}}}}\n")
    assert script_main("access", ["-i", str(chi_env / "hosts.yml"),
                                  "--out", str(repo / "results" / "x")]) == 2
    assert "never go under results/" in capsys.readouterr().err
    assert not (repo / "results" / "x").exists()


@pytest.mark.parametrize("content, fragment", [
    ("name,key\nalice,ssh-ed25519 AAAA\n", "first line must be the header"),
    ("student,ssh_public_key\nAlice,{key}\n", "row 2, student 'Alice'"),
    ("student,ssh_public_key\nalice,{key}\nalice,{key}\n", "row 3, student 'alice' is already on row 2"),
    ("student,ssh_public_key\nalice,not-a-key\n", "row 2, ssh_public_key: not an OpenSSH public key"),
    ("student,ssh_public_key\nalice,ssh-ed25519 AAAA!!!!\n", "base64 part is damaged"),
    ("student,ssh_public_key\nalice,ssh-rsa {body}\n", "does not match its type ssh-rsa"),
    ("student,ssh_public_key\n", "no students"),
    ("student,ssh_public_key,phone\nalice,{key},1\n", "unknown column 'phone'"),
    ("student,ssh_public_key\nalice\n", "row 2 has 1 fields"),
    # issue 26: one key per student, and a whole key
    ("student,ssh_public_key\nalice,{key}\nbob,{key}\n",
     "row 3, ssh_public_key: the same key as student 'alice'"),
    ("student,ssh_public_key\nalice,ssh-ed25519 {body_cut}\n", "row 2, ssh_public_key: the key is cut short"),
    ("student,ssh_public_key\nalice,ssh-ed25519 {body_long}\n", "3 byte(s) follow the key"),
    ("student,ssh_public_key\nalice,ssh-rsa {rsa_small}\n", "an RSA key of under 1024 bits"),
])
def test_bad_rosters(tmp_path, content, fragment) -> None:
    key = _key(tmp_path, "x")
    path = tmp_path / "r.csv"
    body = base64.b64decode(key.split()[1])
    rsa = b"\0\0\0\x07ssh-rsa" + b"\0\0\0\x01\x03" + b"\0\0\0\x40" + b"\x01" * 64  # a 512-bit modulus
    path.write_text(content.format(key=key, body=key.split()[1],
                                   body_cut=base64.b64encode(body[:-4]).decode(),
                                   body_long=base64.b64encode(body + b"xyz").decode(),
                                   rsa_small=base64.b64encode(rsa).decode()))
    with pytest.raises(roster.UsageError) as exc:
        roster.read_roster(path)
    assert fragment in str(exc.value) and str(path) in str(exc.value)
    assert "\n" not in str(exc.value)


def test_a_roster_names_every_bad_row_at_once_in_one_line(tmp_path) -> None:
    """A class of 40 with 30 bad rows: one round of fixes, not one per row; the good rows are not named."""
    good = [f"s{i},{_ed25519(i)}" for i in range(10)]
    bad = [f"S{i},{_ed25519(100 + i)}" for i in range(28)] + ["x,ssh-ed25519 AAAA!!!!", "y"]
    path = tmp_path / "r.csv"
    path.write_text("student,ssh_public_key\n" + "\n".join(good[:5] + bad + good[5:]) + "\n")
    with pytest.raises(roster.UsageError) as exc:
        roster.read_roster(path)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(f"{path}: 30 bad rows, each to fix: row 7, student 'S0'")
    assert msg.count(" | row ") == roster.MAX_BAD_ROWS - 1 and msg.endswith("| and 5 more bad row(s)")
    assert "row 6," not in msg  # the good rows before and after are not named
    # the rows past the cap are counted, and each is named once it is among the first
    path.write_text("student,ssh_public_key\n" + "\n".join(good + bad[-2:]) + "\n")
    with pytest.raises(roster.UsageError, match=r"2 bad rows, each to fix: row 12, ssh_public_key: the key's "
                                               r"base64 part is damaged.* \| row 13 has 1 fields"):
        roster.read_roster(path)


def _ed25519(seed: int) -> str:
    """A well-formed ed25519 public key line (its 32 bytes from ``seed``), no ssh-keygen needed."""
    kind = b"ssh-ed25519"
    blob = len(kind).to_bytes(4, "big") + kind + (32).to_bytes(4, "big") + seed.to_bytes(32, "big")
    return f"ssh-ed25519 {base64.b64encode(blob).decode()} s{seed}@class"


def test_a_roster_that_is_a_pipe_is_refused_without_reading(tmp_path) -> None:
    path = tmp_path / "r.csv"
    os.mkfifo(path)
    with pytest.raises(roster.UsageError) as exc:
        roster.read_roster(path)  # would hang if it were opened
    assert str(exc.value) == f"--roster {path}: not a regular file; give the roster CSV itself"


def test_roster_of_40_students_has_40_distinct_nodes(tmp_path) -> None:
    path = tmp_path / "big.csv"
    path.write_text("student,ssh_public_key\n" + "".join(f"s{i:02d},{_ed25519(i)}\n" for i in range(40)))
    students = roster.read_roster(path)
    names = [roster.node_name("cls", s.name) for s in students]
    assert len(set(names)) == 40 and os.path.commonprefix(names) == "cls-s"
