"""``serve-system rehearsal images``: build (or reuse) the rehearsal images (no Chameleon needed).

Rehearsal nodes themselves are launched, listed and removed by the provisioning commands, like
Chameleon nodes: ``serve-system launch --provider local``, ``status --provider local``,
``rebuild --provider local``, ``teardown --provider local``.
"""

from __future__ import annotations

import argparse
import time

from ..images import stack
from ..textsafe import dumps, echo, markup


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rehearsal",
                       help="the rehearsal images (nodes: launch/status/teardown --provider local)")
    rsub = p.add_subparsers(dest="rehearsal_command", metavar="ACTION", required=True)
    i = rsub.add_parser("images", help="build (or reuse, by recipe hash) the rehearsal images and archives")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=_images)


def _say(msg: str) -> None:
    from rich.console import Console

    Console(stderr=True).print(f"[bold]rehearsal[/bold] {markup(msg)}", highlight=False)


def _images(args: argparse.Namespace) -> int:
    started = time.monotonic()
    stack.ensure_all(_say)
    rows = stack.describe()
    if args.json:
        print(dumps(rows, indent=2))
        return 0
    for row in rows:
        echo(f"{row['image']:<7} {row['ref']}  {row['size_mb']} MB"
             + (f"  archive {row['archive']} ({row['archive_mb']} MB)" if row["archive"] else ""))
    _say(f"images ready in {time.monotonic() - started:.0f} s")
    return 0
