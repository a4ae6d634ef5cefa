"""The ``serve-system`` command line.

Each sub-command lives in its own module under :mod:`serve_system.commands` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` to a callable taking the parsed
arguments and returning an exit code. Errors a user can act on (:class:`ServeSystemError`) become
one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import sys
import warnings
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import NoReturn

from . import __version__, interrupt
from .errors import ServeSystemError
from .textsafe import clean, echo

#: sub-command modules, in the order ``--help`` lists them
COMMANDS: tuple[str, ...] = (
    "lease", "provision", "inventory", "doctor", "rehearsal", "models", "fastapi", "validate", "schema",
    "plan", "collect", "decide", "import_logs", "stats_delta", "report", "compare",
)


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr (the usage is in ``--help``)."""

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> object:
        # argparse drops a "--" given as an option's value (--output=--) and hands the option an empty
        # list: refused here, as any other value that is none
        if action.option_strings and arg_strings == ["--"] and action.nargs in (None, "?"):
            self.error(f"argument {'/'.join(action.option_strings)}: '--' is not a value: give one")
        return super()._get_values(action, arg_strings)

    def error(self, message: str) -> NoReturn:
        # the message quotes what was typed: its control characters escaped, so it stays one line
        self.exit(2, f"{self.prog}: error: {clean(message)} (see {self.prog} --help)\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or with ``only`` the one command of that module (a quicker start)."""
    return _build(only)[0]


def _build(only: str | None) -> tuple[argparse.ArgumentParser, Collection[str]]:
    """The parser and the command names it knows."""
    parser = OneLineParser(
        prog="serve-system",
        description="Provision, configure, experiment and report for the Triton serving lab.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=OneLineParser)
    for name in (only,) if only else COMMANDS:
        importlib.import_module(f"{__package__}.commands.{name}").register(sub)
    return parser, sub.choices


def _parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """A command named like its module (``plan``, ``report``, ``lease``, ...) and given first imports
    that module alone: the playbooks call them several times per run. Anything else, an option before
    the command included (``--help``, ``--version``: the whole command line's), gets the whole command
    line."""
    first = argv[0] if argv else None
    if first in COMMANDS:
        parser, commands = _build(first)
        if first in commands:
            return parser
    return build_parser()


@contextlib.contextmanager
def library_output(verbose: bool) -> Iterator[None]:
    """Keep the log records and warnings of third-party libraries off the terminal, or show them.

    python-neutronclient logs "The python binding code in neutronclient is deprecated..." for every
    client it makes, and openstacksdk and keystoneauth warn of their own deprecations: none of it is
    for the user of a command, whose stderr holds one error line. Without ``verbose`` only the
    project's own records (``serve_system.*``, WARNING and up, as Python's last-resort handler would
    print them) reach stderr and other modules' warnings are ignored; with it every record of WARNING
    and up is printed with its logger's name, and every warning once. The previous settings come back.
    """
    root = logging.getLogger()
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    if verbose:
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    else:
        handler.addFilter(lambda record: record.name.split(".", 1)[0] == "serve_system")
    root.addHandler(handler)  # a handler on the root: the last-resort handler prints nothing more
    try:
        with warnings.catch_warnings():
            if verbose:
                warnings.simplefilter("default")
            else:
                warnings.filterwarnings("ignore", module=r"(?!serve_system(\.|$))")
            yield
    finally:
        root.removeHandler(handler)


def run(func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace,
        prog: str = "serve-system") -> int:
    """Call ``func(args)`` and turn user-facing errors into one stderr line and an exit code.

    An error of the system on a file (:class:`OSError`: unreadable, gone while read) is one line naming the
    file too. Ctrl-C ends the command at once with 130: its helper processes are killed and its workers not
    waited for (:mod:`serve_system.interrupt`). Third-party libraries' log records and warnings stay
    off the terminal unless the command was given ``-v`` (:func:`library_output`).
    """
    interrupt.reset()
    try:
        with interrupt.on_sigint(), library_output(verbose=bool(getattr(args, "verbose", False))):
            return int(func(args) or 0)
    except ServeSystemError as exc:
        echo(f"{prog}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:  # the system refused a file or folder (unreadable, gone): one line naming it
        where = f"{exc.filename}: " if exc.filename is not None else ""
        echo(f"{prog}: error: {where}{exc.strerror or exc}: check the path and its permissions",
             file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        interrupt.abort()
        echo(f"{prog}: interrupted", file=sys.stderr)
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    """The ``serve-system`` program (``argv`` None: this process's arguments, and after Ctrl-C the
    process ends at once, :func:`serve_system.interrupt.exit_now`), or one command in-process."""
    own_process = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser_for(argv).parse_args(argv)
    rc = run(args.func, args)
    if own_process and rc == 130:
        interrupt.exit_now(rc)
    return rc


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
