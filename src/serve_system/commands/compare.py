"""``serve-system compare RUN_DIR...``: runs side by side (e.g. FastAPI beside Triton at one load)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import UsageError
from ..results import compare as cmp


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare",
                       help="several reported runs side by side (e.g. FastAPI vs Triton at load 16)")
    p.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR", help="results/<experiment>/<run-id>")
    p.add_argument("--load", type=float, action="append", default=[],
                   help="keep only this load level (concurrency or senders); repeatable; default: all")
    p.add_argument("--out", type=Path, help="also write the markdown table to this file")
    p.add_argument("--csv", type=Path, help="also write the rows as CSV")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    for x in args.load:
        if not x > 0 or x == float("inf"):
            raise UsageError(f"--load {x:g}: a load level must be a positive number "
                             "(concurrency, senders or rate)")
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
    print(text, end="")
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    if args.csv:
        cmp.write_csv(args.csv, rows)
    return 0
