"""A sharded run merged: one table of every candidate, each against its own node's reference.

A sharded run (:mod:`serve_system.experiment.shard`) measures each candidate on one host and the
reference on every host. What this module computes, from the rows alone (nothing read but the shard
record):

- **the reference per node**: each node's reference, per load and metric, with its 95 % interval;
- **the node factor**: a node's reference mean over the median of the nodes' reference means, per
  load, and their geometric mean over the loads (1.00: a typical node; 1.10: 10 % more of the metric);
- **out of line**: a node whose reference differs from most of the other nodes' (more than half of
  them) by more than the spec's smallest effect, at a load: the 95 % interval of the difference
  (Welch's t on the logs, :func:`intervals.effect`) lies wholly beyond +-smallest effect. With one
  repetition per side there is no interval: a point estimate beyond the smallest effect counts, and
  the flag is *unconfirmed*. With two nodes a gap flags both (a third node would tell which one is
  off); a majority rule, not a pooled one, so one slow node does not flag the normal ones;
- **each candidate against its node's reference** (same node, so node differences cancel), and
  **normalised**: that ratio times the median reference (the candidate as on a typical node). Its
  interval carries the candidate's and its reference's repetitions, so it is wider than the raw
  one;
- **a cross-node ranking** per objective by the normalised value; the lead of the best over the next
  compares two such ratios (four sets of repetitions when the two are on different nodes: wider still).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from .. import metrics
from ..experiment import shard as shardmod
from ..experiment.manifest import Manifest
from ..node import plans, records
from . import intervals as iv
from . import tree as res
from .cells import cell
from .row import Row, value
from .status import Status

Key = tuple[str, float]  # (mode, load)


def read(run: Path, manifest: Manifest) -> shardmod.Shard | None:
    """The run's shard: the manifest's record, else the first host plan's; None: not sharded."""
    found = shardmod.from_record(manifest.shard)
    if found is not None:
        return found
    for path in sorted(run.glob(f"*/{records.PLAN_FILE}")):
        plan = res.read_plan(path.parent)
        found = None if plan is None else shardmod.from_record(plan.shard)
        if found is not None:
            return found
    return None


def _samples(rows: list[Row], metric: str) -> dict[tuple[str, str, Key], list[float]]:
    out: dict[tuple[str, str, Key], list[float]] = {}
    for r in rows:
        if r.get("status") == Status.OK and r.get("load") is not None and r.get(metric) is not None:
            key = (str(r.get("mode") or "concurrency"), float(r["load"]))
            out.setdefault((r["host"], r["variant"], key), []).append(float(value(r, metric)))
    return out


def _mean(xs: Sequence[float]) -> float:
    return math.fsum(xs) / len(xs)


def cross_node(ref_a: Sequence[float], a: Sequence[float], ref_b: Sequence[float],
               b: Sequence[float]) -> iv.Effect:
    """B against A, each first divided by its own node's reference: ``(b / ref_b) / (a / ref_a) - 1``
    (geometric means), its 95 % interval by Welch's t on the logs of the four groups (the variances
    add, the degrees of freedom by Welch-Satterthwaite); no interval with one repetition in a group."""
    groups = [list(map(float, g)) for g in (ref_a, a, ref_b, b)]
    if not all(groups) or min(x for g in groups for x in g) <= 0:
        return iv.Effect(len(a), len(b), None, None, None, "no samples, or a sample is zero or negative")
    logs = [[math.log(x) for x in g] for g in groups]
    m = [_mean(g) for g in logs]
    d = (m[3] - m[2]) - (m[1] - m[0])
    if min(len(g) for g in logs) < 2:
        return iv.Effect(len(a), len(b), math.expm1(d), None, None, iv.ONE_REPETITION, d)
    qs = [statistics.variance(g) / len(g) for g in logs]
    se = math.sqrt(math.fsum(qs))
    if se == 0:
        return iv.Effect(len(a), len(b), math.expm1(d), math.expm1(d), math.expm1(d), None, d)
    df = math.fsum(qs) ** 2 / math.fsum(q * q / (len(g) - 1) for q, g in zip(qs, logs, strict=True))
    half = iv.t_quantile(df) * se
    # per side, a variant's spread and its reference's add (what more repetitions of both would shrink)
    var_a = statistics.variance(logs[0]) + statistics.variance(logs[1])
    var_b = statistics.variance(logs[2]) + statistics.variance(logs[3])
    return iv.Effect(len(a), len(b), math.expm1(d), math.expm1(d - half), math.expm1(d + half), None, d,
                     var_a, var_b)


@dataclass(frozen=True)
class NodeReference:
    """The reference on one node, for one metric at one load: its mean and 95 % interval, its factor
    (over the median node's reference), its difference from the median node (None on the median node)
    and from how many of the other nodes it differs by more than the smallest effect."""

    host: str
    metric: str
    mode: str
    load: float
    n: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    factor: float | None
    vs_median_node: iv.Effect | None
    differs_from: int
    others: int
    #: differs from more than half of the other nodes
    out_of_line: bool
    #: out of line, each of those differences with an interval
    confirmed: bool

    def to_json(self) -> dict[str, object]:
        return {**_fields(self), "vs_median_node": _effect_json(self.vs_median_node)}


@dataclass(frozen=True)
class Candidate:
    """A candidate on its node, for one metric at one load: its mean and 95 % interval, its effect
    against its node's reference (None where the reference was not measured there) and that as on
    the median node (``normalised``)."""

    variant: str
    host: str
    metric: str
    mode: str
    load: float
    n: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    vs_reference: iv.Effect | None
    normalised: float | None

    def to_json(self) -> dict[str, object]:
        return {**_fields(self), "vs_reference": _effect_json(self.vs_reference)}


@dataclass(frozen=True)
class View:
    """The merged view of a sharded run (see the module's text)."""

    reference: str
    hosts: list[str]
    assignment: dict[str, list[str]]
    rule: str
    smallest_effect: float
    nodes: list[NodeReference]
    #: host -> metric -> the node's factor (geometric mean over the loads)
    node_factor: dict[str, dict[str, float]]
    out_of_line: list[str]
    candidates: list[Candidate]
    #: (variant, host) of each candidate measured
    measured: list[tuple[str, str]]

    def to_json(self) -> dict[str, object]:
        """As summary.json keeps it (``shard``)."""
        return {**_fields(self), "nodes": [n.to_json() for n in self.nodes],
                "candidates": [c.to_json() for c in self.candidates],
                "measured": [{"variant": v, "host": h} for v, h in self.measured]}


def _fields(rec: NodeReference | Candidate | View) -> dict[str, object]:
    """A record's fields by name, in order (not copied)."""
    return {f.name: getattr(rec, f.name) for f in fields(rec)}


def analyse(rows: list[Row], shard: shardmod.Shard, metrics: Sequence[str], smallest: float) -> View:
    """The merged view of a sharded run (see the module's text)."""
    ref = shard.reference
    nodes: list[NodeReference] = []
    candidates: list[Candidate] = []
    medians: dict[str, dict[Key, float]] = {}
    for metric in metrics:
        data = _samples(rows, metric)
        keys = sorted({k for (_, v, k) in data if v == ref})
        medians[metric] = {}
        for k in keys:
            per = {h: data[(h, ref, k)] for h in shard.hosts if data.get((h, ref, k))}
            if not per:
                continue
            med = statistics.median(_mean(xs) for xs in per.values())
            medians[metric][k] = med
            ranked = sorted(per, key=lambda h: (_mean(per[h]), h))
            middle = ranked[(len(ranked) - 1) // 2]  # the median node (of two: the lower)
            for h, xs in per.items():
                gaps = [_gap(iv.effect(ys, xs), smallest) for h2, ys in per.items() if h2 != h]
                beyond = [g for g in gaps if g is not None]
                s = iv.summarize(xs, floor=iv.METRIC_FLOOR)
                # out of line: its reference differs by more than the smallest effect from most other nodes
                out = bool(gaps) and len(beyond) * 2 > len(gaps)
                nodes.append(NodeReference(h, metric, k[0], k[1], s.n, s.mean, s.ci_low, s.ci_high,
                                           (s.mean or 0.0) / med if med else None,
                                           iv.effect(per[middle], xs) if h != middle else None,
                                           len(beyond), len(gaps), out, out and all(beyond)))
        for host in shard.hosts:
            for c in shard.assignment[host]:
                for k in sorted({k for (h, v, k) in data if (h, v) == (host, c)}):
                    xs, rs = data[(host, c, k)], data.get((host, ref, k), [])
                    s = iv.summarize(xs, floor=iv.METRIC_FLOOR)
                    e = iv.effect(rs, xs) if rs else None
                    mid = medians[metric].get(k)
                    norm = (mid * (1 + e.change) if mid is not None and e is not None
                            and e.change is not None else None)
                    candidates.append(Candidate(c, host, metric, k[0], k[1], s.n, s.mean, s.ci_low, s.ci_high,
                                                e, norm))
    factors: dict[str, dict[str, float]] = {}
    for h in shard.hosts:
        for metric in metrics:
            fs = [n.factor for n in nodes if n.host == h and n.metric == metric and n.factor]
            if fs:
                factors.setdefault(h, {})[metric] = math.exp(_mean([math.log(f) for f in fs]))
    flagged = sorted({n.host for n in nodes if n.out_of_line})
    measured = sorted({(c.variant, c.host) for c in candidates})
    return View(ref, shard.hosts, shard.assignment, shardmod.RULE, smallest, nodes, factors, flagged,
                candidates, measured)


def _gap(e: iv.Effect, smallest: float) -> bool | None:
    """Whether two references differ by more than ``smallest``: True when the interval lies wholly beyond
    +-smallest, False (unconfirmed) when there is no interval but the estimate does; None: not beyond."""
    if e.change is None:
        return None
    if e.has_interval:
        assert e.low is not None and e.high is not None
        return True if e.low > smallest or e.high < -smallest else None
    return False if abs(e.change) > smallest else None


def _effect_json(e: iv.Effect | None) -> dict[str, object] | None:
    if e is None:
        return None
    return {"change": e.change, "low": e.low, "high": e.high, "n_reference": e.n_a, "n": e.n_b,
            "reason": e.reason}


def _effect(e: iv.Effect | None) -> str:
    return "-" if e is None or e.change is None else iv.effect_text(e)


def ranking(rows: list[Row], shard: shardmod.Shard, objective: plans.ObjectiveRecord,
            smallest: float) -> str | None:
    """One line: the best variant by an objective across nodes, each variant divided by its own node's
    reference (the reference itself: 1), and its lead over the next with its interval."""
    metric, goal = objective.metric, objective.goal
    data = _samples(rows, metric)
    ref = shard.reference
    loads = sorted({k for (_, v, k) in data if v == ref}, key=lambda k: k[1])
    at = objective.at_load
    key = next((k for k in loads if at is not None and k[1] == float(at)), loads[-1] if loads else None)
    if key is None:
        return None
    entries: list[tuple[float, str, str, list[float], list[float]]] = []
    for host in shard.hosts:
        rs = data.get((host, ref, key))
        if not rs:
            continue
        for c in [ref, *shard.assignment[host]]:
            xs = data.get((host, c, key))
            if xs and (c != ref or host == shard.hosts[0]):
                entries.append((_mean(xs) / _mean(rs), c, host, rs, xs))
    if not entries:
        return None
    entries.sort(key=lambda t: t[0], reverse=metrics.wants_higher(goal))
    name = objective.name
    ratio, best, host, rs, xs = entries[0]
    where = "every node" if best == ref else host
    line = (f"- **{name}** ({goal} {metric} at {key[0][:4]} {key[1]:g}, each variant over its node's "
            f"reference): `{best}` on {where}, {ratio:.2f} x the reference")
    if len(entries) > 1:
        _, second, host2, rs2, xs2 = entries[1]
        e = cross_node(rs2, xs2, rs, xs)
        v = iv.lead(e, goal, smallest)
        across = "across nodes" if host2 != host and ref not in (best, second) else "on one node"
        word = "a clear lead" if v.word == iv.HELD else "no clear lead" if v.word == iv.NOT_HELD \
            else iv.explain(v) or "inconclusive"
        line += f"; over `{second}` ({across}): {iv.effect_text(e)}: {word}"
    return line


def markdown(view: View, rows: list[Row], shard: shardmod.Shard,
             objectives: list[plans.ObjectiveRecord]) -> list[str]:
    """## Sharded over N nodes: the rule, the reference per node, the flags, the merged table."""
    smallest = float(view.smallest_effect)
    hosts = view.hosts
    n_c = sum(len(cs) for cs in view.assignment.values())
    lines = [f"## Sharded over {len(hosts)} nodes", "",
             (f"{n_c} candidates, each measured on one node; the reference `{view.reference}` on every "
             f"node ({view.rule}). A candidate is compared with its own node's reference (node "
             "differences cancel) and normalised to the median node (its ratio to the reference times the "
             "median reference); that interval carries the reference's repetitions too, so it is wider "
             "than the raw one. A comparison of candidates on different nodes divides each by its node's "
             "reference: four sets of repetitions, a wider interval still."), "",
             "### The reference on each node", "",
             ("Node factor: the node's reference over the median node's (geometric mean over the loads). "
             "A node is **out of line** when its reference differs from more than half of the other nodes' "
             f"by more than the smallest effect ({smallest * 100:g} %): the 95 % interval of the "
             "difference lies wholly beyond it (*unconfirmed*: one repetition, no interval, the estimate "
             "beyond it). With two nodes a gap flags both."), "",
             ("| node | metric | load | reference [95 %] | factor | vs the median node | differs from | "
             "out of line |"), "|---|---|---|---|---|---|---|---|"]
    for n in view.nodes:
        flag = ("**yes**" if n.confirmed else "unconfirmed") if n.out_of_line else ""
        vs = _effect(n.vs_median_node) if n.vs_median_node else "(the median node)"
        lines.append(f"| {n.host} | {n.metric} | {n.mode[:4]} {n.load:g} | {_ci(n)} | "
                     f"{cell(n.factor, 2)} | {vs} | {n.differs_from} of {n.others} | {flag} |")
    factors = "; ".join(f"{h}: " + ", ".join(f"{m} {f:.2f}" for m, f in fs.items())
                        for h, fs in view.node_factor.items())
    lines += ["", f"Node factors: {factors or '-'}."]
    if view.out_of_line:
        lines += ["", (f"> **Out of line:** {', '.join(view.out_of_line)}: compare its candidates through "
                      "the normalised column, or re-run them on another node.")]
    lines += ["", "### Every candidate, merged", "",
              ("| candidate | node | metric | load | measured [95 %] | vs its node's reference | "
              "normalised |"), "|---|---|---|---|---|---|---|"]
    for c in sorted(view.candidates, key=lambda c: (c.metric, c.variant, c.load)):
        lines.append(f"| {c.variant} | {c.host} | {c.metric} | {c.mode[:4]} {c.load:g} | "
                     f"{_ci(c)} | {_effect(c.vs_reference)} | {cell(c.normalised)} |")
    ranked = [r for o in objectives if (r := ranking(rows, shard, o, smallest))]
    if ranked:
        lines += ["", "### Best across nodes (normalised)", "", *ranked]
    return lines + [""]


def _ci(d: NodeReference | Candidate) -> str:
    text = cell(d.mean)
    if d.ci_low is not None:
        text += f" [{cell(d.ci_low)}, {cell(d.ci_high)}]"
    return text
