"""Why: the true reason of every claim not measurable here, every level that failed and every variant
that ran otherwise than its spec says, derived from the run's records. Each reason's text is defined
here, once.

A claim that could not be judged gets the first of these causes that applies, in this order:

1. :func:`nothing_measured`: no level of the run was measured;
2. :func:`absent`: the variants the claim needs are not in the spec as run;
3. :func:`failed`: they were run and every level failed, or Triton refused them (each with the
   failure's own reason: killed at the memory cap with its peak, the time cap, Triton's error);
4. :func:`shimmed`: they ran, but another backend served them (the ONNX shim: Triton's Python
   backend running onnxruntime, where Triton has no onnxruntime backend);
5. :func:`adapted`: they ran adapted to the host (GPU instances moved to CPU, GPU ids folded);
6. what differed: they ran, but at no common load, batch or instance count (:func:`apart`).

:func:`why` walks the first five for a claim's :class:`Need`\\ s; the claim gives the sixth, which only
it can tell. :func:`level_failure` and :func:`note` are the reasons the report's ``## Not measured``
and ``## Adapted to the host`` give. :func:`counted` and :func:`set_aside` are the rows a
``repetitions: auto`` run judges: a level measured under contention is left out, or kept as
:data:`CONTENDED` so that a claim left without data says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..node import plans
from .row import Row
from .setups import Setup, is_shim
from .status import Status

#: the ``serve_system_served_by`` parameter's value that the renderer sets for the ONNX shim
#: what the ONNX shim is, in the reasons' words
SHIM = "the serve-system ONNX shim (Triton's Python backend running onnxruntime)"
#: how many variants or levels a reason names before it counts the rest
NAMED = 4


@dataclass(frozen=True)
class Need:
    """One kind of variant a claim compares: ``what`` it is in words, whether the spec planned a
    variant as one (``planned``: before the shim and the host's adaptation) and whether it really ran as
    one (``ran``)."""

    what: str
    planned: Callable[[Setup], bool]
    ran: Callable[[Setup], bool] | None = None

    def ran_as(self, s: Setup) -> bool:
        return (self.ran or self.planned)(s)


def _names(variants: Iterable[str]) -> str:
    vs = list(dict.fromkeys(variants))
    shown = ", ".join(f"`{v}`" for v in vs[:NAMED])
    return shown + (f" and {len(vs) - NAMED} more" if len(vs) > NAMED else "")


#: the status :func:`set_aside` gives a level measured under contention
CONTENDED = Status.CONTENDED
#: why such a level is not counted (its cause: the row's ``contention``, in summary.csv)
CONTENDED_WHY = "measured under contention, not counted (the cause: `contention` in summary.csv)"


def counted(rows: list[Row]) -> list[Row]:
    """The rows a ``repetitions: auto`` run judges: those of levels not measured under contention
    (the runner's ``contention``: :func:`serve_system.node.records.contention_cause`); auto
    measures such a level again instead (:mod:`.adaptive`)."""
    return [r for r in rows if not r.get("contention")]


def set_aside(rows: list[Row]) -> list[Row]:
    """The rows a ``repetitions: auto`` run's report judges: as :func:`counted`, with each level
    measured under contention kept as a row of status :data:`CONTENDED` (no claim reads it; a claim
    left without data says that contention is why, not that nothing was measured)."""
    # the cause (which processes, how much) stays in the row's ``contention``, summary.csv's column:
    # the report says it once, not under every claim that lacks the level
    return [_contended(r) if r.get("contention") and r.get("status") == Status.OK else r for r in rows]


def _contended(row: Row) -> Row:
    """``row`` as a level measured under contention: its status :data:`CONTENDED`, and why."""
    out = row.copy()
    out["status"], out["error"] = Status.CONTENDED, CONTENDED_WHY
    return out


def _hosts(setups: Iterable[Setup]) -> set[str]:
    return {s.host for s in setups}


def _where(s: Setup, many_hosts: bool) -> str:
    return f"`{s.variant}` on {s.host}" if many_hosts else f"`{s.variant}`"


def measured(rows: list[Row]) -> set[tuple[str, str]]:
    """(host, variant) pairs with at least one level measured ok."""
    return {(r["host"], r["variant"]) for r in rows
            if r.get("status") == Status.OK and r.get("load") is not None}


# -- 1. nothing measured -------------------------------------------------------------------------


def nothing_measured(rows: list[Row]) -> str:
    """No level of the run was measured ok: why, from its first failed level or refused variant."""
    bad = [r for r in rows if r.get("status") != Status.OK]
    if not bad:
        return "Nothing was measured in this run: no level has a record."
    if all(r.get("status") == Status.CONTENDED for r in bad):
        return (f"Nothing counts in this run: all {len(bad)} level(s) were measured under contention "
                f"(other work took the node's CPU), e.g. `{bad[0]['variant']}`: {row_failure(bad[0])}; "
                "re-run it on a quiet node.")
    return (f"Nothing was measured in this run: all {len(bad)} level(s) or variant(s) failed, e.g. "
            f"`{bad[0]['variant']}`: {row_failure(bad[0])}.")


# -- 2. not in the spec --------------------------------------------------------------------------


def absent(need: Need, setups: dict[tuple[str, str], Setup]) -> str:
    """The spec as run has no variant of the kind a claim needs."""
    have = sorted({s.variant for s in setups.values()})
    return (f"The spec as run has no {need.what}"
            + (f" (its variants: {_names(have)})" if have else "") + ".")


# -- 3. run and failed ---------------------------------------------------------------------------


def peak_mb(row: Row) -> float | None:
    """A failed level's peak resident memory of the measuring command (MB), where recorded."""
    v = row.get("peak_rss_mb")
    return None if v is None else float(v)


def row_failure(row: Row) -> str:
    """A failed level's or unmeasured variant's own reason, as its record says, with perf_analyzer's
    peak resident memory where it was killed and the reason does not say it already."""
    status = row.get("status")
    error = str(row.get("error") or "").strip()
    if status == Status.REFUSED:
        return f"Triton refused its configuration: {error or 'no error recorded'}"
    if status == Status.UNAVAILABLE:
        return f"its runtime was unavailable: {error or 'no error recorded'}"
    text = error or "the level failed, with no reason recorded"
    peak = peak_mb(row)
    if peak is not None and "killed" in text and "resident" not in text:
        text += f", at a peak of {peak:.0f} MB resident"
    return text


def level_failure(row: Row) -> str:
    """The report's ``## Not measured`` line for a failed level or an unmeasured variant."""
    load = row.get("load")
    where = f"{row['host']} / {row['variant']}"
    if load is not None:
        where += f" @ {(row.get('mode') or 'concurrency').replace('_', ' ')} {float(load):g}"
        if row.get("repetition"):
            where += f" (repetition {row['repetition']})"
    return f"{where}: {row.get('status')}: {row_failure(row)}"


def failed(candidates: list[Setup], rows: list[Row], lead: str = "Run but not measured") -> str:
    """Variants a claim needs that were run and measured nothing: each with its failures' reasons."""
    many = len(_hosts(candidates)) > 1
    parts = []
    for s in candidates:
        mine = [r for r in rows if (r["host"], r["variant"]) == (s.host, s.variant)]
        if not mine:
            parts.append(f"{_where(s, many)} has no record of any level")
            continue
        if len(mine) == 1 and mine[0].get("load") is None:
            parts.append(f"{_where(s, many)}: {row_failure(mine[0])}")
            continue
        why = list(dict.fromkeys(row_failure(r) for r in mine))
        word = "was not counted" if all(r.get("status") == Status.CONTENDED for r in mine) else "failed"
        parts.append(f"{_where(s, many)} {word} at all {len(mine)} level(s): " + "; ".join(why[:2])
                     + (f" (and {len(why) - 2} other reason(s))" if len(why) > 2 else ""))
    return f"{lead}: " + "; ".join(parts) + "."


# -- 4. served by another backend ----------------------------------------------------------------


def shimmed(need: Need, variants: list[Setup]) -> str:
    """Variants planned as a needed kind that another backend really served."""
    why = sorted({(s.served_by or "").partition(":")[2].strip() for s in variants} - {""})
    verb = "was" if len(variants) == 1 else "were"
    return (f"{_names(s.variant for s in variants)} {verb} served by {SHIM}, not by Triton's onnxruntime "
            "backend" + (f" ({'; '.join(why)})" if why else "") + f": no {need.what} was measured.")


# -- 5. adapted to the host ----------------------------------------------------------------------


def adapted(need: Need, variants: list[Setup]) -> str:
    """Variants planned as a needed kind that ran otherwise, adapted to the host."""
    parts = [f"`{s.variant}` on {s.host}: " + "; ".join(s.adapted) for s in variants]
    return (f"Adapted to the host, so no {need.what} ran as planned: " + "; ".join(parts) + ".")


def adaptation(s: Setup) -> str:
    """`` (adapted: ...)`` after a variant a reason names, where the host changed its configuration."""
    return f" (adapted: {'; '.join(s.adapted)})" if s.adapted else ""


# -- 6. what differed ----------------------------------------------------------------------------


def loads_text(loads: Iterable[tuple[str, float]]) -> str:
    """``concurrency 1, 8, 16`` (by mode)."""
    by: dict[str, list[float]] = {}
    for mode, load in sorted(set(loads)):
        by.setdefault(mode, []).append(load)
    if not by:
        return "no level measured"
    return "; ".join(f"{mode.replace('_', ' ')} {', '.join(f'{x:g}' for x in xs)}" for mode, xs in by.items())


def differences(a: Setup, b: Setup, loads_a: set[tuple[str, float]] | None = None,
                loads_b: set[tuple[str, float]] | None = None, *, configs: bool = False) -> list[str]:
    """What differed between two variants a claim would compare: instance count and kind, dynamic
    batching, client batch, arrivals, host, (``configs``) the rest of the configuration, and the loads
    when none is common."""
    out = []
    if a.host != b.host:
        out.append(f"host {a.host} vs {b.host}")
    if (a.instances, a.instance_kind) != (b.instances, b.instance_kind):
        out.append(f"instances {a.instances}x {a.instance_kind}{adaptation(a)} vs "
                   f"{b.instances}x {b.instance_kind}{adaptation(b)}")
    if a.dynamic_batching != b.dynamic_batching:
        out.append("dynamic batching " + " vs ".join("on" if s.dynamic_batching else "off" for s in (a, b)))
    if a.batch_size != b.batch_size:
        out.append(f"client batch {a.batch_size} vs {b.batch_size}")
    if a.distribution != b.distribution:
        out.append(f"arrivals {a.distribution} vs {b.distribution}")
    if configs and a.rest != b.rest:
        out.append("the rest of the configuration")
    if loads_a is not None and loads_b is not None and not loads_a & loads_b:
        out.append(f"loads {loads_text(loads_a)} vs {loads_text(loads_b)}, none in common")
    return out


def failed_at(rows: list[Row], host: str, variant: str) -> str:
    """`` (failed at concurrency 8: reason)`` for a measured variant's levels that failed (or were
    measured under contention: ``not counted at``); empty if none."""
    bad = [r for r in rows if (r["host"], r["variant"]) == (host, variant) and r.get("status") != Status.OK
           and r.get("load") is not None]
    if not bad:
        return ""
    where = loads_text((r.get("mode") or "concurrency", float(r["load"])) for r in bad)
    word = "not counted" if all(r.get("status") == Status.CONTENDED for r in bad) else "failed"
    return f" ({word} at {where}: {row_failure(bad[0])})"


def single_levels(variants: list[tuple[Setup, set[tuple[str, float]], str]], what: str) -> str:
    """Variants of the needed kind, each measured at too few loads (with why: a failed level, ...)."""
    many = len(_hosts(s for s, _, _ in variants)) > 1
    return (f"No {what}: " + "; ".join(f"{_where(s, many)} at {loads_text(ls)} only{extra}"
                                       for s, ls, extra in variants[:NAMED])
            + (f" (and {len(variants) - NAMED} more)" if len(variants) > NAMED else "") + ".")


def no_metric(metric: str, variants: list[Setup], because: str) -> str:
    """Variants measured at the loads a claim compares, without the metric it needs."""
    return f"{_names(s.variant for s in variants)}: no {metric} recorded ({because})."


def closest(pairs: list[tuple[Setup, Setup, list[str]]]) -> list[tuple[Setup, Setup, list[str]]]:
    """The pairs with the fewest differences (the ones a reason names)."""
    fewest = min((len(d) for _, _, d in pairs), default=0)
    return [p for p in pairs if len(p[2]) == fewest]


def not_alike(pairs: list[tuple[Setup, Setup, list[str]]], by: str) -> str:
    """No two variants differ only by ``by``: what else differed, for the closest pairs."""
    pairs = closest(pairs)
    return (f"No two variants differ only by {by}: "
            + "; ".join(f"`{a.variant}` vs `{b.variant}`: {', '.join(d)}" for a, b, d in pairs[:NAMED]) + ".")


def no_common_load(pairs: list[tuple[Setup, set[tuple[str, float]], Setup, set[tuple[str, float]]]],
                   rows: list[Row]) -> str:
    """Each pair's loads, where two variants that differ only as a claim needs share none (with
    their failed levels)."""
    return "; ".join(f"`{a.variant}` at {loads_text(la)}{failed_at(rows, a.host, a.variant)} vs "
                     f"`{b.variant}` at {loads_text(lb)}{failed_at(rows, b.host, b.variant)}, none in common"
                     for a, la, b, lb in pairs[:NAMED])


def apart(pairs: list[tuple[Setup, Setup, list[str]]], what: str) -> str:
    """Variants of the needed kinds that were measured, but never at comparable settings: what
    differed, for the closest pairs."""
    pairs = closest(pairs)
    many = len(_hosts(s for a, b, _ in pairs for s in (a, b))) > 1
    shown = [f"{_where(a, many)} vs {_where(b, many)}: {', '.join(d)}" for a, b, d in pairs[:NAMED] if d]
    more = f" (and {len(pairs) - NAMED} more pair(s))" if len(pairs) > NAMED else ""
    return (f"No {what} were measured at a common load, batch and instance count"
            + (": " + "; ".join(shown) + more if shown else "") + ".")


def unqualified(objective: plans.ObjectiveRecord, rows: list[Row], qualified: set[str]) -> str:
    """`` (`b`: why)`` for each variant of the run that does not qualify for an objective: failed at its
    load (the failure's reason), not measured at its load (where it was), without its metric, or
    outside its constraints."""
    at, metric, cons = objective.at_load, objective.metric, objective.constraints
    parts = []
    for v in dict.fromkeys(r["variant"] for r in rows if r["variant"] not in qualified):
        mine = [r for r in rows if r["variant"] == v and r.get("load") is not None]
        there = [r for r in mine if at is None or float(r["load"]) == float(at)]
        ok = [r for r in there if r.get("status") == Status.OK]
        if not mine:
            bad = next(r for r in rows if r["variant"] == v)
            parts.append(f"`{v}`: {row_failure(bad)}")
        elif not there and at is not None:
            parts.append(f"`{v}`: not measured at load {float(at):g} (only at "
                         f"{loads_text((r.get('mode') or 'concurrency', float(r['load'])) for r in mine)})")
        elif not ok:
            where = f" at load {float(at):g}" if at is not None else ""
            word = "not counted" if all(r.get("status") == Status.CONTENDED for r in there) else "failed"
            parts.append(f"`{v}`: {word}{where}: {row_failure(there[0])}")
        elif not any(r.get(metric) is not None for r in ok):
            parts.append(f"`{v}`: no {metric} recorded")
        elif cons:
            parts.append(f"`{v}`: outside the constraints")
    shown = parts[:NAMED] + ([f"{len(parts) - NAMED} more"] if len(parts) > NAMED else [])
    return f" ({'; '.join(shown)})" if shown else ""


# -- the walk ------------------------------------------------------------------------------------


def why(needs: list[Need], setups: dict[tuple[str, str], Setup], rows: list[Row]) -> str | None:
    """The first of causes 1-5 that applies to a claim needing one variant of each of ``needs``;
    None when every need was measured as planned (the claim says what differed)."""
    ok = measured(rows)
    if not ok:
        return nothing_measured(rows)
    for need in needs:
        if not any(need.planned(s) for s in setups.values()):
            return absent(need, setups)
    for need in needs:
        planned = [s for s in setups.values() if need.planned(s)]
        if not any((s.host, s.variant) in ok for s in planned):
            return failed(planned, rows)
    for need in needs:
        planned = [s for s in setups.values() if need.planned(s) and (s.host, s.variant) in ok]
        if any(need.ran_as(s) for s in planned):
            continue
        shims = [s for s in planned if is_shim(s.served_by)]
        if shims:
            return shimmed(need, shims)
        moved = [s for s in planned if s.adapted]
        if moved:
            return adapted(need, moved)
    return None


# -- the report's notes --------------------------------------------------------------------------


def note(text: str) -> str:
    """A variant's note of how it ran, as the report's ``## Adapted to the host`` gives it."""
    served = text.removeprefix("served by: ")
    if served != text and is_shim(served):
        why_ = served.partition(":")[2].strip()
        return f"served by {SHIM}, not by Triton's onnxruntime backend" + (f" ({why_})" if why_ else "")
    return text
