"""``serve-system inventory``: show the nodes an inventory file holds."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import ownedtree
from ..provision.nodes import read_inventory
from ..textsafe import dumps, markup


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inventory", help="list the nodes of an inventory written by launch.py")
    p.add_argument("-i", "--inventory", type=ownedtree.INPUT_PATH, default=Path("inventory/hosts.yml"))
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    nodes = read_inventory(args.inventory)
    if args.json:
        print(dumps([{"name": n.name, **n.host_vars()} for n in nodes], indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table("name", "address", "port", "user", "gpus", "provider")
    for n in nodes:
        table.add_row(*(markup(c) for c in (n.name, n.address, n.port, n.user, n.gpus, n.provider)))
    Console().print(table)
    return 0
