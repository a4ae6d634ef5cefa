"""The report's plots as specs (:class:`.drawing.Plot`: a file name, panels with a title, axes and series:
data) built from the results rows; :mod:`.drawing` draws them.

Drawn, where there is data (report.md lists the rest, with why):

- latency (p50 / p95 / p99, or the average without percentiles) against load, per host and mode;
- throughput against latency, per host;
- Triton's server-side latency breakdown and the batch sizes it formed (where Triton measured them);
- utilisation over time per GPU (CPU where no GPU is reported), and GPU memory over time;
- the FastAPI benchmark's latency distribution (every latency it kept).

Aggregates are the mean over the repetitions, with the 95 % interval as error bars
(:func:`serve_system.results.intervals.summarize`). Labels and units come from
:mod:`serve_system.metrics`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

from .. import metrics
from ..errors import ServeSystemError
from ..node import records
from . import fastapi_tree as fastapi_results
from . import intervals as iv
from . import tree as res
from .cells import cell
from .drawing import Panel, Plot, Series
from .row import Row, value
from .stats import GpuSample, Sample
from .status import Status

#: how every aggregate plot's bars read
BARS = "bars: 95 % interval over repetitions"
#: (metric, line style, legend) of the latency lines
PERCENTILES = (("p50_us", "-", "p50"), ("p95_us", "--", "p95"), ("p99_us", ":", "p99"))
#: drawn for a variant whose perf_analyzer output had no percentiles
AVG = (("latency_avg_us", "-.", "avg (no percentiles)"),)
AVG_AND_PERCENTILES = AVG + PERCENTILES
#: the parts of Triton's server-side time per request, stacked
BREAKDOWN = metrics.select("queue_us", "compute_input_us", "compute_infer_us", "compute_output_us")
_TIME = "seconds since the first sample"

# -- the specs: rows -> plots (or why not) ------------------------------------------------------

Built = tuple[list[Plot], list[str]]


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


def _latency_series(vr: list[Row], colour: str, variant: str) -> list[Series]:
    keys = PERCENTILES if any(value(r, k) is not None for r in vr for k, _, _ in PERCENTILES) else AVG
    out = []
    for key, style, label in keys:
        by_load: dict[float, list[float]] = {}
        for r in vr:
            if value(r, key) is not None:
                by_load.setdefault(float(r["load"]), []).append(float(value(r, key)) / metrics.get(key).scale)
        if by_load:
            xs = sorted(by_load)
            ys, err = _bars([by_load[x] for x in xs])
            out.append(Series("errorbar", xs, ys, f"{variant} {label}", yerr=err,
                              style={"linestyle": style, "marker": "o", "markersize": 4, "capsize": 3,
                                     "color": colour}))
    return out


def latency_vs_load(host: str, hr: list[Row]) -> Built:
    plots, skipped = [], []
    for mode in sorted({m for r in hr if (m := r.get("mode"))}):
        mr = [r for r in hr
              if r["mode"] == mode and any(value(r, k) is not None for k, _, _ in AVG_AND_PERCENTILES)]
        if not mr:
            skipped.append(f"{host}: latency against {mode} (no latency measured)")
            continue
        variants = sorted({r["variant"] for r in mr})
        series = [s for i, v in enumerate(variants)
                  for s in _latency_series([r for r in mr if r["variant"] == v], f"C{i % 10}", v)]
        loads = sorted({float(r["load"]) for r in mr})
        wide = len(loads) > 1 and loads[-1] / loads[0] >= 8
        plots.append(Plot(f"{host}_latency_vs_{mode}.png", (8, 4.8), [Panel(
            f"{host}: latency against load: p50 solid, p95 dashed, p99 dotted ({BARS})",
            "concurrent clients" if mode == "concurrency" else "requests per second (request rate)",
            "latency (ms)", series, title_style={"fontsize": 9},
            xscale=("log", {"base": 2}) if wide else None, xticks=(loads, [f"{x:g}" for x in loads], None),
            legend={"fontsize": 7, "ncol": max(1, len(variants) // 4 + 1)})]))
    return plots, skipped


def throughput_latency(host: str, hr: list[Row]) -> Built:
    def lat(r: Row) -> float | None:
        v = r.get("p95_us") or r.get("latency_avg_us")
        return None if v is None else float(v) / metrics.get("p95_us").scale

    pts_by_v: dict[str, dict[float, list[Row]]] = {}
    for r in hr:
        if r.get("throughput") is not None and lat(r) is not None:
            pts_by_v.setdefault(r["variant"], {}).setdefault(float(r["load"]), []).append(r)
    if not pts_by_v:
        return [], [f"{host}: throughput against latency (no level with both)"]
    series = []
    for v, by_load in sorted(pts_by_v.items()):
        loads = sorted(by_load)
        ys, yerr = _bars([[float(r["throughput"]) for r in by_load[x]] for x in loads])
        xs, xerr = _bars([[lat(r) or 0.0 for r in by_load[x]] for x in loads])
        series.append(Series("errorbar", xs, ys, v, xerr=xerr, yerr=yerr, style={"marker": "o", "capsize": 3},
                             notes=[(f"{load:g}", x, y) for load, x, y in zip(loads, xs, ys, strict=True)]))
    return [Plot(f"{host}_throughput_latency.png", (7, 4.5), [Panel(
        f"{host}: throughput against latency (labels: load level; {BARS})",
        "latency p95 (ms; average where p95 is missing)", "throughput (infer/s)", series,
        title_style={"fontsize": 10}, legend={"fontsize": 8})])], []


def breakdown(host: str, hr: list[Row]) -> Built:
    groups: dict[tuple[str, str, float], list[Row]] = {}
    for r in hr:
        if any(value(r, k) is not None for k in BREAKDOWN):
            groups.setdefault((r["variant"], r["mode"] or "", float(r["load"])), []).append(r)
    if not groups:
        why = f"{host}: server-side latency breakdown (no Triton statistics: e.g. the FastAPI benchmark)"
        return [], [why]
    keys = sorted(groups)
    at = list(range(len(keys)))
    series, bottoms = [], [0.0] * len(keys)
    for part in BREAKDOWN:
        scale = metrics.get(part).scale
        vals = [sum((value(r, part) or 0) / scale for r in groups[k]) / len(groups[k]) for k in keys]
        series.append(Series("bar", at, vals, metrics.get(part).label, style={"bottom": bottoms}))
        bottoms = [b + v for b, v in zip(bottoms, vals, strict=True)]
    totals, err = _bars([[sum((value(r, k) or 0) / metrics.get(k).scale for k in BREAKDOWN)
                          for r in groups[key]] for key in keys])
    series.append(Series("errorbar", at, totals, yerr=err,
                         style={"fmt": "none", "ecolor": "black", "capsize": 4}))
    ticks = [f"{v}\n{load:g} (n={len(groups[(v, m, load)])})" for v, m, load in keys]
    return [Plot(f"{host}_latency_breakdown.png", (max(6, 0.6 * len(keys) + 2), 4.5), [Panel(
        f"{host}: server-side latency breakdown (mean; {BARS}, on the total)", "",
        "server time per request (ms)", series, title_style={"fontsize": 10}, xticks=(at, ticks, 7),
        grid=None, legend={"fontsize": 8})])], []


def batch_sizes(host: str, hr: list[Row]) -> Built:
    """Share of requests served in each batch size, per variant and load (Triton's own statistics),
    the mean over repetitions with its interval."""
    groups: dict[tuple[str, float], list[Row]] = {}
    for r in hr:
        if r.get("batch_size_histogram"):
            groups.setdefault((r["variant"], float(r["load"])), []).append(r)
    if not groups:
        return [], [f"{host}: batch sizes (no Triton statistics)"]
    sizes = sorted({int(k) for rs in groups.values() for r in rs for k in r["batch_size_histogram"] or {}})
    width = 0.8 / len(groups)
    series = []
    for i, ((variant, load), rs) in enumerate(sorted(groups.items())):
        shares: list[list[float]] = [[] for _ in sizes]
        for r in rs:
            h = {int(k): int(v) for k, v in (r["batch_size_histogram"] or {}).items()}
            served = sum(k * v for k, v in h.items()) or 1
            for j, k in enumerate(sizes):
                shares[j].append(100 * k * h.get(k, 0) / served)
        means, err = _bars(shares)
        batches = [float(r["avg_batch_size"]) for r in rs if r.get("avg_batch_size") is not None]
        avg = cell(sum(batches) / len(batches) if batches else None, 2)
        bad = sorted({str(r.get("status")) for r in rs if r.get("status") != Status.OK})
        series.append(Series("bar", [k - 0.4 + (i + 0.5) * width for k in sizes], means,
                             f"{variant} @ {load:g} (avg {avg}, n={len(rs)}{''.join(', ' + b for b in bad)})",
                             yerr=err, style={"width": width, "capsize": 2}))
    return [Plot(f"{host}_batch_sizes.png", (min(13.0, max(7.0, 0.5 * len(sizes) + 4)), 4.5), [Panel(
        f"{host}: batch sizes formed by Triton ({BARS})", "batch size executed by Triton",
        "share of requests (%)", series, title_style={"fontsize": 10},
        xticks=(sizes, [str(k) for k in sizes], None),
        grid={"alpha": 0.3, "axis": "y"}, legend={"fontsize": 7})])], []


def _spans(samples: dict[str, list[Sample]], t0: float) -> list[Series]:
    """Each variant's time span on a time axis, shaded and named."""
    return [Series("span", [ss[0].t - t0, ss[-1].t - t0], label=variant,
                   style={"color": "grey", "alpha": 0.08 if i % 2 else 0.16})
            for i, (variant, ss) in enumerate(sorted(samples.items(), key=lambda kv: kv[1][0].t))]


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


def _trace(samples: list[Sample], t0: float, gpu: str, metric: Callable[[GpuSample], float | None],
           scale: float) -> list[tuple[float, float]]:
    """One GPU's metric over time (seconds since ``t0``), scaled; the samples without it left out."""
    out = []
    for s in samples:
        g = s.gpus.get(gpu)
        v = None if g is None else metric(g)
        if v is not None:
            out.append((s.t - t0, v * scale))
    return out


_LINE = {"lw": 1.2, "marker": ".", "markersize": 3}


def _utilisation(host: str, samples: list[Sample], spans: list[Series], t0: float) -> Built:
    gpus = sorted({gpu for s in samples for gpu, g in s.gpus.items() if g.util is not None})
    if gpus:
        lines = [Series("line", *_gapped(_trace(samples, t0, g, lambda m: m.util, 100)), g, style=_LINE)
                 for g in gpus]
        return [Plot(f"{host}_gpu_utilisation.png", (9, 4.2), [Panel(
            f"{host}: utilisation per GPU (sampled from :8002/metrics)", _TIME, "GPU utilisation (%)",
            lines + spans, title_style={"pad": 14}, ylim={"bottom": 0, "top": 105},
            legend={"fontsize": 7})])], []
    cpu = [(s.t - t0, s.cpu.util * 100) for s in samples if s.cpu.util is not None]
    if not cpu:
        return [], [f"{host}: utilisation (its metrics samples report neither GPU nor CPU utilisation)"]
    return [Plot(f"{host}_cpu_utilisation.png", (9, 4.2), [Panel(
        f"{host}: CPU utilisation (Triton reported no GPU)", _TIME, "CPU utilisation (%)",
        [Series("line", *_gapped(cpu), "CPU (whole host)", style=_LINE), *spans], title_style={"pad": 14},
        ylim={"bottom": 0, "top": 105})])], []


def _memory(host: str, samples: list[Sample], spans: list[Series], t0: float) -> list[Plot]:
    mem_gpus = sorted({gpu for s in samples for gpu, g in s.gpus.items() if g.memory_used is not None})
    if not mem_gpus:
        return []
    series = []
    for i, g in enumerate(mem_gpus):
        colour = f"C{i % 10}"
        series.append(Series("line", *_gapped(_trace(samples, t0, g, lambda m: m.memory_used, 2**-20)),
                             f"{g} used", style={**_LINE, "color": colour}))
        totals = [total / 2**20 for s in samples
                  if g in s.gpus and (total := s.gpus[g].memory_total) is not None]
        if totals:
            series.append(Series("hline", y=[max(totals)], label=f"{g} total",
                                 style={"color": colour, "ls": ":", "lw": 1}))
    return [Plot(f"{host}_gpu_memory.png", (9, 4.2), [Panel(
        f"{host}: GPU memory over time", _TIME, "GPU memory (MiB)", series + spans, title_style={"pad": 14},
        ylim={"bottom": 0}, legend={"fontsize": 7})])]


def over_time(series: res.UtilisationSeries) -> Built:
    """Utilisation (per GPU, else the host's CPU) and GPU memory over the run, per host."""
    plots: list[Plot] = []
    skipped: list[str] = []
    for host in sorted({h for h, _ in series}):
        per_v = {v: ss for (h, v), ss in series.items() if h == host and ss}
        if not per_v:
            continue
        t0 = min(ss[0].t for ss in per_v.values())
        samples = sorted((s for ss in per_v.values() for s in ss), key=lambda s: s.t)
        made, why = _utilisation(host, samples, _spans(per_v, t0), t0)
        plots += made + _memory(host, samples, _spans(per_v, t0), t0)
        skipped += why
    if not series:
        skipped.append("utilisation and GPU memory over time (no metrics.jsonl samples in the run)")
    elif not any(p.name.endswith("_gpu_utilisation.png") for p in plots):
        skipped.append("utilisation per GPU and GPU memory over time (Triton reported no GPU: CPU "
                       "utilisation drawn instead)")
    return plots, skipped


def fastapi_latency(run: Path) -> Built:
    """Per host: the FastAPI benchmark's latency distribution (every latency it kept) and its boxes."""
    found: dict[str, list[tuple[str, float, list[float]]]] = {}
    ldirs = [ld for h in res.host_dirs(run) for v in res.subdirs(h) for ld in res.subdirs(v)]
    for ldir in (ld for ld in ldirs if os.path.lexists(ld / "bench.json")):
        try:
            lat = fastapi_results.latencies_s(ldir)
            load = float(res.read_level(ldir / records.LEVEL_FILE).load) \
                if os.path.lexists(ldir / records.LEVEL_FILE) else 0.0
        except ServeSystemError:
            continue  # the level's row says what is wrong with it
        if lat:
            found.setdefault(ldir.parent.parent.name, []).append((ldir.parent.name, load, lat))
    plots = []
    for host, series in sorted(found.items()):
        series.sort(key=lambda s: (s[1], s[0]))
        steps = []
        for variant, load, lat in series:
            ms = sorted(x * 1000 for x in lat)
            steps.append(Series("step", ms, [(i + 1) / len(ms) for i in range(len(ms))],
                                f"{variant}, {load:g} sender{'s' if load != 1 else ''} (n={len(ms)})"))
        steps += [Series("hline", y=[q], style={"color": "grey", "lw": 0.6, "ls": ":"})
                  for q in (0.5, 0.95, 0.99)]
        boxes = Series("box", y=[[x * 1000 for x in lat] for _, _, lat in series],
                       style={"whis": (1, 99), "showfliers": False})
        plots.append(Plot(f"{host}_fastapi_latency.png", (11, 4.5), [
            Panel(f"{host}: FastAPI latency distribution", "latency (ms, log scale)",
                  "fraction of requests at or below", steps, xscale=("log", {}),
                  legend={"fontsize": 7, "loc": "lower right"}),
            Panel("per variant and senders", "", "latency (ms; box p25-p75, whiskers p1-p99)", [boxes],
                  yscale=("log", {}), grid={"alpha": 0.3, "axis": "y"},
                  xticks=(list(range(1, len(series) + 1)), [f"{v}\n{load:g}" for v, load, _ in series], 7))],
            widths=[3, 2]))
    return plots, []


def host_plots(host: str, rows: list[Row]) -> Built:
    """A host's plots of its rows (every row of that host, as :func:`tree.collect` reads them): latency
    against load, throughput against latency, Triton's breakdown and batch sizes."""
    measured = [r for r in rows if r.get("load") is not None]
    ok = [r for r in measured if r.get("status") == Status.OK]
    if not ok:
        return [], []
    built = [latency_vs_load(host, ok), throughput_latency(host, ok), breakdown(host, ok),
             # Triton's statistics are real even where perf_analyzer found no stable measurement
             batch_sizes(host, measured)]
    return [p for made, _ in built for p in made], [w for _, why in built for w in why]


def run_plots(run: Path, rows: list[Row]) -> Built:
    """The plots of the whole run: utilisation and GPU memory over time, the FastAPI benchmark's latency
    (and why no plot at all, where no level was measured ok)."""
    skipped = [] if any(r.get("status") == Status.OK and r.get("load") is not None for r in rows) \
        else ["every plot (no level was measured ok)"]
    plots: list[Plot] = []
    for made, why in (over_time(res.utilisation_series(run)), fastapi_latency(run)):
        plots += made
        skipped += why
    return plots, skipped


def specs(run: Path, rows: list[Row]) -> Built:
    """Every plot with data, as specs; and the plots skipped with the reason: each host's
    (:func:`host_plots`), then the run's (:func:`run_plots`)."""
    plots: list[Plot] = []
    skipped: list[str] = []
    for host in sorted({r["host"] for r in rows}):
        made, why = host_plots(host, [r for r in rows if r["host"] == host])
        plots += made
        skipped += why
    made, why = run_plots(run, rows)
    return plots + made, skipped + why
