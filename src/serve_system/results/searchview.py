"""A search's measurements at its load level, as its decisions read them (:mod:`.searchrule`,
:mod:`.searchhalving`, :mod:`.searchoptuna`): one host's, or a sharded search's over all its hosts (a
candidate read relative to its host's reference)."""

from __future__ import annotations

import math
import statistics

from .. import metrics
from ..node.plans import SearchPlan
from . import intervals as iv
from .row import Row, value
from .status import Status


class SearchView:
    """The measurements of the search's candidates at its load level: one host's, or a sharded
    search's over all its hosts (each candidate on its own host, the reference on every host).

    **Sharded** (``rec.shard``): the objective's samples of a candidate on host h are read relative
    to h's reference, on the log scale: ``log x - (r_h - R)``, with ``r_h`` the mean log of the
    reference's samples on h (in the repetitions judged) and ``R`` the mean of the ``r_h`` over the
    hosts; the reference's own samples alike (so its mean is ``R``). Two candidates of one host are
    compared on their own samples (the correction cancels); a candidate against the reference on the
    candidate's host's reference samples; two candidates of different hosts A and B on corrected
    samples, with the two corrections' variance ``s**2 (1/m_A + 1/m_B)`` added (``m``: the reference's
    samples on that host). The pool is the spread within a host: every candidate's samples, and the
    reference's per host. ``split`` false: halving drops by the rule before (:mod:`.searchrule`)."""

    def __init__(self, rec: SearchPlan, rows: list[Row], split: bool = True) -> None:
        self.rec = rec
        self.split = split
        self.goal = rec.objective
        self.names = [c.name for c in rec.candidates]
        if self.goal.at_load is None:
            raise ValueError(f"search objective {self.goal.name!r}: no at_load")
        at = self.goal.at_load
        self.rows: dict[str, dict[int, Row]] = {n: {} for n in self.names}
        self.refused: dict[str, str] = {}  # never measured: why (refused by Triton, or it did not answer)
        shard = rec.shard
        self.reference: str | None = shard.reference if shard else None
        #: a sharded search: each candidate's host; the reference's rows per host
        self.home: dict[str, str] = ({c: h for h, cs in shard.assignment.items() for c in cs}
                                     if shard else {})
        self.ref_rows: dict[str, dict[int, Row]] = {h: {} for h in shard.hosts} if shard else {}
        known = set(self.names)
        for r in rows:
            name = r.get("variant")
            if not isinstance(name, str) or name not in known:
                continue
            if shard and name != self.reference and r.get("host") != self.home.get(name):
                continue  # not where the shard puts it
            if r.get("status") == Status.REFUSED:
                self.refused[name] = "Triton refused its configuration"
            elif r.get("status") == Status.UNAVAILABLE:
                why = r.get("error") or "its runtime was unavailable"
                self.refused[name] = f"not measured: {why}"
            elif r.get("load") is not None and float(r["load"]) == at and r.get("repetition") is not None:
                if name == self.reference and shard:
                    if r.get("host") in self.ref_rows:
                        self.ref_rows[r["host"]][int(r["repetition"])] = r
                else:
                    self.rows[name][int(r["repetition"])] = r

    @property
    def sharded(self) -> bool:
        return self.reference is not None

    def has(self, name: str, rep: int) -> bool:
        if name in self.refused:
            return True
        if name == self.reference and self.sharded:
            return all(rep in rs for rs in self.ref_rows.values())
        return rep in self.rows[name]

    def missing(self, name: str, rep: int) -> int:
        """The runs that measuring ``name``'s repetition ``rep`` takes (sharded, the reference: one per
        host that lacks it)."""
        if name == self.reference and self.sharded:
            return sum(rep not in rs for rs in self.ref_rows.values())
        return 0 if self.has(name, rep) else 1

    def measured(self, name: str) -> bool:
        if name == self.reference and self.sharded:
            return any(self.ref_rows.values())
        return bool(self.rows[name])

    def _rows_of(self, name: str) -> list[tuple[str | None, int, Row]]:
        """(host, repetition, row) of a candidate's measurements (the reference's on every host)."""
        if name == self.reference and self.sharded:
            return [(h, rep, r) for h, rs in self.ref_rows.items() for rep, r in sorted(rs.items())]
        return [(self.home.get(name), rep, r) for rep, r in sorted(self.rows[name].items())]

    def raw(self, name: str, reps: set[int] | None = None, metric: str | None = None,
            host: str | None = None) -> list[float]:
        """The samples as measured (``host``: the reference's on that host only)."""
        m = metric or self.goal.metric
        return [float(value(r, m)) for h, rep, r in self._rows_of(name)
                if (host is None or h == host) and (reps is None or rep in reps)
                and r.get("status") == Status.OK and value(r, m) is not None]

    def offsets(self, reps: set[int] | None) -> dict[str, float]:
        """A sharded search's correction per host, ``r_h - R`` (hosts without a reference sample: 0)."""
        if not self.sharded:
            return {}
        assert self.reference is not None
        means = {h: statistics.fmean(math.log(x) for x in xs) for h in self.ref_rows
                 if (xs := [x for x in self.raw(self.reference, reps, host=h) if x > 0])}
        grand = statistics.fmean(means.values()) if means else 0.0
        return {h: means[h] - grand if h in means else 0.0 for h in self.ref_rows}

    def samples(self, name: str, reps: set[int] | None = None, metric: str | None = None) -> list[float]:
        """The samples the search ranks by: as measured, or (sharded, the objective's metric) each
        relative to its host's reference."""
        m = metric or self.goal.metric
        if not self.sharded or m != self.goal.metric:
            return self.raw(name, reps, m)
        off = self.offsets(reps)
        return [float(value(r, m)) * math.exp(-off.get(h or "", 0.0)) for h, rep, r in self._rows_of(name)
                if (reps is None or rep in reps) and r.get("status") == Status.OK and value(r, m) is not None]

    def groups(self, reps: set[int] | None) -> dict[str, list[float]]:
        """The pool's groups: each candidate's own samples (sharded: within its host, the reference's
        per host), keyed by candidate (or ``reference@host``)."""
        out = {n: xs for n in self.names if not (self.sharded and n == self.reference)
               and (xs := self.raw(n, reps))}
        if self.sharded:
            assert self.reference is not None
            out.update({f"{self.reference}@{h}": xs for h in self.ref_rows
                        if (xs := self.raw(self.reference, reps, host=h))})
        return out

    def pair(self, a: str, b: str, reps: set[int] | None) -> tuple[list[float], list[float], float]:
        """The samples that compare A and B, and the extra variance they carry (the class text)."""
        if not self.sharded:
            return self.samples(a, reps), self.samples(b, reps), 0.0
        ha, hb = self.home.get(a), self.home.get(b)
        if a == self.reference and hb is not None:
            return self.raw(a, reps, host=hb), self.raw(b, reps), 0.0
        if b == self.reference and ha is not None:
            return self.raw(a, reps), self.raw(b, reps, host=ha), 0.0
        if ha == hb:
            return self.raw(a, reps), self.raw(b, reps), 0.0
        assert self.reference is not None and ha is not None and hb is not None
        ma, mb = (len(self.raw(self.reference, reps, host=h)) for h in (ha, hb))
        extra = (1 / ma if ma else 0.0) + (1 / mb if mb else 0.0)
        return self.samples(a, reps), self.samples(b, reps), extra

    def spent(self, names: set[str], reps: set[int] | None = None) -> tuple[int, float]:
        """(runs, measured minutes) of these candidates' measurements (of these repetitions)."""
        rs = [r for n in names for _, rep, r in self._rows_of(n) if reps is None or rep in reps]
        return len(rs), sum(float(r.get("duration_s") or 0) for r in rs) / 60

    def violated(self, name: str, reps: set[int] | None) -> str | None:
        """A constraint the candidate decidedly breaks: the metric's 95 % interval beyond the bound."""
        for metric, bound in self.goal.constraints.items():
            s = iv.summarize(self.raw(name, reps, metric), floor=iv.METRIC_FLOOR)
            if s.ci_low is None or s.ci_high is None:
                continue
            if bound.max is not None and s.ci_low > bound.max:
                return f"{metric} [{s.ci_low:,.1f}, {s.ci_high:,.1f}] lies above its max {bound.max:g}"
            if bound.min is not None and s.ci_high < bound.min:
                return f"{metric} [{s.ci_low:,.1f}, {s.ci_high:,.1f}] lies below its min {bound.min:g}"
        return None


def best_first(view: SearchView, names: list[str], reps: set[int] | None) -> list[str]:
    """Names with measurements, best mean first (ties in plan order)."""
    means = {n: statistics.fmean(xs) for n in names if (xs := view.samples(n, reps))}
    sign = -metrics.sign(metrics.goal_direction(view.goal.goal))  # best first
    return sorted(means, key=lambda n: (sign * means[n], view.names.index(n)))
