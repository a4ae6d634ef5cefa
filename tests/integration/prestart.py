"""Shared integration setups started in the background while the tests that need no node run.

The integration tests' big setups (the node images, the shared rehearsal cluster with its site.yml
run, the upstream path's nodes, the local Triton) take minutes and measure nothing; neither do the
unit, bad-input and fuzz tests. So the suite runs those tests first (:func:`order`), and the setups
the collected integration tests need start at once, one after the other, in one background thread
(:class:`Background`): by the time the first integration test asks for its fixture, it is usually
ready. No measurement runs beside them: the integration tests start after the last other test.

A fixture takes part by being declared with :func:`prestartable` instead of ``pytest.fixture``. Its
body is a generator function of one argument, a fresh work folder, that yields the fixture's value
once and tears down after it (as a generator fixture does). Collected but never used (a keyword
selects other tests later), it is still torn down at the session's end; when the suite is started
with ``-p no:...`` or ``--collect-only``, or the fixture is not among the collected tests' fixtures,
the body runs where pytest would run it.

``SERVE_SYSTEM_IT_PRESTART=0`` turns the background off (every body runs in place).
At the end, one line gives each set-up's time and how long the tests waited for it (also written to
``$SERVE_SYSTEM_SETUP_REPORT`` when set: scripts/test.sh prints it after the suite).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

#: a fixture body: given its work folder, yields its value once, then tears down
Body = Callable[[Path], Iterator[Any]]

#: every prestartable body, by fixture name (names are unique across tests/integration)
BODIES: dict[str, Body] = {}
#: each body's fixture scope
SCOPES: dict[str, str] = {}


def prestartable(scope: str) -> Callable[[Body], Any]:
    """``pytest.fixture(scope=scope)`` for a body that may be started in the background."""

    def wrap(body: Body) -> Any:
        name = body.__name__
        if name in BODIES and BODIES[name] is not body:
            raise RuntimeError(f"two prestartable fixtures are named {name!r}")
        BODIES[name] = body
        SCOPES[name] = scope

        @pytest.fixture(scope=scope, name=name)  # type: ignore[call-overload,untyped-decorator]
        def fixture() -> Iterator[Any]:
            yield from BACKGROUND.take(name)

        fixture.__doc__ = body.__doc__
        return fixture

    return wrap


def _workdir(name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"serve-system-it-{name}-"))


def _drop(workdir: Path) -> None:
    if os.environ.get("SERVE_SYSTEM_IT_KEEP") != "1":
        shutil.rmtree(workdir, ignore_errors=True)


@dataclass
class _Job:
    name: str
    workdir: Path
    ready: threading.Event = field(default_factory=threading.Event)
    gen: Iterator[Any] | None = None
    value: Any = None
    error: BaseException | None = None
    closed: bool = False
    #: seconds the body took up to its ``yield`` (its set-up), and seconds a test waited for it
    setup_s: float = 0.0
    waited_s: float = 0.0

    def close(self) -> None:
        """Run the body's teardown (once), then drop its work folder."""
        if self.closed:
            return
        self.closed = True
        try:
            if self.gen is not None:
                for _ in self.gen:  # the body yields once: resuming it runs its teardown
                    raise RuntimeError(f"the {self.name} fixture yielded twice")
        finally:
            _drop(self.workdir)


class Background:
    """The started bodies, run in order in one thread, each up to its ``yield``."""

    def __init__(self) -> None:
        self._jobs: dict[str, _Job] = {}
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    def start(self, names: list[str]) -> None:
        if self._thread is not None or not names:
            return
        for name in names:
            self._jobs[name] = _Job(name, _workdir(name))
        print(f"\n[prestart] set up in the background while the other tests run: {', '.join(names)}",
              file=sys.stderr)
        self._thread = threading.Thread(target=self._run, name="prestart", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for job in self._jobs.values():
            started = time.monotonic()
            try:
                if self._stopping.is_set():
                    raise RuntimeError("the session ended before this setup started")
                job.gen = BODIES[job.name](job.workdir)
                job.value = next(job.gen)
            except BaseException as exc:  # noqa: BLE001 - raised again where the fixture is used
                job.error = exc
            finally:
                job.setup_s = time.monotonic() - started
                job.ready.set()

    def take(self, name: str) -> Iterator[Any]:
        """The fixture's value (waiting for the background if it started it), then its teardown."""
        with self._lock:
            job = self._jobs.get(name)
        if job is None:  # not started in the background: run in place
            workdir = _workdir(name)
            try:
                yield from BODIES[name](workdir)
            finally:
                _drop(workdir)
            return
        asked = time.monotonic()
        job.ready.wait()
        job.waited_s = time.monotonic() - asked
        if job.error is not None:
            job.close()
            raise job.error
        try:
            yield job.value
        finally:
            job.close()

    def finish(self) -> None:
        """At the session's end: wait for a setup in progress, then tear down whatever was not."""
        self._stopping.set()
        if self._thread is None:
            return
        if self._thread.is_alive():
            print("[prestart] waiting for the background setup in progress to tear it down", file=sys.stderr)
        self._thread.join()
        for job in self._jobs.values():
            job.close()
        line = self.summary()
        print(line, file=sys.stderr)
        report = os.environ.get("SERVE_SYSTEM_SETUP_REPORT")
        if report:  # scripts/test.sh prints it again after pytest's own summary
            Path(report).write_text(line + "\n", encoding="utf-8")

    def summary(self) -> str:
        """One line: each background set-up's time, and how long the tests waited for it (the part of
        the set-up the other tests did not hide)."""
        parts = [f"{job.name} {job.setup_s:.0f} s (waited {job.waited_s:.0f} s)"
                 for job in self._jobs.values()]
        total = sum(job.setup_s for job in self._jobs.values())
        waited = sum(job.waited_s for job in self._jobs.values())
        return (f"[prestart] background set-ups {total:.0f} s, of which the tests waited {waited:.0f} s: "
                + "; ".join(parts))


BACKGROUND = Background()


def wanted(items: list[pytest.Item]) -> list[str]:
    """The prestartable fixtures the items use, in the order the items first use them."""
    out: list[str] = []
    for item in items:
        for name in getattr(item, "fixturenames", ()):
            if name in BODIES and name not in out:
                out.append(name)
    return out


def order(items: list[pytest.Item], is_integration: Callable[[pytest.Item], bool]) -> None:
    """Every other test first, then the integration tests: those whose modules use a prestartable
    module fixture first (in the order the background sets them up: their nodes and servers are gone
    before the rest measures), then the rest as collected."""
    first_use: dict[str, int] = {}
    for item in items:
        if is_integration(item):
            for name in getattr(item, "fixturenames", ()):
                if SCOPES.get(name) == "module":
                    first_use.setdefault(item.module.__name__ if item.module else "", len(first_use))

    def key(pair: tuple[int, pytest.Item]) -> tuple[int, int, int]:
        index, item = pair
        if not is_integration(item):
            return (0, 0, index)
        module = item.module.__name__ if item.module else ""
        return (1, first_use.get(module, len(first_use)), index)

    items[:] = [item for _, item in sorted(enumerate(items), key=key)]
