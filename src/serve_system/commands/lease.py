"""``serve-system lease create | show | extend | delete``: the Chameleon lease (Blazar, through python-chi).

``chi_scripts/lease.py`` is its script (:func:`serve_system.commands.provision.script_main`). Every
failure a user can act on is one line on stderr and a non-zero exit code.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from .. import ownedtree
from ..errors import UsageError
from ..provision.nodes import read_inventory
from ..textsafe import clean, dumps
from . import chiargs

# --- argument types ------------------------------------------------------------------------------


def _utc(text: str) -> datetime:
    for fmt in ("%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"):
        try:
            when = datetime.strptime(text.strip().removesuffix("Z").removesuffix(" UTC"), fmt)
        except ValueError:
            continue
        if not 1970 <= when.year <= 9998:
            raise argparse.ArgumentTypeError(f"{text.strip()!r} is not a time between 1970 and 9998 (UTC, "
                                             "like '2026-11-21 17:00')")
        return when
    raise argparse.ArgumentTypeError(f"not a UTC time like '2026-11-21 17:00': {text!r}")


# --- lease ---------------------------------------------------------------------------------------


def _lease_args(p: argparse.ArgumentParser) -> None:
    from ..provision.chameleon.leases import DEFAULT_DURATION, DEFAULT_NODE_TYPE

    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    create = sub.add_parser("create", help="reserve GPU nodes (2 h 50 min by default)")
    chiargs.site_args(create)
    create.add_argument("--node-type", default=DEFAULT_NODE_TYPE, help="node type (default %(default)s)")
    how = create.add_mutually_exclusive_group()
    how.add_argument("--count", type=chiargs.positive, default=1, help="number of nodes (default 1)")
    how.add_argument("--roster", type=ownedtree.INPUT_PATH, metavar="CSV",
                     help="with --sites: one lease per part of the class's split (LEASE-SITE-N, each at "
                          "most the node type's maximum; docs/class.md), one node per student")
    create.add_argument("--sites", type=_sites, metavar="SITE,SITE",
                        help="with --roster: the sites the class is split over (e.g. CHI@TACC,CHI@UC)")
    create.add_argument("--duration", type=chiargs.duration, default=DEFAULT_DURATION, metavar="2h50m",
                        help="lease length with its units, e.g. 2h50m, 170m, 3h (default 2h50m); ignored "
                             "with --end")
    create.add_argument("--start", type=_utc, metavar="'YYYY-MM-DD HH:MM'",
                        help="start time in UTC (default now)")
    create.add_argument("--end", type=_utc, metavar="'YYYY-MM-DD HH:MM'", help="end time in UTC")
    create.add_argument("--align-hour", action="store_true",
                        help="start at the next full hour (the lab's advice; end stays start + duration)")
    create.add_argument("--exclude-node", action="append", default=[], metavar="NODE[,NODE...]",
                        help="never reserve these nodes (comma-separated or repeated), "
                             "e.g. c11-13 (faulty GPU)")
    create.add_argument("--dry-run", action="store_true", help="print the request, create nothing")
    create.set_defaults(func=_lease_create)
    show = sub.add_parser("show", help="show the lease (status, times, reservation id)")
    chiargs.site_args(show)
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(func=_lease_show)
    extend = sub.add_parser("extend", help="move the lease's end later (Blazar lease update)")
    chiargs.site_args(extend)
    extend.add_argument("--by", type=chiargs.duration, default=timedelta(hours=1), metavar="1h",
                        help="how much longer (default 1h)")
    extend.add_argument("-i", "--inventory", type=ownedtree.OUTPUT_FILE, default=None,
                        help="also update serve_lease_end in this inventory "
                             "(default: inventory/hosts.yml if present)")
    extend.set_defaults(func=_lease_extend)
    delete = sub.add_parser("delete", help="delete the lease")
    chiargs.site_args(delete)
    delete.add_argument("--id", dest="lease_id", help="delete this lease id (when names are duplicated)")
    delete.set_defaults(func=_lease_delete)


def _exclude_list(values: Sequence[str]) -> tuple[str, ...]:
    out: list[str] = []
    for value in values:
        for name in value.split(","):
            name = name.strip()
            if not name:
                raise UsageError(f"--exclude-node {value!r}: an empty node name; "
                                 "write names like c11-13,c12-01")
            if name not in out:
                out.append(name)
    return tuple(out)


def _sites(text: str) -> tuple[str, ...]:
    from ..provision.classplan import parse_sites

    try:
        return parse_sites(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(f"--sites {text!r}: ")) from None


def _lease_create_class(args: argparse.Namespace) -> int:
    """``lease create --roster CSV --sites ...``: every lease of the class's split, each at its site."""
    from ..provision import classplan, roster
    from ..provision.chameleon.leases import LeaseRequest, create_lease

    if not (args.roster and args.sites):
        raise UsageError("--roster and --sites go together: the roster is split over the sites' leases")
    students = roster.read_roster(args.roster)
    placements = classplan.plan_class(students, args.sites, args.lease, args.node_type, str(args.roster))
    reqs = [(p, LeaseRequest(
        name=p.lease, node_type=args.node_type, count=len(p.students), start=args.start, end=args.end,
        duration=args.duration, align_hour=args.align_hour, exclude_nodes=_exclude_list(args.exclude_node),
    )) for p in placements]
    for _, req in reqs:
        req.check()  # argument errors before any network call
    console = chiargs.console()
    for line in classplan.plan_lines(placements, "(node prefix)", args.node_type):
        console.print(line, markup=False, highlight=False)
    for p, req in reqs:
        site = chiargs.connect(args, p.site)
        create_lease(req, site, chiargs.RichProgress(console), dry_run=args.dry_run)
    return 0


def _lease_create(args: argparse.Namespace) -> int:
    from ..provision.chameleon.leases import LeaseRequest, create_lease

    if args.start and args.align_hour:
        raise UsageError("--start and --align-hour exclude each other")
    if args.roster or args.sites:
        return _lease_create_class(args)
    req = LeaseRequest(
        name=args.lease, node_type=args.node_type, count=args.count, start=args.start, end=args.end,
        duration=args.duration, align_hour=args.align_hour, exclude_nodes=_exclude_list(args.exclude_node),
    )
    chiargs.check_site(args)
    req.check()  # argument errors before any network call
    site = chiargs.connect(args)
    create_lease(req, site, chiargs.RichProgress(chiargs.console()), dry_run=args.dry_run)
    return 0


def _lease_show(args: argparse.Namespace) -> int:
    from ..provision.chameleon.leases import get_lease

    site = chiargs.connect(args)
    d = get_lease(args.lease, site).as_dict()
    if args.json:
        print(dumps(d, indent=2))
    else:
        chiargs.console().print(clean(
            f"Lease {d['name']} ({d['id']}) at {site}: {d['status']}, {d['start']} -> {d['end']}, "
            f"{d['minutes_left']} min left, node type {d['node_type']}, reservation {d['reservation_id']}"
        ), markup=False)
    return 0


def _lease_extend(args: argparse.Namespace) -> int:
    from ..provision.chameleon.leases import extend_lease
    from ..provision.nodes import write_inventory

    inventory = args.inventory or (chiargs.DEFAULT_INVENTORY if chiargs.DEFAULT_INVENTORY.is_file() else None)
    nodes = read_inventory(inventory) if inventory else []  # a broken inventory fails before Blazar is asked
    site = chiargs.connect(args)
    lease = extend_lease(args.lease, site, args.by, chiargs.RichProgress(chiargs.console()))
    mine = [n for n in nodes if n.provider_ids.get("lease_id") == lease.id]
    if inventory and mine:
        updated = [dataclasses.replace(n, vars={**n.vars, "serve_lease_end": lease.end_iso()})
                   if n in mine else n for n in nodes]
        kh = inventory.parent / "known_hosts"
        write_inventory(updated, inventory, kh if kh.exists() else None)
        chiargs.console().print(f"serve_lease_end = {lease.end_iso()} written for {len(mine)} node(s) "
                            f"in {inventory}")
    return 0


def _lease_delete(args: argparse.Namespace) -> int:
    from ..provision.chameleon.leases import delete_lease

    site = chiargs.connect(args)
    delete_lease(args.lease, site, chiargs.RichProgress(chiargs.console()), lease_id=args.lease_id)
    return 0


# --- registration ----------------------------------------------------------------------------------

COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "lease": ("create, show, extend or delete the Chameleon lease", _lease_args),
}


def register(sub: argparse._SubParsersAction) -> None:
    for name, (help_text, build) in COMMANDS.items():
        build(sub.add_parser(name, help=help_text, description=help_text))
