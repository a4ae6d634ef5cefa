"""``serve-system decide RUN_DIR --host NAME``: whether a ``repetitions: auto`` run needs another
repetition on a host, and of which variants (JSON for the ``experiment`` role; see
:mod:`serve_system.results.adaptive`). The host's fetched records are put into the results first."""

from __future__ import annotations

import argparse

from .. import ownedtree
from ..node import records
from ..results import adaptive
from ..textsafe import dumps


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("decide",
                       help="repetitions: auto: the next runner call of a host, or why none (used by "
                                      "the playbooks)")
    p.add_argument("run_dir", type=ownedtree.RUN_DIR, metavar="RUN_DIR")
    p.add_argument("--host", required=True, help="the host (its folder under RUN_DIR)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    ownedtree.check_run_folder(args.run_dir, "RUN_DIR")
    print(dumps(records.to_json(adaptive.next_round(args.run_dir, args.host))))
    return 0
