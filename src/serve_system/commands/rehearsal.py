"""``serve-system rehearsal``: local rehearsal nodes and their images (no Chameleon needed).

    serve-system rehearsal images            build (or reuse) the node, Triton and client images
    serve-system rehearsal up [--count N]    start nodes, write inventory/hosts.yml + known_hosts
    serve-system rehearsal status            the rehearsal nodes on this machine
    serve-system rehearsal down              remove the nodes of --prefix
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from .. import images, rehearsal
from ..nodes import record_host_keys, scan_host_keys, write_inventory

DEFAULT_PREFIX = "rehearsal-node"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rehearsal", help="local rehearsal nodes (podman + systemd + Docker) and their images")
    rsub = p.add_subparsers(dest="rehearsal_command", metavar="ACTION", required=True)

    i = rsub.add_parser("images", help="build (or reuse, by recipe hash) the rehearsal images and archives")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=_images)

    u = rsub.add_parser("up", help="start rehearsal nodes and write the inventory")
    u.add_argument("--count", type=int, default=1)
    u.add_argument("--prefix", default=DEFAULT_PREFIX, help="node names are PREFIX-1..N (default %(default)s)")
    u.add_argument("-i", "--inventory", type=Path, default=Path("inventory/hosts.yml"))
    u.add_argument("--known-hosts", type=Path, default=Path("inventory/known_hosts"))
    u.set_defaults(func=_up)

    s = rsub.add_parser("status", help="list rehearsal nodes")
    s.add_argument("--prefix", default=None)
    s.set_defaults(func=_status)

    d = rsub.add_parser("down", help="remove the rehearsal nodes of a prefix")
    d.add_argument("--prefix", default=DEFAULT_PREFIX)
    d.set_defaults(func=_down)


def _say(msg: str) -> None:
    from rich.console import Console

    Console(stderr=True).print(f"[bold]rehearsal[/bold] {msg}", highlight=False)


def _images(args: argparse.Namespace) -> int:
    started = time.monotonic()
    images.ensure_all(_say)
    rows = images.describe()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        print(f"{row['image']:<7} {row['ref']}  {row['size_mb']} MB"
              + (f"  archive {row['archive']} ({row['archive_mb']} MB)" if row["archive"] else ""))
    _say(f"images ready in {time.monotonic() - started:.0f} s")
    return 0


def launch_and_record(count: int, prefix: str, inventory: Path, known_hosts: Path) -> list:  # type: ignore[type-arg]
    """Start nodes, then write the inventory and their host keys (what launch.py --provider local does)."""
    nodes = rehearsal.launch_nodes(count, prefix, inventory, known_hosts, report=_say)
    for node in nodes:
        record_host_keys(known_hosts, node.address, node.port, scan_host_keys(node.address, node.port))
    write_inventory(nodes, inventory, known_hosts)
    return nodes


def _up(args: argparse.Namespace) -> int:
    nodes = launch_and_record(args.count, args.prefix, args.inventory, args.known_hosts)
    for node in nodes:
        print(f"{node.name}  ssh -i {node.key_path} -p {node.port} {node.user}@{node.address}")
    _say(f"inventory written to {args.inventory}; next: ansible-playbook playbooks/site.yml")
    return 0


def _status(args: argparse.Namespace) -> int:
    for row in rehearsal.list_nodes(args.prefix):
        print(f"{row['name']:<30} {row['state']:<10} ssh 127.0.0.1:{row['ssh_port']}")
    return 0


def _down(args: argparse.Namespace) -> int:
    removed = rehearsal.teardown_nodes(args.prefix)
    print("removed: " + (", ".join(removed) if removed else "nothing"))
    return 0
