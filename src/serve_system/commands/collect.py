"""``serve-system collect ARCHIVE --host-dir DIR``: a host's records, fetched from the node, into the results.

Run by the ``experiment`` role on the controller after it fetched the archive the node-side runner
packed (:func:`serve_system.records.pack`). Every member is checked against the host's plan
(``DIR/plan.json``) before anything is written; each level's record is written last.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import ServeSystemError
from ..experiment import records


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("collect", help="put a host's fetched records archive into its results folder (used by the playbooks)")
    p.add_argument("archive", type=Path, metavar="ARCHIVE", help=f"the archive the runner packed ({records.ARCHIVE})")
    p.add_argument("--host-dir", type=Path, required=True, help="results/<experiment>/<run-id>/<host> (holds plan.json)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        plan = records.read(args.host_dir / "plan.json", records.HostPlan)
        n = records.unpack(args.archive, args.host_dir, [v.name for v in plan.variants])
    except records.RecordError as exc:
        raise ServeSystemError(str(exc)) from None
    print(f"{n} file(s) -> {args.host_dir}")
    return 0
