"""The ``serve-system`` command line as a whole: which parser a command line gets.

A command named like its module (``plan``, ``report``) builds that module's parser alone, a quicker
start; an option before the command is the whole command line's, and so is its answer.
"""

from __future__ import annotations

import pytest

from serve_system.cli import COMMANDS, main


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as stop:
        main(list(argv))
    assert stop.value.code == 0
    return capsys.readouterr().out


def test_help_before_a_command_is_the_whole_command_lines_help(capsys: pytest.CaptureFixture[str]) -> None:
    whole = _help(capsys, "--help")
    assert "    lease " in whole and "    launch " in whole and "    plan " in whole
    for module in ("plan", "report"):
        assert module in COMMANDS  # commands that take the quicker start when named first
        assert _help(capsys, "--help", module) == whole
        assert _help(capsys, "-h", module, "--json") == whole

