"""A class comparison's class.md (:mod:`.classcmp`): suspect nodes, outliers, the table across nodes,
the pooled findings and the box plots' links; the labels and number formats the box plots share."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from .. import metrics
from . import findings as fnd
from .classcmp import ClassResult
from .classstats import MAD_SD, METRICS, OUTLIER_Z, Outlier


def fmt(metric: str, v: float, unit: bool = True) -> str:
    m = metrics.get(metric)
    if m.is_time:
        return f"{m.show(v):.2f}" + (f" {m.shown}" if unit else "")
    return f"{v:,.1f}" + (m.unit if unit else "")


def load_text(mode: str, load: float) -> str:
    return f"{'concurrency' if mode == 'concurrency' else mode.replace('_', ' ')} {load:g}"


SHORT = {m: metrics.get(m).short for m in METRICS}
METRIC_NAMES = {m: metrics.get(m).axis for m in METRICS}


def outlier_text(o: Outlier) -> str:
    """An outlier in words: its value beside the class median and quartiles."""
    m = o.metric
    return (f"{o.node}: {fmt(m, o.value)} vs class median {fmt(m, o.median)} "
            f"[IQR {fmt(m, o.q1, unit=False)}–{fmt(m, o.q3, unit=False)}]")


def markdown(result: ClassResult, plots: list[Path]) -> str:
    """class.md: the nodes, suspect nodes, outliers, the table across nodes, the pooled findings and the
    box plots' links."""
    nodes = result.nodes
    smallest = result.smallest_effect
    lines = [f"# Class comparison: {result.experiment}", "",
             f"{len(nodes)} nodes: " + ", ".join(f"{n.node} ({n.run})" for n in nodes) + ".", "",
             ("Each node's value at a variant and load is the mean over its ok repetitions; the class's "
             "numbers are taken across the nodes."), ""]
    lines += ["## Suspect nodes", "",
              "A node that is an outlier (in any metric) in more than half of the variants it measured.", ""]
    if result.suspects:
        for s in result.suspects:
            first = s.outliers[0]
            lines.append(f"- **{s.node}**: outlier in {len(s.outlying_variants)} of {s.variants} "
                         f"variants ({', '.join(f'`{v}`' for v in s.outlying_variants)}); "
                         f"e.g. `{first.variant}` at {load_text(first.mode, first.load)}, "
                         f"{SHORT[first.metric]}: {outlier_text(first)}. All "
                         f"{len(s.outliers)} outlying values: "
                         + "; ".join(f"`{o.variant}` {load_text(o.mode, o.load)} {SHORT[o.metric]} "
                                     f"{fmt(o.metric, o.value)}" for o in s.outliers) + ".")
    else:
        lines.append("None.")
    suspect = {s.node for s in result.suspects}
    rest = [o for o in result.outliers if o.node not in suspect]
    lines += ["", "## Outliers", "",
              (f"Rule: a node's value is an outlier when it lies more than {OUTLIER_Z:g} robust standard "
              f"deviations ({MAD_SD} x MAD, the median absolute deviation across the nodes) from the class "
              "median and differs from it by at least the smallest effect of interest, "
              f"{smallest * 100:g} %. Needs three nodes or more."), ""]
    if not result.outliers:
        lines.append("None.")
    elif not rest:
        lines.append("Only the suspect nodes' values, listed above.")
    for o in rest:
        lines.append(f"- `{o.variant}` at {load_text(o.mode, o.load)}, {SHORT[o.metric]}: {outlier_text(o)}")
    lines += ["", "## Across nodes", "",
              ("Per variant and load: the nodes' values, their median, quartiles (IQR), range and "
               "coefficient of variation across nodes (cv = sd / mean)."), "",
              "| variant | load | metric | n | median | IQR | min - max | cv | outliers |",
              "|---|---|---|---|---|---|---|---|---|"]
    for c in result.cells:
        m = c.metric
        cv = "-" if c.cv is None else f"{c.cv * 100:.1f} %"
        lines.append(f"| {c.variant} | {load_text(c.mode, c.load)} | {METRIC_NAMES[m]} | {c.n} | "
                     f"{fmt(m, c.median, False)} | {fmt(m, c.q1, False)}–{fmt(m, c.q3, False)} | "
                     f"{fmt(m, c.min, False)} - {fmt(m, c.max, False)} | {cv} | "
                     f"{', '.join(c.outliers) or '-'} |")
    pool = result.pooled_nodes
    left = (f" Left out of the pool: {', '.join(result.left_out)} (suspect nodes, above); their own runs "
            "still count among the nodes below." if result.left_out else "")
    lines += ["", "## Findings, pooled over the class", "",
              ("The lab's claims with each node as one repetition (one value per node per variant and load: "
              f"the node's mean), pooled over {len(pool)} nodes, so every n below counts nodes; each verdict "
              f"is judged against the smallest effect of interest, {smallest * 100:g} %. After each verdict: "
              f"how many of the {len(nodes)} nodes saw the claim hold in their own run.{left}"), ""]
    if result.loads:
        lines.append("- Note: the tables above keep only load "
                     + ", ".join(f"{x:g}" for x in result.loads) + " (--load); the claims use every load "
                     "the nodes measured (a claim such as the queue delay's compares loads).")
    for note in result.setup_notes:
        lines.append(f"- Note: {note}.")
    for f in result.findings:
        tally = Counter(result.node_verdicts.get(f.key, {}).values())
        own = (f"{tally['held']} of {len(nodes)} nodes saw it hold on their own"
               + "".join(f", {k}: {tally[k]}" for k in fnd.VERDICTS[1:] if tally[k]))
        lines.append(f"- **{f.claim}**: **{f.verdict}** (pooled over {len(pool)} nodes). {own}. {f.detail}")
    lines += ["", "## Box plots", "",
              ("One per metric and load: a box per variant (quartiles, whiskers to 1.5 IQR), every node a "
               "point, the outliers named."), ""]
    lines += [f"![{p.stem}](plots/{p.name})" for p in plots]
    return "\n".join(lines) + "\n"
