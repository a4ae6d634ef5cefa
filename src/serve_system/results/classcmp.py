"""A whole class's runs in one comparison: ``serve-system compare --class RUN_DIR...``.

After a class session every student's node has measured the same experiment. The input is one or
more raw run folders (``results/<experiment>/<run-id>``, read with :func:`tree.collect`, so nothing
needs to be reported first); each (run, host) pair is one **node**. A node is named by its host,
or ``<run-id>/<host>`` where the same host name appears in several runs.

- **Per cell** (variant, load) and metric: one value per node, the node's mean over its ok
  repetitions; across the nodes: n, median, the quartiles (IQR), min/max, and the coefficient of
  variation (sd / mean across nodes). One box plot per metric and load, a box per variant, every
  node drawn as a point and the outliers named.
- **Outliers** (:mod:`.classstats`): a node's value far from the class median (a robust z) that
  differs from it by at least the smallest effect of interest.
- **Suspect nodes**: a node that is an outlier (in any metric) in more than half of the variants
  it measured is named once, with its numbers.
- **Pooled findings**: the lab's claims (:func:`findings.evaluate`) with each node as one
  repetition: one value per node per (variant, load), the node's mean, so the intervals and n
  count nodes; beside each verdict, how many nodes saw the claim hold on their own run. Suspect
  nodes are left out of the pool (a node with a faulty GPU is not a repetition of the lab's
  hardware; its spread would only widen every interval), and the report says so; their own
  verdicts still count in the tally.

The parts: :mod:`.classnodes` (the input), :mod:`.classstats` (across nodes, outliers), this module
(the comparison), :mod:`.classmd` (class.md), :mod:`.classplots` (the box plots), :mod:`.classwrite`
(the output folder).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ServeSystemError
from ..experiment.manifest import Manifest
from . import findings as fnd
from .claim import Finding
from .classnodes import Node, read_nodes
from .classstats import CellStats, Outlier, cell_stats, cells, outliers
from .row import Row, put
from .setups import VariantSetup
from .status import Status

#: the host name the pooled findings speak of
POOL = "all nodes"


@dataclass(frozen=True)
class NodeRef:
    """A node as the class report names it: its label, host, run id and run folder."""

    node: str
    host: str
    run_id: str
    run: str


@dataclass(frozen=True)
class Cell:
    """One (variant, load) and metric across the nodes: its statistics (:class:`CellStats`), the
    outlying nodes and every node's value (a row of class.csv; class.json keeps the fields in this
    order)."""

    variant: str
    mode: str
    load: float
    metric: str
    n: int
    median: float
    q1: float
    q3: float
    min: float
    max: float
    mean: float
    cv: float | None
    mad: float
    outliers: list[str]
    values: dict[str, float]

    @classmethod
    def of(cls, variant: str, mode: str, load: float, metric: str, s: CellStats, outliers: list[str],
           values: dict[str, float]) -> Cell:
        return cls(variant, mode, load, metric, **dataclasses.asdict(s), outliers=outliers, values=values)


@dataclass(frozen=True)
class Suspect:
    """A node that is an outlier in more than half of the variants it measured."""

    node: str
    variants: int
    outlying_variants: list[str]
    outliers: list[Outlier]


@dataclass
class ClassResult:
    """The whole class comparison (:func:`compare_class`)."""

    experiment: str | None
    smallest_effect: float
    loads: list[float] | None
    nodes: list[NodeRef]
    cells: list[Cell]
    outliers: list[Outlier]
    suspects: list[Suspect]
    findings: list[Finding]
    pooled_nodes: list[str]
    left_out: list[str]
    #: claim key -> node label -> the verdict of the node's own run
    node_verdicts: dict[str, dict[str, str]]
    setup_notes: list[str]


def compare_class(run_dirs: list[Path], loads: list[float] | None = None,
                  partial: bool = False) -> ClassResult:
    """The whole class comparison (nothing written): nodes, per-cell statistics and outliers,
    suspect nodes, pooled findings with the per-node tallies."""
    nodes, manifest = read_nodes(run_dirs, partial)
    smallest = float(manifest.smallest_effect)
    table = cells(nodes, loads)
    if not table:
        raise ServeSystemError(f"--load {', '.join(f'{x:g}' for x in loads or [])}: no node measured this "
                               "load; leave --load out or give a load the runs measured")
    stats_rows: list[Cell] = []
    found: list[Outlier] = []
    for (v, mode, load), by_metric in table.items():
        for metric, values in by_metric.items():
            s = cell_stats(values)
            out = outliers(values, smallest)
            for node, z in out.items():
                found.append(Outlier(node, v, mode, load, metric, values[node], s.median, s.q1, s.q3, z))
            stats_rows.append(Cell.of(v, mode, load, metric, s, sorted(out), values))
    suspects = _suspects(nodes, table, found)
    left_out = [s.node for s in suspects]
    pool = [n for n in nodes if n.label not in left_out]
    if len(pool) < 2:  # a class of suspects: pool them all rather than nothing
        pool, left_out = nodes, []
    pooled, _ = pooled_findings(pool, manifest)
    _, per_node = pooled_findings(nodes, manifest, pooled=False)
    return ClassResult(experiment=manifest.experiment, smallest_effect=smallest, loads=loads or None,
                       nodes=[NodeRef(n.label, n.host, n.run_id, str(n.run)) for n in nodes],
                       cells=stats_rows, outliers=found, suspects=suspects, findings=pooled,
                       pooled_nodes=[n.label for n in pool], left_out=left_out, node_verdicts=per_node,
                       setup_notes=_setup_notes(nodes))


def _suspects(nodes: list[Node], table: dict[tuple[str, str, float], dict[str, dict[str, float]]],
              found: list[Outlier]) -> list[Suspect]:
    """Nodes that are outliers in more than half of the variants they measured."""
    out = []
    for n in nodes:
        measured = sorted({v for (v, _, _), c in table.items()
                           if any(n.label in vals for vals in c.values())})
        flagged = sorted({o.variant for o in found if o.node == n.label})
        if measured and len(flagged) * 2 > len(measured):
            out.append(Suspect(n.label, len(measured), flagged, [o for o in found if o.node == n.label]))
    return out


def _setup_notes(nodes: list[Node]) -> list[str]:
    """Variants whose configuration differs between nodes (the pooled findings use the first's)."""
    notes = []
    first: dict[str, tuple[str, Any]] = {}
    for n in nodes:
        for (_, v), s in sorted(n.setups.items()):
            what = (s.config_pbtxt, s.runtime, s.distribution, s.batch_size)
            if v not in first:
                first[v] = (n.label, what)
            elif first[v][1] != what:
                notes.append(f"`{v}` was set up differently on {n.label} than on {first[v][0]}; the pooled "
                             f"findings use {first[v][0]}'s set-up")
    return notes


def pooled_findings(nodes: list[Node], manifest: Manifest, pooled: bool = True
                    ) -> tuple[list[Finding], dict[str, dict[str, str]]]:
    """The lab's claims with each node as a repetition (none without ``pooled``); and claim key ->
    node label -> the verdict of the node's own run."""
    objectives, smallest = manifest.objectives, float(manifest.smallest_effect)
    rows: list[Row] = []
    setups: dict[tuple[str, str], VariantSetup] = {}
    for i, n in enumerate(nodes, start=1):
        for (v, mode, load), m in sorted(n.means.items()):
            row: Row = {"experiment": manifest.experiment or "", "run_id": "class", "host": POOL,
                        "variant": v, "mode": mode, "load": load, "repetition": i, "status": Status.OK,
                        "node": n.label}
            put(row, {k: m.mean(k) for k in fnd.METRICS})
            rows.append(row)
        for (_, v), s in sorted(n.setups.items()):
            setups.setdefault((POOL, v), s)
    found = fnd.evaluate(rows, setups, objectives, smallest) if pooled else []
    per_node: dict[str, dict[str, str]] = {}
    for n in nodes:
        for f in fnd.evaluate(n.rows, n.setups, objectives, smallest):
            per_node.setdefault(f.key, {})[n.label] = f.verdict
    return found, per_node
