"""The host-side half of a runner call: ``python3 .node.pyz --follow LOG --seq N`` waits, on the node
itself, for level ``N``'s event of a detached runner (:mod:`.runner`, in the client container) in its
event log, and prints the call's events up to it; the ``experiment`` role runs it once per level (its
command lines: :mod:`.runnercall`). Standard library only (it travels in the node bundle)."""

from __future__ import annotations

import argparse
import fcntl
import sys
import time
from pathlib import Path

from . import events
from . import records as rec

#: how often the log is looked at (a stat; it is read only when it grew)
POLL_S = 0.05


def runner_alive(lock: Path) -> bool:
    """Whether a runner holds a run's lock (each holds it from its start to its end)."""
    try:
        with open(lock, "a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(f, fcntl.LOCK_UN)
            return False
    except OSError:
        return False


def follow(log: Path, seq: int, timeout: float, stderr: Path | None = None) -> int:
    """Wait for level ``seq``'s event (or the call's end) in a running call's ``--log``; print the
    call's events up to it. When it is the call's last level, wait for the end too (it comes at once).

    The role calls this once per level while the runner goes on, so each level is shown as it ends,
    and reads the last answer for the whole call. Exit 1 with one line when the runner is gone without
    its end event (what it wrote to ``stderr`` is quoted) or nothing comes within ``timeout`` seconds.
    """
    deadline = time.time() + timeout
    size, quiet_since, checked = -1, time.time(), 0.0
    while True:
        if (now_size := _size(log)) != size:  # the log grew (it only grows): read and look again
            size, quiet_since = now_size, time.time()
            try:
                text = log.read_text(encoding="utf-8")
            except FileNotFoundError:
                text = ""
            try:
                got, _ = events.read_events(text[:text.rfind("\n") + 1], str(log))  # whole lines only
            except rec.RecordError as exc:
                print(exc, file=sys.stderr)
                return 2
            ends = [i for i, e in enumerate(got) if e.kind == events.END]
            hit = next((i for i, e in enumerate(got) if e.kind == events.LEVEL and e.seq == seq), None)
            if ends or (hit is not None and got[hit].seq != got[hit].total):
                upto = ends[0] + 1 if ends else (hit or 0) + 1
                for e in got[:upto]:
                    print(events.event_line(e), flush=True)
                return 0
        now = time.time()
        if now - quiet_since >= 5 and now - checked >= 5:
            checked = now
            if not runner_alive(log.parent / rec.RUNNER_LOCK) and _size(log) == size:
                said = (stderr.read_text(errors="replace").strip().splitlines()
                        if stderr and stderr.is_file() else [])
                print(f"{log}: the runner is gone without its end event"
                      + (f"; it said: {said[-1]}" if said else "") + ": see its log and "
                      + (str(stderr) if stderr else "the node"), file=sys.stderr)
                return 1
        if now >= deadline:
            print(f"{log}: no event of level {seq} nor the end within {timeout:.0f} s: see the runner's log",
                  file=sys.stderr)
            return 1
        # a look is one stat() while nothing is written: often enough that a call's end is seen at once
        time.sleep(POLL_S)


def _size(log: Path) -> int:
    """The event log's size (0 before the runner made it): it only grows, so a new size is new lines."""
    try:
        return log.stat().st_size
    except FileNotFoundError:
        return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--follow", type=Path, required=True, metavar="LOG",
                    help="wait for level --seq's event (or the end) in a running call's --log file; print it")
    ap.add_argument("--seq", type=int, default=1, help="the level's number in the call (0: its end)")
    ap.add_argument("--stderr", type=Path, default=None,
                    help="the runner's own errors (its --stderr): quoted when the runner is gone")
    ap.add_argument("--timeout", type=float, default=3600.0, help="how long to wait (s)")
    args = ap.parse_args(argv)
    return follow(args.follow, args.seq, args.timeout, args.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
