"""A class of 40 over two sites (CHI@TACC and CHI@UC) against two HTTP-level fake sites.

Each site is a :class:`FakeChameleon` of its own (its own leases, servers, floating IPs and Keystone,
which accepts only that site's application credential), both served through one requests-mock. The
real python-chi and OpenStack clients run; the nodes' SSH ports are TCP listeners on 40 loopback
addresses. One roster of 40 goes through ``lease create`` and ``launch`` with ``--sites``; then the
board, a rebuild at the second site, the access sheets, and ``compare --class`` over the runs of
nodes of both sites.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests_mock
from chi_harness import LoopbackListener, launch_args, launch_main, lease_main, status_main
from fakes.chameleon import FakeChameleon, install_sites
from report_trees import SPREAD, lab_run
from test_provision_class import _ed25519

from serve_system.cli import main
from serve_system.commands.provision import script_main
from serve_system.errors import UsageError
from serve_system.provision import classplan, roster
from serve_system.provision.nodes import read_inventory

TACC, UC = "CHI@TACC", "CHI@UC"
PREFIX = "node-serve-system-tester"
ADDRESSES = {TACC: [f"127.0.1.{i}" for i in range(1, 21)], UC: [f"127.0.2.{i}" for i in range(1, 21)]}


@pytest.fixture
def sites(chi_env: Path) -> Iterator[dict[str, FakeChameleon]]:
    """Two fake sites, each with its own credential and floating IPs."""
    fakes = {site: FakeChameleon(site=site, credential_id=f"{site[4:].lower()}-cred",
                                 fip_pool=list(ADDRESSES[site])) for site in (TACC, UC)}
    with requests_mock.Mocker() as m:
        install_sites(m, fakes)
        yield fakes


@pytest.fixture
def sshd40() -> Iterator[LoopbackListener]:
    listener = LoopbackListener(ADDRESSES[TACC] + ADDRESSES[UC])
    yield listener
    listener.close()


def _openrc(work: Path) -> list[str]:
    """Per-site openrc files (the environment's credential is neither site's): --openrc SITE=FILE."""
    out = []
    for site in (TACC, UC):
        rc = work / f"{site[4:].lower()}.sh"
        rc.write_text(f"export OS_APPLICATION_CREDENTIAL_ID={site[4:].lower()}-cred\n"
                      "export OS_APPLICATION_CREDENTIAL_SECRET=s3cret\n")
        out += ["--openrc", f"{site}={rc}"]
    return out


def _roster40(work: Path, sites: dict[int, str] | None = None) -> Path:
    path = work / "class.csv"
    sites = sites or {}
    path.write_text("student,ssh_public_key,site\n"
                    + "".join(f"s{i:02d},{_ed25519(i + 1)},{sites.get(i, '')}\n" for i in range(40)))
    return path


def _grant(fakes: dict[str, FakeChameleon]) -> None:
    """The sites grant the class's leases (Blazar makes them ACTIVE at their start)."""
    for fake in fakes.values():
        for lease in fake.leases.values():
            lease["status"] = "ACTIVE"


def test_the_split_is_deterministic_and_stable_when_students_are_appended(tmp_path: Path) -> None:
    students = roster.read_roster(_roster40(tmp_path, {0: UC, 1: UC}))
    plan = classplan.plan_class(students, (TACC, UC), "L", "gpu_p100")
    assert [(p.site, p.lease, len(p.students)) for p in plan] == [
        (TACC, "L-tacc-1", 16), (TACC, "L-tacc-2", 4), (UC, "L-uc-1", 16), (UC, "L-uc-2", 4)]
    # s00, s01: their site column; s02-s04 to CHI@TACC (fewer, then first on a tie), s05 to CHI@UC
    assert [s.name for s in plan[2].students][:3] == ["s00", "s01", "s05"]
    assert plan == classplan.plan_class(students, (TACC, UC), "L", "gpu_p100")
    more = [*students, roster.Student("s40", _ed25519(99))]
    grown = classplan.plan_class(more, (TACC, UC), "L", "gpu_p100")
    # 20 and 20: the new student goes to CHI@TACC (first on the tie), into its last lease only
    assert grown[0] == plan[0] and grown[2:] == plan[2:]
    assert grown[1].students == (*plan[1].students, more[-1])
    with pytest.raises(UsageError, match="student 's00' has site CHI@UC, not one of --sites CHI@TACC"):
        classplan.plan_class(students, (TACC,), "L", "gpu_p100")


def test_forty_students_over_two_sites(sites, sshd40, chi_env, capsys) -> None:  # type: ignore[no-untyped-def]
    csv = _roster40(chi_env)
    creds = _openrc(chi_env)
    many = ["--roster", str(csv), "--sites", f"{TACC},{UC}", *creds]

    # the dry run prints the split and creates nothing
    assert lease_main(["create", *many, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "Class of 40 over 4 lease(s) of gpu_p100:" in out
    assert "CHI@UC lease serve_system_tester-uc-2: 4 node(s)" in out
    assert all(f.writes() == [] for f in sites.values())

    # one command: every lease at its site, each within the node type's maximum, each site's credential
    assert lease_main(["create", *many]) == 0
    for site, fake in sites.items():
        slug = site[4:].lower()
        assert sorted((b["name"], b["reservations"][0]["min"]) for b in fake.lease_create_bodies) == \
            [(f"serve_system_tester-{slug}-1", 16), (f"serve_system_tester-{slug}-2", 4)]
        assert {b["auth"]["identity"]["application_credential"]["id"] for b in fake.auth_bodies} == \
            {f"{slug}-cred"}
    _grant(sites)

    # launch: each student's server on their lease's reservation at their site; one inventory of 40
    assert launch_main(launch_args(chi_env, sshd40.port, *many)) == 0
    inventory = read_inventory(chi_env / "hosts.yml")
    assert len(inventory) == 40
    for site, fake in sites.items():
        reservations = {lz["name"]: lz["reservations"][0]["id"] for lz in fake.leases.values()}
        assert len(fake.servers) == 20
        mine = [n for n in inventory if n.vars["serve_site"] == site]
        assert len(mine) == 20
        for n in mine:
            (server,) = fake.server_by_name(n.name)
            assert server["reservation"] == reservations[n.vars["serve_lease"]]
            assert n.provider_ids["site"] == site and n.address in ADDRESSES[site]
        base = f"serve_system_tester-{site[4:].lower()}"
        assert Counter(n.vars["serve_lease"] for n in mine) == {f"{base}-1": 16, f"{base}-2": 4}
    assert "s3cret" not in (chi_env / "hosts.yml").read_text()  # no credential in the inventory
    # a second launch changes nothing at either site
    writes = {s: len(f.writes()) for s, f in sites.items()}
    first = (chi_env / "hosts.yml").read_text()
    assert launch_main(launch_args(chi_env, sshd40.port, *many)) == 0
    assert {s: len(f.writes()) for s, f in sites.items()} == writes
    assert (chi_env / "hosts.yml").read_text() == first
    capsys.readouterr()

    # the board: every node of both sites, each with its site and its lease's minutes
    rc = status_main(["--inventory", str(chi_env / "hosts.yml"), "--ssh-port", str(sshd40.port),
                      "--probe-timeout", "2", "--json", *creds])
    board = json.loads(capsys.readouterr().out)
    assert rc == 1  # the loopback "sshd" answers no SSH: every node is reachable, none healthy
    assert len(board["nodes"]) == 40 and board["sites"] == [TACC, UC]
    assert Counter(r["site"] for r in board["nodes"]) == {TACC: 20, UC: 20}
    assert sorted(lz["name"] for lz in board["leases"]) == [
        "serve_system_tester-tacc-1", "serve_system_tester-tacc-2", "serve_system_tester-uc-1",
        "serve_system_tester-uc-2"]
    assert all(isinstance(r["lease_minutes_left"], int) for r in board["nodes"])
    assert not [r for r in board["nodes"] if "not in the inventory" in r["problem"]]
    assert status_main(["--inventory", str(chi_env / "hosts.yml"), "--ssh-port", str(sshd40.port),
                        "--probe-timeout", "2", *creds]) == 1
    text = capsys.readouterr().out
    assert "Lease serve_system_tester-uc-2 at CHI@UC" in text and "over CHI@TACC, CHI@UC" in text
    assert "0 of 40 node(s) healthy" in text

    # rebuild of a node at the second site: Nova's rebuild there, nothing at the first
    uc_node = next(n for n in inventory if n.vars["serve_site"] == UC)
    tacc_writes = len(sites[TACC].writes())
    assert script_main("rebuild", ["--inventory", str(chi_env / "hosts.yml"), "--ssh-port", str(sshd40.port),
                                   "--ssh-timeout", "5", "--poll", "0.01", "--server-timeout", "5",
                                   uc_node.name, *creds]) == 0
    (server,) = sites[UC].server_by_name(uc_node.name)
    assert [sid for sid, body in sites[UC].server_actions if "rebuild" in body] == [server["id"]]
    assert len(sites[TACC].writes()) == tacc_writes and sites[TACC].server_actions == []
    assert len(read_inventory(chi_env / "hosts.yml")) == 40

    # access sheets for all 40
    out_dir = chi_env / "sheets"
    assert script_main("access", ["--inventory", str(chi_env / "hosts.yml"), "--out", str(out_dir)]) == 0
    assert sorted(p.name for p in out_dir.iterdir() if p.suffix == ".txt") == \
        [f"s{i:02d}.txt" for i in range(40)]
    assert f"ssh -i ~/.ssh/YOUR_PRIVATE_KEY -p {sshd40.port} cc@{uc_node.address}" in \
        (out_dir / f"{uc_node.vars['serve_student']}.txt").read_text()

    # compare --class over runs of nodes of both sites (one run per site, as each site's playbook run
    # over its nodes writes them): the host names are the node names, unique over the sites
    runs = []
    for site in (TACC, UC):
        run = chi_env / "results" / "lab" / f"class-{site[4:].lower()}"
        for i, n in enumerate(n for n in inventory if n.vars["serve_site"] == site):
            if i >= 4:  # four nodes per site are enough for the comparison's statistics
                break
            src = lab_run(chi_env / "src" / n.name / "lab" / "r1", repetitions=3,
                          spread=tuple(s * (1 + 0.01 * i) for s in SPREAD[:3]))
            if not run.exists():
                run.mkdir(parents=True)
                shutil.copy(src / "manifest.json", run / "manifest.json")
            shutil.move(src / "node-1", run / n.name)
        runs.append(run)
    report = chi_env / "class-report"
    assert main(["compare", "--class", *map(str, runs), "--out", str(report)]) == 0
    doc = json.loads((report / "class.json").read_text())
    nodes = {n["node"] for n in doc["nodes"]}
    assert {n["host"] for n in doc["nodes"]} == nodes
    assert all(c["n"] == "8" for c in _csv_rows(report / "class.csv"))  # every node in every cell
    both = {n.name for n in inventory if n.vars["serve_site"] == TACC}, {n.name for n in inventory
                                                                          if n.vars["serve_site"] == UC}
    assert len(nodes) == 8 and len(nodes & both[0]) == 4 and len(nodes & both[1]) == 4
    assert not any("/" in n for n in nodes)  # no clash between the sites' host names

    # teardown: every server, floating IP and lease of the class at both sites
    assert script_main("teardown", ["--inventory", str(chi_env / "hosts.yml"), "--poll", "0.01",
                                    "--server-timeout", "5", "--delete-lease", *creds]) == 0
    for fake in sites.values():
        assert fake.servers == {} and fake.leases == {} and fake.floatingips == {}


def _csv_rows(path: Path) -> list[dict[str, str]]:
    import csv

    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_sites_needs_a_roster_and_known_sites(chi_env, capsys) -> None:  # type: ignore[no-untyped-def]
    assert launch_main(launch_args(chi_env, 22, "--count", "3", "--sites", f"{TACC},{UC}")) == 2
    assert "--sites splits a class roster" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # an argument error: argparse's usage line, exit status 2
        launch_main(launch_args(chi_env, 22, "--sites", "CHI@TACC,KVM@TACC"))
    assert exc.value.code == 2
    assert "'KVM@TACC' is not a Chameleon GPU site" in capsys.readouterr().err
    with pytest.raises(UsageError, match="row 2, site 'CHI@NU'"):
        roster.read_roster(_roster40(chi_env, {0: "CHI@NU"}))
