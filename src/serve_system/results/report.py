"""Report a run: summary.csv + summary.json, plots (matplotlib, Agg) and report.md.

Everything is recomputed from the raw tree (:mod:`serve_system.results`). The run folder is checked
first (:func:`check_run`): an empty or interrupted run, or a malformed record, is refused with one
line saying what is missing, before anything is written (``partial=True`` reports an interrupted
run anyway and lists what is missing). report.md holds the best variant per objective of the spec,
the lab's claims checked against the numbers (``## Findings``, :mod:`serve_system.results.findings`), the
measurements and the plots:

- latency (p50 / p95 / p99) against load, per variant;
- throughput against latency, per variant;
- Triton's server-side latency breakdown and the batch sizes it formed (where Triton measured them);
- utilisation over time per GPU (CPU where no GPU is reported), and GPU memory over time;
- the FastAPI benchmark's latency distribution (every latency it kept).

A plot without data is not drawn; report.md says which and why.
"""

from __future__ import annotations

import os
from itertools import pairwise
from pathlib import Path
from typing import Any

from .. import safeio, textsafe
from ..errors import ServeSystemError
from ..experiment import perf as perfmod
from ..experiment import records
from ..experiment.spec.models import DEFAULT_OBJECTIVES as _DEFAULT
from ..experiment.spec.models import DEFAULT_SMALLEST_EFFECT
from ..experiment.spec.reader import read_objectives
from . import fastapi_tree as fastapi_results
from . import findings as fnd
from . import intervals as iv
from . import reasons as why_
from . import sequential
from . import shard as shardres
from . import tree as res
from .cells import cell, ms_cells

DEFAULT_OBJECTIVES = [o.as_record() for o in _DEFAULT]
PERCENTILES = (("p50_us", "-", "p50"), ("p95_us", "--", "p95"), ("p99_us", ":", "p99"))
#: drawn for a variant whose perf_analyzer output had no percentiles
AVG = (("latency_avg_us", "-.", "avg (no percentiles)"),)
AVG_AND_PERCENTILES = AVG + PERCENTILES


# -- checks (nothing is written before they pass) -----------------------------------------------


def read_manifest(run: Path) -> dict[str, Any]:
    """The run's manifest.json, its objectives and smallest effect checked (the defaults without one)."""
    path = run / records.MANIFEST_FILE
    if not os.path.lexists(path):
        return {"objectives": list(DEFAULT_OBJECTIVES)}
    data = records.to_json(res.read_manifest(run))  # typed: one line naming the field
    # the spec's own rules for objectives (names, metrics, goals, loads, constraints); none: the default
    data["objectives"] = [o.as_record() for o in read_objectives(data.get("objectives"), path)]
    data["smallest_effect"] = _smallest_effect(data, path)
    return data


def _smallest_effect(data: dict[str, Any], path: Path) -> float:
    """The spec's smallest effect of interest, as the run's manifest keeps it (its own field, or the
    spec as run); the default where neither has one (runs planned before the field existed)."""
    spec = data["spec"] if isinstance(data.get("spec"), dict) else {}
    for field, value in (("smallest_effect", data.get("smallest_effect")),
                         ("spec.smallest_effect", spec.get("smallest_effect"))):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
            raise ServeSystemError(f"{path}: field '{field}' must be a share between 0 and 1 (0.05 = 5 %), "
                                   f"found {value!r}; fix it in the spec and plan the run again")
        return float(value)
    return DEFAULT_SMALLEST_EFFECT


def _host_end(run: Path, host: str) -> str | None:
    """When a host's part of the run ended (its host.json), None while it has none."""
    path = run / host / records.HOST_FILE
    if not os.path.lexists(path):
        return None
    try:
        return records.read(path, records.HostRecord).end
    except records.RecordError:
        return None  # not the runner's record: the host reads as not finished


def _host_dirs(run: Path) -> list[Path]:
    return res.host_dirs(run)


def missing(run: Path, manifest: dict[str, Any]) -> list[str]:
    """What an interrupted run lacks: hosts, variants or levels that were planned or started, unfinished.

    ``repetitions: auto`` plans repetitions up to its budget and measures those beyond the first ones
    only while a claim is undecided: a repetition past the first ones that was never started is what
    the run decided it did not need, not missing."""
    out: list[str] = []
    hosts = {p.name: p for p in _host_dirs(run)}
    for h in manifest.get("hosts") or []:
        if str(h) not in hosts:
            out.append(f"{h}/ (a host of manifest.json without results)")
    for name, hdir in hosts.items():
        plan = res.read_json(hdir / records.PLAN_FILE, kind="plan")
        if isinstance(plan, dict):
            if not os.path.lexists(hdir / records.HOST_FILE):
                out.append(f"{name}/host.json (the host never finished)")
            # a search measures the levels it picks; what it did not pick is not missing
            adaptive = plan.get("adaptive") if isinstance(plan.get("adaptive"), dict) else None
            start = int(adaptive.get("start") or 0) if adaptive else None
            for v in [] if plan.get("search") else plan.get("variants") or []:
                if not isinstance(v, dict):
                    continue
                vdir = hdir / str(v.get("name"))
                vmeta = res.read_json(vdir / records.VARIANT_FILE) or {}
                if vmeta.get("status") in records.NOT_MEASURED:
                    continue
                for lv in v.get("levels") or []:
                    if not isinstance(lv, dict) or records.level_done(vdir / str(lv.get("id"))):
                        continue
                    if start is not None and int(lv.get("repetition") or 0) > start \
                            and not (vdir / str(lv.get("id"))).exists():
                        continue  # an extra repetition auto did not ask for
                    out.append(f"{name}/{v.get('name')}/{lv.get('id')}")
        for ldir in sorted(hdir.glob("*/*/")):
            if ldir.is_dir() and not ldir.name.startswith(".") and not ldir.parent.name.startswith(".") \
                    and not records.level_done(ldir) \
                    and any(ldir.iterdir()) and f"{name}/{ldir.parent.name}/{ldir.name}" not in out:
                out.append(f"{name}/{ldir.parent.name}/{ldir.name} (started, no level.json)")
    return out


def contention_note(rows: list[dict[str, Any]], auto: bool) -> list[str]:
    """The report's warning on levels measured under contention (other processes on the node's CPU,
    steal): each with its cause and the processes that took the CPU."""
    hit = [r for r in rows if r.get("contention")]
    if not hit:
        return []
    what = "; ".join(f"{r['host']}/{r['variant']} {r.get('mode')} {r.get('load')} repetition "
                     f"{r.get('repetition')}: {r['contention']}" for r in hit)
    then = ("`repetitions: auto` did not count them and measured those variants again within its budget."
            if auto else "They are counted here: measure again on a quiet node (a new run id), or use "
                         "`repetitions: auto`, which measures such levels again.")
    return [f"> **Measured under contention** ({len(hit)} level(s)): {what}. {then}", ""]


def plan_looks(run: Path) -> sequential.Looks | None:
    """The sequential looks of a ``repetitions: auto`` run (every host plans the same), else None."""
    for hdir in _host_dirs(run):
        plan = res.read_json(hdir / "plan.json")
        looks = sequential.looks_of(plan.get("adaptive")) if isinstance(plan, dict) else None
        if looks is not None:
            return looks
    return None


def check_run(run_dir: str | Path, partial: bool = False
              ) -> tuple[Path, dict[str, Any], list[dict[str, Any]], list[str]]:
    """Read and check a run folder; return (run, manifest, rows, missing). Raises before anything is
    written."""
    run = Path(run_dir)
    if not run.is_dir():
        raise ServeSystemError(f"{run}: no such run folder; give results/<experiment>/<run-id>")
    manifest = read_manifest(run)
    if not os.path.lexists(run / records.MANIFEST_FILE) and not _host_dirs(run):
        raise ServeSystemError(f"{run}: empty run folder (no manifest.json, no <host>/ folder); give "
                               "results/<experiment>/<run-id> as an experiment playbook wrote it")
    rows = res.collect(run)
    gaps = missing(run, manifest)
    if not any(r.get("load") is not None for r in rows) and not any(r["status"] in records.NOT_MEASURED
                                                                   for r in rows):
        what = f"; missing: {', '.join(gaps[:6])}{' ...' if len(gaps) > 6 else ''}" if gaps else ""
        raise ServeSystemError(f"{run}: nothing measured yet (no <host>/<variant>/<level>/level.json){what}; "
                               "run the experiment (ansible-playbook experiments/NAME.yml -e run_id=...) "
                               "first")
    if gaps and not partial:
        raise ServeSystemError(
            f"{run}: interrupted run, {len(gaps)} missing: {', '.join(gaps[:6])}"
            f"{' ...' if len(gaps) > 6 else ''}; resume it (run the experiment again with "
            f"-e run_id={run.name}) or report what is there with --partial")
    return run, manifest, rows, gaps


# -- summary ------------------------------------------------------------------------------------


def _csv(path: Path, columns: tuple[str, ...], rows: list[dict[str, Any]]) -> None:
    with safeio.open_write(path, within=path.parent, newline="") as fh:
        w = textsafe.DictWriter(fh, fieldnames=list(columns))
        w.writeheader()
        for r in rows:
            w.writerow({k: textsafe.dumps(v) if isinstance(v, dict) else ("" if v is None else v)
                        for k, v in r.items() if k in columns})


def write_summary(run_dir: Path, rows: list[dict[str, Any]],
                  extra: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """summary.csv (the rows: one per repetition), summary_stats.csv (per level and metric: n, mean, sd,
    95 % interval, cv, noisy; :func:`tree.level_stats`) and summary.json ({experiment, run_id, rows,
    stats, best, findings, ...})."""
    csv_path, json_path = run_dir / "summary.csv", run_dir / "summary.json"
    stats = res.level_stats(rows)
    _csv(csv_path, res.COLUMNS, rows)
    _csv(run_dir / "summary_stats.csv", res.STAT_COLUMNS, stats)
    doc = {"experiment": rows[0]["experiment"] if rows else None,
           "run_id": rows[0]["run_id"] if rows else None, "rows": rows, "stats": stats, **(extra or {})}
    safeio.write_text(json_path, textsafe.dumps(doc, indent=1, default=str) + "\n", within=run_dir)
    return csv_path, json_path


def best(rows: list[dict[str, Any]], objective: dict[str, Any]) -> dict[str, Any] | None:
    """The best (host, variant, load) by an objective, averaging repetitions; None if no row qualifies."""
    ranked = fnd.rank(rows, objective)
    return ranked[0] if ranked else None


# -- plots --------------------------------------------------------------------------------------


class _Plots:
    """Draws into ``plots/``; remembers what was drawn and what was skipped (and why)."""

    def __init__(self, run: Path) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        self.plt = plt
        self.dir = run / "plots"
        self.made: list[Path] = []
        self.skipped: list[str] = []

    def save(self, fig: Any, name: str) -> None:
        fig.tight_layout()
        path = self.dir / safeio.plain_name(name, str(self.dir), "plot name")
        with safeio.open_write(path, within=self.dir.parent, binary=True) as fh:  # never through a link
            fig.savefig(fh, dpi=110, format="png")
        self.plt.close(fig)
        self.made.append(path)


def _variant_colours(variants: list[str]) -> dict[str, Any]:
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    return {v: cmap(i % 10) for i, v in enumerate(variants)}


#: how every aggregate plot's bars read
BARS = "bars: 95 % interval over repetitions"


def _bars(samples: list[list[float]]) -> tuple[list[float], list[list[float]]]:
    """Means and matplotlib's asymmetric error bars (the 95 % t interval; none with one repetition)."""
    means, low, high = [], [], []
    for xs in samples:
        sm = iv.summarize(xs, floor=iv.METRIC_FLOOR)
        mean = sm.mean if sm.mean is not None else float("nan")
        means.append(mean)
        low.append(mean - sm.ci_low if sm.ci_low is not None else 0.0)
        high.append(sm.ci_high - mean if sm.ci_high is not None else 0.0)
    return means, [low, high]


def _latency_vs_load(p: _Plots, host: str, hr: list[dict[str, Any]]) -> None:
    for mode in sorted({r["mode"] for r in hr if r.get("mode")}):
        mr = [r for r in hr
              if r["mode"] == mode and any(r.get(k) is not None for k, _, _ in AVG_AND_PERCENTILES)]
        if not mr:
            p.skipped.append(f"{host}: latency against {mode} (no latency measured)")
            continue
        variants = sorted({r["variant"] for r in mr})
        colours = _variant_colours(variants)
        fig, ax = p.plt.subplots(figsize=(8, 4.8))
        for v in variants:
            vr = [r for r in mr if r["variant"] == v]
            keys = PERCENTILES if any(r.get(k) is not None for r in vr for k, _, _ in PERCENTILES) else AVG
            for key, style, label in keys:
                by_load: dict[float, list[float]] = {}
                for r in vr:
                    if r.get(key) is not None:
                        by_load.setdefault(float(r["load"]), []).append(float(r[key]) / 1000)
                if by_load:
                    xs = sorted(by_load)
                    ys, err = _bars([by_load[x] for x in xs])
                    ax.errorbar(xs, ys, yerr=err, linestyle=style, marker="o", markersize=4, capsize=3,
                                color=colours[v], label=f"{v} {label}")
        loads = sorted({float(r["load"]) for r in mr})
        if len(loads) > 1 and loads[-1] / loads[0] >= 8:
            ax.set_xscale("log", base=2)
        ax.set_xticks(loads, [f"{x:g}" for x in loads])
        ax.set_xlabel("concurrent clients" if mode == "concurrency" else "requests per second (request rate)")
        ax.set_ylabel("latency (ms)")
        ax.set_title(f"{host}: latency against load: p50 solid, p95 dashed, p99 dotted ({BARS})", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=max(1, len(variants) // 4 + 1))
        p.save(fig, f"{host}_latency_vs_{mode}.png")


def _throughput_latency(p: _Plots, host: str, hr: list[dict[str, Any]]) -> None:
    def lat(r: dict[str, Any]) -> float | None:
        v = r.get("p95_us") or r.get("latency_avg_us")
        return None if v is None else float(v) / 1000

    pts_by_v: dict[str, dict[float, list[dict[str, Any]]]] = {}
    for r in hr:
        if r.get("throughput") is not None and lat(r) is not None:
            pts_by_v.setdefault(r["variant"], {}).setdefault(float(r["load"]), []).append(r)
    if not pts_by_v:
        p.skipped.append(f"{host}: throughput against latency (no level with both)")
        return
    fig, ax = p.plt.subplots(figsize=(7, 4.5))
    for v, by_load in sorted(pts_by_v.items()):
        loads = sorted(by_load)
        ys, yerr = _bars([[float(r["throughput"]) for r in by_load[x]] for x in loads])
        xs, xerr = _bars([[lat(r) or 0.0 for r in by_load[x]] for x in loads])
        ax.errorbar(xs, ys, xerr=xerr, yerr=yerr, marker="o", capsize=3, label=v)
        for load, x, y in zip(loads, xs, ys, strict=True):
            ax.annotate(f"{load:g}", (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("latency p95 (ms; average where p95 is missing)")
    ax.set_ylabel("throughput (infer/s)")
    ax.set_title(f"{host}: throughput against latency (labels: load level; {BARS})", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    p.save(fig, f"{host}_throughput_latency.png")


def _breakdown(p: _Plots, host: str, hr: list[dict[str, Any]]) -> None:
    parts = ("queue_us", "compute_input_us", "compute_infer_us", "compute_output_us")
    groups: dict[tuple[str, str, float], list[dict[str, Any]]] = {}
    for r in hr:
        if any(r.get(k) is not None for k in parts):
            groups.setdefault((r["variant"], r["mode"] or "", float(r["load"])), []).append(r)
    if not groups:
        p.skipped.append(f"{host}: server-side latency breakdown (no Triton statistics: e.g. the FastAPI "
                         "benchmark)")
        return
    keys = sorted(groups)
    fig, ax = p.plt.subplots(figsize=(max(6, 0.6 * len(keys) + 2), 4.5))
    bottoms = [0.0] * len(keys)
    for part in parts:
        vals = [sum((r.get(part) or 0) / 1000 for r in groups[k]) / len(groups[k]) for k in keys]
        ax.bar(range(len(keys)), vals, bottom=bottoms, label=part.replace("_us", ""))
        bottoms = [b + v for b, v in zip(bottoms, vals, strict=True)]
    totals, err = _bars([[sum((r.get(k) or 0) / 1000 for k in parts) for r in groups[key]] for key in keys])
    ax.errorbar(range(len(keys)), totals, yerr=err, fmt="none", ecolor="black", capsize=4)
    ax.set_xticks(range(len(keys)), [f"{v}\n{load:g} (n={len(groups[(v, m, load)])})" for v, m, load in keys],
                  fontsize=7)
    ax.set_ylabel("server time per request (ms)")
    ax.set_title(f"{host}: server-side latency breakdown (mean; {BARS}, on the total)", fontsize=10)
    ax.legend(fontsize=8)
    p.save(fig, f"{host}_latency_breakdown.png")


def _batch_sizes(p: _Plots, host: str, hr: list[dict[str, Any]]) -> None:
    """Share of requests served in each batch size, per variant and load (Triton's own statistics),
    the mean over repetitions with its interval."""
    groups: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for r in hr:
        if r.get("batch_size_histogram"):
            groups.setdefault((r["variant"], float(r["load"])), []).append(r)
    if not groups:
        p.skipped.append(f"{host}: batch sizes (no Triton statistics)")
        return
    sizes = sorted({int(k) for rs in groups.values() for r in rs for k in r["batch_size_histogram"]})
    fig, ax = p.plt.subplots(figsize=(min(13.0, max(7.0, 0.5 * len(sizes) + 4)), 4.5))
    width = 0.8 / len(groups)
    for i, ((variant, load), rs) in enumerate(sorted(groups.items())):
        shares: list[list[float]] = [[] for _ in sizes]
        for r in rs:
            h = {int(k): int(v) for k, v in r["batch_size_histogram"].items()}
            served = sum(k * v for k, v in h.items()) or 1
            for j, k in enumerate(sizes):
                shares[j].append(100 * k * h.get(k, 0) / served)
        means, err = _bars(shares)
        batches = [float(r["avg_batch_size"]) for r in rs if r.get("avg_batch_size") is not None]
        avg = cell(sum(batches) / len(batches) if batches else None, 2)
        bad = sorted({str(r.get("status")) for r in rs if r.get("status") != records.OK})
        ax.bar([k - 0.4 + (i + 0.5) * width for k in sizes], means, width=width, yerr=err, capsize=2,
               label=f"{variant} @ {load:g} (avg {avg}, n={len(rs)}{''.join(', ' + b for b in bad)})")
    ax.set_xticks(sizes, [str(k) for k in sizes])
    ax.set_xlabel("batch size executed by Triton")
    ax.set_ylabel("share of requests (%)")
    ax.set_title(f"{host}: batch sizes formed by Triton ({BARS})", fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7)
    p.save(fig, f"{host}_batch_sizes.png")


def _spans(ax: Any, samples: dict[str, list[dict[str, Any]]], t0: float) -> None:
    """Shade and name each variant's time span on a time axis."""
    for i, (variant, ss) in enumerate(sorted(samples.items(), key=lambda kv: kv[1][0]["t"])):
        a, b = ss[0]["t"] - t0, ss[-1]["t"] - t0
        ax.axvspan(a, b, color="grey", alpha=0.08 if i % 2 else 0.16, lw=0)
        ax.text((a + b) / 2, 1.0, variant, transform=ax.get_xaxis_transform(), ha="center", va="bottom",
                fontsize=7)


def _gapped(pts: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """x and y of a time series, broken (NaN) where sampling paused, e.g. between variants."""
    if len(pts) < 2:
        return [q[0] for q in pts], [q[1] for q in pts]
    steps = sorted(b[0] - a[0] for a, b in pairwise(pts))
    gap = max(5.0, 3 * steps[len(steps) // 2])
    xs, ys = [pts[0][0]], [pts[0][1]]
    for a, b in pairwise(pts):
        if b[0] - a[0] > gap:
            xs.append((a[0] + b[0]) / 2)
            ys.append(float("nan"))
        xs.append(b[0])
        ys.append(b[1])
    return xs, ys


def _over_time(p: _Plots, series: dict[tuple[str, str], list[dict[str, Any]]]) -> None:
    hosts = sorted({h for h, _ in series})
    any_gpu = False
    for host in hosts:
        per_v = {v: ss for (h, v), ss in series.items() if h == host and ss}
        if not per_v:
            continue
        t0 = min(ss[0]["t"] for ss in per_v.values())
        samples = sorted((s for ss in per_v.values() for s in ss), key=lambda s: s["t"])
        gpus = sorted({g for s in samples for g, m in s["gpus"].items() if "nv_gpu_utilization" in m})
        if gpus:
            any_gpu = True
            fig, ax = p.plt.subplots(figsize=(9, 4.2))
            for g in gpus:
                pts = [(s["t"] - t0, s["gpus"][g]["nv_gpu_utilization"] * 100) for s in samples
                       if "nv_gpu_utilization" in s["gpus"].get(g, {})]
                ax.plot(*_gapped(pts), label=g, lw=1.2, marker=".", markersize=3)
            _spans(ax, per_v, t0)
            ax.set_ylim(0, 105)
            ax.set_xlabel("seconds since the first sample")
            ax.set_ylabel("GPU utilisation (%)")
            ax.set_title(f"{host}: utilisation per GPU (sampled from :8002/metrics)", pad=14)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
            p.save(fig, f"{host}_gpu_utilisation.png")
        else:
            cpu = [(s["t"] - t0, s["cpu"]["nv_cpu_utilization"] * 100) for s in samples
                   if "nv_cpu_utilization" in s["cpu"]]
            if not cpu:
                p.skipped.append(f"{host}: utilisation (its metrics samples report neither GPU nor CPU "
                                 "utilisation)")
            else:
                fig, ax = p.plt.subplots(figsize=(9, 4.2))
                ax.plot(*_gapped(cpu), lw=1.2, marker=".", markersize=3, label="CPU (whole host)")
                _spans(ax, per_v, t0)
                ax.set_ylim(0, 105)
                ax.set_xlabel("seconds since the first sample")
                ax.set_ylabel("CPU utilisation (%)")
                ax.set_title(f"{host}: CPU utilisation (Triton reported no GPU)", pad=14)
                ax.grid(alpha=0.3)
                p.save(fig, f"{host}_cpu_utilisation.png")
        mem_gpus = sorted({g for s in samples for g, m in s["gpus"].items()
                           if "nv_gpu_memory_used_bytes" in m})
        if not mem_gpus:
            continue
        fig, ax = p.plt.subplots(figsize=(9, 4.2))
        for g in mem_gpus:
            pts = [(s["t"] - t0, s["gpus"][g]["nv_gpu_memory_used_bytes"] / 2**20) for s in samples
                   if "nv_gpu_memory_used_bytes" in s["gpus"].get(g, {})]
            line = ax.plot(*_gapped(pts), label=f"{g} used", lw=1.2, marker=".", markersize=3)
            totals = [s["gpus"][g]["nv_gpu_memory_total_bytes"] / 2**20 for s in samples
                      if "nv_gpu_memory_total_bytes" in s["gpus"].get(g, {})]
            if totals:
                ax.axhline(max(totals), color=line[0].get_color(), ls=":", lw=1, label=f"{g} total")
        _spans(ax, per_v, t0)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("seconds since the first sample")
        ax.set_ylabel("GPU memory (MiB)")
        ax.set_title(f"{host}: GPU memory over time", pad=14)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        p.save(fig, f"{host}_gpu_memory.png")
    if not series:
        p.skipped.append("utilisation and GPU memory over time (no metrics.jsonl samples in the run)")
    elif not any_gpu:
        p.skipped.append("utilisation per GPU and GPU memory over time (Triton reported no GPU: CPU "
                         "utilisation drawn instead)")


def _fastapi_latency(p: _Plots, run: Path) -> None:
    found: dict[str, list[tuple[str, float, list[float]]]] = {}
    ldirs = [ld for h in _host_dirs(run) for v in res.subdirs(h) for ld in res.subdirs(v)]
    for ldir in (ld for ld in ldirs if os.path.lexists(ld / "bench.json")):
        try:
            lat = fastapi_results.latencies_s(ldir)
            meta = res.read_json(ldir / records.LEVEL_FILE) or {}
        except ServeSystemError:
            continue  # the level's row says what is wrong with it
        if lat:
            load = float(meta.get("load") or 0)
            found.setdefault(ldir.parent.parent.name, []).append((ldir.parent.name, load, lat))
    for host, series in sorted(found.items()):
        fig, (ax, bx) = p.plt.subplots(1, 2, figsize=(11, 4.5), gridspec_kw={"width_ratios": [3, 2]})
        series.sort(key=lambda s: (s[1], s[0]))
        for variant, load, lat in series:
            ms = sorted(x * 1000 for x in lat)
            n = len(ms)
            ax.step(ms, [(i + 1) / n for i in range(n)], where="post",
                    label=f"{variant}, {load:g} sender{'s' if load != 1 else ''} (n={n})")
        ax.set_xscale("log")
        for q in (0.5, 0.95, 0.99):
            ax.axhline(q, color="grey", lw=0.6, ls=":")
        ax.set_xlabel("latency (ms, log scale)")
        ax.set_ylabel("fraction of requests at or below")
        ax.set_title(f"{host}: FastAPI latency distribution")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
        bx.boxplot([[x * 1000 for x in lat] for _, _, lat in series], whis=(1, 99), showfliers=False)
        bx.set_xticks(range(1, len(series) + 1), [f"{v}\n{load:g}" for v, load, _ in series], fontsize=7)
        bx.set_yscale("log")
        bx.set_ylabel("latency (ms; box p25-p75, whiskers p1-p99)")
        bx.set_title("per variant and senders")
        bx.grid(alpha=0.3, axis="y")
        p.save(fig, f"{host}_fastapi_latency.png")


def make_plots(run: Path, rows: list[dict[str, Any]]) -> tuple[list[Path], list[str]]:
    """Draw every plot with data; return (files, plots skipped with the reason)."""
    p = _Plots(run)
    ok = [r for r in rows if r.get("status") == records.OK and r.get("load") is not None]
    if not ok:
        p.skipped.append("every plot (no level was measured ok)")
    for host in sorted({r["host"] for r in ok}):
        hr = [r for r in ok if r["host"] == host]
        _latency_vs_load(p, host, hr)
        _throughput_latency(p, host, hr)
        _breakdown(p, host, hr)
        # Triton's statistics are real even where perf_analyzer found no stable measurement
        _batch_sizes(p, host, [r for r in rows if r["host"] == host and r.get("load") is not None])
    _over_time(p, res.utilisation_series(run))
    _fastapi_latency(p, run)
    return p.made, p.skipped


# -- report.md ----------------------------------------------------------------------------------


def _rule(o: dict[str, Any]) -> str:
    rule = f"{o.get('goal', 'max')} {o.get('metric', 'throughput')}"
    if o.get("at_load") is not None:
        rule += f" at load {float(o['at_load']):g}"
    if o.get("constraints"):
        rule += " with " + ", ".join(f"{m} {k} {b}" for m, bd in o["constraints"].items()
                                     for k, b in bd.items())
    return rule


def _standing(ranked: list[dict[str, Any]], smallest: float, looks: sequential.Looks | None = None) -> str:
    """After the best variant: whether its lead over the next variant is decided, or a tie (at a
    sequential look: its repeated interval, as the findings judge it)."""
    found = fnd.standing(ranked, smallest, looks)
    if found is None:
        return ""
    _, second, e, v = found
    lead = f"lead over `{second['variant']}` {iv.effect_text(e)}"
    if v.word == iv.HELD:
        return f"; {lead}"
    if v.reason == iv.ONE_REPETITION:
        return f"; {lead}: not a clear best ({iv.ONE_REPETITION})"
    return f"; **tied** with `{second['variant']}` ({lead}: the interval includes zero)"


def _interval(s: dict[str, Any] | None, scale: float = 1.0, digits: int = 1) -> str:
    if s is None:
        return "-"
    text = cell(s["mean"] / scale, digits)
    if s["ci_low"] is not None:
        text += f" [{cell(s['ci_low'] / scale, digits)}, {cell(s['ci_high'] / scale, digits)}]"
    return text


def _per_level(rows: list[dict[str, Any]]) -> list[str]:
    """## Per level: n, mean and 95 % interval per metric, and the noise flag (cv >= 10 %, pyperf's rule)."""
    stats = res.level_stats(rows)
    if not stats:
        return []
    by: dict[tuple[str, str, str, Any], dict[str, dict[str, Any]]] = {}
    for s in stats:
        by.setdefault((s["host"], s["variant"], s["mode"], s["load"]), {})[s["metric"]] = s
    intro = ("Each level's repetitions: n, the mean and its 95 % interval (Student's t; none with one "
             "repetition). A level is *noisy* when a metric's repetitions vary by "
             f"{iv.NOISY_CV * 100:g} % or more of their mean (coefficient of variation, pyperf's rule): its "
             "comparisons need more "
             "repetitions, or a quieter node. *windows cv* is the most that the measurement windows of "
             "one repetition varied (throughput over the last "
             f"{perfmod.STABILITY_WINDOWS} windows, which perf_analyzer's numbers rest on); a level is noisy "
             f"as well when it reaches {iv.NOISY_CV * 100:g} %.")
    windows: dict[tuple[str, str, str, Any], float] = {}
    for r in rows:
        if r.get("status") == records.OK and r.get("window_cv") is not None:
            k = (r["host"], r["variant"], r.get("mode") or "concurrency", r["load"])
            windows[k] = max(windows.get(k, 0.0), float(r["window_cv"]))
    lines = ["## Per level", "", intro, "",
             "| host | variant | load | n | throughput/s | avg ms | p95 ms | p99 ms | windows cv | noisy |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    noisy_levels = []
    for (host, variant, mode, load), ms in by.items():
        n = max(s["n"] for s in ms.values())
        noisy = [f"{m.removesuffix('_us')} cv {s['cv'] * 100:.0f} %" for m, s in ms.items() if s["noisy"]]
        wcv = windows.get((host, variant, mode, load))
        if wcv is not None and wcv >= iv.NOISY_CV:
            noisy.append(f"windows cv {wcv * 100:.0f} %")
        where = f"{mode[:4]} {cell(load)}"
        if noisy:
            noisy_levels.append(f"{host} / {variant} @ {where}: " + ", ".join(noisy))
        lines.append(f"| {host} | {variant} | {where} | {n} | {_interval(ms.get('throughput'))} | "
                     f"{_interval(ms.get('latency_avg_us'), 1000, 2)} | "
                     f"{_interval(ms.get('p95_us'), 1000, 2)} | "
                     f"{_interval(ms.get('p99_us'), 1000, 2)} | "
                     f"{'' if wcv is None else f'{wcv * 100:.1f} %'} | {'**noisy**' if noisy else ''} |")
    if noisy_levels:
        lines += ["", f"Noisy levels ({len(noisy_levels)}): " + "; ".join(noisy_levels) + "."]
    return lines + [""]


def search_section(run: Path, rows: list[dict[str, Any]]) -> list[str]:
    """``## Search``: per host that searched (halving, optuna), the search path and the winner or the
    tie (:func:`serve_system.results.searchdecide.markdown`); nothing for a grid."""
    from . import searchdecide as search  # optuna's study is rebuilt only for a run that used it

    lines: list[str] = []
    sharded = False
    for hdir in _host_dirs(run):
        plan = res.read_json(hdir / records.PLAN_FILE, kind="plan")
        rec = plan.get("search") if isinstance(plan, dict) else None
        if not isinstance(rec, dict):
            continue
        shard = rec.get("shard")
        if shard and sharded:
            continue  # one search over every host: said once
        sharded = sharded or bool(shard)
        host_rows = rows if shard else [r for r in rows if r["host"] == hdir.name]
        title = f"sharded over {len(shard['hosts'])} hosts" if shard else hdir.name
        try:
            lines += search.markdown(title, rec, search.step(rec, host_rows))
        except (KeyError, TypeError, ValueError) as exc:
            raise ServeSystemError(f"{hdir / 'plan.json'}: search: unreadable ({exc!r}): re-plan the run "
                                   "(serve-system plan)") from None
    if not lines:
        return []
    intro = ("Each candidate's path: measured at the search objective's load level, dropped only when "
             "the interval of its difference from the leader (its level adjusted over the rung's "
             "comparisons and the search's rungs) lies wholly on the worse side of zero (ties survive); "
             "the winner is named when its lead over the runner-up excludes zero.")
    return ["", "## Search", "", intro, "", *lines]


def write_report(run_dir: str | Path, partial: bool = False) -> dict[str, Any]:
    """Check the run folder, then write summary.csv/json, plots and report.md; return what was written."""
    run, manifest, rows, gaps = check_run(run_dir, partial)
    objectives = manifest["objectives"]  # checked and completed by check_run
    smallest = manifest["smallest_effect"]
    winners = [best(rows, o) for o in objectives]
    looks = plan_looks(run)
    judged = fnd.counted(rows) if looks is not None else rows  # auto measured contended levels again
    found = fnd.evaluate(judged, res.variant_setups(run), objectives, smallest, looks)
    plots, skipped = make_plots(run, rows)
    shard = shardres.read(run, manifest)
    metrics = list(dict.fromkeys(str(o.get("metric", "throughput")) for o in objectives))
    sharded = shardres.analyse(rows, shard, metrics, smallest) if shard else None
    csv_path, json_path = write_summary(run, rows, {"best": winners, "findings": [f.to_json() for f in found],
                                                    "missing": gaps, "shard": sharded})
    title = f"{manifest.get('experiment') or run.parent.name}: run {manifest.get('run_id') or run.name}"
    lines = [f"# {title}", ""]
    if manifest.get("description"):
        lines += [str(manifest["description"]).strip(), ""]
    stand_in = manifest.get("stand_in") or next((r["stand_in"] for r in rows if r.get("stand_in")), None)
    if stand_in:
        lines += [f"> **Stand-in model.** {stand_in} Latencies and batching are real; predictions are not.",
                  ""]
    if manifest.get("start"):
        hosts = manifest.get("hosts") or sorted({r["host"] for r in rows})
        # each host writes host.json (with its end time) when its part of the run is over
        ends = {h: _host_end(run, str(h)) for h in hosts}
        finished = [e for e in ends.values() if e]
        if finished and len(finished) == len(hosts):
            ended = max(finished)
        else:
            ended = "(not finished on " + ", ".join(h for h, e in ends.items() if not e) + ")"
        lines += [f"Started {manifest['start']}, ended {ended}; hosts: {', '.join(hosts)}.", ""]
    if gaps:
        lines += [f"> **Interrupted run, reported with --partial.** Missing: {', '.join(gaps)}.", ""]
    lines += contention_note(rows, looks is not None)
    lines += ["## Best variant per objective", ""]
    for o, w in zip(objectives, winners, strict=True):
        if w is None:
            lines.append(f"- **{o.get('name', _rule(o))}** ({_rule(o)}): no measured level qualifies"
                         + why_.unqualified(o, rows, set()))
        else:
            lines.append(f"- **{w['objective']}** ({_rule(o)}): `{w['variant']}` on {w['host']} at "
                         f"{w['mode']} {w['load']:g} -> {w['metric']} = {cell(w['value'])} "
                         f"(mean of {w['repetitions']})"
                         + _standing(fnd.rank(judged, o), smallest, looks))
    if shard and sharded:
        lines += ["", ("(Sharded run: these compare raw numbers across nodes; see the normalised ranking "
                      "below.)"), "", *shardres.markdown(sharded, rows, shard, objectives)]
    lines += search_section(run, rows)
    lines += ["", *fnd.markdown(found, stand_in, smallest, looks)]
    lines += _per_level(rows)
    lines += ["## Measurements", "",
              ("| host | variant | load | rep | status | throughput/s | avg ms | p95 ms | p99 ms | "
               "queue ms | infer ms | avg batch | util |"),
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        util, busiest = r.get("gpu_util"), r.get("gpu_util_max")
        if util is not None:
            util_s = f"GPU {util * 100:.0f}%" + (f" (busiest {busiest * 100:.0f}%)" if busiest is not None
                                                 else "")
        else:
            util_s = f"CPU {r['cpu_util'] * 100:.0f}%" if r.get("cpu_util") is not None else "-"
        ms = ms_cells(r)
        load = f"{r['mode'][:4] if r.get('mode') else ''} {cell(r.get('load'))}".strip()
        lines.append(f"| {r['host']} | {r['variant']} | {load} | {cell(r.get('repetition'))} | {r['status']}"
                     f"{' (retried)' if r.get('retried') else ''} | {cell(r.get('throughput'))} | "
                     f"{ms('latency_avg_us')} | "
                     f"{ms('p95_us')} | {ms('p99_us')} | {ms('queue_us')} | {ms('compute_infer_us')} | "
                     f"{cell(r.get('avg_batch_size'), 2)} | {util_s} |")
    problems = [r for r in rows if r["status"] != records.OK]
    if problems:
        lines += ["", "## Not measured", ""]
        lines += [f"- {why_.level_failure(r)}" for r in problems]
    adapted = [f"{host}/{variant}: {why_.note(n)}"
               for (host, variant), setup in res.variant_setups(run).items() for n in setup["notes"]]
    if adapted:
        lines += ["", "## Adapted to the host", ""] + [f"- {n}" for n in adapted]
    if plots or skipped:
        lines += ["", "## Plots", ""] + [f"![{p.stem}](plots/{p.name})" for p in plots]
        if skipped:
            lines += ["", "Not drawn (no data): " + "; ".join(skipped) + "."]
    lines += ["", ("Files: `summary.csv` (one row per host x variant x load x repetition; times in "
                   "microseconds; `windows` and `window_cv`: perf_analyzer's measurement windows and how "
                   "much the last ones varied), `summary_stats.csv` (one row per host x variant x load x "
                   "metric over the repetitions: n, mean, sd, ci_low and ci_high of the 95 % interval "
                   "(Student's t), cv and "
                   "noisy), `summary.json` (the rows, those statistics as `stats`, the best variants and the "
                   "findings with their effects and intervals). Raw perf_analyzer output, stats and metrics "
                   "are under each `<host>/<variant>/<level>/`."), ""]
    md = run / "report.md"
    safeio.write_text(md, "\n".join(lines), within=run)
    return {"rows": len(rows), "summary_csv": str(csv_path), "summary_json": str(json_path),
            "report": str(md),
            "plots": [str(p) for p in plots], "skipped": skipped, "best": winners, "findings": found,
            "missing": gaps}
