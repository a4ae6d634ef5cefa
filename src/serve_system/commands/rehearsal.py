"""``serve-system rehearsal images``: build (or reuse) the rehearsal images (no Chameleon needed).

``serve-system rehearsal upstream-repo``: the upstream mode (docs/rehearsal.md): a signed stand-in of
Docker's and NVIDIA's apt repositories served on podman's bridge until Ctrl-C, and the host variables
that point the roles at it (for ``ansible-playbook playbooks/site.yml -e '<them>'``).

Rehearsal nodes themselves are launched, listed and removed by the provisioning commands, like
Chameleon nodes: ``serve-system launch --provider local``, ``status --provider local``,
``rebuild --provider local``, ``teardown --provider local``.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
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
    u = rsub.add_parser("upstream-repo",
                        help="serve stand-ins of Docker's and NVIDIA's apt repositories to rehearsal nodes "
                             "(the upstream mode) until Ctrl-C")
    u.add_argument("--port", type=int, default=0, help="port on podman's bridge (default: a free one)")
    u.add_argument("--versions", choices=("today", "oldest"), default="today",
                   help="the upstream versions the stand-in packages claim: today's (default) or the oldest "
                        "the project supports (docs/real-node.md lists both)")
    u.set_defaults(func=_upstream_repo)


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


def _upstream_repo(args: argparse.Namespace) -> int:
    import tempfile
    from pathlib import Path

    from ..errors import UsageError
    from ..images import build as images
    from ..provision import aptserve, debs, upstream_repo

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be 0 to 65535, got {args.port}")
    # Ctrl-C, or SIGTERM (what a background job gets), at any point: the temporary site is removed
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    stack.ensure_images(("node",), _say)
    host = aptserve.bridge_address()
    with tempfile.TemporaryDirectory(prefix="serve-system-upstream-") as tmp:
        debian = debs.debs_from_image(images.NODE.ref, upstream_repo.DEBIAN_SOURCES, Path(tmp) / "debian")
        versions = upstream_repo.VERSION_SETS[args.versions]
        site = upstream_repo.build(Path(tmp) / "site", "trixie", debian, versions=versions)
        with aptserve.serve(site.root, host, args.port) as server:
            variables = json.dumps(upstream_repo.node_vars(server.base_url, versions=versions))
            print(variables, flush=True)
            _say(f"serving Docker's and NVIDIA's stand-in repositories at {server.base_url} "
                 "(Ctrl-C or SIGTERM stops); on a fresh rehearsal node, in another shell:")
            # one line, unwrapped: to be copied as it is
            print(f"  .venv/bin/ansible-playbook playbooks/site.yml --limit NODE -e '{variables}'",
                  file=sys.stderr, flush=True)
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                _say(f"stopped; {len(server.requests)} request(s) served")
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
