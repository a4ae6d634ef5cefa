"""``serve-system compare RUN_DIR...``: runs side by side (e.g. FastAPI beside Triton at one load).

With ``--class``: a whole class's runs of one experiment in one comparison (each host of each run is
one node; :mod:`serve_system.results.classcmp`), written as a class report into a folder.
"""

from __future__ import annotations

import argparse
import sys

from .. import ownedtree, safeio
from ..errors import UsageError
from ..results import compare as cmp
from ..textsafe import clean, echo


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare",
                       help="several reported runs side by side (e.g. FastAPI vs Triton at load 16)")
    p.add_argument("run_dirs", nargs="+", type=ownedtree.INPUT_PATH, metavar="RUN_DIR",
                   help="results/<experiment>/<run-id>")
    p.add_argument("--load", type=float, action="append", default=[],
                   help="keep only this load level (concurrency or senders); repeatable; default: all")
    p.add_argument("--out", type=ownedtree.OWNED_DIR,
                   help="also write the markdown table to this file; with --class: the class report's folder "
                        "(default results/class/<experiment>)")
    p.add_argument("--csv", type=ownedtree.OUTPUT_FILE, help="also write the rows as CSV")
    p.add_argument("--class", dest="class_", action="store_true",
                   help="a class's runs of one experiment (raw run folders; every host of every run is one "
                        "node): spread across nodes, outlier nodes, the lab's findings pooled over nodes")
    p.add_argument("--force", action="store_true", help="with --class: replace a class report in --out")
    p.add_argument("--partial", action="store_true", help="with --class: take interrupted runs as they are")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    for x in args.load:
        if not x > 0 or x == float("inf"):
            raise UsageError(f"--load {x:g}: a load level must be a positive number "
                             "(concurrency, senders or rate)")
    if args.class_:
        return _class(args)
    for option, on in (("--force", args.force), ("--partial", args.partial)):
        if on:
            raise UsageError(f"{option}: only with --class; add --class or leave {option} out")
    outs = [(o, path) for o, path in (("--out", args.out), ("--csv", args.csv)) if path is not None]
    for option, path in outs:
        cmp.check_output(path, option)
    if len(outs) == 2 and outs[0][1].resolve() == outs[1][1].resolve():
        raise UsageError(f"--out and --csv both name {args.out}; give two different files")
    inputs = {(d / n).resolve() for d in args.run_dirs for n in ("summary.json", "summary.csv", "report.md")}
    for option, path in outs:
        if path.resolve() in inputs:
            raise UsageError(f"{option} {path}: is a run's own report file; write the comparison elsewhere")
    rows = cmp.compare(args.run_dirs, args.load or None)
    text = cmp.markdown(rows)
    sys.stdout.write(clean(text, lines=True))
    if args.out:
        safeio.write_text(args.out, text)  # a temporary name, renamed: never through a link
    if args.csv:
        cmp.write_csv(args.csv, rows)
    return 0


def _class(args: argparse.Namespace) -> int:
    from ..results import classcmp, classwrite
    from ..results.classmd import outlier_text

    if args.csv is not None:
        raise UsageError(f"--csv {args.csv}: with --class the CSV is class.csv in the --out folder; "
                         "leave --csv out")
    out = args.out if args.out is not None else classwrite.default_out(args.run_dirs)
    classwrite.check_out(out, args.run_dirs, args.force)
    result = classcmp.compare_class(args.run_dirs, args.load or None, args.partial)
    written = classwrite.write(result, out)
    echo(f"{len(result.nodes)} nodes, {len(result.cells)} cell(s) -> {out / 'class.md'} "
         f"({len(written) - len(classwrite.FILES)} box plot(s))")
    for s in result.suspects:
        o = s.outliers[0]
        echo(f"suspect node {s.node}: outlier in {len(s.outlying_variants)} of {s.variants} "
             f"variants, e.g. {o.variant} {o.mode} {o.load:g} {o.metric}: {outlier_text(o)}")
    suspects = {s.node for s in result.suspects}
    for o in result.outliers:
        if o.node not in suspects:
            echo(f"outlier: {o.variant} {o.mode} {o.load:g} {o.metric}: {outlier_text(o)}")
    for f in result.findings:
        held = sum(v == "held" for v in result.node_verdicts.get(f.key, {}).values())
        echo(f"finding: {f.claim}: {f.verdict} (pooled over {len(result.pooled_nodes)} nodes; "
             f"held on {held} of {len(result.nodes)} on their own)")
    return 0
