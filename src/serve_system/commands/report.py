"""``serve-system report RUN_DIR``: summary.csv/json, plots and report.md from a run's raw files."""

from __future__ import annotations

import argparse

from .. import ownedtree
from ..errors import ServeSystemError
from ..node import archive, records
from ..results import drawing
from ..textsafe import echo


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="summarise a run folder results/<experiment>/<run-id> "
                                      "(recomputed from raw files)")
    p.add_argument("run_dir", type=ownedtree.RUN_DIR, metavar="RUN_DIR")
    p.add_argument("--partial", action="store_true",
                   help="report an interrupted run anyway (report.md lists what is missing)")
    p.add_argument("--collect", action="store_true",
                   help="first put the hosts' fetched records into the run (as serve-system collect "
                        "--run-dir)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.collect:
        try:
            for host, n in archive.collect_run(args.run_dir):
                echo(f"{n} file(s) -> {args.run_dir / host}")
        except records.RecordError as exc:
            raise ServeSystemError(str(exc)) from None
    # the processes that draw the plots first: they import matplotlib while this one imports and reads
    with drawing.Drawing() as draw:
        from ..results import report

        out = report.write_report(args.run_dir, partial=args.partial, drawing=draw)
    echo(f"{out['rows']} row(s) -> {out['report']} ({len(out['plots'])} plot(s))")
    for b in out["best"]:
        if b:
            echo(f"best {b.objective}: {b.variant} on {b.host} at {b.mode} {b.load:g} "
                 f"({b.metric} = {b.value:.1f})")
    for f in out["findings"]:
        echo(f"finding: {f.claim}: {f.verdict}")
    if out["missing"]:
        echo(f"partial: {len(out['missing'])} missing (listed in report.md)")
    return 0
