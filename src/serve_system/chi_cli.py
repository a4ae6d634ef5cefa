"""The command lines behind chi_scripts/{lease,launch,teardown,status}.py.

Each ``*_main(argv)`` parses its arguments and calls :mod:`serve_system.chameleon` (or, with
``--provider local``, the rehearsal provider in :mod:`serve_system.rehearsal`). Every failure a
user can act on ends as one line on stderr and a non-zero exit code; never a traceback.
"""

from __future__ import annotations

import argparse
import getpass
import inspect
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console

from . import chameleon as chm
from .cli import run
from .errors import ServeSystemError, UsageError

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCAL_PREFIX = "serve-rehearsal"


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the error and a pointer to --help)."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def _user() -> str:
    return os.environ.get("USER") or getpass.getuser()


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _port(text: str) -> int:
    value = _positive(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"port out of range 1-65535: {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {value}")
    return value


def _duration(text: str) -> timedelta:
    """``2h50m``, ``170m``, ``1h``, ``90`` (minutes)."""
    m = re.fullmatch(r"\s*(?:(\d+)\s*h)?\s*(?:(\d+)\s*m?)?\s*", text)
    if not m or not any(m.groups()):
        raise argparse.ArgumentTypeError(f"not a duration like 2h50m or 170m: {text!r}")
    td = timedelta(hours=int(m.group(1) or 0), minutes=int(m.group(2) or 0))
    if td <= timedelta(0):
        raise argparse.ArgumentTypeError(f"duration must be positive: {text!r}")
    return td


def _utc(text: str) -> datetime:
    for fmt in ("%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"):
        try:
            return datetime.strptime(text.strip().removesuffix("Z").removesuffix(" UTC"), fmt)
        except ValueError:
            continue
    raise argparse.ArgumentTypeError(f"not a UTC time like '2026-11-21 17:00': {text!r}")


def _common(parser: argparse.ArgumentParser, *, lease_default: bool = True) -> None:
    g = parser.add_argument_group("Chameleon")
    g.add_argument("--site", default=chm.DEFAULT_SITE, help="Chameleon site (default %(default)s; also CHI@UC)")
    g.add_argument("--openrc", type=Path, metavar="FILE",
                   help="read OS_* credentials from this openrc file (parsed, never executed); "
                        "default: the environment")
    if lease_default:
        g.add_argument("--lease", default=chm.default_lease_name(_user()), metavar="NAME",
                       help="lease name (default %(default)s)")


def _connect(args: argparse.Namespace) -> chm.Site:
    env = dict(os.environ)
    if args.openrc:
        env.update(chm.parse_openrc(args.openrc, os.environ))
    creds = chm.resolve_credentials(env)
    return chm.Site.connect(creds, args.site)


def _main(build: Callable[[], argparse.ArgumentParser], argv: Sequence[str] | None) -> int:
    parser = build()
    args = parser.parse_args(argv)
    return run(args.func, args, prog=parser.prog)


# --- lease ---------------------------------------------------------------------------------------


def build_lease_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="lease.py", description="Create, show or delete the Chameleon lease of the lab.")
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=OneLineParser)
    create = sub.add_parser("create", help="reserve GPU nodes (2 h 50 min by default)")
    _common(create)
    create.add_argument("--node-type", default=chm.DEFAULT_NODE_TYPE, help="node type (default %(default)s)")
    create.add_argument("--count", type=_positive, default=1, help="number of nodes (default 1)")
    create.add_argument("--duration", type=_duration, default=chm.DEFAULT_DURATION, metavar="2h50m",
                        help="lease length (default 2h50m); ignored with --end")
    create.add_argument("--start", type=_utc, metavar="'YYYY-MM-DD HH:MM'", help="start time in UTC (default now)")
    create.add_argument("--end", type=_utc, metavar="'YYYY-MM-DD HH:MM'", help="end time in UTC")
    create.add_argument("--align-hour", action="store_true",
                        help="start at the next full hour (the lab's advice; end stays start + duration)")
    create.add_argument("--exclude-node", action="append", default=[], metavar="NODE",
                        help="never reserve this node (repeatable), e.g. c11-13 which has a faulty GPU")
    create.add_argument("--dry-run", action="store_true", help="print the request, create nothing")
    create.set_defaults(func=_lease_create)
    show = sub.add_parser("show", help="show the lease (status, times, reservation id)")
    _common(show)
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(func=_lease_show)
    delete = sub.add_parser("delete", help="delete the lease")
    _common(delete)
    delete.add_argument("--id", dest="lease_id", help="delete this lease id (when names are duplicated)")
    delete.set_defaults(func=_lease_delete)
    return p


def _lease_create(args: argparse.Namespace) -> int:
    if args.start and args.align_hour:
        raise UsageError("--start and --align-hour exclude each other")
    req = chm.LeaseRequest(
        name=args.lease, node_type=args.node_type, count=args.count, start=args.start, end=args.end,
        duration=args.duration, align_hour=args.align_hour, exclude_nodes=tuple(args.exclude_node),
    )
    req.window()  # argument errors before any network call
    site = _connect(args)
    chm.create_lease(req, site.name, Console(highlight=False, soft_wrap=True), dry_run=args.dry_run)
    return 0


def _lease_show(args: argparse.Namespace) -> int:
    site = _connect(args)
    lease = chm.get_lease(args.lease, site.name)
    if args.json:
        print(json.dumps(lease.as_dict(), indent=2))
    else:
        d = lease.as_dict()
        Console(highlight=False, soft_wrap=True).print(
            f"Lease {d['name']} ({d['id']}) at {site.name}: {d['status']}, {d['start']} -> {d['end']}, "
            f"{d['minutes_left']} min left, node type {d['node_type']}, reservation {d['reservation_id']}"
        )
    return 0


def _lease_delete(args: argparse.Namespace) -> int:
    site = _connect(args)
    chm.delete_lease(args.lease, site.name, Console(highlight=False, soft_wrap=True), lease_id=args.lease_id)
    return 0


def lease_main(argv: Sequence[str] | None = None) -> int:
    return _main(build_lease_parser, argv)


def _rehearsal() -> Any:
    """The local rehearsal provider, imported lazily: the chameleon path does not need it."""
    try:
        from . import rehearsal
    except ModuleNotFoundError as exc:
        if exc.name != f"{__package__}.rehearsal":
            raise
        raise ServeSystemError(
            "--provider local: the rehearsal provider (serve_system.rehearsal) is not installed in this checkout"
        ) from exc
    return rehearsal


# --- launch --------------------------------------------------------------------------------------


def _inventory_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--inventory", type=Path, default=REPO_ROOT / "inventory" / "hosts.yml",
                   help="inventory to write (default inventory/hosts.yml)")
    p.add_argument("--known-hosts", type=Path, default=None,
                   help="known_hosts file to record host keys in (default: next to the inventory)")


def build_launch_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="launch.py", description=(
        "Bring up the lab's GPU server(s) on a Chameleon lease (or local rehearsal nodes), make them "
        "reachable over SSH, write the Ansible inventory. Safe to re-run: existing servers are reused."))
    p.add_argument("--provider", choices=("chameleon", "local"), default="chameleon",
                   help="chameleon (python-chi) or local rehearsal nodes in podman (default %(default)s)")
    _common(p)
    p.add_argument("--count", type=_positive, default=1, help="number of servers (default 1)")
    p.add_argument("--prefix", help=f"server name prefix (default node-serve-system-$USER; "
                                     f"{LOCAL_PREFIX} for --provider local)")
    p.add_argument("--image", default=chm.DEFAULT_IMAGE, help="disk image (default %(default)s)")
    p.add_argument("--key-name", default=os.environ.get("OS_KEYPAIR_NAME") or f"{_user()}-jupyter",
                   help="Chameleon key pair name (default $OS_KEYPAIR_NAME or %(default)s)")
    p.add_argument("--key-path", default=str(Path.home() / ".ssh" / "id_rsa_chameleon"),
                   help="private key matching --key-name, written to the inventory (default %(default)s)")
    p.add_argument("--network", default=chm.DEFAULT_NETWORK, help="network (default %(default)s)")
    p.add_argument("--node-type", help="node type for the GPU count (default: from the lease)")
    p.add_argument("--replace-failed", action="store_true", help="delete and recreate servers in ERROR")
    p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    p.add_argument("--margin", type=_duration, default=timedelta(minutes=30), metavar="30m",
                   help="refuse a lease ending sooner than this (default 30m)")
    p.add_argument("--lease-timeout", type=_seconds, default=3600.0, metavar="S",
                   help="how long to wait for a PENDING lease to start (default 3600)")
    p.add_argument("--server-timeout", type=_seconds, default=1800.0, metavar="S",
                   help="how long to wait for servers to be ACTIVE (default 1800)")
    p.add_argument("--ssh-timeout", type=_seconds, default=600.0, metavar="S",
                   help="how long to wait for TCP port 22 (default 600)")
    p.add_argument("--ssh-port", type=_port, default=22, help="SSH port on the nodes (default 22)")
    p.add_argument("--poll", type=_seconds, default=15.0, metavar="S", help="seconds between status polls")
    _inventory_args(p)
    p.add_argument("--configure", action="store_true", help="then run playbooks/site.yml with ansible-runner")
    p.set_defaults(func=_launch)
    return p


def _launch(args: argparse.Namespace) -> int:
    console = Console(highlight=False, soft_wrap=True)
    known_hosts = args.known_hosts or args.inventory.parent / "known_hosts"
    if args.provider == "local":
        prefix = args.prefix or LOCAL_PREFIX
        if args.dry_run:
            console.print(f"[dry run] would start {args.count} local rehearsal node(s) named {prefix}*")
            return 0
        rehearsal = _rehearsal()
        extra: dict[str, Any] = {}
        if "report" in inspect.signature(rehearsal.launch_nodes).parameters:
            extra["report"] = console.print  # progress lines, when the provider offers them
        nodes = rehearsal.launch_nodes(args.count, prefix, args.inventory, known_hosts, **extra)
    else:
        prefix = args.prefix or chm.default_prefix(_user())
        site = _connect(args)  # credentials first: without them, one error line and nothing else
        key_path = str(Path(args.key_path).expanduser())
        if not Path(key_path).is_file():
            console.print(f"[yellow]warning:[/] --key-path {key_path} does not exist; Ansible needs the private "
                          f"key of key pair {args.key_name}")
        opts = chm.LaunchOptions(
            lease_name=args.lease, prefix=prefix, key_name=args.key_name, key_path=key_path,
            count=args.count, image=args.image, network=args.network, node_type=args.node_type,
            replace_failed=args.replace_failed, dry_run=args.dry_run, lease_timeout=args.lease_timeout,
            server_timeout=args.server_timeout, ssh_timeout=args.ssh_timeout, ssh_port=args.ssh_port,
            poll=args.poll, margin=args.margin,
        )
        nodes = chm.launch(opts, site.name, console)
        if args.dry_run:
            return 0
    chm.finish_nodes(nodes, args.inventory, known_hosts, console)
    if args.configure:
        from .playbook import run_playbook

        rc = run_playbook(REPO_ROOT / "playbooks" / "site.yml", args.inventory, console=console)
        if rc != 0:
            raise ServeSystemError(f"playbooks/site.yml failed (rc={rc}); fix the error above and re-run with --configure")
    return 0


def launch_main(argv: Sequence[str] | None = None) -> int:
    return _main(build_launch_parser, argv)


# --- teardown ------------------------------------------------------------------------------------


def build_teardown_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="teardown.py", description=(
        "Delete the lab's servers (by name prefix) and release their floating IPs; optionally delete "
        "the lease. Safe to re-run."))
    p.add_argument("--provider", choices=("chameleon", "local"), default="chameleon",
                   help="chameleon (python-chi) or local rehearsal nodes (default %(default)s)")
    _common(p)
    p.add_argument("--prefix", help=f"server name prefix (default node-serve-system-$USER; "
                                     f"{LOCAL_PREFIX} for --provider local)")
    p.add_argument("--delete-lease", action="store_true", help="also delete the lease named by --lease")
    p.add_argument("--dry-run", action="store_true", help="print what would be removed, remove nothing")
    p.set_defaults(func=_teardown)
    return p


def _teardown(args: argparse.Namespace) -> int:
    console = Console(highlight=False, soft_wrap=True)
    if args.provider == "local":
        prefix = args.prefix or LOCAL_PREFIX
        if args.dry_run:
            console.print(f"[dry run] would remove local rehearsal nodes named {prefix}*")
            return 0
        removed = _rehearsal().teardown_nodes(prefix)
        console.print(f"Removed {len(removed)} node(s)" + (": " + ", ".join(removed) if removed else ""))
        return 0
    site = _connect(args)
    chm.teardown(args.prefix or chm.default_prefix(_user()), site.name, console,
                 lease_name=args.lease if args.delete_lease else None, dry_run=args.dry_run)
    return 0


def teardown_main(argv: Sequence[str] | None = None) -> int:
    return _main(build_teardown_parser, argv)


# --- status --------------------------------------------------------------------------------------


def build_status_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="status.py", description=(
        "Lease status and time left, servers, floating IPs, SSH reachability and Triton readiness "
        "(asked over SSH: Triton only listens on the node's loopback)."))
    _common(p)
    p.add_argument("--prefix", help="server name prefix (default node-serve-system-$USER)")
    p.add_argument("--ssh-port", type=_port, default=22, help="SSH port on the nodes (default 22)")
    p.add_argument("--key-path", default=str(Path.home() / ".ssh" / "id_rsa_chameleon"),
                   help="private key for the Triton check over SSH (default %(default)s)")
    p.add_argument("--known-hosts", type=Path, default=REPO_ROOT / "inventory" / "known_hosts",
                   help="known_hosts written by launch.py (default inventory/known_hosts)")
    p.add_argument("--no-triton", action="store_true", help="skip the Triton readiness check")
    p.add_argument("--json", action="store_true", help="print JSON on stdout")
    p.set_defaults(func=_status)
    return p


def _status(args: argparse.Namespace) -> int:
    site = _connect(args)
    st: dict[str, Any] = chm.status(
        args.prefix or chm.default_prefix(_user()), site.name, lease_name=args.lease,
        ssh_port=args.ssh_port, key_path=args.key_path, known_hosts=args.known_hosts,
        check_triton=not args.no_triton,
    )
    if args.json:
        print(json.dumps(st, indent=2))
    else:
        chm.print_status(st, Console(highlight=False, soft_wrap=True))
    return 0


def status_main(argv: Sequence[str] | None = None) -> int:
    return _main(build_status_parser, argv)
