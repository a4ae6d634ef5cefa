"""Running build steps concurrently in the order their dependencies allow.

A :class:`Step` names what it needs (other steps' keys) and an action. :func:`run` starts every step
whose needs are done, up to ``workers`` at once (the actions are subprocesses: debootstrap, podman
build, podman save, so threads are enough), and returns each step's result. The first failure stops
new steps from starting, lets the running ones finish and raises one :class:`ServeSystemError`
naming the step that failed (its label) and why, in one line.

The actions keep their own cache rules (a per-image lock, a write under a temporary name renamed
into place), so a step that another session is running too waits for it instead of racing it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from ..errors import ServeSystemError

#: how many steps run at once by default (each is a subprocess mostly waiting on the network or disk)
WORKERS = 4


@dataclass(frozen=True)
class Step:
    """One unit of a build: ``action()`` once every step in ``needs`` has finished."""

    key: str
    label: str
    needs: tuple[str, ...]
    action: Callable[[], Any]


def levels(steps: Sequence[Step]) -> list[list[str]]:
    """The steps in dependency order, grouped: each group needs only earlier groups (keys sorted).

    Raises :class:`ServeSystemError` for a duplicate key, a need that is no step, or a cycle.
    """
    by_key: dict[str, Step] = {}
    for step in steps:
        if step.key in by_key:
            raise ServeSystemError(f"build plan: two steps named {step.key}")
        by_key[step.key] = step
    for step in steps:
        unknown = [n for n in step.needs if n not in by_key]
        if unknown:
            raise ServeSystemError(f"build plan: {step.key} needs {', '.join(unknown)}, which is no step")
    done: set[str] = set()
    out: list[list[str]] = []
    left = dict(by_key)
    while left:
        ready = sorted(k for k, s in left.items() if all(n in done for n in s.needs))
        if not ready:
            raise ServeSystemError(f"build plan: a cycle among {', '.join(sorted(left))}")
        out.append(ready)
        done.update(ready)
        for k in ready:
            del left[k]
    return out


def run(steps: Sequence[Step], workers: int = WORKERS,
        on_done: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run ``steps`` (at most ``workers`` at once, each after its needs); their results by key.

    Where more steps are ready than slots are free, the earlier ones in ``steps`` start first.
    ``on_done(key)`` is called (in this thread) as each step finishes well.
    """
    levels(steps)  # checks the plan before anything starts
    pending = {s.key: s for s in steps}
    results: dict[str, Any] = {}
    running: dict[Future[Any], Step] = {}
    failure: tuple[Step, BaseException] | None = None
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="build") as pool:
        while pending or running:
            if failure is None:
                for key in list(pending):  # in the order given: earlier steps first when slots are few
                    step = pending[key]
                    if len(running) >= max(1, workers):
                        break
                    if all(n in results for n in step.needs):
                        running[pool.submit(step.action)] = step
                        del pending[key]
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                step = running.pop(fut)
                exc = fut.exception()
                if exc is None:
                    results[step.key] = fut.result()
                    if on_done is not None:
                        on_done(step.key)
                elif failure is None:
                    failure = (step, exc)
    if failure is not None:
        step, exc = failure
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ServeSystemError(f"{step.label} failed: {reason}") from exc
    return results
