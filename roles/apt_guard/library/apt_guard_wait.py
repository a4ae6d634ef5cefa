"""Module of role apt_guard, run on the node: one slice of the wait for cloud-init and apt's locks.

The role's action plugin of the same name (``action_plugins/apt_guard_wait.py``) calls it once with
``seconds: 0`` (a look: is cloud-init done, who holds which lock) and then in slices of up to 30 s
until everything is free or the bound (``apt_guard_lock_timeout``) is passed, reporting between slices.

apt and dpkg lock their files with POSIX record locks (``fcntl(F_SETLK)`` on the whole file: apt-pkg's
``GetLock``, dpkg's ``file_lock``), not ``flock(2)``, which does not conflict with them on Linux. So a
lock is held when ``fcntl(F_GETLK)`` for a write lock over the whole file says so, and the kernel names
the holder's pid (as apt does in "It is held by process N"). Nothing here takes a lock or writes a file.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import struct
import subprocess
import time
from collections.abc import Callable
from typing import Any

DOCUMENTATION = r"""
module: apt_guard_wait
short_description: Wait, one slice, for cloud-init to finish and apt's and dpkg's locks to be free
description:
  - Looks at cloud-init (C(cloud-init status), or C(cloud-init status --wait) for up to O(seconds) when
    O(seconds) > 0) where it is installed, then at each lock file (fcntl F_GETLK) every O(poll) seconds
    until none is held or O(seconds) have passed. Returns what holds what; never fails for a held lock.
  - Run through the action plugin of the same name, which adds the bound and the reports.
options:
  locks:
    description: The lock files; a missing file is free.
    type: list
    elements: path
    required: true
  seconds:
    description: How long this call may wait (0 - look once).
    type: float
    default: 0
  poll:
    description: Seconds between looks at the locks.
    type: float
    default: 1
  cloud_init:
    description: cloud-init's command (looked up on PATH); empty - do not wait for cloud-init.
    type: str
    default: cloud-init
"""

#: struct flock on 64-bit Linux (amd64, arm64): l_type, l_whence, l_start, l_len, l_pid
_FLOCK = "hhqqi"
#: cloud-init's states that are not an end (`cloud-init status`: 22.x says "not run", 23.x+ "not started")
_CLOUD_INIT_PENDING = ("running", "not run", "not started")
#: how much of a holder's command line is reported
_CMDLINE_CHARS = 160


def lock_holder(path: str) -> int | None:
    """The pid of the process whose fcntl lock on ``path`` keeps a write lock out; None when it is free
    (or the file is missing). 0: a process this pid namespace cannot see; -1: an open file description
    lock, which has no pid."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    try:  # F_GETLK takes no lock; closing the descriptor drops none (this process holds none)
        got = fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
    finally:
        os.close(fd)
    kind, _whence, _start, _length, pid = struct.unpack(_FLOCK, got)
    return None if kind == fcntl.F_UNLCK else pid


def describe(pid: int, proc: str = "/proc") -> dict[str, Any]:
    """What the node says about process ``pid``: its name (comm), command line and seconds running;
    whatever cannot be read (the process is gone, no pid) is left out."""
    info: dict[str, Any] = {"pid": pid}
    if pid <= 0:
        return info
    base = os.path.join(proc, str(pid))
    try:
        with open(os.path.join(base, "comm"), encoding="utf-8", errors="replace") as f:
            info["name"] = f.read().strip()
        with open(os.path.join(base, "cmdline"), "rb") as fb:
            words = fb.read().rstrip(b"\0").split(b"\0")
        cmdline = " ".join(w.decode("utf-8", "replace") for w in words if w)
        if cmdline:
            info["cmdline"] = cmdline[:_CMDLINE_CHARS]
        with open(os.path.join(base, "stat"), encoding="utf-8", errors="replace") as f:
            started = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime in clock ticks
        with open(os.path.join(proc, "uptime"), encoding="utf-8") as f:
            uptime = float(f.read().split()[0])
        info["running_s"] = max(0, round(uptime - started / os.sysconf("SC_CLK_TCK")))
    except (OSError, ValueError, IndexError):
        pass
    return info


def held(locks: list[str]) -> list[dict[str, Any]]:
    """The locks of ``locks`` that are held now, each with its holder (:func:`describe`)."""
    out = []
    for path in locks:
        pid = lock_holder(path)
        if pid is not None:
            out.append({"path": path, **describe(pid)})
    return out


def cloud_init_status(command: str, seconds: float) -> dict[str, Any]:
    """cloud-init's state: ``done`` False while it runs. ``seconds`` > 0: ``cloud-init status --wait`` for
    up to that long; 0: ``cloud-init status`` (a look). Not installed (or ``command`` empty): done."""
    exe = shutil.which(command) if command else None
    if exe is None:
        return {"installed": False, "done": True}
    argv = [exe, "status", "--wait"] if seconds > 0 else [exe, "status"]
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=seconds if seconds > 0 else 60, check=False)
    except subprocess.TimeoutExpired:  # run() has killed it
        return {"installed": True, "done": False, "status": "running"}
    status = ""
    for line in proc.stdout.splitlines():
        if line.strip().startswith("status:"):
            status = line.split(":", 1)[1].strip()
    if not status:  # not the answer of any cloud-init seen: say what it said
        status = (proc.stdout.strip() or proc.stderr.strip() or f"exit {proc.returncode}").splitlines()[-1]
    return {"installed": True, "done": status not in _CLOUD_INIT_PENDING, "status": status,
            "rc": proc.returncode}


def wait_slice(locks: list[str], seconds: float, poll: float, cloud_init: str,
               clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """Wait up to ``seconds`` (0: look once) for cloud-init to be done, then for every lock of ``locks``
    to be free; ``free`` says whether both are so at the end, ``holders`` what holds which lock then."""
    start = clock()
    deadline = start + seconds
    ci = cloud_init_status(cloud_init, seconds)
    if not ci["done"]:
        return {"free": False, "cloud_init": ci, "holders": held(locks), "waited_s": clock() - start}
    while True:
        holders = held(locks)
        left = deadline - clock()
        if not holders or left <= 0:
            break
        sleep(min(poll, left))
    return {"free": not holders, "cloud_init": ci, "holders": holders, "waited_s": clock() - start}


def main() -> None:
    from ansible.module_utils.basic import AnsibleModule

    module = AnsibleModule(
        argument_spec={
            "locks": {"type": "list", "elements": "path", "required": True},
            "seconds": {"type": "float", "default": 0},
            "poll": {"type": "float", "default": 1},
            "cloud_init": {"type": "str", "default": "cloud-init"},
        },
        supports_check_mode=True,
    )
    p = module.params
    if p["seconds"] < 0 or p["poll"] <= 0:
        module.fail_json(msg="apt_guard_wait: seconds must be >= 0 and poll > 0")
    try:
        answer = wait_slice(p["locks"], p["seconds"], p["poll"], p["cloud_init"])
    except OSError as exc:  # a lock file that cannot be opened to look (no become), a link
        module.fail_json(msg=f"apt_guard_wait: cannot look at the lock {exc.filename}: {exc.strerror} "
                             "(the role looks as root: become)")
    module.exit_json(changed=False, **answer)


if __name__ == "__main__":
    main()
