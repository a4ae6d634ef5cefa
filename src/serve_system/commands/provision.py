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
from ..provision import board, roster
from ..provision.base import LaunchRequest, Progress, Provider, default_prefix, finish, server_names
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


def _provider(args: argparse.Namespace) -> Provider:
    if args.provider == "local":
        from ..provision.local import LocalProvider

        return LocalProvider(args.prefix, Path(args.inventory))
    from ..provision.chameleon import ChameleonProvider

    chiargs.check_site(args)
    site = chiargs.connect(args)  # credentials first: without them, one error line and nothing else
    return ChameleonProvider(
        site=site, prefix=args.prefix, lease_name=args.lease, key_name=args.key_name,
        key_path=str(Path(args.key_path).expanduser()), image=args.image,
        network=getattr(args, "network", "sharednet1"), node_type=getattr(args, "node_type", None),
        replace_failed=getattr(args, "replace_failed", False),
        lease_timeout=getattr(args, "lease_timeout", 3600.0), server_timeout=args.server_timeout,
        ssh_timeout=args.ssh_timeout, ssh_port=args.ssh_port, poll=args.poll, margin=args.margin,
    )


def _nodes_table(nodes: Sequence[Node], inventory: Path, known_hosts: Path) -> Any:
    from rich.table import Table

    table = Table(title=f"Nodes ({markup(inventory)})")
    for col in ("name", "address", "port", "user", "GPUs", "provider", "student"):
        table.add_column(col)
    for n in nodes:
        table.add_row(*(markup(c) for c in (n.name, n.address, n.port, n.user, n.gpus, n.provider)),
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
    p.add_argument("--node-type", help="Chameleon node type for the GPU count (default: from the lease)")
    p.add_argument("--replace-failed", action="store_true",
                   help="delete and recreate Chameleon servers in ERROR")
    p.add_argument("--lease-timeout", type=_seconds, default=3600.0, metavar="S",
                   help="how long to wait for a PENDING lease to start (default 3600)")
    p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    p.add_argument("--configure", action="store_true", help="then run playbooks/site.yml on the nodes")
    p.set_defaults(func=_launch)


def _launch(args: argparse.Namespace) -> int:
    console = chiargs.console()
    students = roster.read_roster(args.roster) if args.roster else []
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


def _board(args: argparse.Namespace, provider: Provider) -> tuple[dict[str, Any], list[board.NodeHealth]]:
    fleet = provider.fleet()
    inv = Path(args.inventory)
    nodes = read_inventory(inv) if inv.is_file() else []
    rows = board.probe(fleet, nodes, _known_hosts(args), timeout=args.probe_timeout)
    head: dict[str, Any] = {"provider": provider.name, "prefix": args.prefix, "lease": fleet.lease}
    return head, rows


def _status_once(args: argparse.Namespace, provider: Provider, console: Console) -> int:
    head, rows = _board(args, provider)
    lease = head["lease"]
    warn = None
    if (lease and isinstance(lease.get("minutes_left"), int)
            and lease["minutes_left"] < args.margin.total_seconds() / 60):
        warn = (f"warning: lease {lease['name']} ends {lease['end']}, in {lease['minutes_left']} min "
                f"(less than the {int(args.margin.total_seconds() // 60)} min margin): "
                "`serve-system lease extend --by 1h`")
    if args.json:
        print(dumps({**head, "nodes": [r.as_dict() for r in rows],
                     "healthy": bool(rows) and all(r.healthy for r in rows)}, indent=2))
    else:
        if lease:
            if "minutes_left" in lease:
                console.print(markup(f"Lease {lease['name']} ({lease['id']}): {lease['status']}, "
                                     f"{lease['start']} -> {lease['end']}, {lease['minutes_left']} min left"))
            else:
                console.print(markup(f"Lease {lease['name']}: {lease['status']}"))
        console.print(board.table(rows, f"Nodes of {args.prefix} ({provider.name})"))
        bad = [r for r in rows if not r.healthy]
        console.print(f"{len(rows) - len(bad)} of {len(rows)} node(s) healthy")
    if warn:
        echo(warn, file=sys.stderr)
    if not rows:
        raise ServeSystemError(f"no nodes named {args.prefix} or {args.prefix}-* ({provider.name}); "
                               "run launch first")
    return 0 if all(r.healthy for r in rows) else 1


def _status(args: argparse.Namespace) -> int:
    if args.watch is None and args.times is not None:
        raise ServeSystemError("--times N counts the refreshes of --watch: give --watch too")
    console = chiargs.console()
    if Path(args.inventory).is_file():
        read_inventory(Path(args.inventory))  # a broken inventory is said before credentials are read
    provider = _provider(args)
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
    provider = _provider(args)
    console = chiargs.console()

    def work(progress: Progress) -> int:
        fresh = {n.name: n for n in provider.rebuild(chosen, progress)}
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

    provider = _provider(args)
    progress = chiargs.RichProgress(chiargs.console())
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

