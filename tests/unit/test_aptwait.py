"""The wait before the play's first apt task: role apt_guard's module (the looks on the node) and
serve_system.aptwait (the loop, the bound, the lines), over real fcntl locks held by another process.

The locks are taken as apt and dpkg take theirs (a POSIX write lock on the whole file: ``lockf``), by a
child process, on files in a temporary directory.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from serve_system import aptwait

REPO = Path(__file__).resolve().parents[2]

#: holds a write lock on each file named after the seconds, as apt and dpkg do (fcntl F_SETLK, whole file)
HOLDER = """\
import fcntl, os, sys, time
fds = [os.open(p, os.O_RDWR | os.O_CREAT, 0o640) for p in sys.argv[2:]]
for fd in fds:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("locked", flush=True)
time.sleep(float(sys.argv[1]))
"""


def _module() -> ModuleType:
    path = REPO / "roles" / "apt_guard" / "library" / "apt_guard_wait.py"
    spec = importlib.util.spec_from_file_location("apt_guard_wait_module", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


mod = _module()


@contextmanager
def held(tmp_path: Path, seconds: float, *names: str) -> Iterator[subprocess.Popen[str]]:
    """A child process holding fcntl write locks on ``names`` (in tmp_path, its folder) for ``seconds``."""
    script = tmp_path / "hold-lock"
    script.write_text(HOLDER)
    proc = subprocess.Popen([sys.executable, script.name, str(seconds), *names], cwd=tmp_path,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_held_lock_names_its_holder_and_a_free_or_missing_one_is_free(tmp_path: Path) -> None:
    (tmp_path / "free").write_text("")
    with held(tmp_path, 60, "lock-frontend", "lock") as proc:
        assert mod.lock_holder(str(tmp_path / "lock-frontend")) == proc.pid
        assert mod.lock_holder(str(tmp_path / "free")) is None
        assert mod.lock_holder(str(tmp_path / "missing")) is None
        who = mod.held([str(tmp_path / n) for n in ("lock-frontend", "lock", "free", "missing")])
        assert [h["path"] for h in who] == [str(tmp_path / "lock-frontend"), str(tmp_path / "lock")]
        h = who[0]
        assert h["pid"] == proc.pid and h["name"].startswith("python")
        assert h["cmdline"] == f"{sys.executable} hold-lock 60 lock-frontend lock"[:160]
        assert 0 <= h["running_s"] < 60
        text = aptwait.holders_text(who)  # one holder, both its locks
        assert text == (f"pid {proc.pid} ({h['name']}: {h['cmdline']}, running {h['running_s']} s) holds "
                        f"{tmp_path}/lock-frontend, {tmp_path}/lock")
    assert mod.lock_holder(str(tmp_path / "lock-frontend")) is None  # the holder is gone: free


def test_an_flock_lock_is_not_an_apt_lock(tmp_path: Path) -> None:
    """flock(2) does not conflict with the fcntl locks apt takes (Linux): apt is not kept out by it, so
    the wait does not wait for it either (`flock /var/lib/dpkg/lock-frontend sleep 120` holds nothing)."""
    path = tmp_path / "lock-frontend"
    path.write_text("")
    with open(path) as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        assert mod.lock_holder(str(path)) is None
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what apt does: granted beside the flock
        finally:
            os.close(fd)


def test_a_slice_ends_when_the_lock_is_freed_or_its_seconds_are_up(tmp_path: Path) -> None:
    locks = [str(tmp_path / "lock-frontend"), str(tmp_path / "lock")]
    with held(tmp_path, 1.5, "lock-frontend"):
        started = time.monotonic()
        answer = mod.wait_slice(locks, 30, 0.1, "")
        took = time.monotonic() - started
    assert answer["free"] and answer["holders"] == [] and answer["cloud_init"] == {"installed": False,
                                                                                    "done": True}
    assert 0.5 < took < 20 and answer["waited_s"] == pytest.approx(took, abs=0.5)

    with held(tmp_path, 60, "lock") as proc:
        look = mod.wait_slice(locks, 0, 0.1, "")  # seconds 0: one look
        assert not look["free"] and [h["pid"] for h in look["holders"]] == [proc.pid]
        started = time.monotonic()
        answer = mod.wait_slice(locks, 0.6, 0.1, "")
        assert 0.5 < time.monotonic() - started < 10
        assert not answer["free"] and answer["holders"][0]["path"] == locks[1]


def _cloud_init(tmp_path: Path, wait_s: float) -> str:
    """A stand-in for cloud-init's command line (cloud-init does not run on this machine): `status`
    answers as cloud-init 24.x does while it runs, `status --wait` after ``wait_s`` with its end."""
    exe = tmp_path / "cloud-init"
    exe.write_text(
        "#!/bin/sh\n"
        f'if [ "$2" = --wait ]; then sleep {wait_s}; printf "\\n...\\nstatus: done\\n"; exit 0; fi\n'
        'echo "status: running"\n')
    exe.chmod(0o755)
    return str(exe)


def test_cloud_init_is_waited_for_within_the_slice_and_reported_while_it_runs(tmp_path: Path) -> None:
    quick, slow = tmp_path / "quick", tmp_path / "slow"
    quick.mkdir()
    slow.mkdir()
    assert mod.cloud_init_status(_cloud_init(quick, 0.2), 5) == {
        "installed": True, "done": True, "status": "done", "rc": 0}
    assert mod.cloud_init_status(_cloud_init(quick, 0.2), 0)["status"] == "running"  # a look
    assert mod.cloud_init_status(str(tmp_path / "absent"), 5) == {"installed": False, "done": True}
    started = time.monotonic()
    with held(tmp_path, 60, "lock") as proc:
        answer = mod.wait_slice([str(tmp_path / "lock")], 1, 0.1, _cloud_init(slow, 30))
    assert time.monotonic() - started < 15  # the --wait was cut at the slice's end
    assert answer["free"] is False and answer["cloud_init"] == {"installed": True, "done": False,
                                                                "status": "running"}
    assert [h["pid"] for h in answer["holders"]] == [proc.pid]  # and who holds what meanwhile
    assert aptwait.blocked_text(answer).startswith(f"cloud-init is still running; pid {proc.pid} (")


def _look(locks: list[str], poll: float = 0.1) -> aptwait.Look:
    return lambda seconds: mod.wait_slice(locks, seconds, poll, "")


def test_the_wait_reports_the_holder_and_ends_when_the_lock_is_freed(tmp_path: Path) -> None:
    lines: list[str] = []
    locks = [str(tmp_path / "lock-frontend"), str(tmp_path / "lock")]
    with held(tmp_path, 4, "lock-frontend", "lock") as proc:
        result = aptwait.wait(_look(locks), "node-1", 60, lines.append, every_s=1)
    assert result["changed"] is False and "failed" not in result
    assert 1 <= result["waited_s"] < 30
    assert [h["pid"] for h in result["holders"]] == [proc.pid, proc.pid]
    assert len(lines) >= 3  # at once, after each 1 s slice, the end
    assert all(line.startswith("node-1: waiting before apt (") for line in lines[:-1])
    assert lines[0].startswith(
        f"node-1: waiting before apt (0 s of 60 s, apt_guard_lock_timeout): pid {proc.pid} (")
    assert lines[0].endswith(f"holds {locks[0]}, {locks[1]}")
    assert lines[-1].startswith(
        f"node-1: waited {result['waited_s']:.0f} s for apt's locks (pid {proc.pid} (")
    assert lines[-1].endswith("; all free now")


def test_nothing_held_is_one_look_and_no_line(tmp_path: Path) -> None:
    lines: list[str] = []
    calls: list[float] = []
    look = _look([str(tmp_path / "lock")])
    result = aptwait.wait(lambda s: (calls.append(s), look(s))[1], "node-1", 900, lines.append)
    assert result == {"changed": False, "waited_s": 0, "holders": [],
                      "cloud_init": {"installed": False, "done": True}}
    assert calls == [0] and lines == []


def test_past_the_bound_the_wait_fails_with_one_line_naming_the_holder_and_the_fix(tmp_path: Path) -> None:
    lines: list[str] = []
    with held(tmp_path, 60, "lock-frontend") as proc:
        started = time.monotonic()
        result = aptwait.wait(_look([str(tmp_path / "lock-frontend")]), "node-1", 1.5, lines.append,
                              every_s=1)
        assert time.monotonic() - started < 20
    msg = result["msg"]
    assert result["failed"] is True and "\n" not in msg
    assert msg.startswith(f"node-1: still not free after 2 s (apt_guard_lock_timeout): pid {proc.pid} (")
    assert f"holds {tmp_path}/lock-frontend: on a first boot this is usually unattended-upgrades" in msg
    assert msg.endswith("or wait longer with -e apt_guard_lock_timeout=900")
    assert result["waited_s"] >= 1.5 and [h["pid"] for h in result["holders"]] == [proc.pid]
    assert lines and all(line.startswith("node-1: waiting before apt (") for line in lines)

    # a bound of 0: one look, no wait
    with held(tmp_path, 60, "lock-frontend"):
        zero = aptwait.wait(_look([str(tmp_path / "lock-frontend")]), "node-1", 0, lines.append)
    assert zero["failed"] is True and "after 0 s" in zero["msg"] and zero["msg"].endswith("=900")


def test_a_failed_look_ends_the_wait_with_its_own_answer() -> None:
    answer = {"failed": True, "msg": "apt_guard_wait: cannot look at the lock /x: Permission denied"}
    assert aptwait.wait(lambda s: answer, "n", 900, print) == {**answer, "changed": False}


@pytest.mark.parametrize(("holder", "text"), [
    ({"pid": 0}, "a process outside this node's view (pid not visible here)"),
    ({"pid": -1}, "an open file description lock (no pid)"),
    ({"pid": 7}, "pid 7 (gone)"),
    ({"pid": 7, "name": "apt-get", "cmdline": "apt-get install -y x", "running_s": 3},
     "pid 7 (apt-get: apt-get install -y x, running 3 s)"),
    ({"pid": 7, "name": "dpkg", "cmdline": "dpkg", "running_s": 3}, "pid 7 (dpkg, running 3 s)"),
])
def test_holder_text(holder: dict[str, Any], text: str) -> None:
    assert aptwait.holder_text(holder) == text


def test_a_cloud_init_wait_says_how_it_ended() -> None:
    ci = {"installed": True, "done": True, "status": "error", "rc": 1}
    assert (aptwait.done_line("n", 42.4, [], ci)
            == "n: waited 42 s for cloud-init to finish (status: error); all free now")
    running = {"free": False, "holders": [],
               "cloud_init": {"installed": True, "done": False, "status": "running"}}
    msg = aptwait.timeout_line("n", running, 900)
    assert msg.startswith("n: still not free after 900 s (apt_guard_lock_timeout): cloud-init is still "
                          "running: see `cloud-init status --long`")
    assert msg.endswith("-e apt_guard_lock_timeout=1800")
