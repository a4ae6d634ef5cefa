"""Ctrl-C ends a command within moments, whatever its probes and workers are doing.

Three pieces, used together:

* :func:`run_child` starts a helper command (an SSH probe, ssh-keyscan) in a process group of its
  own and keeps it in a registry. The terminal's SIGINT does not reach it (so a child forked in the
  instant the signal arrived cannot miss it and run on); :func:`abort` kills every registered group
  with SIGKILL instead, so no probe is waited for.
* :func:`parallel` runs work in daemon threads: when the caller is interrupted it aborts and
  returns at once, and a worker still inside a slow call (a socket, an HTTP request) never holds up
  the interpreter's exit, as a ``ThreadPoolExecutor``'s threads would (they are joined at exit).
* :data:`stopping` is set by :func:`abort`: wait loops in workers wait on it instead of sleeping.

``serve_system.cli.run`` installs :func:`on_sigint` (SIGINT aborts at once, then raises
KeyboardInterrupt) and returns 130; a program's entry point (``serve-system``, ``chi_scripts/*.py``)
then ends with :func:`exit_now`, without the seconds of interpreter finalization.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NoReturn, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: set once the command is interrupted: workers stop waiting and stop starting children
stopping = threading.Event()

#: re-entrant: the SIGINT handler (:func:`on_sigint`) may run in the main thread while it holds it
_lock = threading.RLock()
_children: set[subprocess.Popen[str]] = set()


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the child leads its own group: its own children go too
    except (ProcessLookupError, PermissionError):
        pass


def abort() -> None:
    """The command was interrupted: kill every registered child's process group, stop the waits."""
    stopping.set()
    with _lock:
        for proc in list(_children):
            _kill_group(proc)


@contextlib.contextmanager
def on_sigint() -> Iterator[None]:
    """While inside: SIGINT first calls :func:`abort`, then raises KeyboardInterrupt as Python does.

    Aborting in the handler itself, not where the KeyboardInterrupt is caught, matters: on its way
    up, the exception may pass a ``with ThreadPoolExecutor`` (a library's, or an image build's) that
    waits for its workers, and those workers stop only once :data:`stopping` is set. Outside the main
    thread, or where SIGINT is ignored or handled by someone else, nothing changes.
    """
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        abort()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def exit_now(code: int) -> NoReturn:
    """End this process with ``code`` at once: stdout and stderr flushed, the interpreter's own
    finalization skipped. For a program's entry point after Ctrl-C: with the OpenStack clients
    loaded, finalization alone took 1.8-2.8 s on the busy 2-core build machine (a plain exit of a
    process that imported them), most of the 2 s a command has to end in."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more to say there
            pass
    os._exit(code)


def reset() -> None:
    """Forget an earlier interruption (a library caller, or a test, that goes on after one)."""
    stopping.clear()


def run_child(argv: Sequence[str], *, input: str | None = None,
              timeout: float) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, capture_output=True, text=True, timeout=timeout)`` for a helper command,
    in its own process group, killed (with its group) on timeout or on :func:`abort`.

    Raises ``subprocess.TimeoutExpired`` on timeout, ``OSError`` when it cannot start, and
    ``KeyboardInterrupt`` when the command is being interrupted.
    """
    if stopping.is_set():
        raise KeyboardInterrupt
    proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    with _lock:
        _children.add(proc)
        if stopping.is_set():  # abort() ran between our check and the registration: it missed us
            _kill_group(proc)
    try:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.communicate()
            raise
        except BaseException:  # interrupted in this thread (the main one): the child must not outlive us
            _kill_group(proc)
            raise
    finally:
        with _lock:
            _children.discard(proc)
    if stopping.is_set() and proc.returncode == -signal.SIGKILL:
        raise KeyboardInterrupt
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def parallel(fn: Callable[[T], R], items: Iterable[T], *, max_workers: int = 64) -> list[R]:
    """``[fn(x) for x in items]``, at most ``max_workers`` at a time, in daemon threads; results in
    the order of ``items``. The first exception of a worker is raised (the others still finish).
    Interrupted (Ctrl-C in the calling thread), it calls :func:`abort` and does not wait for them."""
    todo = list(items)
    if not todo:
        return []
    results: list[R | None] = [None] * len(todo)
    errors: list[BaseException] = []
    work: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i in range(len(todo)):
        work.put(i)
    left = [len(todo)]
    done = threading.Event()
    count_lock = threading.Lock()

    def worker() -> None:
        while True:
            try:
                i = work.get_nowait()
            except queue.Empty:
                return
            try:
                if stopping.is_set():
                    raise KeyboardInterrupt
                results[i] = fn(todo[i])
            except BaseException as exc:  # noqa: BLE001 - handed to the caller; a worker must not die loudly
                errors.append(exc)
            with count_lock:
                left[0] -= 1
                if left[0] == 0:
                    done.set()

    for _ in range(max(1, min(max_workers, len(todo)))):
        threading.Thread(target=worker, daemon=True, name="serve-system-worker").start()
    try:
        # waited for in short steps: the kernel may hand a process's SIGINT to any of its threads, and
        # on a worker it only sets Python's flag; the handler runs once the main thread next runs
        # bytecode, which a wait without a timeout delays until every worker is done (a probe's whole
        # timeout: Ctrl-C was seen to hang status --watch and launch for over a minute)
        while not done.wait(0.1):
            pass
    except BaseException:
        abort()
        raise
    if errors:
        raise errors[0]
    return results  # type: ignore[return-value]
