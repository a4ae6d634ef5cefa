"""The raw results tree -> one tidy table (a row per host x variant x load level x repetition).

Layout written by the ``experiment`` role and its node-side runner (everything raw, nothing
computed; the records are :mod:`serve_system.node.records`)::

    results/<experiment>/<run-id>/
      manifest.json                 run: spec, start/end, hosts, versions, failures
      spec.yml                      the spec as run
      <host>/plan.json              what the host measured (its GPU count); host.json at its end
      <host>/<variant>/variant.json status (measured | refused), Triton's error, adaptation notes
      <host>/<variant>/config.pbtxt, load_body.json   the exact config sent
      <host>/<variant>/<level>/     level.json (mode, load, repetition, attempts, start/end),
                                    perf.stdout, perf.csv, stats_before.json, stats_after.json,
                                    metrics.jsonl (sampled :8002/metrics)

Rows are recomputed from these files every time, so a parser fix re-reports old runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import stat
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .. import metrics, safeio
from ..errors import ServeSystemError
from ..experiment import perf as perfmod
from ..experiment.manifest import Manifest
from ..node import plans, records
from . import fastapi_tree as fastapi_results
from . import intervals
from . import stats as statsmod
from .row import Row, blank, put, value
from .setups import VariantSetup
from .status import NOT_MEASURED, Status

#: summary columns, in order
COLUMNS: tuple[str, ...] = (
    "experiment", "run_id", "host", "variant", "model", "mode", "load", "repetition", "status", "error",
    *metrics.PERF_ROW,
    "inference_count", "execution_count", "avg_batch_size", "batch_size_histogram",
    "gpu_util", "gpu_util_max", "gpu_mem_max_bytes", "cpu_util", "attempts", "retried", "duration_s",
    "windows", "window_cv",
    "client_peak_rss_bytes", "stand_in",
    "errors",
    "contention", "other_cpu",
)

#: the metrics summarised per level over its repetitions (summary_stats.csv, error bars, noise)
STAT_METRICS: tuple[str, ...] = metrics.PER_LEVEL


@dataclass(frozen=True)
class LevelStat:
    """One metric over a level's ok repetitions (a row of summary_stats.csv: one per host x variant x load
    level x metric, tidy): n, mean, sd, the 95 % interval of the mean, cv and whether it is noisy."""

    experiment: str
    run_id: str
    host: str
    variant: str
    mode: str
    load: float
    metric: str
    n: int
    mean: float | None
    sd: float | None
    ci_low: float | None
    ci_high: float | None
    cv: float | None
    noisy: bool

    def as_row(self) -> dict[str, object]:
        """The row as summary_stats.csv and summary.json's ``stats`` keep it (columns in order)."""
        return dataclasses.asdict(self)


#: summary_stats.csv's columns
STAT_COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(LevelStat))


def level_stats(rows: list[Row]) -> list[LevelStat]:
    """Per (host, variant, mode, load) and metric of :data:`STAT_METRICS`: n, mean, sd, the 95 %
    interval of the mean (Student's t, :func:`intervals.summarize`), the coefficient of variation and
    whether it is noisy (cv >= 10 %), over the level's ok repetitions."""
    groups: dict[tuple[str, str, str, str, str, float], list[Row]] = {}
    for r in rows:
        if r.get("status") == Status.OK and r.get("load") is not None:
            key = (r["experiment"], r["run_id"], r["host"], r["variant"], r.get("mode") or "concurrency",
                   r["load"])
            groups.setdefault(key, []).append(r)
    out = []
    for key, rs in sorted(groups.items(), key=lambda kv: (kv[0][2:5], float(kv[0][5]))):
        for metric in STAT_METRICS:
            vals = [float(value(r, metric)) for r in rs if value(r, metric) is not None]
            if not vals:
                continue
            s = intervals.summarize(vals, floor=intervals.METRIC_FLOOR)
            out.append(LevelStat(*key, metric=metric, n=s.n, mean=s.mean, sd=s.sd, ci_low=s.ci_low,
                                 ci_high=s.ci_high, cv=s.cv, noisy=s.noisy))
    return out


def _read_text(path: Path) -> str:
    """A raw output file of a level (perf_analyzer's stdout or CSV): "" when missing; a regular file,
    bounded, inside its folder (else one line naming it); bytes that are not UTF-8 replaced."""
    if not os.path.lexists(path):
        return ""
    return safeio.read_bytes(path, kind="output", within=path.parent).decode("utf-8", errors="replace")


def subdirs(folder: Path) -> list[Path]:
    """The folders in ``folder``, sorted, links and hidden ones left out (a link is never followed out of
    a run folder)."""
    try:
        entries = [(p, os.lstat(p).st_mode) for p in folder.iterdir() if not p.name.startswith(".")]
    except OSError as exc:  # unreadable, or gone while it was read (a folder the tool does not own)
        raise ServeSystemError(f"{folder}: cannot list the folder ({exc.strerror}): give a run folder "
                               "(results/<experiment>/<run-id>)") from None
    return sorted(p for p, mode in entries if stat.S_ISDIR(mode))


def host_dirs(run: Path, hosts: Collection[str] | None = None) -> list[Path]:
    """A run folder's host folders (not ``plots/``, not hidden, not links; ``hosts``: only those)."""
    return [p for p in subdirs(run) if p.name != "plots" and (hosts is None or p.name in hosts)]


_LEVEL_FIX = "re-run the experiment to measure this level again, or delete the level folder"


def read_plan(host_dir: Path) -> plans.HostPlan | None:
    """A host folder's plan.json as its record (:class:`plans.HostPlan`); None where there is none,
    one line naming the file and the field where it is not one."""
    path = host_dir / records.PLAN_FILE
    if not os.path.lexists(path):
        return None
    return records.read(path, plans.HostPlan, fix="plan the run again (serve-system plan) or delete it")


def read_level(path: Path) -> records.LevelRecord:
    """A level.json as its record, checked: a JSON object whose ``load`` is a positive number, then a
    :class:`records.LevelRecord` (else one line naming the file and the field)."""
    fix = _LEVEL_FIX
    meta = safeio.read_json(path, kind="record", within=path.parent, fix=fix)
    if not isinstance(meta, dict):
        raise ServeSystemError(f"{path}: expected a JSON object, found {type(meta).__name__}; {fix}")
    load = meta.get("load")
    if isinstance(load, bool) or not isinstance(load, int | float) or not load > 0 or load == float("inf"):
        raise ServeSystemError(f"{path}: field 'load' must be a positive number, found {load!r}; {fix}")
    try:
        return records.from_json(meta, records.LevelRecord, str(path))
    except records.RecordError as exc:
        raise ServeSystemError(f"{exc}; {fix}") from None


def level_row(level_dir: Path, base: Row) -> Row:
    """One tidy row from a level folder (its level record, raw outputs, stats and metrics)."""
    lrec = read_level(level_dir / records.LEVEL_FILE)
    row = blank(COLUMNS, base)
    row["mode"], row["load"], row["repetition"] = lrec.mode, _num(float(lrec.load)), lrec.repetition
    row["attempts"] = len(lrec.attempts) or None
    row["retried"] = len(lrec.attempts) > 1
    row["duration_s"] = round(lrec.end - lrec.start, 3)
    row["client_peak_rss_bytes"] = lrec.client_peak_rss_bytes  # perf_analyzer's, failed levels too
    if lrec.contention is not None:  # what else used the node's CPU (the runner's /proc readings)
        row["contention"] = records.contention_cause(lrec.contention)
        row["other_cpu"] = (None if lrec.contention.others is None
                            else round(lrec.contention.others + (lrec.contention.unseen or 0.0), 4))
    if lrec.status != Status.OK:  # killed, Triton restarted, ...: the level failed, whatever was printed
        row["status"], row["error"] = Status.FAILED, lrec.error or "the level failed"
        row["peak_rss_mb"] = peak_rss_mb(lrec)
        return row
    try:
        return _raw_fields(level_dir, lrec, row)
    except ServeSystemError as exc:  # a raw file that is not what the runner writes: this level alone
        row["status"], row["error"] = Status.FAILED, str(exc)
        return row


def _raw_fields(level_dir: Path, lrec: records.LevelRecord, row: Row) -> Row:
    """``row`` completed from a measured level's raw files (perf_analyzer's output, stats, metrics);
    the level's record says it ran (its status is ok): what the files hold decides the row's."""
    mode, load = lrec.mode, float(lrec.load)
    bench = fastapi_results.bench_fields(level_dir)  # the FastAPI experiment's client output
    if bench is not None or lrec.tool == "fastapi_bench":
        bench = bench or fastapi_results.BenchFields(
            Status.FAILED, lrec.error or "the benchmark client wrote no bench.json")
        bench.fill(row)
        return row
    stdout = _read_text(level_dir / records.PERF_STDOUT_FILE)
    csv_text = _read_text(level_dir / records.PERF_CSV_FILE)
    batch = lrec.batch_size
    levels = perfmod.combine(perfmod.parse_csv(csv_text, batch) if csv_text.strip() else [],
                             perfmod.parse_stdout(stdout))
    match = next((lv for lv in levels if lv.mode == mode and abs(lv.load - load) < 1e-6), None)
    if match is None:
        row["status"] = Status.FAILED
        row["error"] = (lrec.error or _last_error(stdout)
                        or "perf_analyzer reported nothing for this level")
    else:
        row["status"] = Status.of(match.status)
        row["error"] = match.error
        if match.status == Status.OK:
            put(row, {k: getattr(match, k) for k in metrics.PERF_ROW})
            # the windows the numbers rest on (perf_analyzer -v): how many, and how much they vary
            row["windows"] = len(match.windows) or None
            cv = perfmod.window_cv(match)
            row["window_cv"] = None if cv is None else round(cv, 4)
    before, after = level_dir / records.STATS_BEFORE_FILE, level_dir / records.STATS_AFTER_FILE
    if os.path.lexists(after):
        deltas = statsmod.delta(statsmod.load_snapshot(before, within=level_dir) if os.path.lexists(before)
                                else None, statsmod.load_snapshot(after, within=level_dir))
        d = next((x for x in deltas if x.name == row.get("model")), deltas[0] if len(deltas) == 1 else None)
        if d is not None:
            row["inference_count"] = d.inference_count
            row["execution_count"] = d.execution_count
            row["avg_batch_size"] = None if d.avg_batch_size is None else round(d.avg_batch_size, 4)
            row["batch_size_histogram"] = {str(k): v for k, v in sorted(d.histogram.items())}
            if row["status"] == Status.OK and row["queue_us"] is None:
                row["queue_us"] = d.avg_us("queue")
                row["compute_input_us"] = d.avg_us("compute_input")
                row["compute_infer_us"] = d.avg_us("compute_infer")
                row["compute_output_us"] = d.avg_us("compute_output")
    samples = statsmod.read_samples(level_dir / records.METRICS_FILE, within=level_dir)
    row["gpu_util"] = statsmod.mean_gpu_util(samples)
    row["gpu_util_max"] = statsmod.busiest_gpu_util(samples)
    row["gpu_mem_max_bytes"] = statsmod.max_gpu_mem(samples)
    row["cpu_util"] = statsmod.mean_cpu_util(samples)
    return row


def peak_rss_mb(lrec: records.LevelRecord) -> float | None:
    """The measuring command's peak resident memory over a level's attempts (MB), where recorded: the
    kernel's exact count (the level's ``client_peak_rss_bytes``, else its attempts' ``peak_rss_bytes``),
    else the runner's samples (``max_rss_mb``, records written before the exact count)."""
    exact = lrec.client_peak_rss_bytes or records.client_peak_rss(lrec.attempts)
    if exact is not None:
        return round(exact / 2**20, 1)
    peaks = [a.max_rss_mb for a in lrec.attempts if a.max_rss_mb is not None]
    return max(peaks) if peaks else None


def _last_error(text: str) -> str | None:
    for line in reversed(text.splitlines()):
        if "error" in line.lower() or "failed" in line.lower():
            return line.strip()
    return None


def _num(v: float) -> float | int:
    return int(v) if float(v).is_integer() else v


def _row_order(r: Row) -> tuple[Any, ...]:
    return (r["host"], r["variant"], r["mode"] or "", r["load"] or 0, r["repetition"] or 0)


def collect(run_dir: str | Path, hosts: Collection[str] | None = None,
            each_host: Callable[[str, list[Row]], None] | None = None) -> list[Row]:
    """All rows of a run folder (refused or unavailable variants give one row with that status);
    ``hosts``: only those hosts' rows (nothing of another host's folder is read); ``each_host``: called
    with a host's name and rows as soon as they are read (in their final order), host after host."""
    run = Path(run_dir)
    if not run.is_dir():
        raise ServeSystemError(f"{run}: no such run folder (expected results/<experiment>/<run-id>)")
    manifest = read_manifest(run)
    experiment = manifest.experiment or run.parent.name
    run_id = manifest.run_id or run.name
    stand_in = manifest.stand_in
    rows: list[Row] = []
    for host_dir in host_dirs(run, hosts):
        host_rows: list[Row] = []
        for vdir in subdirs(host_dir):
            vrec = read_variant(vdir)
            base: Row = {"experiment": experiment, "run_id": run_id, "host": host_dir.name,
                         "variant": vdir.name, "model": None if vrec is None else vrec.model,
                         "stand_in": (None if vrec is None else vrec.stand_in) or stand_in}
            # every level with a record, even one that level_done would re-measure: reading it says what
            # is wrong with it in one line instead of leaving it out of the report silently
            levels = [p for p in subdirs(vdir) if os.path.lexists(p / records.LEVEL_FILE)]
            if vrec is not None and vrec.status in NOT_MEASURED and not levels:
                row = blank(COLUMNS, base)
                row["status"], row["error"] = Status(vrec.status), vrec.error
                host_rows.append(row)
                continue
            for ldir in levels:
                host_rows.append(level_row(ldir, base))
        host_rows.sort(key=_row_order)
        if each_host is not None:
            each_host(host_dir.name, host_rows)
        rows += host_rows  # the hosts come in name order: the rows stay in _row_order
    return rows


def records_state(run_dir: str | Path) -> str:
    """A digest of the files :func:`collect` reads (the manifest, and every entry of each host's
    variant and level folders: its name, size, modification and change times, inode): while it is
    the same, so are the rows. For a view decided once and kept (a sharded search's next batch, which
    every host's ``decide`` asks for)."""
    run = Path(run_dir)
    digest = hashlib.sha256()

    def add(path: str, entry: os.DirEntry[str] | None = None) -> None:
        try:
            st = entry.stat() if entry is not None else os.stat(path)
            digest.update(f"{st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {st.st_ino} ".encode())
        except OSError:
            digest.update(b"- ")
        digest.update(os.fsencode(path) + b"\0")

    def entries(path: str) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(path) as it:
                return sorted(it, key=lambda e: e.name)
        except OSError:
            return []

    add(str(run / records.MANIFEST_FILE))
    for host_dir in host_dirs(run):
        for vdir in subdirs(host_dir):
            for e in entries(str(vdir)):
                add(e.path, e)
                if e.is_dir():
                    for f in entries(e.path):
                        add(f.path, f)
    return digest.hexdigest()


def read_variant(vdir: Path) -> records.VariantRecord | None:
    """A variant folder's variant.json as its record; None where there is none (one line naming the file
    and the field where it is not one)."""
    path = vdir / records.VARIANT_FILE
    if not os.path.lexists(path):
        return None
    return records.read(path, records.VariantRecord, fix="run the experiment again with the same run id to "
                        "measure this variant again, or delete its folder")


def read_manifest(run: Path) -> Manifest:
    """The run's manifest (:class:`Manifest`; an empty one where there is none)."""
    path = run / records.MANIFEST_FILE
    if not os.path.lexists(path):
        return Manifest()
    return records.read(path, Manifest,
                        fix="restore it from the experiment's run or delete it")


#: (host, variant) -> its metrics samples over the run, in time order
UtilisationSeries = dict[tuple[str, str], list[statsmod.Sample]]


def utilisation_series(run_dir: str | Path) -> UtilisationSeries:
    """(host, variant) -> metrics samples over the run, in time order (for the utilisation plot)."""
    run = Path(run_dir)
    out: UtilisationSeries = {}
    for host_dir in host_dirs(run):
        for vdir in subdirs(host_dir):
            for ldir in subdirs(vdir):
                f = ldir / records.METRICS_FILE
                try:
                    samples = statsmod.read_samples(f, within=ldir)
                except ServeSystemError:
                    continue  # said once, as the level's error (level_row)
                out.setdefault((host_dir.name, vdir.name), []).extend(samples)
    for v in out.values():
        v.sort(key=lambda s: s.t)
    return out


def variant_setups(run_dir: str | Path, hosts: Collection[str] | None = None
                   ) -> dict[tuple[str, str], VariantSetup]:
    """(host, variant) -> how it was set up, from the raw files (:class:`VariantSetup`; for the
    report's findings; ``hosts``: only those hosts')."""
    run = Path(run_dir)
    out: dict[tuple[str, str], VariantSetup] = {}
    for host_dir in host_dirs(run, hosts):
        plan: plans.HostPlan | None = _quiet(read_plan, host_dir)
        for vdir in subdirs(host_dir):
            vrec: records.VariantRecord | None = _quiet(read_variant, vdir)
            cfg = vdir / records.CONFIG_FILE
            config = _quiet(_read_text, cfg) if os.path.lexists(cfg) else None
            setup = VariantSetup(config_pbtxt=config, host_gpus=None if plan is None else plan.gpus)
            if vrec is not None:
                setup.runtime, setup.status, setup.error = vrec.runtime, vrec.status, vrec.error
                setup.notes = vrec.notes
            for ldir in subdirs(vdir):
                path = ldir / records.LEVEL_FILE
                lrec = _quiet(lambda p: records.read(p, records.LevelRecord), path) \
                    if os.path.lexists(path) else None
                if lrec is None:
                    continue
                setup.batch_size = lrec.batch_size or 1
                cpus = lrec.provenance.get("cpus")
                if isinstance(cpus, int) and not isinstance(cpus, bool) and cpus > 0:
                    setup.host_cpus = cpus
                for attempt in lrec.attempts:
                    argv = [str(a) for a in attempt.argv]
                    if "--request-distribution" in argv[:-1]:
                        setup.distribution = argv[argv.index("--request-distribution") + 1]
                break
            out[(host_dir.name, vdir.name)] = setup
    return out


_T = TypeVar("_T")


def _quiet(read: Callable[[Path], _T], path: Path) -> _T | None:
    """``read(path)``, or None where the file is not what the tool wrote (its rows already say so)."""
    try:
        return read(path)
    except ServeSystemError:
        return None
