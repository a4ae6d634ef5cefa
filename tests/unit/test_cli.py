"""The ``serve-system`` command line as a whole: which parser a command line gets.

A command named like its module (``plan``, ``lease``) builds that module's parser alone, a quicker
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
    for module in ("lease", "plan", "report"):
        assert module in COMMANDS  # commands that take the quicker start when named first
        assert _help(capsys, "--help", module) == whole
        assert _help(capsys, "-h", module, "--json") == whole


def test_a_command_named_first_gets_its_own_help(capsys: pytest.CaptureFixture[str]) -> None:
    lease = _help(capsys, "lease", "--help")
    assert lease.startswith("usage: serve-system lease [-h] ACTION ...")
    assert "create, show, extend or delete the Chameleon lease" in lease
    assert _help(capsys, "lease", "create", "--help").startswith("usage: serve-system lease create")


def test_an_error_of_the_system_on_a_file_is_one_line_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    """Found by the CLI fuzzer: ``report /`` met /proc/1/fdinfo, which even root may not read."""
    import argparse

    from serve_system.cli import run

    def denied(_args: argparse.Namespace) -> int:
        raise PermissionError(13, "Permission denied", "/proc/1/fdinfo/level.json")

    assert run(denied, argparse.Namespace()) == 1
    err = capsys.readouterr().err
    assert err == ("serve-system: error: /proc/1/fdinfo/level.json: Permission denied: check the path and "
                   "its permissions\n")
