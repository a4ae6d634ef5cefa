"""What a block of code opens and lists (Python's audit events ``open``, ``os.scandir`` and
``os.listdir``), for tests that show which files a call reads."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

_watching: list[list[tuple[str, str]]] = []
_hooked = False


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if _watching and event in ("open", "os.scandir", "os.listdir") and isinstance(args[0], str | bytes):
        _watching[-1].append((event, os.path.abspath(os.fsdecode(args[0]))))


@contextlib.contextmanager
def watched() -> Iterator[list[tuple[str, str]]]:
    """(event, absolute path) of every file opened and folder listed in the block, in order."""
    global _hooked
    if not _hooked:  # an audit hook stays for the process: one, idle outside these blocks
        sys.addaudithook(_hook)
        _hooked = True
    seen: list[tuple[str, str]] = []
    _watching.append(seen)
    try:
        yield seen
    finally:
        _watching.remove(seen)
