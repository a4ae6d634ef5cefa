"""``serve-system import PATH... [--json]``: perf_analyzer logs and CSV exports -> the same rows."""

from __future__ import annotations

import argparse
import codecs
from pathlib import Path
from typing import Any

from .. import ownedtree
from ..errors import ServeSystemError
from ..experiment import perf
from ..textfile import decode_utf8, read_bytes
from ..textsafe import dumps, markup


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import",
                       help="parse perf_analyzer stdout logs (as pasted in the labs) and -f CSV exports")
    p.add_argument("paths", nargs="+", type=ownedtree.INPUT_PATH, metavar="PATH")
    p.add_argument("--json", action="store_true", help="one JSON object per load level (JSON lines)")
    p.add_argument("-b", "--batch-size", type=_batch_size, default=None,
                   help="batch size used, where the log does not say (CSV exports never do)")
    p.set_defaults(func=_run)


def _batch_size(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"-b/--batch-size: {text!r} is not a whole number: give the "
                                         "batch size perf_analyzer ran with (its -b), e.g. -b 1") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"-b/--batch-size: {n} is not a batch size: "
                                         "give 1 or more (perf_analyzer's -b)")
    return n


def read_log(path: Path) -> str:
    """A log or CSV's text: UTF-8 (with or without BOM) or UTF-16 with BOM (PowerShell's ``>``)."""
    raw = read_bytes(path, "give perf_analyzer's output or -f CSV file")
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return raw.decode("utf-16")
        except UnicodeDecodeError:
            raise ServeSystemError(f"{path}: starts as UTF-16 but is not: save it as UTF-8") from None
    if b"\0" in raw:
        raise ServeSystemError(f"{path}: a binary file, not perf_analyzer's text output or -f CSV export")
    return decode_utf8(raw, path, "save it as UTF-8")


def _run(args: argparse.Namespace) -> int:
    rows: list[tuple[Path, perf.Level]] = []
    for path in args.paths:
        text = read_log(path)
        try:
            levels = perf.parse_any(text, args.batch_size, strict=True)
        except perf.CsvFormatError as exc:
            raise ServeSystemError(f"{path}: {exc}") from None
        if not levels:
            raise ServeSystemError(f"{path}: no perf_analyzer results found (expected 'Concurrency: N, "
                                   "throughput: ...' lines or a -f CSV export)")
        rows += [(path, lv) for lv in levels]
    if args.json:
        for path, lv in rows:
            print(dumps({**lv.to_json(), "source": str(path)}))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table("source", "mode", "load", "status", "infer/s", "avg us", "p50", "p90", "p95", "p99",
                  "queue", "infer", "batch")
    for path, lv in rows:
        j = lv.to_json()
        table.add_row(*(markup(c) for c in (
            path.name, lv.mode, f"{lv.load:g}", lv.status,
            *(_cell(j, k) for k in ("throughput", "latency_avg_us", "p50_us", "p90_us", "p95_us", "p99_us",
                                    "queue_us", "compute_infer_us", "batch_size")))))
    Console(width=160).print(table)
    return 0


def _cell(row: dict[str, Any], key: str) -> str:
    return "-" if row.get(key) is None else f"{row[key]:g}"
