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
from typing import Any

from .. import safeio, textsafe
from ..errors import ServeSystemError
from ..node import records
from .cells import cell, ms_cells

COLUMNS = ("experiment", "run_id", "host", "variant", "mode", "load", "status", "repetitions", "throughput",
           "p50_us", "p95_us", "p99_us", "errors", "ratio", "note")
METRICS = ("throughput", "p50_us", "p95_us", "p99_us", "errors")


def load_rows(run_dir: Path) -> list[dict[str, Any]]:
    """A reported run's rows (summary.json: ``{"rows": [...], ...}``, or a bare list from older reports)."""
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
    return rows


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


def compare(run_dirs: list[Path], loads: list[float] | None = None) -> list[dict[str, Any]]:
    """One row per (run, host, variant, mode, load), repetitions averaged; ordered by load, then input
    order."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
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
    out: list[dict[str, Any]] = []
    for key in order:
        rs = groups[key]
        ok = [r for r in rs if r.get("status") == records.OK]
        row: dict[str, Any] = dict(
            zip(("experiment", "run_id", "host", "variant", "mode"), key[1:6], strict=True))
        row["load"] = key[6]
        row["status"] = records.OK if ok else (rs[0].get("status") or records.FAILED)
        row["repetitions"] = len(ok)
        for m in METRICS:
            vals = [float(r[m]) for r in ok if r.get(m) is not None]
            row[m] = statistics.fmean(vals) if vals else None
        row["note"] = "" if ok else (rs[0].get("error") or "")
        out.append(row)
    out.sort(key=lambda r: (float("inf") if r["load"] is None else r["load"]))
    first: dict[float, float] = {}
    for r in out:
        if r["load"] is None or r["throughput"] is None:
            r["ratio"] = None
            continue
        base = first.setdefault(r["load"], r["throughput"])
        r["ratio"] = r["throughput"] / base if base else None
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
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


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with safeio.open_write(path, newline="") as fh:  # a temporary name, renamed: never through a link
        w = textsafe.DictWriter(fh, fieldnames=list(COLUMNS))
        w.writeheader()
        for r in rows:
            w.writerow({k: "" if r.get(k) is None else r.get(k) for k in COLUMNS})
