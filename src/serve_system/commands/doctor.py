"""``serve-system doctor``: the checks an instructor runs first on every node of an inventory, one line each
(:mod:`serve_system.doctor`); exit 1 when any check fails."""

from __future__ import annotations

import argparse
import fnmatch
from pathlib import Path

from .. import doctor, ownedtree
from ..argtypes import Number, Whole
from ..errors import UsageError
from ..provision.nodes import Node, read_inventory
from ..textsafe import dumps, echo
from . import chiargs


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor", help="check every node: apt locks, driver, toolkit and CDI, cuInit in a container, "
                       "Docker's storage, Jupyter's work folder, Triton (one line each: ok, or what is wrong "
                       "and the fix)")
    p.add_argument("-i", "--inventory", type=ownedtree.INPUT_PATH, default=chiargs.DEFAULT_INVENTORY,
                   help="inventory file (default inventory/hosts.yml)")
    p.add_argument("--known-hosts", type=ownedtree.INPUT_PATH, default=None,
                   help="known_hosts file of the nodes' host keys (default: next to the inventory)")
    p.add_argument("--limit", default="",
                   help="only these nodes: names or shell patterns, comma-separated (as ansible's --limit)")
    p.add_argument("--min-free-gib", type=Number(0, 1e6), default=doctor.MIN_FREE_GIB,
                   help="the least free space under Docker's root, GiB (default %(default)g)")
    p.add_argument("--load-seconds", type=Number(1, 60), default=doctor.LOAD_SECONDS,
                   help="seconds of load on Triton while its GPU metrics are read, GPU nodes "
                        "(default %(default)g)")
    p.add_argument("--timeout", type=Whole(30, 3600), default=300,
                   help="seconds a node's checks may take in all (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print JSON instead of lines")
    p.set_defaults(func=_run)


def _chosen(nodes: list[Node], limit: str, inventory: Path) -> list[Node]:
    patterns = [p.strip() for p in limit.split(",") if p.strip()]
    if not patterns:
        return nodes
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(n.name, p) for n in nodes)]
    if unmatched:
        names = ", ".join(repr(p[:60]) for p in unmatched)
        raise UsageError(f"--limit: no node of {inventory} matches {names}; "
                         f"its nodes: {', '.join(n.name for n in nodes) or 'none'}")
    return [n for n in nodes if any(fnmatch.fnmatchcase(n.name, p) for p in patterns)]


def _run(args: argparse.Namespace) -> int:
    inventory = Path(args.inventory)
    nodes = _chosen(read_inventory(inventory), args.limit, inventory)
    if not nodes:
        raise UsageError(f"{inventory}: no nodes in it; run launch first")
    known_hosts = Path(args.known_hosts or inventory.parent / "known_hosts")
    if not known_hosts.is_file():
        raise UsageError(f"{known_hosts}: known_hosts file not found (launch pins the nodes' host keys "
                         "there); pass --known-hosts PATH or re-run launch")
    for n in nodes:
        if not n.key_path or not Path(n.key_path).expanduser().is_file():
            raise UsageError(f"{inventory}: node {n.name}: SSH key {n.key_path or '(none)'!r} not found "
                             "(ansible_ssh_private_key_file); fix the inventory or re-run launch")
    reports = doctor.examine_all(nodes, known_hosts, wait=args.timeout, load_seconds=args.load_seconds,
                                 min_free_gib=args.min_free_gib)
    failing = [r.node for r in reports if not r.ok]
    if args.json:
        print(dumps({"ok": not failing, "nodes": [r.as_dict() for r in reports]}, indent=2))
        return 1 if failing else 0
    width = max(len(n) for n in doctor.CHECKS)
    for r in reports:
        for c in r.checks:
            echo(f"{r.node}  {c.name:<{width}}  {c.line()}")
        counts = r.counts()
        echo(f"{r.node}: {counts[doctor.OK]} ok, {counts[doctor.SKIPPED]} skipped, "
             f"{counts[doctor.FAIL]} failed")
    echo(f"doctor: {len(reports) - len(failing)} of {len(reports)} node(s) pass"
         + (f"; failing: {', '.join(failing)}" if failing else ""))
    return 1 if failing else 0
