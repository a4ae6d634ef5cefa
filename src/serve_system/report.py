"""Report a run: summary.csv + summary.json, plots (matplotlib, Agg) and report.md.

Everything is recomputed from the raw tree (:mod:`serve_system.results`). Plots:
throughput vs latency per variant, stacked server-side latency breakdown, batch-size histograms,
utilisation over time (GPU where Triton reports one, else CPU). The best variant per objective of
the spec (``manifest.json`` keeps it) is named with the rule that picked it.
"""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path
from typing import Any

from . import results as res
from .spec import DEFAULT_OBJECTIVES as _DEFAULT
from .spec import read_objectives

DEFAULT_OBJECTIVES = [o.as_record() for o in _DEFAULT]


def write_summary(run_dir: Path, rows: list[dict[str, Any]]) -> tuple[Path, Path]:
    csv_path, json_path = run_dir / "summary.csv", run_dir / "summary.json"
    with csv_path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(res.COLUMNS))
        w.writeheader()
        for r in rows:
            w.writerow({k: json.dumps(v) if isinstance(v, dict) else ("" if v is None else v) for k, v in r.items()
                        if k in res.COLUMNS})
    json_path.write_text(json.dumps(rows, indent=1, default=str) + "\n", encoding="utf-8")
    return csv_path, json_path


def best(rows: list[dict[str, Any]], objective: dict[str, Any]) -> dict[str, Any] | None:
    """The best (host, variant, load) by an objective, averaging repetitions; None if no row qualifies."""
    metric, goal = objective.get("metric", "throughput"), objective.get("goal", "max")
    at_load = objective.get("at_load")
    cons = objective.get("constraints") or {}
    groups: dict[tuple[str, str, Any, Any], list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("status") != "ok":
            continue
        if at_load is not None and float(r["load"]) != float(at_load):
            continue
        groups.setdefault((r["host"], r["variant"], r["mode"], r["load"]), []).append(r)
    cands = []
    for key, rs in groups.items():
        vals: dict[str, float] = {}
        for m in {metric, *cons}:
            nums = [float(r[m]) for r in rs if r.get(m) is not None]
            if nums:
                vals[m] = statistics.fmean(nums)
        if metric not in vals:
            continue
        ok = True
        for m, bound in cons.items():
            if m not in vals or ("max" in bound and vals[m] > bound["max"]) or ("min" in bound and vals[m] < bound["min"]):
                ok = False
        if ok:
            cands.append((vals[metric], key, len(rs)))
    if not cands:
        return None
    value, key, n = (max if goal == "max" else min)(cands, key=lambda c: c[0])
    return {"objective": objective.get("name", f"{goal}_{metric}"), "metric": metric, "goal": goal,
            "host": key[0], "variant": key[1], "mode": key[2], "load": key[3], "value": value, "repetitions": n,
            "at_load": at_load, "constraints": cons}


def _plots(run_dir: Path, rows: list[dict[str, Any]]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = run_dir / "plots"
    out_dir.mkdir(exist_ok=True)
    made: list[Path] = []
    ok = [r for r in rows if r.get("status") == "ok" and r.get("throughput") is not None]
    hosts = sorted({r["host"] for r in ok})
    for host in hosts:
        hr = [r for r in ok if r["host"] == host]
        variants = sorted({r["variant"] for r in hr})
        # throughput vs latency per variant
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for v in variants:
            pts = sorted(((r["load"], r["throughput"], r.get("p95_us") or r.get("latency_avg_us"))
                          for r in hr if r["variant"] == v), key=lambda t: t[0])
            pts = [p for p in pts if p[2] is not None]
            if pts:
                ax.plot([p[2] / 1000 for p in pts], [p[1] for p in pts], marker="o", label=v)
                for load, thr, lat in pts:
                    ax.annotate(f"{load:g}", (lat / 1000, thr), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.set_xlabel("latency p95 (ms; avg where p95 missing)")
        ax.set_ylabel("throughput (infer/s)")
        ax.set_title(f"{host}: throughput vs latency (labels: load level)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        made.append(_save(fig, out_dir / f"{host}_throughput_latency.png"))
        # stacked server-side breakdown
        fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(hr) + 2), 4.5))
        labels, bottoms = [], [0.0] * len(hr)
        hr_sorted = sorted(hr, key=lambda r: (r["variant"], r["load"], r.get("repetition") or 1))
        labels = [f"{r['variant']}\n{r['load']:g}" for r in hr_sorted]
        for part in ("queue_us", "compute_input_us", "compute_infer_us", "compute_output_us"):
            vals = [(r.get(part) or 0) / 1000 for r in hr_sorted]
            ax.bar(range(len(hr_sorted)), vals, bottom=bottoms, label=part.replace("_us", ""))
            bottoms = [b + v for b, v in zip(bottoms, vals)]
        ax.set_xticks(range(len(hr_sorted)), labels, fontsize=7)
        ax.set_ylabel("server time per request (ms)")
        ax.set_title(f"{host}: server-side latency breakdown")
        ax.legend(fontsize=8)
        made.append(_save(fig, out_dir / f"{host}_latency_breakdown.png"))
        # batch-size histograms
        with_hist = [r for r in hr_sorted if r.get("batch_size_histogram")]
        if with_hist:
            fig, ax = plt.subplots(figsize=(7, 4.5))
            width = 0.8 / len(with_hist)
            for i, r in enumerate(with_hist):
                h = {int(k): v for k, v in r["batch_size_histogram"].items()}
                ax.bar([k + i * width for k in h], list(h.values()), width=width,
                       label=f"{r['variant']} @ {r['load']:g}")
            ax.set_xlabel("batch size executed")
            ax.set_ylabel("executions")
            ax.set_title(f"{host}: batch sizes formed by Triton")
            ax.legend(fontsize=7)
            made.append(_save(fig, out_dir / f"{host}_batch_sizes.png"))
    series = res.utilisation_series(run_dir)
    if series:
        fig, ax = plt.subplots(figsize=(8, 4))
        gpu_seen = False
        t0 = min(s[0]["t"] for s in series.values() if s) if any(series.values()) else 0
        for (host, variant), samples in sorted(series.items()):
            gpu = [(s["t"] - t0, statistics.fmean(g["nv_gpu_utilization"] for g in s["gpus"].values()
                                                  if "nv_gpu_utilization" in g))
                   for s in samples if any("nv_gpu_utilization" in g for g in s["gpus"].values())]
            if gpu:
                gpu_seen = True
                ax.plot([p[0] for p in gpu], [p[1] * 100 for p in gpu], label=f"{host}/{variant}")
                continue
            cpu = [(s["t"] - t0, s["cpu"]["nv_cpu_utilization"]) for s in samples if "nv_cpu_utilization" in s["cpu"]]
            if cpu:
                ax.plot([p[0] for p in cpu], [p[1] * 100 for p in cpu], label=f"{host}/{variant} (CPU)")
        ax.set_xlabel("seconds since first sample")
        ax.set_ylabel("GPU utilisation (%)" if gpu_seen else "CPU utilisation (%) - no GPU reported")
        ax.set_title("utilisation over time (sampled from :8002/metrics)")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        made.append(_save(fig, out_dir / "utilisation.png"))
    return made


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _fmt(v: Any, digits: int = 1) -> str:
    if v is None or v == "":
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return str(v)


def write_report(run_dir: str | Path) -> dict[str, Any]:
    """Write summary.csv/json, plots and report.md for a run folder; return what was written."""
    run = Path(run_dir)
    rows = res.collect(run)
    manifest = res._read_json(run / "manifest.json") or {}
    csv_path, json_path = write_summary(run, rows)
    plots = _plots(run, rows)
    objectives = [o.as_record() for o in read_objectives(manifest.get("objectives"), run / "manifest.json")]
    winners = [b for b in (best(rows, o) for o in objectives)]
    lines = [f"# {manifest.get('experiment') or run.parent.name}: run {manifest.get('run_id') or run.name}", ""]
    if manifest.get("description"):
        lines += [str(manifest["description"]).strip(), ""]
    stand_in = manifest.get("stand_in") or next((r["stand_in"] for r in rows if r.get("stand_in")), None)
    if stand_in:
        lines += [f"> **Stand-in model.** {stand_in} Latencies and batching are real; predictions are not.", ""]
    if manifest.get("start"):
        hosts = manifest.get("hosts") or sorted({r["host"] for r in rows})
        # each host writes host.json (with its end time) when its part of the run is over
        ends = {h: (res._read_json(run / h / "host.json") or {}).get("end") for h in hosts}
        finished = [e for e in ends.values() if e]
        if manifest.get("end"):
            ended = str(manifest["end"])
        elif finished and len(finished) == len(hosts):
            ended = max(finished)
        else:
            ended = "(not finished on " + ", ".join(h for h, e in ends.items() if not e) + ")"
        lines += [f"Started {manifest['start']}, ended {ended}; hosts: {', '.join(hosts)}.", ""]
    lines += ["## Best variant per objective", ""]
    for o, w in zip(objectives, winners):
        rule = f"{o.get('goal', 'max')} {o.get('metric', 'throughput')}"
        if o.get("at_load") is not None:
            rule += f" at load {float(o['at_load']):g}"
        if o.get("constraints"):
            rule += " with " + ", ".join(f"{m} {k} {b}" for m, bd in o["constraints"].items() for k, b in bd.items())
        if w is None:
            lines.append(f"- **{o.get('name', rule)}** ({rule}): no measured level qualifies")
        else:
            lines.append(f"- **{w['objective']}** ({rule}): `{w['variant']}` on {w['host']} at {w['mode']} "
                         f"{w['load']:g} -> {w['metric']} = {_fmt(w['value'])} (mean of {w['repetitions']})")
    lines += ["", "## Measurements", "",
              "| host | variant | load | rep | status | throughput/s | avg ms | p95 ms | p99 ms | queue ms | "
              "infer ms | avg batch | util |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        util = r.get("gpu_util")
        util_s = f"GPU {util * 100:.0f}%" if util is not None else (
            f"CPU {r['cpu_util'] * 100:.0f}%" if r.get("cpu_util") is not None else "-")
        ms = lambda k: _fmt(r[k] / 1000, 2) if r.get(k) is not None else "-"  # noqa: E731
        load = f"{r['mode'][:4] if r.get('mode') else ''} {_fmt(r.get('load'))}".strip()
        lines.append(f"| {r['host']} | {r['variant']} | {load} | {_fmt(r.get('repetition'))} | {r['status']}"
                     f"{' (retried)' if r.get('retried') else ''} | {_fmt(r.get('throughput'))} | {ms('latency_avg_us')} | "
                     f"{ms('p95_us')} | {ms('p99_us')} | {ms('queue_us')} | {ms('compute_infer_us')} | "
                     f"{_fmt(r.get('avg_batch_size'), 2)} | {util_s} |")
    problems = [r for r in rows if r["status"] != "ok"]
    if problems or manifest.get("failures"):
        lines += ["", "## Not measured", ""]
        for r in problems:
            lines.append(f"- {r['host']} / {r['variant']}"
                         f"{' @ ' + _fmt(r.get('load')) if r.get('load') is not None else ''}: {r['status']}: "
                         f"{(r.get('error') or '').strip()}")
        for f in manifest.get("failures") or []:
            lines.append(f"- {f}")
    notes = res._read_json(run / "notes.json") or {}
    for host_dir in sorted(p for p in run.iterdir() if p.is_dir() and p.name != "plots"):
        for vdir in sorted(p for p in host_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
            vm = res._read_json(vdir / "variant.json") or {}
            for n in vm.get("notes") or []:
                notes.setdefault("adapted", []).append(f"{host_dir.name}/{vdir.name}: {n}")
    if notes.get("adapted"):
        lines += ["", "## Adapted to the host", ""] + [f"- {n}" for n in notes["adapted"]]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p.stem}](plots/{p.name})" for p in plots]
    lines += ["", "Files: `summary.csv`, `summary.json` (one row per host x variant x load x repetition; "
              "times in microseconds). Raw perf_analyzer output, stats and metrics are under each "
              "`<host>/<variant>/<level>/`.", ""]
    md = run / "report.md"
    md.write_text("\n".join(lines), encoding="utf-8")
    return {"rows": len(rows), "summary_csv": str(csv_path), "summary_json": str(json_path),
            "report": str(md), "plots": [str(p) for p in plots], "best": winners}
