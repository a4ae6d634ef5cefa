"""A whole class's runs in one comparison: ``serve-system compare --class RUN_DIR...``.

After a class session every student's node has measured the same experiment. The input is one or
more raw run folders (``results/<experiment>/<run-id>``, read with :func:`tree.collect`, so nothing
needs to be reported first); each (run, host) pair is one **node**. A node is named by its host,
or ``<run-id>/<host>`` where the same host name appears in several runs.

- **Per cell** (variant, load) and metric: one value per node, the node's mean over its ok
  repetitions; across the nodes: n, median, the quartiles (IQR), min/max, and the coefficient of
  variation (sd / mean across nodes). One box plot per metric and load, a box per variant, every
  node drawn as a point and the outliers named.
- **Outliers** (:func:`outliers`): a node's value is an outlier when it lies further from the
  class median than :data:`OUTLIER_Z` robust standard deviations (1.4826 x the median absolute
  deviation, MAD: the standard deviation a normal sample with that MAD has; the modified z-score of
  Iglewicz and Hoaglin) *and* differs from the median by at least the spec's smallest effect of
  interest (nodes that agree to within what matters are never named, even when the MAD is tiny).
  The median and MAD ignore a single wild node, which a mean and a standard deviation do not; it
  needs three nodes or more (with two, neither can be told apart from the other).
- **Suspect nodes**: a node that is an outlier (in any metric) in more than half of the variants
  it measured is named once, with its numbers.
- **Pooled findings**: the lab's claims (:func:`findings.evaluate`) with each node as one
  repetition: one value per node per (variant, load), the node's mean, so the intervals and n
  count nodes; beside each verdict, how many nodes saw the claim hold on their own run. Suspect
  nodes are left out of the pool (a node with a faulty GPU is not a repetition of the lab's
  hardware; its spread would only widen every interval), and the report says so; their own
  verdicts still count in the tally.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import metrics, ownedtree, safeio, textsafe
from ..errors import ServeSystemError
from ..experiment import records
from . import findings as fnd
from . import runs
from . import tree as res
from .claim import Finding
from .status import Status

#: the metrics compared across nodes (one box plot each per load)
METRICS: tuple[str, ...] = metrics.select("throughput", "latency_avg_us", "p50_us", "p95_us", "p99_us")
#: robust z beyond which a node's value is an outlier (Iglewicz and Hoaglin's modified z-score)
OUTLIER_Z = 3.5
#: a MAD times this is a normal sample's standard deviation
MAD_SD = 1.4826
#: the host name the pooled findings speak of
POOL = "all nodes"
#: the files a class report consists of (a --force run removes only these before writing)
FILES = ("class.md", "class.csv", "class.json")
CSV_COLUMNS: tuple[str, ...] = ("variant", "mode", "load", "metric", "n", "median", "q1", "q3", "min", "max",
                                "mean", "cv", "mad", "outliers")


@dataclass
class Node:
    """One node's result: a host of one run."""

    run: Path
    run_id: str
    host: str
    label: str
    rows: list[dict[str, Any]]
    setups: dict[tuple[str, str], dict[str, Any]]
    #: (variant, mode, load) -> findings' per-level means (every metric of findings.METRICS)
    means: dict[tuple[str, str, float], dict[str, Any]] = field(default_factory=dict)


@dataclass
class Outlier:
    node: str
    variant: str
    mode: str
    load: float
    metric: str
    value: float
    median: float
    q1: float
    q3: float
    z: float

    def text(self) -> str:
        m = self.metric
        return (f"{self.node}: {_fmt(m, self.value)} vs class median {_fmt(m, self.median)} "
                f"[IQR {_fmt(m, self.q1, unit=False)}–{_fmt(m, self.q3, unit=False)}]")


# -- reading ------------------------------------------------------------------------------------


def _not_a_run(run: Path) -> str | None:
    """Why ``run`` is not a run folder, or None."""
    if not run.is_dir():
        return f"{run}: no such run folder; give results/<experiment>/<run-id>"
    if (run / "manifest.json").is_file() or any(run.glob("*/*/variant.json")) \
            or any(run.glob("*/*/*/level.json")):
        return None
    inner = sorted(p for p in run.iterdir() if (p / "manifest.json").is_file())
    if inner:
        return (f"{run}: not a run folder but a folder of runs; give the runs themselves, e.g. "
                f"{inner[0]}")
    return (f"{run}: not a run folder (no manifest.json, no <host>/<variant>/ records); give "
            "results/<experiment>/<run-id> as an experiment playbook wrote it")


def read_nodes(run_dirs: list[Path], partial: bool = False) -> tuple[list[Node], records.Manifest]:
    """Every (run, host) of the run folders as a :class:`Node`, checked; and the first run's manifest
    (objectives, smallest effect). Raises with one line naming the folder and the fix."""
    seen: dict[Path, Path] = {}
    for run in run_dirs:
        why = _not_a_run(run)
        if why:
            raise ServeSystemError(why)
        key = run.resolve()
        if key in seen:
            raise ServeSystemError(f"{run}: given twice (also as {seen[key]}); give each run folder once")
        seen[key] = run
    nodes: list[Node] = []
    manifest: records.Manifest | None = None
    experiment: tuple[str, Path] | None = None
    for run in run_dirs:
        _, man, rows, _gaps = runs.check_run(run, partial)
        if manifest is None:
            manifest = man
        exp = next((str(r["experiment"]) for r in rows), run.parent.name)
        if experiment is None:
            experiment = (exp, run)
        elif exp != experiment[0]:
            raise ServeSystemError(f"{run}: a run of experiment '{exp}', but {experiment[1]} is of "
                                   f"'{experiment[0]}'; compare the runs of one experiment at a time")
        setups = res.variant_setups(run)
        for host in sorted({str(r["host"]) for r in rows}):
            hrows = [r for r in rows if r["host"] == host]
            node = Node(run, str(hrows[0]["run_id"]), host, host, hrows,
                        {k: v for k, v in setups.items() if k[0] == host})
            node.means = {(v, mode, load): m for (_, v, mode, load), m in fnd.levels(hrows).items()}
            nodes.append(node)
    measured = [n for n in nodes if n.means]
    if len(measured) < 2:
        what = f"one node ({measured[0].host} of {measured[0].run})" if measured else "no node"
        raise ServeSystemError(f"{', '.join(str(r) for r in run_dirs)}: {what} with measurements; a class "
                               "comparison needs two nodes or more: give more run folders (one per "
                               "student) or a run measured on several hosts")
    hosts = Counter(n.host for n in measured)
    for n in measured:
        if hosts[n.host] > 1:
            n.label = f"{n.run_id}/{n.host}"
    labels = Counter(n.label for n in measured)
    dup = next((n for n in measured if labels[n.label] > 1), None)
    if dup is not None:
        raise ServeSystemError(f"{dup.run}: node {dup.label} appears in two run folders with the same run "
                               "id; give each run once")
    return measured, dataclasses.replace(manifest or records.Manifest(),
                                         experiment=experiment[0] if experiment else None)


# -- statistics across nodes --------------------------------------------------------------------


def _quartiles(xs: list[float]) -> tuple[float, float]:
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def cell_stats(values: dict[str, float]) -> dict[str, Any]:
    """n, median, quartiles, min/max, mean, cv (across nodes) and MAD of one cell's node values."""
    xs = sorted(values.values())
    med = statistics.median(xs)
    q1, q3 = _quartiles(xs)
    mean = statistics.fmean(xs)
    sd = statistics.stdev(xs) if len(xs) > 1 else None
    return {"n": len(xs), "median": med, "q1": q1, "q3": q3, "min": xs[0], "max": xs[-1], "mean": mean,
            "cv": sd / abs(mean) if sd is not None and mean else None,
            "mad": statistics.median(abs(x - med) for x in xs)}


def outliers(values: dict[str, float], smallest: float) -> dict[str, float]:
    """node -> robust z of the values that are outliers (see the module's text); none below 3 nodes."""
    if len(values) < 3:
        return {}
    s = cell_stats(values)
    med, spread = s["median"], MAD_SD * s["mad"]
    out = {}
    for node, x in values.items():
        dev = x - med
        far = abs(dev) > OUTLIER_Z * spread
        matters = abs(dev) >= smallest * abs(med) if med else dev != 0
        if far and matters:
            out[node] = math.copysign(math.inf, dev) if spread == 0 else dev / spread
    return out


def cells(nodes: list[Node], loads: list[float] | None = None
          ) -> dict[tuple[str, str, float], dict[str, dict[str, float]]]:
    """(variant, mode, load) -> metric -> node label -> the node's mean; ordered by variant and load."""
    out: dict[tuple[str, str, float], dict[str, dict[str, float]]] = {}
    for n in nodes:
        for (v, mode, load), m in n.means.items():
            if loads and not any(abs(load - x) < 1e-9 for x in loads):
                continue
            c = out.setdefault((v, mode, load), {})
            for metric in METRICS:
                if m.get(metric) is not None:
                    c.setdefault(metric, {})[n.label] = float(m[metric])
    return dict(sorted(out.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])))


# -- the comparison -----------------------------------------------------------------------------


def compare_class(run_dirs: list[Path], loads: list[float] | None = None,
                  partial: bool = False) -> dict[str, Any]:
    """The whole class comparison (nothing written): nodes, per-cell statistics and outliers,
    suspect nodes, pooled findings with the per-node tallies."""
    nodes, manifest = read_nodes(run_dirs, partial)
    smallest = float(manifest.smallest_effect)
    table = cells(nodes, loads)
    if not table:
        raise ServeSystemError(f"--load {', '.join(f'{x:g}' for x in loads or [])}: no node measured this "
                               "load; leave --load out or give a load the runs measured")
    stats_rows: list[dict[str, Any]] = []
    found: list[Outlier] = []
    for (v, mode, load), by_metric in table.items():
        for metric, values in by_metric.items():
            s = cell_stats(values)
            out = outliers(values, smallest)
            for node, z in out.items():
                found.append(Outlier(node, v, mode, load, metric, values[node], s["median"], s["q1"], s["q3"],
                                     z))
            stats_rows.append({"variant": v, "mode": mode, "load": load, "metric": metric, **s,
                               "outliers": sorted(out), "values": values})
    suspects = _suspects(nodes, table, found)
    left_out = [s["node"] for s in suspects]
    pool = [n for n in nodes if n.label not in left_out]
    if len(pool) < 2:  # a class of suspects: pool them all rather than nothing
        pool, left_out = nodes, []
    pooled, _ = pooled_findings(pool, manifest)
    _, per_node = pooled_findings(nodes, manifest, pooled=False)
    return {"experiment": manifest.experiment, "smallest_effect": smallest, "loads": loads or None,
            "nodes": [{"node": n.label, "host": n.host, "run_id": n.run_id, "run": str(n.run)}
                      for n in nodes],
            "cells": stats_rows, "outliers": found, "suspects": suspects, "findings": pooled,
            "pooled_nodes": [n.label for n in pool], "left_out": left_out, "node_verdicts": per_node,
            "setup_notes": _setup_notes(nodes)}


def _suspects(nodes: list[Node], table: dict[tuple[str, str, float], dict[str, dict[str, float]]],
              found: list[Outlier]) -> list[dict[str, Any]]:
    """Nodes that are outliers in more than half of the variants they measured."""
    out = []
    for n in nodes:
        measured = sorted({v for (v, _, _), c in table.items()
                           if any(n.label in vals for vals in c.values())})
        flagged = sorted({o.variant for o in found if o.node == n.label})
        if measured and len(flagged) * 2 > len(measured):
            out.append({"node": n.label, "variants": len(measured), "outlying_variants": flagged,
                        "outliers": [o for o in found if o.node == n.label]})
    return out


def _setup_notes(nodes: list[Node]) -> list[str]:
    """Variants whose configuration differs between nodes (the pooled findings use the first's)."""
    notes = []
    first: dict[str, tuple[str, Any]] = {}
    for n in nodes:
        for (_, v), s in sorted(n.setups.items()):
            what = (s.get("config_pbtxt"), s.get("runtime"), s.get("distribution"), s.get("batch_size"))
            if v not in first:
                first[v] = (n.label, what)
            elif first[v][1] != what:
                notes.append(f"`{v}` was set up differently on {n.label} than on {first[v][0]}; the pooled "
                             f"findings use {first[v][0]}'s set-up")
    return notes


def pooled_findings(nodes: list[Node], manifest: records.Manifest, pooled: bool = True
                    ) -> tuple[list[Finding], dict[str, dict[str, str]]]:
    """The lab's claims with each node as a repetition (none without ``pooled``); and claim key ->
    node label -> the verdict of the node's own run."""
    objectives, smallest = manifest.objectives, float(manifest.smallest_effect)
    rows: list[dict[str, Any]] = []
    setups: dict[tuple[str, str], dict[str, Any]] = {}
    for i, n in enumerate(nodes, start=1):
        for (v, mode, load), m in sorted(n.means.items()):
            row = {"experiment": manifest.experiment, "run_id": "class", "host": POOL, "variant": v,
                   "mode": mode, "load": load, "repetition": i, "status": Status.OK, "node": n.label}
            row.update({k: m.get(k) for k in fnd.METRICS})
            rows.append(row)
        for (_, v), s in sorted(n.setups.items()):
            setups.setdefault((POOL, v), s)
    found = fnd.evaluate(rows, setups, objectives, smallest) if pooled else []
    per_node: dict[str, dict[str, str]] = {}
    for n in nodes:
        for f in fnd.evaluate(n.rows, n.setups, objectives, smallest):
            per_node.setdefault(f.key, {})[n.label] = f.verdict
    return found, per_node


# -- writing ------------------------------------------------------------------------------------


def default_out(run_dirs: list[Path]) -> Path:
    """Where a class report goes without --out: ``results/class/<experiment>`` beside the runs'
    experiment folder (for runs in ``results/<experiment>/<run-id>``)."""
    first = run_dirs[0]
    return first.resolve().parent.parent / "class" / first.resolve().parent.name


def check_out(out: Path, run_dirs: list[Path], force: bool) -> None:
    """Refuse an output folder that is a file, lies in or holds one of the runs, or is not empty
    (without ``force``)."""
    if out.exists() and not out.is_dir():
        raise ServeSystemError(f"--out {out}: is a file; give a folder for the class report")
    target = out.resolve()
    for run in run_dirs:
        r = run.resolve()
        if target == r or r in target.parents:
            raise ServeSystemError(f"--out {out}: lies inside run folder {run}; write the class report "
                                   "elsewhere (a run keeps its own report)")
        if target in r.parents:
            raise ServeSystemError(f"--out {out}: holds run folder {run}; write the class report elsewhere")
    if out.is_symlink():
        raise ServeSystemError(f"--out {out}: is a link; give a folder of its own for the class report")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ServeSystemError(f"--out {out}: folder exists and is not empty; give another folder or "
                               "--force to replace the class report in it (only the files it wrote there)")


def _fmt(metric: str, v: float, unit: bool = True) -> str:
    m = metrics.get(metric)
    if m.is_time:
        return f"{m.show(v):.2f}" + (f" {m.shown}" if unit else "")
    return f"{v:,.1f}" + (m.unit if unit else "")


def _load(mode: str, load: float) -> str:
    return f"{'concurrency' if mode == 'concurrency' else mode.replace('_', ' ')} {load:g}"


SHORT = {m: metrics.get(m).short for m in METRICS}
METRIC_NAMES = {m: metrics.get(m).axis for m in METRICS}


def markdown(result: dict[str, Any], plots: list[Path]) -> str:
    nodes = result["nodes"]
    smallest = result["smallest_effect"]
    lines = [f"# Class comparison: {result['experiment']}", "",
             f"{len(nodes)} nodes: " + ", ".join(f"{n['node']} ({n['run']})" for n in nodes) + ".", "",
             ("Each node's value at a variant and load is the mean over its ok repetitions; the class's "
             "numbers are taken across the nodes."), ""]
    lines += ["## Suspect nodes", "",
              "A node that is an outlier (in any metric) in more than half of the variants it measured.", ""]
    if result["suspects"]:
        for s in result["suspects"]:
            first = s["outliers"][0]
            lines.append(f"- **{s['node']}**: outlier in {len(s['outlying_variants'])} of {s['variants']} "
                         f"variants ({', '.join(f'`{v}`' for v in s['outlying_variants'])}); "
                         f"e.g. `{first.variant}` at {_load(first.mode, first.load)}, "
                         f"{SHORT[first.metric]}: {first.text()}. All "
                         f"{len(s['outliers'])} outlying values: "
                         + "; ".join(f"`{o.variant}` {_load(o.mode, o.load)} {SHORT[o.metric]} "
                                     f"{_fmt(o.metric, o.value)}" for o in s["outliers"]) + ".")
    else:
        lines.append("None.")
    suspect = {s["node"] for s in result["suspects"]}
    rest = [o for o in result["outliers"] if o.node not in suspect]
    lines += ["", "## Outliers", "",
              (f"Rule: a node's value is an outlier when it lies more than {OUTLIER_Z:g} robust standard "
              f"deviations ({MAD_SD} x MAD, the median absolute deviation across the nodes) from the class "
              "median and differs from it by at least the smallest effect of interest, "
              f"{smallest * 100:g} %. Needs three nodes or more."), ""]
    if not result["outliers"]:
        lines.append("None.")
    elif not rest:
        lines.append("Only the suspect nodes' values, listed above.")
    for o in rest:
        lines.append(f"- `{o.variant}` at {_load(o.mode, o.load)}, {SHORT[o.metric]}: {o.text()}")
    lines += ["", "## Across nodes", "",
              ("Per variant and load: the nodes' values, their median, quartiles (IQR), range and "
               "coefficient of variation across nodes (cv = sd / mean)."), "",
              "| variant | load | metric | n | median | IQR | min - max | cv | outliers |",
              "|---|---|---|---|---|---|---|---|---|"]
    for c in result["cells"]:
        m = c["metric"]
        cv = "-" if c["cv"] is None else f"{c['cv'] * 100:.1f} %"
        lines.append(f"| {c['variant']} | {_load(c['mode'], c['load'])} | {METRIC_NAMES[m]} | {c['n']} | "
                     f"{_fmt(m, c['median'], False)} | {_fmt(m, c['q1'], False)}–{_fmt(m, c['q3'], False)} | "
                     f"{_fmt(m, c['min'], False)} - {_fmt(m, c['max'], False)} | {cv} | "
                     f"{', '.join(c['outliers']) or '-'} |")
    pool = result["pooled_nodes"]
    left = (f" Left out of the pool: {', '.join(result['left_out'])} (suspect nodes, above); their own runs "
            "still count among the nodes below." if result["left_out"] else "")
    lines += ["", "## Findings, pooled over the class", "",
              ("The lab's claims with each node as one repetition (one value per node per variant and load: "
              f"the node's mean), pooled over {len(pool)} nodes, so every n below counts nodes; each verdict "
              f"is judged against the smallest effect of interest, {smallest * 100:g} %. After each verdict: "
              f"how many of the {len(nodes)} nodes saw the claim hold in their own run.{left}"), ""]
    if result.get("loads"):
        lines.append("- Note: the tables above keep only load "
                     + ", ".join(f"{x:g}" for x in result["loads"]) + " (--load); the claims use every load "
                     "the nodes measured (a claim such as the queue delay's compares loads).")
    for note in result["setup_notes"]:
        lines.append(f"- Note: {note}.")
    for f in result["findings"]:
        tally = Counter(result["node_verdicts"].get(f.key, {}).values())
        own = (f"{tally['held']} of {len(nodes)} nodes saw it hold on their own"
               + "".join(f", {k}: {tally[k]}" for k in fnd.VERDICTS[1:] if tally[k]))
        lines.append(f"- **{f.claim}**: **{f.verdict}** (pooled over {len(pool)} nodes). {own}. {f.detail}")
    lines += ["", "## Box plots", "",
              ("One per metric and load: a box per variant (quartiles, whiskers to 1.5 IQR), every node a "
               "point, the outliers named."), ""]
    lines += [f"![{p.stem}](plots/{p.name})" for p in plots]
    return "\n".join(lines) + "\n"


def box_plots(result: dict[str, Any], out: Path) -> list[Path]:
    """One PNG per (metric, mode, load): a box per variant with the nodes as points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[tuple[str, str, float], list[dict[str, Any]]] = {}
    for c in result["cells"]:
        groups.setdefault((c["metric"], c["mode"], c["load"]), []).append(c)
    made = []
    for (metric, mode, load), cs in sorted(groups.items(), key=lambda kv: (METRICS.index(kv[0][0]),
                                                                           kv[0][1], kv[0][2])):
        scale = metrics.get(metric).scale
        fig, ax = plt.subplots(figsize=(max(4.0, 1.4 * len(cs) + 2), 4.2))
        data = [[v / scale for v in c["values"].values()] for c in cs]
        ax.boxplot(data, showfliers=False)
        ax.set_xticks(range(1, len(cs) + 1), [c["variant"] for c in cs], rotation=20)
        for i, c in enumerate(cs, start=1):
            names = list(c["values"])
            for j, name in enumerate(names):
                x = i + (j - (len(names) - 1) / 2) * min(0.3 / max(len(names), 1), 0.04)
                y = c["values"][name] / scale
                bad = name in c["outliers"]
                ax.plot(x, y, "o", color="tab:red" if bad else "tab:blue", alpha=0.9 if bad else 0.5,
                        markersize=5 if bad else 3)
                if bad:
                    ax.annotate(name, (x, y), textcoords="offset points", xytext=(5, 3), fontsize=8,
                                color="tab:red")
        ax.set_ylabel(METRIC_NAMES[metric])
        ax.set_title(f"{METRIC_NAMES[metric]} across nodes at {_load(mode, load)}")
        fig.tight_layout()
        path = out / "plots" / safeio.plain_name(f"box_{metric}_{mode}_{load:g}.png", f"--out {out}", "plot")
        with safeio.open_write(path, within=out, binary=True) as fh:  # never through a link
            fig.savefig(fh, dpi=100, format="png")
        plt.close(fig)
        made.append(path)
    return made


def _jsonable(result: dict[str, Any]) -> dict[str, Any]:
    def o(x: Outlier) -> dict[str, Any]:
        return {**x.__dict__, "z": None if math.isinf(x.z) else x.z}

    return {**result, "outliers": [o(x) for x in result["outliers"]],
            "suspects": [{**s, "outliers": [o(x) for x in s["outliers"]]} for s in result["suspects"]],
            "findings": [f.to_json() for f in result["findings"]]}


def write(result: dict[str, Any], out: Path) -> list[Path]:
    """class.md, class.csv, class.json and plots/box_*.png into ``out`` (replacing only those files)."""
    # check_out has refused a user's non-empty folder (without --force): only the files this command put
    # there before are removed (its list, ownedtree.OwnedFolder), a user's own files stay
    folder = ownedtree.OwnedFolder(out, force=True, option="--out")
    folder.clear()
    for name in FILES:
        folder.add(name)
    plots = box_plots(result, out)
    for p in plots:
        folder.add(p.relative_to(out).as_posix())
    folder.write_text("class.md", markdown(result, plots))
    with folder.open("class.csv", newline="") as fh:
        w = textsafe.DictWriter(fh, fieldnames=list(CSV_COLUMNS))
        w.writeheader()
        for c in result["cells"]:
            row = {k: "" if c[k] is None else c[k] for k in CSV_COLUMNS}
            w.writerow({**row, "load": f"{c['load']:g}", "outliers": ";".join(c["outliers"])})
    folder.write_text("class.json", textsafe.dumps(_jsonable(result), indent=1, default=str) + "\n")
    return [out / n for n in FILES] + plots
