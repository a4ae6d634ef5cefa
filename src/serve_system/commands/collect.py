"""``serve-system collect``: hosts' records, fetched from the nodes, into the results.

``serve-system collect --run-dir RUN`` puts every host's archive the ``experiment`` role fetched
(``RUN/<host>/.fetch/results.tar.gz``, packed by the node-side runner: :func:`archive.pack`) into the
run's results; ``serve-system collect ARCHIVE --host-dir DIR`` one archive. Every member is checked
against the host's plan (``plan.json``) before anything is written; each level's record is written
last. ``serve-system report --collect`` does the same first, in the same process.
"""

from __future__ import annotations

import argparse

from .. import ownedtree
from ..errors import ServeSystemError
from ..node import archive, plans, records
from ..textsafe import echo


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("collect",
                       help="put hosts' fetched records archives into the results (used by the playbooks)")
    p.add_argument("archive", type=ownedtree.INPUT_PATH, metavar="ARCHIVE", nargs="?",
                   help=f"one archive the runner packed ({archive.ARCHIVE}), with --host-dir")
    p.add_argument("--host-dir", type=ownedtree.RUN_DIR,
                   help="results/<experiment>/<run-id>/<host> (holds plan.json)")
    p.add_argument("--run-dir", type=ownedtree.RUN_DIR,
                   help="results/<experiment>/<run-id>: every host's fetched archive")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if (args.run_dir is None) == (args.archive is None) or (args.archive is None) != (args.host_dir is None):
        raise ServeSystemError("collect: give ARCHIVE --host-dir DIR, or --run-dir RUN")
    try:
        if args.run_dir is not None:
            ownedtree.check_run_folder(args.run_dir, "--run-dir")
            for host, n in archive.collect_run(args.run_dir):
                echo(f"{n} file(s) -> {args.run_dir / host}")
            return 0
        plan = records.read(args.host_dir / records.PLAN_FILE, plans.HostPlan, fix=archive.PLAN_FIX)
        n = archive.unpack(args.archive, args.host_dir, plan)
    except records.RecordError as exc:
        raise ServeSystemError(str(exc)) from None
    echo(f"{n} file(s) -> {args.host_dir}")
    return 0
