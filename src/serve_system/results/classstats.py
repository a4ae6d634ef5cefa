"""A class comparison's statistics across nodes (:mod:`.classcmp`): per cell (variant, load) and metric,
the nodes' values and their median, quartiles, range, cv and MAD, and the outliers.

**Outliers** (:func:`outliers`): a node's value is an outlier when it lies further from the
class median than :data:`OUTLIER_Z` robust standard deviations (1.4826 x the median absolute
deviation, MAD: the standard deviation a normal sample with that MAD has; the modified z-score of
Iglewicz and Hoaglin) *and* differs from the median by at least the spec's smallest effect of
interest (nodes that agree to within what matters are never named, even when the MAD is tiny).
The median and MAD ignore a single wild node, which a mean and a standard deviation do not; it
needs three nodes or more (with two, neither can be told apart from the other).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from .. import metrics
from .classnodes import Node

#: the metrics compared across nodes (one box plot each per load)
METRICS: tuple[str, ...] = metrics.select("throughput", "latency_avg_us", "p50_us", "p95_us", "p99_us")
#: robust z beyond which a node's value is an outlier (Iglewicz and Hoaglin's modified z-score)
OUTLIER_Z = 3.5
#: a MAD times this is a normal sample's standard deviation
MAD_SD = 1.4826


@dataclass
class Outlier:
    """A node's value of a cell that lies far from the class median (:func:`outliers`)."""

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


def _quartiles(xs: list[float]) -> tuple[float, float]:
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


@dataclass(frozen=True)
class CellStats:
    """One cell's node values across the nodes: n, median, quartiles, min/max, mean, cv (sd / mean; None
    with one node) and the median absolute deviation."""

    n: int
    median: float
    q1: float
    q3: float
    min: float
    max: float
    mean: float
    cv: float | None
    mad: float


def cell_stats(values: dict[str, float]) -> CellStats:
    """n, median, quartiles, min/max, mean, cv (across nodes) and MAD of one cell's node values."""
    xs = sorted(values.values())
    med = statistics.median(xs)
    q1, q3 = _quartiles(xs)
    mean = statistics.fmean(xs)
    sd = statistics.stdev(xs) if len(xs) > 1 else None
    return CellStats(n=len(xs), median=med, q1=q1, q3=q3, min=xs[0], max=xs[-1], mean=mean,
                     cv=sd / abs(mean) if sd is not None and mean else None,
                     mad=statistics.median(abs(x - med) for x in xs))


def outliers(values: dict[str, float], smallest: float) -> dict[str, float]:
    """node -> robust z of the values that are outliers (see the module's text); none below 3 nodes."""
    if len(values) < 3:
        return {}
    s = cell_stats(values)
    med, spread = s.median, MAD_SD * s.mad
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
                if (mean := m.mean(metric)) is not None:
                    c.setdefault(metric, {})[n.label] = mean
    return dict(sorted(out.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])))
