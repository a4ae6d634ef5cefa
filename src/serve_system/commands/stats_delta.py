"""``serve-system stats BEFORE.json AFTER.json [--json]``: what Triton did between two snapshots."""

from __future__ import annotations

import argparse

from .. import ownedtree
from ..results import stats
from ..textsafe import dumps, echo

#: said of a model whose counters went backwards between the snapshots
RESET_NOTE = (" [counters went backwards: the server restarted or the model was reloaded"
              " between the snapshots; these are the counts since then]")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("stats",
                       help="per model: inference/execution count deltas, average batch size, histogram")
    p.add_argument("before", type=ownedtree.INPUT_PATH, metavar="BEFORE.json")
    p.add_argument("after", type=ownedtree.INPUT_PATH, metavar="AFTER.json")
    p.add_argument("--json", action="store_true", help="a JSON list, one object per model")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    deltas = stats.delta_files(args.before, args.after)
    if args.json:
        print(dumps([d.to_json() for d in deltas], indent=1))
        return 0
    for d in deltas:
        avg = "-" if d.avg_batch_size is None else f"{round(d.avg_batch_size, 4):.2f}"  # as --json rounds it
        echo(f"{d.name} v{d.version}: {d.inference_count} inferences in {d.execution_count} executions "
             f"(avg batch {avg}){RESET_NOTE if d.reset else ''}")
        for size, n in sorted(d.histogram.items()):
            echo(f"  batch {size:>3}: {n:>7} {'#' * min(60, n * 60 // max(d.histogram.values()))}")
    return 0
