"""``serve-system import PATH... [--json]``: perf_analyzer logs and CSV exports -> the same rows."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .. import perf
from ..errors import ServeSystemError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="parse perf_analyzer stdout logs (as pasted in the labs) and -f CSV exports")
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    p.add_argument("--json", action="store_true", help="one JSON object per load level (JSON lines)")
    p.add_argument("-b", "--batch-size", type=int, default=None,
                   help="batch size used, where the log does not say (CSV exports never do)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    rows: list[tuple[Path, perf.Level]] = []
    for path in args.paths:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise ServeSystemError(f"{path}: cannot read: {exc.strerror}") from None
        levels = perf.parse_any(text, args.batch_size)
        if not levels:
            raise ServeSystemError(f"{path}: no perf_analyzer results found (expected 'Concurrency: N, "
                                   "throughput: ...' lines or a -f CSV export)")
        rows += [(path, lv) for lv in levels]
    if args.json:
        for path, lv in rows:
            print(json.dumps({**lv.to_json(), "source": str(path)}))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table("source", "mode", "load", "status", "infer/s", "avg us", "p50", "p90", "p95", "p99",
                  "queue", "infer", "batch")
    for path, lv in rows:
        j = lv.to_json()
        cell = lambda k: "-" if j.get(k) is None else f"{j[k]:g}"
        table.add_row(path.name, lv.mode, f"{lv.load:g}", lv.status, cell("throughput"), cell("latency_avg_us"),
                      cell("p50_us"), cell("p90_us"), cell("p95_us"), cell("p99_us"), cell("queue_us"),
                      cell("compute_infer_us"), cell("batch_size"))
    Console(width=160).print(table)
    return 0
