"""The raw results tree -> one tidy table (a row per host x variant x load level x repetition).

Layout written by the ``experiment`` role and its node-side runner (everything raw, nothing
computed; the records are :mod:`serve_system.experiment.records`)::

    results/<experiment>/<run-id>/
      manifest.json                 run: spec, start/end, hosts, versions, failures
      spec.yml                      the spec as run
      <host>/facts.json             node facts (GPUs, OS, Triton and perf_analyzer versions)
      <host>/<variant>/variant.json status (measured | refused), Triton's error, adaptation notes
      <host>/<variant>/config.pbtxt, load_body.json   the exact config sent
      <host>/<variant>/<level>/     level.json (mode, load, repetition, attempts, start/end),
                                    perf.stdout, perf.csv, stats_before.json, stats_after.json,
                                    metrics.jsonl (sampled :8002/metrics)

Rows are recomputed from these files every time, so a parser fix re-reports old runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import ServeSystemError
from ..experiment import perf as perfmod
from ..experiment import records
from . import fastapi_tree as fastapi_results
from . import intervals
from . import stats as statsmod

#: summary columns, in order
COLUMNS: tuple[str, ...] = (
    "experiment", "run_id", "host", "variant", "model", "mode", "load", "repetition", "status", "error",
    "throughput", "latency_avg_us", "p50_us", "p90_us", "p95_us", "p99_us",
    "queue_us", "compute_input_us", "compute_infer_us", "compute_output_us",
    "inference_count", "execution_count", "avg_batch_size", "batch_size_histogram",
    "gpu_util", "gpu_util_max", "gpu_mem_max_bytes", "cpu_util", "attempts", "retried", "duration_s",
    "windows", "window_cv",
    "client_peak_rss_bytes", "stand_in",
    "errors",
    "contention", "other_cpu",
)

#: the metrics summarised per level over its repetitions (summary_stats.csv, error bars, noise)
STAT_METRICS: tuple[str, ...] = ("throughput", "latency_avg_us", "p50_us", "p90_us", "p95_us", "p99_us")
#: summary_stats.csv's columns: one row per host x variant x load level x metric (tidy)
STAT_COLUMNS: tuple[str, ...] = (
    "experiment", "run_id", "host", "variant", "mode", "load", "metric", "n", "mean", "sd", "ci_low",
    "ci_high", "cv", "noisy",
)


def level_stats(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (host, variant, mode, load) and metric of :data:`STAT_METRICS`: n, mean, sd, the 95 %
    interval of the mean (Student's t, :func:`intervals.summarize`), the coefficient of variation and
    whether it is noisy (cv >= 10 %), over the level's ok repetitions."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("status") == "ok" and r.get("load") is not None:
            key = (r["experiment"], r["run_id"], r["host"], r["variant"], r.get("mode") or "concurrency",
                   r["load"])
            groups.setdefault(key, []).append(r)
    out = []
    for key, rs in sorted(groups.items(), key=lambda kv: (kv[0][2:5], float(kv[0][5]))):
        for metric in STAT_METRICS:
            vals = [float(r[metric]) for r in rs if r.get(metric) is not None]
            if not vals:
                continue
            s = intervals.summarize(vals, floor=intervals.METRIC_FLOOR)
            out.append({**dict(zip(STAT_COLUMNS[:6], key, strict=True)), "metric": metric, "n": s.n,
                        "mean": s.mean, "sd": s.sd, "ci_low": s.ci_low, "ci_high": s.ci_high, "cv": s.cv,
                        "noisy": s.noisy})
    return out


def read_json(path: Path) -> Any:
    """A JSON file's data; None when it is missing or not JSON (a level not measured yet reads as absent)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


_LEVEL_FIX = "re-run the experiment to measure this level again, or delete the level folder"


def read_level_json(path: Path) -> dict[str, Any]:
    """A level.json, checked: a JSON object whose ``load`` is a positive number (else one-line error)."""
    fix = _LEVEL_FIX
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not valid UTF-8 JSON"
        raise ServeSystemError(f"{path}: unreadable level record ({why}); {fix}") from None
    if not isinstance(meta, dict):
        raise ServeSystemError(f"{path}: expected a JSON object, found {type(meta).__name__}; {fix}")
    load = meta.get("load")
    if isinstance(load, bool) or not isinstance(load, int | float) or not load > 0 or load == float("inf"):
        raise ServeSystemError(f"{path}: field 'load' must be a positive number, found {load!r}; {fix}")
    return meta


def level_row(level_dir: Path, base: dict[str, Any]) -> dict[str, Any]:
    """One tidy row from a level folder (its level record, raw outputs, stats and metrics)."""
    path = level_dir / "level.json"
    meta = read_level_json(path)
    try:
        lrec = records.from_json(meta, records.LevelRecord, str(path))
    except records.RecordError as exc:
        raise ServeSystemError(f"{exc}; {_LEVEL_FIX}") from None
    row: dict[str, Any] = {c: None for c in COLUMNS}
    row.update(base)
    mode = lrec.mode
    load = float(lrec.load)
    row.update(mode=mode, load=_num(load), repetition=lrec.repetition)
    row["attempts"] = len(lrec.attempts) or None
    row["retried"] = len(lrec.attempts) > 1
    row["duration_s"] = round(lrec.end - lrec.start, 3)
    row["client_peak_rss_bytes"] = lrec.client_peak_rss_bytes  # perf_analyzer's, failed levels too
    if lrec.contention is not None:  # what else used the node's CPU (the runner's /proc readings)
        row["contention"] = records.contention_cause(lrec.contention)
        row["other_cpu"] = lrec.contention.others
    if lrec.status != records.OK:  # killed, Triton restarted, ...: the level failed, whatever was printed
        row.update(status="failed", error=lrec.error or "the level failed",
                   peak_rss_mb=peak_rss_mb(meta, lrec))
        return row
    bench = fastapi_results.bench_fields(level_dir)  # the FastAPI experiment's client output
    if bench is not None or lrec.tool == "fastapi_bench":
        bench = bench or {"status": meta.get("status") if meta.get("status") not in (None, "ok")
                          else "failed",
                          "error": meta.get("error") or "the benchmark client wrote no bench.json"}
        row.update({k: v for k, v in bench.items() if k in COLUMNS})
        if meta.get("status") == "failed" and row["status"] == "ok":
            row["error"] = meta.get("error")
        return row
    stdout = _read_text(level_dir / "perf.stdout")
    csv_text = _read_text(level_dir / "perf.csv")
    batch = lrec.batch_size
    levels = perfmod.combine(perfmod.parse_csv(csv_text, batch) if csv_text.strip() else [],
                             perfmod.parse_stdout(stdout))
    match = next((lv for lv in levels if lv.mode == mode and abs(lv.load - load) < 1e-6), None)
    if match is None:
        row["status"] = meta.get("status") if meta.get("status") not in (None, "ok") else "failed"
        row["error"] = (meta.get("error") or _last_error(stdout)
                        or "perf_analyzer reported nothing for this level")
    else:
        row["status"] = match.status
        row["error"] = match.error
        if match.status == "ok":
            for k in ("throughput", "latency_avg_us", "p50_us", "p90_us", "p95_us", "p99_us",
                      "queue_us", "compute_input_us", "compute_infer_us", "compute_output_us"):
                row[k] = getattr(match, k)
            # the windows the numbers rest on (perf_analyzer -v): how many, and how much they vary
            row["windows"] = len(match.windows) or None
            cv = perfmod.window_cv(match)
            row["window_cv"] = None if cv is None else round(cv, 4)
    before, after = level_dir / "stats_before.json", level_dir / "stats_after.json"
    if after.exists():
        deltas = statsmod.delta(read_json(before) if before.exists() else None, read_json(after) or {})
        d = next((x for x in deltas if x.name == row.get("model")), deltas[0] if len(deltas) == 1 else None)
        if d is not None:
            row["inference_count"] = d.inference_count
            row["execution_count"] = d.execution_count
            row["avg_batch_size"] = None if d.avg_batch_size is None else round(d.avg_batch_size, 4)
            row["batch_size_histogram"] = {str(k): v for k, v in sorted(d.histogram.items())}
            if row["status"] == "ok" and row["queue_us"] is None:
                row["queue_us"] = d.avg_us("queue")
                row["compute_input_us"] = d.avg_us("compute_input")
                row["compute_infer_us"] = d.avg_us("compute_infer")
                row["compute_output_us"] = d.avg_us("compute_output")
    samples = statsmod.read_samples(level_dir / "metrics.jsonl")
    row["gpu_util"] = statsmod.mean_gpu_util(samples)
    row["gpu_util_max"] = statsmod.busiest_gpu_util(samples)
    row["gpu_mem_max_bytes"] = statsmod.max_gpu_mem(samples)
    row["cpu_util"] = statsmod.mean_cpu_util(samples)
    return row


def peak_rss_mb(meta: dict[str, Any], lrec: records.LevelRecord) -> float | None:
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


def collect(run_dir: str | Path) -> list[dict[str, Any]]:
    """All rows of a run folder (refused or unavailable variants give one row with that status)."""
    run = Path(run_dir)
    if not run.is_dir():
        raise ServeSystemError(f"{run}: no such run folder (expected results/<experiment>/<run-id>)")
    manifest = read_json(run / "manifest.json") or {}
    experiment = manifest.get("experiment") or run.parent.name
    run_id = manifest.get("run_id") or run.name
    stand_in = manifest.get("stand_in")
    rows: list[dict[str, Any]] = []
    for host_dir in sorted(p for p in run.iterdir() if p.is_dir() and not p.name.startswith((".", "plots"))):
        for vdir in sorted(p for p in host_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
            vmeta = _variant(vdir)
            base = {"experiment": experiment, "run_id": run_id, "host": host_dir.name, "variant": vdir.name,
                    "model": vmeta.get("model"), "stand_in": vmeta.get("stand_in") or stand_in}
            # every level with a record, even one that level_done would re-measure: reading it says what
            # is wrong with it in one line instead of leaving it out of the report silently
            levels = sorted(p for p in vdir.iterdir() if p.is_dir() and (p / "level.json").exists())
            if vmeta.get("status") in records.NOT_MEASURED and not levels:
                row: dict[str, Any] = {c: None for c in COLUMNS}
                row.update(base, status=vmeta["status"], error=vmeta.get("error"))
                rows.append(row)
                continue
            for ldir in levels:
                rows.append(level_row(ldir, base))
    rows.sort(key=lambda r: (r["host"], r["variant"], r["mode"] or "", r["load"] or 0, r["repetition"] or 0))
    return rows


def _variant(vdir: Path) -> dict[str, Any]:
    path = vdir / "variant.json"
    if not path.exists():
        return {}
    try:
        return records.to_json(records.read(path, records.VariantRecord))
    except records.RecordError as exc:
        raise ServeSystemError(str(exc)) from None


def utilisation_series(run_dir: str | Path) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(host, variant) -> metrics samples over the run, in time order (for the utilisation plot)."""
    run = Path(run_dir)
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for f in sorted(run.glob("*/*/*/metrics.jsonl")):
        key = (f.parent.parent.parent.name, f.parent.parent.name)
        out.setdefault(key, []).extend(statsmod.read_samples(f))
    for v in out.values():
        v.sort(key=lambda s: s["t"])
    return out


def variant_setups(run_dir: str | Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(host, variant) -> how it was set up, from the raw files (for the report's findings).

    ``config_pbtxt`` (the exact config sent, or None), ``distribution`` and ``batch_size`` (from the
    first level's perf_analyzer argv and level.json), ``runtime`` (FastAPI variants), ``status``,
    ``error``, ``notes`` (how the host changed it, and who served it: the ONNX shim), and the host's
    ``host_gpus`` / ``host_cpus`` (facts.json).
    """
    run = Path(run_dir)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for host_dir in sorted(p for p in run.iterdir() if p.is_dir() and not p.name.startswith((".", "plots"))):
        facts = read_json(host_dir / "facts.json") or {}
        for vdir in sorted(p for p in host_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
            vmeta = read_json(vdir / "variant.json") or {}
            cfg = vdir / "config.pbtxt"
            setup: dict[str, Any] = {
                "config_pbtxt": _read_text(cfg) if cfg.is_file() else None,
                "runtime": vmeta.get("runtime"), "status": vmeta.get("status"), "error": vmeta.get("error"),
                "notes": vmeta.get("notes") or [],
                "distribution": None, "batch_size": 1,
                "host_gpus": facts.get("gpus"), "host_cpus": facts.get("cpus"),
            }
            for lj in sorted(vdir.glob("*/level.json")):
                meta = read_json(lj) or {}
                setup["batch_size"] = meta.get("batch_size") or 1
                for attempt in meta.get("attempts") or []:
                    argv = [str(a) for a in (attempt or {}).get("argv") or []]
                    if "--request-distribution" in argv[:-1]:
                        setup["distribution"] = argv[argv.index("--request-distribution") + 1]
                break
            out[(host_dir.name, vdir.name)] = setup
    return out
