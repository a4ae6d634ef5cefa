"""Ctrl-C while the main thread waits for workers: the kernel may hand a process's SIGINT to any of its
threads, and the main thread must still stop at once, not once every worker is done."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from serve_system import interrupt


def test_a_sigint_that_lands_on_a_worker_still_interrupts_the_wait() -> None:
    released = threading.Event()  # set only after the wait was interrupted (or a bound, on a hang)
    finished: list[bool] = []

    started = threading.Barrier(2)

    def work(i: int) -> int:
        started.wait(30)
        if i == 0:  # the signal delivered to this worker thread, as the kernel may do with a Ctrl-C,
            time.sleep(0.3)  # once the main thread waits for the workers (not while it starts them)
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        finished.append(released.wait(30))  # a probe still waiting for its answer
        return i

    try:
        with interrupt.on_sigint(), pytest.raises(KeyboardInterrupt):  # as serve_system.cli.run does
            interrupt.parallel(work, range(2))
        assert finished == []  # interrupted while every worker was still busy, not after them
        assert interrupt.stopping.is_set()  # and aborted: children killed, waits stopped
    finally:
        released.set()
        interrupt.reset()
