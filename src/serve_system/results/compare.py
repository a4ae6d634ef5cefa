"""Several runs side by side: e.g. FastAPI at 16 senders beside Triton at concurrency 16.

Reads each run's ``summary.json`` (written by ``serve-system report RUN_DIR``; the same row schema
for the Triton and FastAPI experiments), keeps the rows at the chosen load levels, averages
repetitions, and writes one markdown table (and optionally CSV) with a throughput ratio against the
first row of each load level.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import Any, TypedDict, cast

from .. import safeio, textsafe
from ..errors import ServeSystemError
from .cells import cell, ms_cells
from .row import Row, value
from .status import Status

COLUMNS = ("experiment", "run_id", "host", "variant", "mode", "load", "status", "repetitions", "throughput",
           "p50_us", "p95_us", "p99_us", "errors", "ratio", "note")
METRICS = ("throughput", "p50_us", "p95_us", "p99_us", "errors")


class Compared(TypedDict, total=False):
    """One row of the comparison (:data:`COLUMNS`): a run's (host, variant, mode, load), its ok
    repetitions averaged. Its names are as the run's summary.json holds them (a file: shown as found)."""

    experiment: Any
    run_id: Any
    host: Any
    variant: Any
    mode: Any
    load: float | None
    status: str
    repetitions: int
    throughput: float | None
    p50_us: float | None
    p95_us: float | None
    p99_us: float | None
    errors: float | None
    ratio: float | None
    note: str


def load_rows(run_dir: Path) -> list[Row]:
    """A reported run's rows (summary.json: ``{"rows": [...], ...}``, or a bare list from older reports):
    JSON objects whose load and metrics are checked numbers (the other columns as the file holds them)."""
    path = run_dir / "summary.json"
    fix = f"re-run `serve-system report {run_dir}`"
    if not run_dir.is_dir():
        raise ServeSystemError(f"{run_dir}: no such run folder; give results/<experiment>/<run-id>")
    if not os.path.lexists(path):
        raise ServeSystemError(f"{path}: no summary; run `serve-system report {run_dir}` first")
    # the one read path: a regular file inside the run folder, bounded (a pipe or a device is refused)
    # and JSON's numbers finite and bounded (safeio.loads_json)
    doc = safeio.read_json(path, kind="output", within=run_dir, fix=fix)
    rows = doc.get("rows") if isinstance(doc, dict) else doc
    if not isinstance(rows, list):
        raise ServeSystemError(f"{path}: field 'rows' must be a list of rows; {fix}")
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise ServeSystemError(f"{path}: rows[{i}] must be an object; {fix}")
        for k in ("load", *METRICS):
            v = r.get(k)
            if v is not None:  # a number, not negative, bounded (one line naming the row and field)
                r[k] = safeio.check_number(v, path, f"rows[{i}].{k}", low=0, fix=fix)
    return cast(list[Row], rows)


def check_output(path: Path, option: str) -> None:
    """Refuse an output path that cannot be written (before any work is done)."""
    if path.is_dir():
        raise ServeSystemError(f"{option} {path}: is a folder; give a file name, e.g. {path / 'compare.md'}")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise ServeSystemError(f"{option} {path}: folder {parent} does not exist; create it first or choose "
                               "another path")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ServeSystemError(f"{option} {path}: not writable; choose a path you can write")


def compare(run_dirs: list[Path], loads: list[float] | None = None) -> list[Compared]:
    """One row per (run, host, variant, mode, load), repetitions averaged; ordered by load, then input
    order."""
    groups: dict[tuple[Any, ...], list[Row]] = {}
    order: list[tuple[Any, ...]] = []
    for i, run in enumerate(run_dirs):
        for r in load_rows(run):
            key: tuple[Any, ...]
            if r.get("load") is None:  # a variant that never ran (refused / unavailable)
                key = (i, r.get("experiment"), r.get("run_id"), r.get("host"), r.get("variant"),
                       r.get("mode"), None)
            elif loads and not any(abs(float(r["load"]) - x) < 1e-9 for x in loads):
                continue
            else:
                key = (i, r.get("experiment"), r.get("run_id"), r.get("host"), r.get("variant"),
                       r.get("mode"), float(r["load"]))
            if key not in groups:
                groups[key] = []
                order.append(key)
            groups[key].append(r)
    out: list[Compared] = []
    for key in order:
        rs = groups[key]
        ok = [r for r in rs if r.get("status") == Status.OK]

        def mean(m: str, ok: list[Row] = ok) -> float | None:
            vals = [float(value(r, m)) for r in ok if value(r, m) is not None]
            return statistics.fmean(vals) if vals else None

        out.append(Compared(
            experiment=key[1], run_id=key[2], host=key[3], variant=key[4], mode=key[5], load=key[6],
            status=Status.OK if ok else (rs[0].get("status") or Status.FAILED), repetitions=len(ok),
            throughput=mean("throughput"), p50_us=mean("p50_us"), p95_us=mean("p95_us"),
            p99_us=mean("p99_us"), errors=mean("errors"), note="" if ok else (rs[0].get("error") or "")))
    out.sort(key=lambda c: (float("inf") if c["load"] is None else c["load"]))
    first: dict[float, float] = {}
    for c in out:
        if c["load"] is None or c["throughput"] is None:
            c["ratio"] = None
            continue
        base = first.setdefault(c["load"], c["throughput"])
        c["ratio"] = c["throughput"] / base if base else None
    return out


def markdown(rows: list[Compared]) -> str:
    lines = [("| experiment | host | variant | load | status | throughput/s | p50 ms | p95 ms | p99 ms | "
              "errors | x first |"), "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ms = ms_cells(r)
        load = "-" if r["load"] is None else f"{r['mode'] or ''} {r['load']:g}".strip()
        status = r["status"] + (f": {r['note']}" if r["note"] else "")
        lines.append(f"| {r['experiment']} ({r['run_id']}) | {r['host']} | {r['variant']} | {load} | "
                     f"{status} | {cell(r['throughput'])} | {ms('p50_us')} | {ms('p95_us')} | {ms('p99_us')} "
                     f"| {cell(r['errors'], 0)} | {cell(r['ratio'], 2)} |")
    return "\n".join(lines) + "\n"


def write_csv(path: Path, rows: list[Compared]) -> None:
    with safeio.open_write(path, newline="") as fh:  # a temporary name, renamed: never through a link
        w = textsafe.DictWriter(fh, fieldnames=list(COLUMNS))
        w.writeheader()
        for r in rows:
            w.writerow({k: "" if r.get(k) is None else r.get(k) for k in COLUMNS})
