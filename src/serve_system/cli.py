"""The ``serve-system`` command line.

Each sub-command lives in its own module under :mod:`serve_system.commands` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` to a callable taking the parsed
arguments and returning an exit code. Errors a user can act on (:class:`ServeSystemError`) become
one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from . import __version__
from .errors import ServeSystemError

#: sub-command modules, in the order ``--help`` lists them
COMMANDS: tuple[str, ...] = (
    "inventory", "rehearsal", "models", "fastapi", "validate", "schema", "plan", "import_logs", "stats_delta",
    "report", "compare",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="serve-system",
        description="Provision, configure, experiment and report for the Triton serving lab.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"{__package__}.commands.{name}").register(sub)
    return parser


def run(func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace,
        prog: str = "serve-system") -> int:
    """Call ``func(args)`` and turn user-facing errors into one stderr line and an exit code."""
    try:
        return int(func(args) or 0)
    except ServeSystemError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return run(args.func, args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
