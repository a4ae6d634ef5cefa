"""chi_scripts/lease.py, credentials and argument handling, against the HTTP-level fake Chameleon."""

from __future__ import annotations

import codecs
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from chi_harness import launch_main, lease_main, status_main, teardown_main

from serve_system.errors import ServeSystemError
from serve_system.provision.chameleon.credentials import parse_openrc, resolve_credentials

REPO = Path(__file__).resolve().parents[2]


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


def test_create_default_lease(fake) -> None:
    assert lease_main(["create"]) == 0
    body = fake.lease_create_bodies[0]
    assert body["name"] == "serve_system_tester"
    assert body["start_date"] == "now"
    end = datetime.strptime(body["end_date"], "%Y-%m-%d %H:%M")
    expected = datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=2, minutes=50)
    assert abs((end - expected).total_seconds()) < 120
    (res,) = body["reservations"]
    assert res["resource_type"] == "physical:host" and res["min"] == 1 and res["max"] == 1
    assert json.loads(res["resource_properties"]) == ["==", "$node_type", "gpu_p100"]
    assert len(fake.leases) == 1


def test_create_excludes_nodes_and_aligns_to_the_hour(fake) -> None:
    assert lease_main(["create", "--exclude-node", "c11-13", "--exclude-node", "c11-14", "--align-hour",
                       "--count", "2", "--site", "CHI@UC"]) == 0
    body = fake.lease_create_bodies[0]
    start = datetime.strptime(body["start_date"], "%Y-%m-%d %H:%M")
    end = datetime.strptime(body["end_date"], "%Y-%m-%d %H:%M")
    assert start.minute == 0 and start > datetime.now(UTC).replace(tzinfo=None)
    assert end - start == timedelta(hours=2, minutes=50) and end.minute == 50
    res = body["reservations"][0]
    assert res["min"] == 2 and res["max"] == 2
    assert json.loads(res["resource_properties"]) == [
        "and", ["!=", "$node_name", "c11-13"], ["!=", "$node_name", "c11-14"],
        ["==", "$node_type", "gpu_p100"]]
    assert any(p.startswith("https://chi.uc.fake:1234/") for _, p in fake.log)


def test_blazar_refusal_shows_blazars_reason(fake, capsys) -> None:
    fake.blazar_refusal = "Not enough hosts available"
    assert lease_main(["create"]) == 1
    line = _one_error_line(capsys)
    assert line.endswith("Blazar refused lease serve_system_tester at CHI@TACC: Not enough hosts available")
    assert "Unable to make lease" not in line
    assert fake.leases == {}


def test_create_reuses_live_lease_and_refuses_error_one(fake, capsys) -> None:
    fake.add_lease("serve_system_tester", status="PENDING")
    assert lease_main(["create"]) == 0
    assert fake.lease_create_bodies == []
    assert "already exists" in capsys.readouterr().out
    fake.leases.clear()
    bad = fake.add_lease("serve_system_tester", status="ERROR")
    assert lease_main(["create"]) == 1
    line = _one_error_line(capsys)
    assert bad["id"] in line and "delete it first" in line
    assert fake.lease_create_bodies == []


def test_create_dry_run(fake, capsys) -> None:
    assert lease_main(["create", "--dry-run"]) == 0
    assert fake.writes() == [] and fake.leases == {}
    assert "no lease created" in capsys.readouterr().out


def test_show_and_delete(fake, capsys) -> None:
    lease = fake.add_lease("serve_system_tester")
    assert lease_main(["show", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["id"] == lease["id"] and shown["reservation_id"] == lease["reservations"][0]["id"]
    assert shown["node_type"] == "gpu_p100" and shown["status"] == "ACTIVE"
    assert lease_main(["delete"]) == 0
    assert fake.leases == {}
    assert lease_main(["delete"]) == 0  # idempotent
    assert "nothing to delete" in capsys.readouterr().out


def test_delete_duplicates_needs_id(fake, capsys) -> None:
    a = fake.add_lease("serve_system_tester")
    b = fake.add_lease("serve_system_tester")
    assert lease_main(["delete"]) == 1
    line = _one_error_line(capsys)
    assert a["id"] in line and b["id"] in line and "--id" in line
    assert lease_main(["delete", "--id", a["id"]]) == 0
    assert list(fake.leases) == [b["id"]]


def test_missing_credentials_one_line_no_network(chi_env, monkeypatch, capsys) -> None:
    for name in ("OS_APPLICATION_CREDENTIAL_ID", "OS_APPLICATION_CREDENTIAL_SECRET", "OS_PROJECT_NAME"):
        monkeypatch.delenv(name)
    for main in (lease_main, launch_main, teardown_main, status_main):
        argv = ["show"] if main is lease_main else []
        assert main(argv) == 1
        line = _one_error_line(capsys)
        assert "missing OpenStack credentials" in line
        assert "OS_APPLICATION_CREDENTIAL_ID" in line and "--openrc" in line


def test_partial_credentials_name_the_missing_variable(chi_env, monkeypatch, capsys) -> None:
    monkeypatch.delenv("OS_APPLICATION_CREDENTIAL_SECRET")
    assert lease_main(["show"]) == 1
    line = _one_error_line(capsys)
    assert "missing OpenStack credentials: OS_APPLICATION_CREDENTIAL_SECRET; " in line


def test_rejected_credentials(fake, capsys) -> None:
    fake.reject_auth = True
    assert lease_main(["show"]) == 1
    assert "refused the credentials (HTTP 401)" in _one_error_line(capsys)


def test_openrc_is_parsed_not_executed(fake, chi_env, monkeypatch, tmp_path) -> None:
    for name in ("OS_APPLICATION_CREDENTIAL_ID", "OS_APPLICATION_CREDENTIAL_SECRET", "OS_PROJECT_NAME"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("OS_PASSWORD", "from-env")
    marker = tmp_path / "executed"
    rc = tmp_path / "openrc.sh"
    rc.write_text(
        "#!/usr/bin/env bash\n"
        f"touch {marker}\n"
        "export OS_AUTH_URL=https://chi.tacc.chameleoncloud.org:5000/v3\n"
        'export OS_USERNAME="someone@example.org"\n'
        "export OS_PROJECT_NAME='CHI-123456'\n"
        "export OS_USER_DOMAIN_NAME=chameleon\n"
        'read -sr OS_PASSWORD_INPUT\nexport OS_PASSWORD=$OS_PASSWORD_INPUT\n'
    )
    fake.add_lease("serve_system_tester")
    assert lease_main(["show", "--openrc", str(rc)]) == 0
    assert not marker.exists()
    auth = fake.auth_bodies[-1]["auth"]
    assert auth["identity"]["password"]["user"]["name"] == "someone@example.org"
    assert auth["identity"]["password"]["user"]["password"] == "from-env"
    assert auth["scope"]["project"]["name"] == "CHI-123456"


def test_parse_openrc_resolves_references(tmp_path) -> None:
    rc = tmp_path / "rc"
    rc.write_text('export OS_USERNAME=me\nexport OS_PROJECT_NAME="${OS_USERNAME}-proj"  # comment\n'
                  "OS_REGION_NAME=CHI@UC\nunrelated=1\n")
    assert parse_openrc(rc) == {"OS_USERNAME": "me", "OS_PROJECT_NAME": "me-proj", "OS_REGION_NAME": "CHI@UC"}


@pytest.mark.parametrize("raw, expected", [
    ("export OS_PROJECT_NAME=café\n".encode("utf-8-sig"), "café"),
    ("export OS_PROJECT_NAME=café\n".encode("utf-16"), "café"),
    ("export OS_PROJECT_NAME=café\n".encode("utf-16-be").join([codecs.BOM_UTF16_BE, b""]), "café"),
    ("export OS_PROJECT_NAME=café\n".encode("utf-32"), "café"),
    ("# Projet été\nexport OS_PROJECT_NAME=cafe\n".encode("latin-1"), "cafe"),  # Latin-1 off the values
])
def test_openrc_encodings_read_when_unambiguous(tmp_path, raw: bytes, expected: str) -> None:
    rc = tmp_path / "rc"
    rc.write_bytes(raw)
    assert parse_openrc(rc) == {"OS_PROJECT_NAME": expected}


@pytest.mark.parametrize("raw, fragment", [
    ("export OS_PROJECT_NAME=café\n".encode("latin-1"), "line 1 (OS_PROJECT_NAME): its value is not UTF-8"),
    ("export OS_PROJECT_NAME=café\n".encode("cp1252"), "its value is not UTF-8"),
    ("export OS_PROJECT_NAME=x\n".encode("utf-16-le"), "holds NUL bytes without a byte order mark"),
    (codecs.BOM_UTF16_LE + b"\x00\xd8", "starts with a UTF-16 byte order mark but byte"),
    (b"export OS_PASSWORD='a\x07b'\n", "line 1 (OS_PASSWORD): a control character"),
    (b"x" * (300 * 1024), "larger than 256 KiB"),
])
def test_openrc_ambiguous_or_damaged_is_one_line(tmp_path, raw: bytes, fragment: str) -> None:
    rc = tmp_path / "rc"
    rc.write_bytes(raw)
    with pytest.raises(ServeSystemError) as exc:
        parse_openrc(rc)
    assert str(exc.value).startswith(f"--openrc {rc}: ") and fragment in str(exc.value), str(exc.value)
    assert "\n" not in str(exc.value)


def test_openrc_pipe_or_folder_refused_without_reading(tmp_path) -> None:
    os.mkfifo(tmp_path / "pipe")
    for path, fragment in ((tmp_path / "pipe", "not a regular file"), (tmp_path, "is a folder")):
        with pytest.raises(ServeSystemError, match=fragment):
            parse_openrc(path)


def test_password_credentials_need_a_project() -> None:
    with pytest.raises(ServeSystemError, match="OS_PROJECT_NAME"):
        resolve_credentials({"OS_USERNAME": "a", "OS_PASSWORD": "b"})
    creds = resolve_credentials({"OS_APPLICATION_CREDENTIAL_ID": "i",
                                 "OS_APPLICATION_CREDENTIAL_SECRET": "sekrit-value",
                                 "OS_PROJECT_NAME": "CHI-1"})
    assert creds.auth_type == "v3applicationcredential" and creds.project is None
    assert "sekrit-value" not in repr(creds)


@pytest.mark.parametrize("argv, fragment", [
    (["--count", "0"], "--count: must be at least 1"),
    (["--count", "x"], "--count: not a number"),
    (["--ssh-port", "70000"], "port out of range"),
    (["--provider", "aws"], "invalid choice: 'aws'"),
    (["--margin", "soon"], "not a duration"),
    (["--margin", "30"], ("--margin: '30' has no unit: give 30m for minutes, 30h for hours or 30s for "
                          "seconds")),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_bad_launch_arguments(chi_env, capsys, argv, fragment) -> None:
    with pytest.raises(SystemExit) as exc:
        launch_main(argv)
    assert exc.value.code == 2
    line = _one_error_line(capsys)
    assert fragment in line and line.startswith("launch.py: error:")


@pytest.mark.parametrize("text, minutes", [("3m", 3), ("90s", 1.5), ("2h", 120), ("2h50m", 170),
                                           ("2h 50m", 170), ("1H30M", 90), ("1h0m30s", 60.5)])
def test_a_duration_is_numbers_with_their_units(text: str, minutes: float) -> None:
    from serve_system.commands.chiargs import duration

    assert duration(text) == timedelta(minutes=minutes)


@pytest.mark.parametrize("text, fragment", [
    ("3", "'3' has no unit: give 3m for minutes, 3h for hours or 3s for seconds"),  # once 3 minutes, silently
    (" 170 ", "'170' has no unit: give 170m"),
    ("3 hours", "not a duration like 2h50m, 170m or 90s"), ("30s2m", "not a duration like"),
    ("0m", "duration must be positive"), ("745h", "longer than 31 days"),
])
def test_a_duration_without_a_unit_is_refused_with_the_fix(text: str, fragment: str) -> None:
    import argparse

    from serve_system.commands.chiargs import duration

    with pytest.raises(argparse.ArgumentTypeError, match=fragment):
        duration(text)
    # the lease's length as the user gives it on the command line: the option is named
    with pytest.raises(SystemExit):
        lease_main(["create", "--duration", text])


def test_bad_lease_arguments(chi_env, capsys) -> None:
    with pytest.raises(SystemExit):
        lease_main(["create", "--start", "tomorrow"])
    assert "not a UTC time" in _one_error_line(capsys)
    assert lease_main(["create", "--start", "2001-01-01 00:00"]) == 2
    assert "is in the past" in _one_error_line(capsys)
    assert lease_main(["create", "--start", "2999-01-01 10:00", "--end", "2999-01-01 09:00"]) == 2
    assert "end before it starts" in _one_error_line(capsys)


@pytest.mark.parametrize("script", ["lease", "launch", "teardown", "status"])
def test_scripts_help_runs_with_the_venv_python(script) -> None:
    proc = subprocess.run([sys.executable, str(REPO / "chi_scripts" / f"{script}.py"), "--help"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: {script}.py")
    assert ("create" if script == "lease" else "--site") in proc.stdout


def test_launch_script_without_credentials_exits_with_one_line(tmp_path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "USER": "tester"}
    proc = subprocess.run([sys.executable, str(REPO / "chi_scripts" / "launch.py")], capture_output=True,
                          text=True, timeout=60, check=False, env=env)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "missing OpenStack credentials" in lines[0]
    assert proc.stdout == ""  # nothing before the error (not even the key-path warning)
