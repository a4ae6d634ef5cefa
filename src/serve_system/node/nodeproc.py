"""The node's processes, as the runner sees them from the client container: the measuring client run
under a memory and a time cap (and what its output says when it measured nothing), the node's CPU
counters in /proc read around a level (what else used the node: :class:`records.Contention`), Triton's
metrics sampled while a level runs, and what the kernel says of the host.

Packed into the node bundle beside :mod:`.runner` (which imports it; this module never imports the
runner) and :mod:`.records`; standard library only.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from . import records as rec

#: perf_analyzer's words for a measurement that did not settle (the runner retries with a longer window)
UNSTABLE = re.compile(r"Failed to obtain stable measurement", re.IGNORECASE)
#: perf_analyzer's own words for requests that failed (it can still exit 0 with nothing measured)
REQUEST_ERROR = re.compile(r"had error:\s*(.+)|(No valid requests recorded[^.\n]*)", re.IGNORECASE)


def _csv_rows(argv: list[str]) -> int | None:
    """The result rows of the CSV perf_analyzer was asked to write (``-f``); None: it was not asked."""
    if "-f" not in argv or argv.index("-f") + 1 >= len(argv):
        return None
    try:
        lines = Path(argv[argv.index("-f") + 1]).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return 0
    return max(0, sum(1 for ln in lines if ln.strip()) - 1)


def nothing_measured(argv: list[str], rc: int | None, text: str) -> str | None:
    """Why a perf_analyzer run that exited 0 measured nothing (no result row in its CSV), in its own
    words (the first request error it printed), or None when it measured the level."""
    if rc != 0 or _csv_rows(argv) != 0:
        return None
    found = list(REQUEST_ERROR.finditer(text))
    failed = next((m.group(1).strip() for m in found if m.group(1) and m.group(1).strip()), None)
    if failed:
        return f"perf_analyzer measured nothing: its requests failed: {failed}"
    said = next((m.group(2).strip() for m in found if m.group(2)), None)
    unstable = next((ln.strip() for ln in text.splitlines() if UNSTABLE.search(ln)), None)
    return f"perf_analyzer measured nothing: {said or unstable or 'no result row in its CSV'}"


class Sampler(threading.Thread):
    """Samples Triton's Prometheus metrics into metrics.jsonl while a level runs."""

    def __init__(self, url: str, out: Path, interval: float):
        super().__init__(daemon=True)
        self.url, self.out, self.interval = url, out, interval
        self.stop = threading.Event()
        self.errors = 0

    def run(self) -> None:
        with self.out.open("a", encoding="utf-8") as f:
            while not self.stop.is_set():
                t = time.time()
                try:
                    with urllib.request.urlopen(self.url, timeout=5) as resp:
                        line = {"t": t, "text": resp.read().decode("utf-8", "replace")}
                except OSError as exc:
                    self.errors += 1
                    line = {"t": t, "error": str(exc)}
                f.write(json.dumps(line) + "\n")
                f.flush()
                self.stop.wait(max(0.0, self.interval - (time.time() - t)))


#: the node's own /proc as the client container sees it (the serve_stack role mounts it there), else
#: the container's: /proc/stat and /proc/pressure are the node's either way, the processes are not
HOST_PROC = Path("/host/proc")


def proc_root() -> Path:
    return HOST_PROC if (HOST_PROC / "stat").is_file() else Path("/proc")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None


def cpu_snapshot(root: Path) -> dict[str, Any]:
    """One reading of the node's CPU counters: /proc/stat's busy, steal and total ticks and its CPU
    count, /proc/pressure/cpu's ``some`` total (microseconds), each process's CPU ticks and name."""
    out: dict[str, Any] = {"t": time.monotonic(), "cpus": 0, "procs": {}}
    for line in (_read(root / "stat") or "").splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            nums = [int(x) for x in parts[1:9] if x.isdigit()] + [0] * 8
            idle, steal = nums[3] + nums[4], nums[7]
            out.update(total=sum(nums[:8]), idle=idle, steal=steal)
        elif parts and parts[0].startswith("cpu") and parts[0][3:].isdigit():
            out["cpus"] += 1
    for line in (_read(root / "pressure" / "cpu") or "").splitlines():
        if line.startswith("some"):
            total = [f.split("=", 1)[1] for f in line.split() if f.startswith("total=")]
            if total and total[0].isdigit():
                out["pressure_us"] = int(total[0])
    try:  # the runner itself, as the node numbers it (``self`` resolves in the procfs' own namespace)
        me = int(os.readlink(root / "self"))
    except (OSError, ValueError):
        me = os.getpid()
    try:
        pids = [p for p in os.listdir(root) if p.isdigit() and int(p) != me]
    except OSError:
        pids = []
    for pid in pids:
        text = _read(root / pid / "stat")
        if not text or ")" not in text:
            continue
        comm = text[text.index("(") + 1:text.rindex(")")]
        rest = text[text.rindex(")") + 2:].split()
        if len(rest) > 12 and rest[11].isdigit() and rest[12].isdigit():
            out["procs"][int(pid)] = (comm, int(rest[11]) + int(rest[12]))
    return out


def contention(before: dict[str, Any], after: dict[str, Any], client_cpu_s: float = 0.0) -> rec.Contention:
    """What else used the node's CPU between two :func:`cpu_snapshot` readings (a level's span).
    ``client_cpu_s``: the measuring client's CPU seconds as its rusage counted them (it has exited
    by the second reading, so /proc no longer shows it)."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    seconds = max(1e-6, after["t"] - before["t"])
    cpus = max(1, int(after.get("cpus") or 1))
    c = rec.Contention(seconds=round(seconds, 3), cpus=cpus)
    if "total" in before and "total" in after and after["total"] > before["total"]:
        span = after["total"] - before["total"]
        c.busy = round(1 - (after["idle"] - before["idle"] + after["steal"] - before["steal"]) / span, 4)
        c.steal = round((after["steal"] - before["steal"]) / span, 4)
    if "pressure_us" in before and "pressure_us" in after:
        c.pressure = round(min(1.0, (after["pressure_us"] - before["pressure_us"]) / 1e6 / seconds), 4)
    procs = after["procs"]
    if any(comm in rec.MEASURING[:2] for comm, _ in procs.values()):  # the node's processes are visible
        used: dict[int, tuple[str, float]] = {}
        measuring = 0.0
        for pid, (comm, ticks) in procs.items():
            was = before["procs"].get(pid)
            delta = ticks - (was[1] if was and was[0] == comm else 0)
            if comm in rec.MEASURING:
                measuring += max(0, delta) / tick
            elif delta > 0:
                used[pid] = (comm, delta / tick)
        measuring += max(0.0, client_cpu_s)
        c.others = round(sum(s for _, s in used.values()) / (cpus * seconds), 4)
        c.measuring = round(measuring / (cpus * seconds), 4)
        if c.busy is not None:
            c.unseen = round(max(0.0, c.busy - c.others - c.measuring), 4)
        c.top = [f"{comm} ({pid}) {sec:.1f} CPU-s" for pid, (comm, sec) in
                 sorted(used.items(), key=lambda kv: -kv[1][1])[:5]]
    c.cause = rec.contention_cause(c)
    return c


def _rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        return None
    return None


def run_capped(argv: list[str], cwd: Path, memory_mb: float, timeout_s: float) -> tuple[rec.Attempt, str]:
    """Run a measuring command, killed if its resident memory passes ``memory_mb`` or time ``timeout_s``."""
    start = time.time()
    peak = 0.0
    reason = None
    out_path = cwd / ".attempt.out"
    with out_path.open("wb") as out:
        try:
            proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        except OSError as exc:
            return rec.Attempt(argv=argv, rc=None, start=start, end=time.time(),
                               reason=f"could not start: {exc}"), ""
        exited = _exit_signal(proc.pid)
        try:
            while (reaped := _reap(proc)) is None:
                rss = _rss_mb(proc.pid)
                if rss is not None:
                    peak = max(peak, rss)
                if rss is not None and rss > memory_mb:
                    reason = (f"killed by the runner: memory cap {memory_mb:.0f} MB reached "
                              f"(resident {rss:.0f} MB)")
                elif time.time() - start > timeout_s:
                    reason = f"killed by the runner: time cap {timeout_s:.0f} s reached"
                if reason:
                    os.killpg(proc.pid, signal.SIGKILL)
                    reaped = _reap(proc, block=True)
                    break
                _wait_exit(exited, 0.2)
        finally:
            if exited is not None:
                os.close(exited)
    rc = proc.returncode
    if reason is None and rc is not None and rc < 0:
        name = signal.Signals(-rc).name
        reason = (f"perf_analyzer was killed by {name}"
                  + (" (the kernel's OOM killer?)" if name == "SIGKILL" else ""))
    text = out_path.read_text(encoding="utf-8", errors="replace")
    out_path.unlink()
    return rec.Attempt(argv=argv, rc=rc, start=start, end=time.time(), reason=reason,
                       max_rss_mb=round(peak, 1) or None,
                       peak_rss_bytes=None if reaped is None else reaped[0] * 1024,
                       cpu_s=None if reaped is None else round(reaped[1], 3)), text


def _exit_signal(pid: int) -> int | None:
    """A file descriptor that becomes readable when process ``pid`` exits (a pidfd), or None where the
    kernel or Python has none (Linux before 5.3): the caller then waits its whole interval."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _wait_exit(exited: int | None, seconds: float) -> None:
    """Wait ``seconds``, or less: until the process of ``exited`` (:func:`_exit_signal`) exits. A level
    ends as its measuring command does, not up to one sampling interval later."""
    if exited is None:
        time.sleep(seconds)
    else:
        select.select([exited], [], [], seconds)


def _reap(proc: subprocess.Popen[bytes], block: bool = False) -> tuple[int, float] | None:
    """Reap ``proc`` if it ended (``block``: wait for it): its peak resident memory in KiB (the
    kernel's ru_maxrss, its reaped children included) and its CPU seconds (user + system), with
    ``proc.returncode`` set; None while it runs."""
    pid, status, usage = os.wait4(proc.pid, 0 if block else os.WNOHANG)
    if pid == 0:
        return None
    proc.returncode = os.waitstatus_to_exitcode(status)
    return int(usage.ru_maxrss), usage.ru_utime + usage.ru_stime


def host_facts() -> dict[str, Any]:
    """What the node's kernel says of the host, from inside the container (same kernel, CPUs and memory)."""
    memory_mb = None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            memory_mb = next((int(ln.split()[1]) // 1024 for ln in f if ln.startswith("MemTotal:")), None)
    except (OSError, ValueError):
        pass
    return {"kernel": os.uname().release, "cpus": os.cpu_count(), "memory_mb": memory_mb}
