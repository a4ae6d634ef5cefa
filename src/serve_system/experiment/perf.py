"""perf_analyzer: parse what it prints and exports (its command line is :mod:`.perfargv`).

Three inputs are understood, all giving the same :class:`Level` rows (one per load level):

* plain stdout, whole or pasted in pieces as in the labs: the per-level blocks
  (``Request concurrency: 8`` / ``Request Rate: 120``, client p50..p99 lines, the server's
  ``Avg request latency: ... (overhead + queue + compute input + compute infer + compute output)``)
  and the summary lines (``Concurrency: 8, throughput: 52.3 infer/sec, latency 151983 usec``);
* the ``-f`` CSV export (plain or ``--verbose-csv``), whose rows are sorted by throughput;
* perf_analyzer's ``Failed to obtain stable measurement ... for concurrency 4`` error: that level is
  reported as unmeasured, never as numbers;
* with ``-v`` (always passed by :func:`.perfargv.build_argv`), every measurement window of a level
  (``Pass [2] throughput: 212.8 infer/sec. Avg latency: 9399 usec (std 512 usec).``): the samples a
  level's numbers rest on (:attr:`Level.windows`, :func:`window_cv`).

All times are microseconds, as perf_analyzer reports them.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from .. import metrics
from ..errors import ServeSystemError
from ..node import defaults

#: Level.mode values
CONCURRENCY = "concurrency"
REQUEST_RATE = "request_rate"

@dataclass
class Level:
    """What perf_analyzer measured at one load level (or why it could not)."""

    mode: str
    load: float
    status: str = "ok"  # "ok" or "unmeasured"
    error: str | None = None
    batch_size: int | None = None
    throughput: float | None = None
    latency_avg_us: float | None = None
    p50_us: float | None = None
    p90_us: float | None = None
    p95_us: float | None = None
    p99_us: float | None = None
    queue_us: float | None = None
    compute_input_us: float | None = None
    compute_infer_us: float | None = None
    compute_output_us: float | None = None
    overhead_us: float | None = None
    server_latency_us: float | None = None
    client_send_us: float | None = None
    client_recv_us: float | None = None
    network_us: float | None = None
    extra: dict[str, float] = field(default_factory=dict)
    #: every measurement window perf_analyzer printed for this level (``-v``), in order: throughput,
    #: the stabilised latency (``avg`` or ``p95``...) in us, and its standard deviation when printed
    windows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, float]:
        return (self.mode, self.load)

    def to_json(self) -> dict[str, Any]:
        """The import/report JSON object: fixed keys, the breakdown only where present."""
        out: dict[str, Any] = {"mode": self.mode, "load": _num(self.load), "status": self.status}
        if self.status != "ok":
            out["error"] = self.error
            for key in metrics.PER_LEVEL:
                out[key] = None
            return out
        for key in metrics.PER_LEVEL:
            out[key] = _num(getattr(self, key))
        for key in (k for k in metrics.PERF_ROW if k not in metrics.PER_LEVEL):  # Triton's breakdown
            if getattr(self, key) is not None:
                out[key] = _num(getattr(self, key))
        if self.batch_size is not None:
            out["batch_size"] = self.batch_size
        return out

    def merge(self, other: Level) -> None:
        """Fill fields this level lacks from ``other`` (same load level)."""
        for name, value in asdict(other).items():
            if name in ("mode", "load", "extra", "windows"):
                continue
            if getattr(self, name) is None and value is not None:
                setattr(self, name, value)
        if other.status != "ok" and self.throughput is None:
            self.status, self.error = other.status, other.error
        for k, v in other.extra.items():
            self.extra.setdefault(k, v)
        if not self.windows:
            self.windows = list(other.windows)


def _num(value: float | None) -> float | int | None:
    if value is None:
        return None
    return int(value) if float(value).is_integer() else value


UNSTABLE = re.compile(
    r"Failed to obtain stable measurement within (?P<windows>\d+) measurement windows for "
    r"(?P<what>concurrency|request rate) (?P<load>\d+(?:\.\d+)?)", re.IGNORECASE)


# --------------------------------------------------------------------------------- stdout

_F = r"([\d.]+(?:e[+-]?\d+)?)"
SUMMARY = re.compile(
    rf"^\s*(?P<what>Concurrency|Request Rate):\s*{_F},"
    rf"\s*throughput:\s*{_F}\s*infer/sec,\s*latency\s*{_F}\s*usec",
    re.IGNORECASE)
SUMMARY_HEADER = re.compile(r"Inferences/Second vs\. Client (?P<stat>Average|p\d+) Batch Latency",
                            re.IGNORECASE)
BLOCK = re.compile(rf"^\s*(?:Request concurrency|Request Rate):\s*{_F}(?!\s*,)", re.IGNORECASE)
BLOCK_KIND = re.compile(r"^\s*(Request concurrency|Request Rate)", re.IGNORECASE)
BATCH = re.compile(r"^\s*Batch size:\s*(\d+)", re.IGNORECASE)
CLIENT_THROUGHPUT = re.compile(rf"^\s*Throughput:\s*{_F}\s*infer/sec", re.IGNORECASE)
AVG_LATENCY = re.compile(rf"^\s*Avg latency:\s*{_F}\s*usec", re.IGNORECASE)
PCT = re.compile(rf"^\s*p(\d+) latency:\s*{_F}\s*usec", re.IGNORECASE)
SERVER = re.compile(rf"Avg request latency:\s*{_F}\s*usec\s*\((?P<parts>[^)]*)\)", re.IGNORECASE)
PART = re.compile(rf"(overhead|queue|compute input|compute infer|compute output)\s+{_F}\s*usec",
                  re.IGNORECASE)
#: one measurement window (``-v``): ``Pass [3] throughput: 210.9 infer/sec. Avg latency: 9472 usec (std
#: 1403 usec).`` or, when stabilising on a percentile, ``... p95 latency: 12926 usec``
WINDOW = re.compile(rf"^\s*Pass \[(?P<n>\d+)\] throughput:\s*{_F}\s*infer/sec\.\s*"
                    rf"(?:(?P<stat>Avg|p\d+) latency:\s*{_F}\s*usec(?:\s*\(std\s*{_F}\s*usec\))?)?",
                    re.IGNORECASE)
#: perf_analyzer reports a level from its last this-many windows (its stability window)
STABILITY_WINDOWS = defaults.STABILITY_WINDOWS
PART_KEYS = {"overhead": "overhead_us", "queue": "queue_us", "compute input": "compute_input_us",
             "compute infer": "compute_infer_us", "compute output": "compute_output_us"}


def _fnum(text: str) -> float:
    """A number of perf_analyzer's output: finite and of sane length (ValueError otherwise)."""
    if len(text) > 40:
        raise ValueError(text[:40])
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def _inum(text: str) -> int:
    """A whole number of perf_analyzer's output (ASCII digits, sane length; ValueError otherwise)."""
    if len(text) > 30 or not (text.isascii() and text.isdigit()):
        raise ValueError(text[:30])
    return int(text)


def _read_detail(target: Level, line: str) -> None:
    """A level's detail line (a measurement window, client throughput, latencies, the server's parts)
    into ``target``; raises ValueError when its numbers are not numbers."""
    if m := WINDOW.match(line):
        win: dict[str, Any] = {"throughput": _fnum(m.group(2))}
        if m.group("stat"):
            win["latency_stat"] = m.group("stat").lower()
            win["latency_us"] = _fnum(m.group(4))
            if m.group(5):
                win["latency_std_us"] = _fnum(m.group(5))
        target.windows.append(win)
    elif m := CLIENT_THROUGHPUT.match(line):
        target.throughput = _fnum(m.group(1))
    elif m := AVG_LATENCY.match(line):
        target.latency_avg_us = _fnum(m.group(1))
    elif m := PCT.match(line):
        setattr_pct(target, _inum(m.group(1)), _fnum(m.group(2)))
    elif m := SERVER.search(line):
        target.server_latency_us = _fnum(m.group(1))
        for part in PART.finditer(m.group("parts")):
            setattr(target, PART_KEYS[part.group(1).lower()], _fnum(part.group(2)))


def parse_stdout(text: str) -> list[Level]:
    """Levels from perf_analyzer's plain output (whole runs or fragments pasted from a lab)."""
    batch: int | None = None
    summaries: list[Level] = []
    blocks: list[Level] = []
    orphan = Level(mode="?", load=0)  # details seen before any block header (pasted fragments)
    current: Level | None = None
    summary_stat = "Average"
    for line in text.splitlines():
        try:  # a line whose numbers are not numbers (hostile or torn output) is not perf_analyzer's: skipped
            if m := BATCH.match(line):
                batch = _inum(m.group(1))
                continue
            if m := SUMMARY_HEADER.search(line):
                summary_stat = m.group("stat")
                current = None
                continue
            if m := SUMMARY.match(line):
                mode = CONCURRENCY if m.group("what").lower() == "concurrency" else REQUEST_RATE
                lvl = Level(mode=mode, load=_fnum(m.group(2)), throughput=_fnum(m.group(3)))
                lat = _fnum(m.group(4))
                if summary_stat.lower() == "average":
                    lvl.latency_avg_us = lat
                else:
                    setattr_pct(lvl, _inum(summary_stat[1:]), lat)
                summaries.append(lvl)
                continue
            if m := BLOCK.match(line):
                kind = BLOCK_KIND.match(line).group(1).lower()  # type: ignore[union-attr]
                mode = CONCURRENCY if kind == "request concurrency" else REQUEST_RATE
                current = Level(mode=mode, load=_fnum(m.group(1)))
                blocks.append(current)
                continue
            _read_detail(current if current is not None else orphan, line)
        except ValueError:
            continue
    levels: dict[tuple[str, float], Level] = {}
    for lvl in summaries + blocks:
        if lvl.key in levels:
            levels[lvl.key].merge(lvl)
        else:
            levels[lvl.key] = lvl
    if len(levels) == 1 and any(v is not None for v in asdict(orphan).values()
                                if not isinstance(v, (str, dict, list))):
        only = next(iter(levels.values()))
        orphan.mode, orphan.load = only.mode, only.load
        only.merge(orphan)
    for m in UNSTABLE.finditer(text):
        mode = CONCURRENCY if m.group("what").lower() == "concurrency" else REQUEST_RATE
        try:
            key = (mode, _fnum(m.group("load")))
        except ValueError:
            continue
        lvl = levels.setdefault(key, Level(mode=mode, load=key[1]))
        if lvl.throughput is None or key not in {s.key for s in summaries}:
            lvl.status = "unmeasured"
            lvl.error = m.group(0)
    for lvl in levels.values():
        if lvl.batch_size is None:
            lvl.batch_size = batch
        if lvl.status == "ok" and lvl.throughput is None:
            lvl.status = "unmeasured"
            lvl.error = lvl.error or "no throughput reported for this level"
    return sorted(levels.values(), key=lambda x: (x.mode, x.load))


def window_cv(lvl: Level, key: str = "throughput") -> float | None:
    """How much the windows a level's numbers rest on (its last :data:`STABILITY_WINDOWS`) vary: their
    standard deviation over their mean (None with fewer than two windows)."""
    vals = [float(w[key]) for w in lvl.windows[-STABILITY_WINDOWS:] if w.get(key) is not None]
    if len(vals) < 2:
        return None
    mean = sum(vals) / len(vals)
    if mean <= 0:
        return None
    # relative to the mean first: numbers near the float range do not overflow when squared (the fuzzer)
    return math.sqrt(sum((v / mean - 1) ** 2 for v in vals) / (len(vals) - 1))


def setattr_pct(lvl: Level, pct: int, value: float) -> None:
    name = f"p{pct}_us"
    if hasattr(lvl, name):
        setattr(lvl, name, value)
    else:
        lvl.extra[name] = value


# --------------------------------------------------------------------------------- CSV

#: perf_analyzer's -f column -> the Level field (the metric table's)
CSV_COLUMNS = metrics.CSV_COLUMNS


#: other columns perf_analyzer's -f export may have (--verbose-csv, --collect-metrics, response cache)
CSV_OTHER_COLUMNS = frozenset({
    "request/response", "response wait", "Avg GPU Utilization", "Avg GPU Power Usage", "Max GPU Memory Usage",
    "Total GPU Memory", "Response Throughput", "Server Cache Hit", "Server Cache Miss",
})
CSV_LOAD_COLUMNS = ("Concurrency", "Request Rate")
_PCT_COLUMN = re.compile(r"^p\d+ latency$")


class CsvFormatError(ServeSystemError):
    """A -f CSV export whose columns or cells are not perf_analyzer's (message names row/column)."""


def check_csv_header(columns: list[str]) -> None:
    """Refuse a header that is not perf_analyzer's: no load column, no throughput, or unknown columns."""
    cols = [c.strip() for c in columns]
    if not any(c in CSV_LOAD_COLUMNS for c in cols):
        raise CsvFormatError(
            "header: no 'Concurrency' or 'Request Rate' column: give perf_analyzer's -f export")
    if "Inferences/Second" not in cols:
        raise CsvFormatError(
            "header: no 'Inferences/Second' column: give perf_analyzer's -f export unchanged")
    unknown = [c for c in cols if c not in CSV_COLUMNS and c not in CSV_OTHER_COLUMNS
               and c not in CSV_LOAD_COLUMNS
               and not _PCT_COLUMN.match(c)]
    if unknown:
        raise CsvFormatError(f"header: unknown column(s) {', '.join(map(repr, unknown))}: not a "
                             "perf_analyzer -f export column (was the file edited?)")
    dupes = sorted({c for c in cols if cols.count(c) > 1})
    if dupes:
        raise CsvFormatError(f"header: column(s) {', '.join(map(repr, dupes))} appear twice")


def looks_like_csv(text: str) -> bool:
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    return first.startswith(("Concurrency,", "Request Rate,"))


def parse_csv(text: str, batch_size: int | None = None, strict: bool = False) -> list[Level]:
    """Levels from perf_analyzer's ``-f`` export (rows come sorted by throughput: re-sort by load).

    ``strict``: the header must be perf_analyzer's and every cell of a level row a number, else
    :class:`CsvFormatError` (a user's file); otherwise what is not understood is skipped (the runner's),
    and text the csv module cannot split into rows at all gives no level.
    """
    try:
        return _parse_csv(text, batch_size, strict)
    except csv.Error as exc:  # found by the fuzzer: a bare carriage return inside a cell
        if strict:
            raise CsvFormatError(f"not CSV as perf_analyzer writes it ({exc})") from None
        return []


def _parse_csv(text: str, batch_size: int | None, strict: bool) -> list[Level]:
    reader = csv.DictReader(io.StringIO(text.strip(), newline=""))
    levels: list[Level] = []
    if strict:
        check_csv_header(list(reader.fieldnames or []))
    for rownum, row in enumerate(reader, start=2):
        if strict:
            _check_csv_row(row, rownum)
        if not row:
            continue
        if "Concurrency" in row:
            mode, load = CONCURRENCY, row["Concurrency"]
        elif "Request Rate" in row:
            mode, load = REQUEST_RATE, row["Request Rate"]
        else:
            continue
        if load in (None, ""):
            continue  # trailing blocks of --verbose-csv exports (server-side metrics) have no load
        try:
            lvl = Level(mode=mode, load=_fnum(load), batch_size=batch_size)
        except ValueError:
            continue
        for col, value in row.items():
            if col is None or value in (None, ""):
                continue
            col = col.strip()
            try:
                num = _fnum(value.strip())
            except ValueError:
                continue
            if col in CSV_COLUMNS:
                setattr(lvl, CSV_COLUMNS[col], num)
            elif col not in ("Concurrency", "Request Rate"):
                lvl.extra[col] = num
        if lvl.latency_avg_us is None:
            parts = [lvl.client_send_us, lvl.network_us, lvl.queue_us, lvl.compute_input_us,
                     lvl.compute_infer_us, lvl.compute_output_us, lvl.client_recv_us]
            if all(p is not None for p in parts):
                lvl.latency_avg_us = float(sum(parts))  # type: ignore[arg-type]
        levels.append(lvl)
    return sorted(levels, key=lambda x: (x.mode, x.load))


def _check_csv_row(row: dict[str | Any, str | Any], rownum: int) -> None:
    if None in row:
        raise CsvFormatError(f"row {rownum}: more cells than the header has columns")
    if all(v in (None, "") for v in row.values()):
        return
    for col, value in row.items():
        if value is None:
            raise CsvFormatError(
                f"row {rownum}: fewer cells than the header has columns (no {col.strip()!r})")
        if value.strip() == "" and col.strip() in CSV_LOAD_COLUMNS:
            return  # a --verbose-csv trailing block: no load
    for col, value in row.items():
        try:
            num = float(value)
        except ValueError:
            raise CsvFormatError(f"row {rownum}, column {col.strip()!r}: {value!r} is not a number") from None
        if num < 0 or math.isnan(num):
            raise CsvFormatError(f"row {rownum}, column {col.strip()!r}: {value!r} is not a count, rate or "
                                 "time (must be >= 0)")


def parse_any(text: str, batch_size: int | None = None, strict: bool = False) -> list[Level]:
    """Parse a CSV export or plain output, whichever ``text`` is (``strict``: see :func:`parse_csv`)."""
    if looks_like_csv(text):
        return parse_csv(text, batch_size, strict)
    levels = parse_stdout(text)
    for lvl in levels:
        if lvl.batch_size is None:
            lvl.batch_size = batch_size
    return levels


def combine(csv_levels: list[Level], stdout_levels: list[Level]) -> list[Level]:
    """CSV numbers first, completed from stdout (server breakdown, unmeasured levels)."""
    out = {lvl.key: lvl for lvl in csv_levels}
    for lvl in stdout_levels:
        if lvl.key in out:
            out[lvl.key].merge(lvl)
        else:
            out[lvl.key] = lvl
    return sorted(out.values(), key=lambda x: (x.mode, x.load))
