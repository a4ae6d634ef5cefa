"""The wait before the play's first apt task: its bound, its reports, its one-line failure.

A node on its first boot is not idle: cloud-init is still at work, and on an image months old
(CC-Ubuntu24.04-CUDA leaves unattended-upgrades on) apt is installing updates, a kernel and a DKMS
rebuild of the driver among them, which holds apt's and dpkg's locks for minutes. ansible's apt
module waits 60 s for them (``lock_timeout``), then fails. Role ``apt_guard`` (imported by every
role of the play before its first apt task) waits first: for cloud-init to finish and for the locks
to be free, up to ``apt_guard_lock_timeout`` seconds, saying who holds what while it waits; every apt
task of the roles has the same bound as its ``lock_timeout`` (a lock taken again between tasks).

The looks run on the node (the role's module ``apt_guard_wait``: fcntl ``F_GETLK`` on each lock file,
``cloud-init status [--wait]``); :func:`wait` drives them from the controller (the role's action
plugin of the same name), one slice of at most :data:`REPORT_EVERY_S` seconds at a time, and writes
the lines the play shows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

#: seconds between two reports of a wait (one look on the node each)
REPORT_EVERY_S = 30.0
#: the role variable that bounds the wait
BOUND_VARIABLE = "apt_guard_lock_timeout"

#: one look on the node: seconds it may wait (0: look once) -> the module's answer
Look = Callable[[float], Mapping[str, Any]]


def holder_text(holder: Mapping[str, Any]) -> str:
    """``pid 812 (unattended-upgr: /usr/bin/python3 /usr/bin/unattended-upgrade, running 95 s)``."""
    pid = holder.get("pid")
    if pid == 0:
        return "a process outside this node's view (pid not visible here)"
    if pid == -1:
        return "an open file description lock (no pid)"
    about = [str(holder["name"])] if holder.get("name") else []
    if holder.get("cmdline") and holder.get("cmdline") != holder.get("name"):
        about = [f"{about[0]}: {holder['cmdline']}" if about else str(holder["cmdline"])]
    if holder.get("running_s") is not None:
        about.append(f"running {holder['running_s']} s")
    return f"pid {pid} ({', '.join(about)})" if about else f"pid {pid} (gone)"


def holders_text(holders: Iterable[Mapping[str, Any]]) -> str:
    """Each holder once with the locks it holds: ``pid 812 (...) holds /var/lib/dpkg/lock-frontend, ...``."""
    by_pid: dict[Any, tuple[Mapping[str, Any], list[str]]] = {}
    for h in holders:
        by_pid.setdefault(h.get("pid"), (h, []))[1].append(str(h["path"]))
    return "; ".join(f"{holder_text(h)} holds {', '.join(paths)}" for h, paths in by_pid.values())


def blocked_text(answer: Mapping[str, Any]) -> str:
    """What is in the way in one look: cloud-init still running, the locks and their holders."""
    parts = []
    ci = answer.get("cloud_init") or {}
    if not ci.get("done", True):
        parts.append(f"cloud-init is still {ci.get('status') or 'running'}")
    if answer.get("holders"):
        parts.append(holders_text(answer["holders"]))
    return "; ".join(parts) or "nothing"


def progress_line(host: str, answer: Mapping[str, Any], waited_s: float, bound_s: float) -> str:
    return (f"{host}: waiting before apt ({waited_s:.0f} s of {bound_s:.0f} s, {BOUND_VARIABLE}): "
            f"{blocked_text(answer)}")


def done_line(host: str, waited_s: float, holders: Iterable[Mapping[str, Any]],
              cloud_init: Mapping[str, Any] | None) -> str:
    """The line of a wait that ended: how long, for what, and cloud-init's end state where it waited."""
    what = []
    if cloud_init is not None:
        what.append(f"cloud-init to finish (status: {cloud_init.get('status') or 'unknown'})")
    holders = list(holders)
    if holders:
        what.append(f"apt's locks ({holders_text(holders)})")
    return f"{host}: waited {waited_s:.0f} s for {' and '.join(what)}; all free now"


def timeout_line(host: str, answer: Mapping[str, Any], bound_s: float) -> str:
    """The play's one line when the bound has passed: what still holds on, and the fix."""
    ci = answer.get("cloud_init") or {}
    if not ci.get("done", True):
        fix = ("see `cloud-init status --long` and /var/log/cloud-init-output.log on the node; run the play "
               "again once it is done")
    else:
        fix = ("on a first boot this is usually unattended-upgrades installing updates (a kernel, the "
               "driver's DKMS rebuild), which can take many minutes: let it finish (`systemctl status "
               "unattended-upgrades apt-daily-upgrade`, `tail -f /var/log/unattended-upgrades/"
               "unattended-upgrades-dpkg.log` on the node) and run the play again")
    return (f"{host}: still not free after {bound_s:.0f} s ({BOUND_VARIABLE}): {blocked_text(answer)}: "
            f"{fix}, or wait longer with -e {BOUND_VARIABLE}={max(2 * int(bound_s), 900)}")


def wait(look: Look, host: str, bound_s: float, report: Callable[[str], None],
         clock: Callable[[], float] = time.monotonic, every_s: float = REPORT_EVERY_S) -> dict[str, Any]:
    """Look at once; while anything is in the way, report it and look again for up to ``every_s``
    seconds, until all is free (one line says how long it waited, for what) or ``bound_s`` has passed
    (a failed result whose ``msg`` is :func:`timeout_line`). A failed look ends the wait with its answer.
    The result (no change) carries ``waited_s``, the ``holders`` seen (each once, as first seen) and
    cloud-init's last state."""
    answer = look(0)
    start = clock()  # the wait starts with the first answer (the first report says 0 s)
    seen: dict[tuple[Any, str], Mapping[str, Any]] = {}
    waited_for_cloud_init = False
    while not answer.get("failed") and not answer.get("free"):
        for h in answer.get("holders") or ():
            seen.setdefault((h.get("pid"), str(h.get("path"))), h)
        waited_for_cloud_init |= not (answer.get("cloud_init") or {}).get("done", True)
        elapsed = clock() - start
        if elapsed >= bound_s:
            return {"failed": True, "changed": False, "msg": timeout_line(host, answer, bound_s),
                    "waited_s": round(elapsed, 1), "holders": list(seen.values()),
                    "cloud_init": answer.get("cloud_init")}
        report(progress_line(host, answer, elapsed, bound_s))
        answer = look(min(every_s, bound_s - elapsed))
    if answer.get("failed"):
        return {**answer, "changed": False}
    waited = clock() - start
    cloud_init = answer.get("cloud_init") or {}
    if not seen and not waited_for_cloud_init:  # free at the first look: nothing to say
        return {"changed": False, "waited_s": 0, "holders": [], "cloud_init": cloud_init}
    report(done_line(host, waited, seen.values(), cloud_init if waited_for_cloud_init else None))
    return {"changed": False, "waited_s": round(waited, 1), "holders": list(seen.values()),
            "cloud_init": cloud_init}
