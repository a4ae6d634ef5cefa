"""``serve-system launch | status | rebuild | teardown | access``: one command family.

The same options and defaults for both providers (``--provider chameleon`` through python-chi, or
``--provider local`` rehearsal nodes in podman), one default prefix (``node-serve-system-$USER``).
``chi_scripts/{lease,launch,status,teardown}.py`` are thin entry points over :func:`script_main`,
which also runs the lease family (:mod:`.lease`). Every failure a user can act on is one line on
stderr and a non-zero exit code; long waits show rich progress bars on stderr.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from rich.console import Console

from .. import ownedtree
from ..cli import OneLineParser, run
from ..errors import ServeSystemError, UsageError
from ..provision import board, classplan, roster
from ..provision.base import Fleet, LaunchRequest, Progress, Provider, default_prefix, finish, server_names
from ..provision.nodes import Node, read_inventory
from ..textsafe import dumps, echo, markup
from . import chiargs
from .lease import COMMANDS as LEASE_COMMANDS

# --- argument types ------------------------------------------------------------------------------


def _port(text: str) -> int:
    t = text.strip()
    if not (t.isascii() and t.isdigit()) or len(t) > 5 or int(t) > 65535:
        raise argparse.ArgumentTypeError(f"port out of range 1-65535: {text[:40]!r}")
    if int(t) < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {int(t)}")
    return int(t)


#: the longest wait a seconds option takes
MAX_SECONDS = 7 * 24 * 3600


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0 and at most {MAX_SECONDS} "
                                         f"(a week): {text[:40]!r}")
    return value


def _prefix(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,50}", text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a node-name prefix: use 1-51 letters, digits, '-', '_' or '.', "
            "starting with a letter or digit")
    return text


# --- shared options ------------------------------------------------------------------------------


def _node_args(p: argparse.ArgumentParser) -> None:
    """Options every node command shares, for both providers."""
    p.add_argument("--provider", choices=("chameleon", "local"), default="chameleon",
                   help="chameleon (python-chi) or local rehearsal nodes in podman (default %(default)s)")
    p.add_argument("--prefix", type=_prefix, default=default_prefix(chiargs.user()),
                   help="node name prefix, both providers (default %(default)s)")
    p.add_argument("-i", "--inventory", type=ownedtree.OUTPUT_FILE, default=chiargs.DEFAULT_INVENTORY,
                   help="inventory file (default inventory/hosts.yml)")
    p.add_argument("--known-hosts", type=ownedtree.OUTPUT_FILE, default=None,
                   help="known_hosts file of the nodes' host keys (default: next to the inventory)")
    chiargs.site_args(p)
    p.add_argument("--key-name", default=os.environ.get("OS_KEYPAIR_NAME") or f"{chiargs.user()}-jupyter",
                   help="Chameleon key pair name (default $OS_KEYPAIR_NAME or %(default)s)")
    p.add_argument("--key-path", type=ownedtree.INPUT_TEXT,
                   default=str(Path.home() / ".ssh" / "id_rsa_chameleon"),
                   help="private key of --key-name, written to the inventory (default %(default)s)")
    p.add_argument("--image", default="CC-Ubuntu24.04-CUDA",
                   help="disk image on Chameleon (default %(default)s)")
    p.add_argument("--ssh-port", type=_port, default=22, help="SSH port on Chameleon nodes (default 22)")
    p.add_argument("--poll", type=_seconds, default=15.0, metavar="S", help="seconds between status polls")
    p.add_argument("--server-timeout", type=_seconds, default=1800.0, metavar="S",
                   help="how long to wait for servers to be ACTIVE (default 1800)")
    p.add_argument("--ssh-timeout", type=_seconds, default=600.0, metavar="S",
                   help="how long to wait for SSH (default 600)")
    p.add_argument("--margin", type=chiargs.duration, default=timedelta(minutes=30), metavar="30m",
                   help="warn (status) or refuse (launch) when less of the lease is left (default 30m)")


def _known_hosts(args: argparse.Namespace) -> Path:
    return Path(args.known_hosts or Path(args.inventory).parent / "known_hosts")


def _provider(args: argparse.Namespace, site: str | None = None, lease: str | None = None,
              class_names: frozenset[str] = frozenset()) -> Provider:
    """The provider of ``args``; Chameleon: a session at ``site`` (default ``--site``) on lease ``lease``
    (default ``--lease``), with that site's credentials."""
    if args.provider == "local":
        from ..provision.local import LocalProvider

        return LocalProvider(args.prefix, Path(args.inventory))
    from ..provision.chameleon import ChameleonProvider

    chiargs.check_site(args)
    site = chiargs.connect(args, site)  # credentials first: without them, one error line and nothing else
    return ChameleonProvider(
        site=site, prefix=args.prefix, lease_name=lease or args.lease, key_name=args.key_name,
        key_path=str(Path(args.key_path).expanduser()), image=args.image,
        network=getattr(args, "network", "sharednet1"), node_type=getattr(args, "node_type", None),
        replace_failed=getattr(args, "replace_failed", False),
        lease_timeout=getattr(args, "lease_timeout", 3600.0), server_timeout=args.server_timeout,
        ssh_timeout=args.ssh_timeout, ssh_port=args.ssh_port, poll=args.poll, margin=args.margin,
        class_names=class_names,
    )


def _class_groups(nodes: Sequence[Node]) -> dict[str, dict[str, list[str]]]:
    """Chameleon nodes by the site and lease launch recorded (``serve_site``, ``serve_lease``): site ->
    lease -> node names, in inventory order; empty when the inventory is one lease's (no record)."""
    out: dict[str, dict[str, list[str]]] = {}
    for n in nodes:
        site, lease = n.vars.get("serve_site"), n.vars.get("serve_lease")
        if n.provider == "chameleon" and isinstance(site, str) and isinstance(lease, str):
            out.setdefault(site, {}).setdefault(lease, []).append(n.name)
    return out


def _is_class(groups: dict[str, dict[str, list[str]]]) -> bool:
    """Whether the inventory spans more than one lease (a class launched with --sites)."""
    return sum(len(by_lease) for by_lease in groups.values()) > 1


def _nodes_table(nodes: Sequence[Node], inventory: Path, known_hosts: Path) -> Any:
    from rich.table import Table

    table = Table(title=f"Nodes ({markup(inventory)})")
    for col in ("name", "address", "port", "user", "GPUs", "provider", "site", "student"):
        table.add_column(col)
    for n in nodes:
        table.add_row(*(markup(c) for c in (n.name, n.address, n.port, n.user, n.gpus, n.provider,
                                            n.vars.get("serve_site") or "-")),
                      markup(n.vars.get("serve_student") or (f"(dropped: {n.vars['serve_student_dropped']})"
                                                            if n.vars.get("serve_student_dropped") else "-")))
    return table


def site_yml(inventory: Path, nodes: Sequence[Node], console: Console, limit: str | None = None) -> None:
    from ..playbook import run_playbook

    rc = run_playbook(chiargs.REPO_ROOT / "playbooks" / "site.yml", inventory, console=console, limit=limit,
                      forks=len(nodes))
    if rc != 0:
        raise ServeSystemError(f"playbooks/site.yml failed (rc={rc}); "
                               "fix the error above and re-run with --configure")


def _with_progress(console: Console, work: Callable[[Progress], int]) -> int:
    prog = chiargs.RichProgress(console)
    try:
        return work(prog)
    finally:
        prog.close()


# --- launch --------------------------------------------------------------------------------------


def _launch_args(p: argparse.ArgumentParser) -> None:
    _node_args(p)
    how = p.add_mutually_exclusive_group()
    how.add_argument("--count", type=chiargs.positive, default=1,
                     help="number of nodes: PREFIX for 1, PREFIX-1..N for more (default 1)")
    how.add_argument("--roster", type=ownedtree.INPUT_PATH, metavar="CSV",
                     help="one node PREFIX-STUDENT per student of this CSV "
                          "(header student,ssh_public_key[,email])")
    p.add_argument("--network", default="sharednet1", help="Chameleon network (default %(default)s)")
    p.add_argument("--node-type", help="Chameleon node type for the GPU count (default: from the lease); "
                   "with --sites: the type the class's leases were made for (default gpu_p100)")
    _sites_arg(p)
    p.add_argument("--replace-failed", action="store_true",
                   help="delete and recreate Chameleon servers in ERROR")
    p.add_argument("--lease-timeout", type=_seconds, default=3600.0, metavar="S",
                   help="how long to wait for a PENDING lease to start (default 3600)")
    p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    p.add_argument("--configure", action="store_true", help="then run playbooks/site.yml on the nodes")
    p.set_defaults(func=_launch)


def _sites_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sites", type=_sites, metavar="SITE,SITE",
                   help="with --roster: split the class over these sites and over leases of at most the "
                        "node type's maximum each, named LEASE-SITE-N (e.g. CHI@TACC,CHI@UC; docs/class.md)")


def _sites(text: str) -> tuple[str, ...]:
    try:
        return classplan.parse_sites(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(f"--sites {text!r}: ")) from None


def _class_plan(args: argparse.Namespace, students: Sequence[roster.Student]) -> list[classplan.Placement]:
    from ..provision.chameleon.leases import DEFAULT_NODE_TYPE

    if args.provider != "chameleon":
        raise UsageError("--sites is for --provider chameleon (rehearsal nodes have no sites)")
    if not students:
        raise UsageError("--sites splits a class roster over leases and sites: give --roster CSV too")
    return classplan.plan_class(students, args.sites, args.lease, args.node_type or DEFAULT_NODE_TYPE,
                                str(args.roster))


def _launch_class(args: argparse.Namespace, students: Sequence[roster.Student],
                  previous: Sequence[Node], console: Console) -> int:
    """``launch --roster CSV --sites ...``: each lease of the split launched at its site, one inventory."""
    placements = _class_plan(args, students)
    node_type = args.node_type or "gpu_p100"
    for line in classplan.plan_lines(placements, args.prefix, node_type):
        console.print(line, markup=False, highlight=False)
    names = [n for p in placements for n in p.names(args.prefix)]
    all_vars = roster.roster_vars(args.prefix, students)

    def work(progress: Progress) -> int:
        nodes: list[Node] = []
        for p in placements:
            mine = p.names(args.prefix)
            others = frozenset(n for q in placements if q.site == p.site for n in q.names(args.prefix))
            provider = _provider(args, p.site, p.lease, others)
            req = LaunchRequest(tuple(mine), dry_run=args.dry_run,
                                node_vars={n: {**all_vars[n], "serve_site": p.site, "serve_lease": p.lease}
                                           for n in mine})
            nodes += provider.launch(req, progress)
        if args.dry_run:
            return 0
        nodes += [n for n in roster.dropped(previous, students) if n.name not in names]
        finish(nodes, args.inventory, _known_hosts(args), progress)
        progress.note(_nodes_table(nodes, args.inventory, _known_hosts(args)))
        progress.note(f"Inventory: {args.inventory} ({len(nodes)} nodes over {len(placements)} lease(s))   "
                      f"known hosts: {_known_hosts(args)}")
        return 0

    rc = _with_progress(console, work)
    if rc == 0 and args.configure and not args.dry_run:
        site_yml(args.inventory, read_inventory(args.inventory), console)
    return rc


def _launch(args: argparse.Namespace) -> int:
    console = chiargs.console()
    students = roster.read_roster(args.roster) if args.roster else []
    if args.sites:
        previous_class = read_inventory(args.inventory) if Path(args.inventory).is_file() else []
        return _launch_class(args, students, previous_class, console)
    names = ([roster.node_name(args.prefix, s.name) for s in students] if students
             else server_names(args.prefix, args.count))
    previous: list[Node] = []
    if students and Path(args.inventory).is_file():
        previous = read_inventory(args.inventory)
    provider = _provider(args)
    if provider.name == "chameleon" and not args.dry_run and not Path(args.key_path).expanduser().is_file():
        console.print(f"[yellow]warning:[/] --key-path {markup(args.key_path)} does not exist; "
                      f"Ansible needs the private key of key pair {args.key_name}")
    req = LaunchRequest(tuple(names), dry_run=args.dry_run,
                        node_vars=roster.roster_vars(args.prefix, students))

    def work(progress: Progress) -> int:
        nodes = provider.launch(req, progress)
        if args.dry_run:
            return 0
        nodes += [n for n in roster.dropped(previous, students) if n.name not in names]
        finish(nodes, args.inventory, _known_hosts(args), progress)
        progress.note(_nodes_table(nodes, args.inventory, _known_hosts(args)))
        progress.note(f"Inventory: {args.inventory}   known hosts: {_known_hosts(args)}")
        return 0

    rc = _with_progress(console, work)
    if rc == 0 and args.configure and not args.dry_run:
        site_yml(args.inventory, read_inventory(args.inventory), console)
    return rc


# --- status --------------------------------------------------------------------------------------


def _status_args(p: argparse.ArgumentParser) -> None:
    _node_args(p)
    p.add_argument("--json", action="store_true", help="print JSON on stdout")
    p.add_argument("--watch", type=_seconds, metavar="S", nargs="?", const=10.0, default=None,
                   help="refresh every S seconds (default 10) until Ctrl-C (exit status 130)")
    p.add_argument("--times", type=chiargs.positive, metavar="N", default=None,
                   help="with --watch: stop after N refreshes (e.g. a log of the class's nodes for an hour); "
                        "the exit code is the last refresh's")
    p.add_argument("--probe-timeout", type=chiargs.positive, default=10, metavar="S",
                   help="SSH connect timeout of each node's probe (default 10)")
    p.set_defaults(func=_status)


def _board(args: argparse.Namespace,
           provider: Provider | None) -> tuple[dict[str, Any], list[board.NodeHealth]]:
    """The board's head and rows; ``provider`` None: the inventory is a class over several leases
    (:func:`_class_board`)."""
    inv = Path(args.inventory)
    nodes = read_inventory(inv) if inv.is_file() else []
    if provider is None:
        return _class_board(args, nodes)
    fleet = provider.fleet()
    rows = board.probe(fleet, nodes, _known_hosts(args), timeout=args.probe_timeout)
    head: dict[str, Any] = {"provider": provider.name, "prefix": args.prefix, "lease": fleet.lease}
    return head, rows


def _class_board(args: argparse.Namespace, nodes: Sequence[Node]) -> tuple[dict[str, Any],
                                                                          list[board.NodeHealth]]:
    """One board over every site and lease the inventory records: one server listing per site, each
    lease's summary, every machine probed at once (a machine of the prefix that the inventory lacks
    is shown too, as "not in the inventory")."""
    groups = _class_groups(nodes)
    leases: list[dict[str, Any]] = []
    fleets: list[tuple[str, Fleet]] = []
    for site, by_lease in groups.items():
        from ..provision.chameleon import ChameleonProvider

        provider = _provider(args, site, next(iter(by_lease)))
        assert isinstance(provider, ChameleonProvider)
        listed = provider.fleet()  # one listing of the site's servers for all its leases
        placed: set[str] = set()
        for lease, names in by_lease.items():
            provider.lease_name = lease
            summary = provider.lease_summary()
            if summary is not None:
                leases.append({**summary, "site": site})
            fleets.append((site, Fleet([m for m in listed.machines if m.name in names], summary)))
            placed.update(names)
        strays = [m for m in listed.machines if m.name not in placed]
        if strays:
            fleets.append((site, Fleet(strays, None)))
    rows: list[board.NodeHealth] = []
    for site, fleet in fleets:  # each fleet's probes run at once; the fleets one after the other
        for row in board.probe(fleet, nodes, _known_hosts(args), timeout=args.probe_timeout):
            row.site = site
            rows.append(row)
    head: dict[str, Any] = {"provider": "chameleon", "prefix": args.prefix, "lease": None, "leases": leases,
                            "sites": list(groups)}
    return head, rows


def _lease_line(lease: dict[str, Any]) -> str:
    at = f" at {lease['site']}" if lease.get("site") else ""
    if "minutes_left" in lease:
        return (f"Lease {lease['name']}{at} ({lease['id']}): {lease['status']}, "
                f"{lease['start']} -> {lease['end']}, {lease['minutes_left']} min left")
    return f"Lease {lease['name']}{at}: {lease['status']}"


def _status_once(args: argparse.Namespace, provider: Provider | None, console: Console) -> int:
    head, rows = _board(args, provider)
    leases = [head["lease"]] if head["lease"] else head.get("leases", [])
    warns = []
    for lease in leases:
        left = lease.get("minutes_left")
        if isinstance(left, int) and left < args.margin.total_seconds() / 60:
            site = f" --site {lease['site']} --lease {lease['name']}" if lease.get("site") else ""
            warns.append(f"warning: lease {lease['name']} ends {lease['end']}, in {left} min "
                         f"(less than the {int(args.margin.total_seconds() // 60)} min margin): "
                         f"`serve-system lease extend{site} --by 1h`")
    if args.json:
        print(dumps({**head, "nodes": [r.as_dict() for r in rows],
                     "healthy": bool(rows) and all(r.healthy for r in rows)}, indent=2))
    else:
        for lease in leases:
            console.print(markup(_lease_line(lease)))
        sites = f" over {', '.join(head['sites'])}" if head.get("sites") else ""
        console.print(board.table(rows, f"Nodes of {args.prefix} ({head['provider']}{sites})"))
        bad = [r for r in rows if not r.healthy]
        console.print(f"{len(rows) - len(bad)} of {len(rows)} node(s) healthy")
    for warn in warns:
        echo(warn, file=sys.stderr)
    if not rows:
        raise ServeSystemError(f"no nodes named {args.prefix} or {args.prefix}-* ({head['provider']}); "
                               "run launch first")
    return 0 if all(r.healthy for r in rows) else 1


def _status(args: argparse.Namespace) -> int:
    if args.watch is None and args.times is not None:
        raise ServeSystemError("--times N counts the refreshes of --watch: give --watch too")
    console = chiargs.console()
    nodes = read_inventory(Path(args.inventory)) if Path(args.inventory).is_file() else []
    # a broken inventory is said before credentials are read; a class over several leases: its own board
    provider = None if args.provider == "chameleon" and _is_class(_class_groups(nodes)) else _provider(args)
    if args.watch is None:
        return _status_once(args, provider, console)
    rc = 0
    done = 0
    # Ctrl-C ends the watch as it ends every command: at once, probes killed, exit status 130
    while args.times is None or done < args.times:
        if done:
            time.sleep(args.watch)
        console.clear()  # a terminal is redrawn; a pipe or a log gets one board after the other
        of = f" {done + 1}/{args.times}" if args.times else ""
        console.print(f"serve-system status{of}, every {args.watch:g} s (Ctrl-C to stop) - "
                      f"{time.strftime('%H:%M:%S')}")
        try:
            rc = _status_once(args, provider, console)
        except ServeSystemError as exc:
            console.print(f"error: {markup(exc)}")
            rc = 1
        done += 1
    return rc


# --- rebuild -------------------------------------------------------------------------------------


def _rebuild_args(p: argparse.ArgumentParser) -> None:
    _node_args(p)
    p.add_argument("nodes", nargs="*", metavar="NODE", help="node names of the inventory to rebuild")
    p.add_argument("--all", action="store_true", help="rebuild every node of the inventory")
    p.add_argument("--configure", action="store_true",
                   help="then run playbooks/site.yml on the rebuilt nodes")
    p.set_defaults(func=_rebuild)


def _rebuild(args: argparse.Namespace) -> int:
    if bool(args.nodes) == bool(args.all):
        raise UsageError("name the nodes to rebuild (NODE ...) or pass --all, not both or neither")
    inventory = Path(args.inventory)
    nodes = read_inventory(inventory)
    by_name = {n.name: n for n in nodes}
    unknown = [n for n in args.nodes if n not in by_name]
    if unknown:
        raise UsageError(f"{inventory}: no node named {', '.join(unknown)}; "
                         f"known: {', '.join(sorted(by_name))}")
    chosen = list(nodes) if args.all else [by_name[n] for n in dict.fromkeys(args.nodes)]
    wrong = [n.name for n in chosen if n.provider != args.provider]
    if wrong:
        raise UsageError(f"{', '.join(wrong)} was made by --provider {chosen[0].provider}, "
                         f"not {args.provider}; pass --provider {chosen[0].provider}")
    # each node at the site launch recorded for it (a class over two sites), else at --site
    by_site: dict[str, list[Node]] = {}
    for n in chosen:
        site = n.vars.get("serve_site") if args.provider == "chameleon" else None
        by_site.setdefault(site if isinstance(site, str) else "", []).append(n)
    console = chiargs.console()

    def work(progress: Progress) -> int:
        fresh: dict[str, Node] = {}
        for site, group in by_site.items():
            provider = _provider(args, site or None)
            fresh.update({n.name: n for n in provider.rebuild(group, progress)})
        merged = [fresh.get(n.name, n) for n in nodes]
        finish(merged, inventory, _known_hosts(args), progress, pin=list(fresh.values()))
        progress.note(f"Rebuilt {', '.join(fresh)}; host keys re-pinned for them only")
        return 0

    rc = _with_progress(console, work)
    if args.configure:
        site_yml(inventory, chosen, console, limit=",".join(n.name for n in chosen))
    return rc


# --- teardown ------------------------------------------------------------------------------------


def _teardown_args(p: argparse.ArgumentParser) -> None:
    _node_args(p)
    p.add_argument("--delete-lease", action="store_true",
                   help="also delete the lease named by --lease (Chameleon)")
    p.add_argument("--dry-run", action="store_true", help="print what would be removed, remove nothing")
    p.set_defaults(func=_teardown)


def _teardown(args: argparse.Namespace) -> int:
    from ..provision.chameleon import ChameleonProvider

    progress = chiargs.RichProgress(chiargs.console())
    inv = Path(args.inventory)
    groups = _class_groups(read_inventory(inv)) if args.provider == "chameleon" and inv.is_file() else {}
    if _is_class(groups):  # a class over several leases: each site's servers, then each recorded lease
        removed: list[str] = []
        for site, by_lease in groups.items():
            provider = _provider(args, site)
            assert isinstance(provider, ChameleonProvider)
            removed += provider.teardown(progress, dry_run=args.dry_run)
            if args.delete_lease:
                for lease in by_lease:
                    removed += provider.remove_lease(lease, progress, dry_run=args.dry_run)
        if not args.dry_run:
            progress.note(f"Removed {len(removed)} resource(s) at {', '.join(groups)}"
                          + (": " + ", ".join(removed) if removed else ""))
        return 0
    provider = _provider(args)
    if isinstance(provider, ChameleonProvider):
        removed = provider.teardown(progress, dry_run=args.dry_run, delete_lease_too=args.delete_lease)
    else:
        removed = provider.teardown(progress, dry_run=args.dry_run)
    if not args.dry_run:
        progress.note(f"Removed {len(removed)} resource(s)" + (": " + ", ".join(removed) if removed else ""))
    return 0


# --- access --------------------------------------------------------------------------------------


def _access_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--inventory", type=ownedtree.INPUT_PATH, default=chiargs.DEFAULT_INVENTORY,
                   help="inventory written by launch --roster (default inventory/hosts.yml)")
    p.add_argument("--out", type=ownedtree.OWNED_DIR, required=True, metavar="DIR",
                   help="private folder for the sheets, one STUDENT.txt each "
                        "(mode 0600; never under results/; new, empty or written by access before)")
    p.add_argument("--force", action="store_true",
                   help="write into a non-empty folder of yours (only the sheets are replaced)")
    p.set_defaults(func=_access)


def _access(args: argparse.Namespace) -> int:
    nodes = read_inventory(args.inventory)
    written = roster.write_sheets(nodes, args.out, chiargs.REPO_ROOT, force=args.force, source=args.inventory)
    chiargs.console().print(f"Wrote {len(written)} access sheet(s) (mode 0600) to {args.out}: "
                            + ", ".join(p.name for p in written))
    return 0


# --- registration ----------------------------------------------------------------------------------

COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "launch": ("bring up nodes (a count or a class roster), pin host keys, write the inventory",
               _launch_args),
    "status": ("status board: every node probed at once (SSH, Docker, Triton, Jupyter, experiment, lease)",
               _status_args),
    "rebuild": ("return nodes to a fresh image, re-pin their host keys (--configure: site.yml)",
                _rebuild_args),
    "teardown": ("delete the nodes of a prefix (and the lease with --delete-lease)", _teardown_args),
    "access": ("write each student's access sheet (mode 0600) from the inventory", _access_args),
}


def register(sub: argparse._SubParsersAction) -> None:
    for name, (help_text, build) in COMMANDS.items():
        build(sub.add_parser(name, help=help_text, description=help_text))


#: every command :func:`script_main` runs: the lease family's and this module's
SCRIPT_COMMANDS = {**LEASE_COMMANDS, **COMMANDS}


def script_main(command: str, argv: Sequence[str] | None = None) -> int:
    """``chi_scripts/<command>.py``: the same command, with the script's name in messages (``argv``
    None: the script's own process, which ends at once after Ctrl-C, as ``serve-system`` does)."""
    help_text, build = SCRIPT_COMMANDS[command]
    parser = OneLineParser(prog=f"{command}.py", description=help_text)
    build(parser)
    args = parser.parse_args(argv)
    rc = run(args.func, args, prog=parser.prog)
    if argv is None and rc == 130:
        from .. import interrupt

        interrupt.exit_now(rc)
    return rc

