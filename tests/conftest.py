"""Settings for every test directory."""

from __future__ import annotations

import signal

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """SIGINT handled as Python's default, however pytest was started.

    A shell starts a background job (``pytest ... &``, ``nohup``) with SIGINT ignored, and an ignored
    signal is inherited across exec: every command the Ctrl-C tests start would then ignore the SIGINT
    they send it, as a background job should, and hang until killed (seen: a suite started so in the
    background failed all four of them). Restored here, in the process every test's children come from.
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
