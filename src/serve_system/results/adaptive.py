"""``repetitions: auto``: whether one host's run needs another repetition, and of which variants.

After the first repetitions (every variant, :data:`~..experiment.spec.models.AUTO_START` of them), the
``experiment`` role asks :func:`next_round` (``serve-system decide``) after each runner call: the
findings are judged on everything measured so far, and the variants of every comparison still
*inconclusive* get one more repetition, in the plan's next round and its order. It stops when every
claim is decided (held, did not hold, or not measurable here), or the budget is spent: the plan's
last round, or the measured minutes (the levels' own time, ``budget.minutes``). Each look judges the
claims with the repeated intervals of :mod:`.sequential` (the error spent over the planned looks, so
that stopping at the first look where all is decided keeps each claim's error at 5 %). A level the
runner measured under contention (:class:`~serve_system.experiment.records.Contention`) is not
counted: its variant gets another repetition in its place while its load has fewer than ``start``
uncontended ones, within the same budget.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ServeSystemError
from ..experiment import records, search
from . import findings as fnd
from . import sequential, tree
from .report import read_manifest


def undecided_variants(found: list[fnd.Finding]) -> set[str]:
    """The variants of the comparisons that are still inconclusive."""
    out: set[str] = set()
    for f in found:
        for ev in f.evidence:
            if ev.get("verdict") != fnd.INCONCLUSIVE:
                continue
            for key in ("variant", "without", "with", "constant", "poisson", "python", "onnx"):
                if isinstance(ev.get(key), str):
                    out.add(ev[key])
            for key in ("best", "next"):
                if isinstance(ev.get(key), dict) and isinstance(ev[key].get("variant"), str):
                    out.add(ev[key]["variant"])
            out.update(p["variant"] for p in ev.get("points") or [] if isinstance(p.get("variant"), str))
    return out


def contended(rows: list[dict[str, Any]], start: int) -> set[str]:
    """The variants with a level measured under contention whose load has fewer than ``start``
    repetitions that were not: each gets another repetition (within the budget) in its place."""
    clean: dict[tuple[str, Any, Any], int] = {}
    hit: set[tuple[str, Any, Any]] = set()
    for r in rows:
        key = (r["variant"], r.get("mode"), r.get("load"))
        if r.get("contention"):
            hit.add(key)
        else:
            clean[key] = clean.get(key, 0) + 1
    return {k[0] for k in hit if clean.get(k, 0) < start}


def next_round(run_dir: Path, host: str) -> dict[str, Any]:
    """The host's next runner call, or why there is none.

    Returns ``{"decided": bool, "text": what the role prints, "batch": a batch like ``plan --role``'s
    (None when decided)}``. The fetched archives are put into the results first.
    """
    try:
        records.collect_run(run_dir)
        hplan = records.read(run_dir / host / "plan.json", records.HostPlan)
    except records.RecordError as exc:
        raise ServeSystemError(str(exc)) from None
    if hplan.search:
        return search_round(run_dir, hplan)
    if not hplan.adaptive:
        return {"decided": True, "text": f"{host}: every planned repetition is measured", "batch": None}
    manifest = read_manifest(run_dir)
    every = [r for r in tree.collect(run_dir) if r["host"] == host]
    rows = fnd.counted(every)  # a level measured under contention does not count: it is measured again
    setups = {k: v for k, v in tree.variant_setups(run_dir).items() if k[0] == host}
    redo = contended(every, int(hplan.adaptive.get("start") or 1)) & {v.name for v in hplan.variants}
    found = fnd.evaluate(rows, setups, manifest["objectives"], manifest["smallest_effect"],
                         sequential.looks_of(hplan.adaptive))
    open_claims = [f.key for f in found if f.verdict == fnd.INCONCLUSIVE]
    undecided = undecided_variants(found) & {v.name for v in hplan.variants} if open_claims else set()
    undecided |= redo
    if hplan.adaptive.get("only"):  # -e variants: repetitions only of those
        undecided &= set(hplan.adaptive["only"])
    if not undecided:
        return {"decided": True, "batch": None,
                "text": f"{host}: every claim is decided" if not open_claims else
                        f"{host}: {', '.join(open_claims)} undecided, but no variant's repetition can decide "
                        "it"}
    done = records.done_levels(run_dir / host)
    measured = {(v.name, lv.repetition) for v in hplan.variants for lv in v.levels if (v.name, lv.id) in done}
    # every measured level spends the budget, a contended one too
    minutes = sum(float(r["duration_s"]) for r in every if r.get("duration_s") is not None) / 60
    budget = hplan.adaptive.get("minutes")
    waiting = "; ".join(([f"{', '.join(open_claims)} undecided"] if open_claims else [])
                        + ([", ".join(f"`{n}`" for n in sorted(redo)) + " measured under contention (not "
                            "counted)"] if redo else []))
    if budget is not None and minutes >= budget:
        return {"decided": True, "batch": None,
                "text": f"{host}: {waiting}; the budget is spent "
                        f"({minutes:.1f} of {budget:g} measured minutes)"}
    for r, names in enumerate(hplan.rounds, 1):
        todo = [n for n in names if n in undecided and (n, r) not in measured]
        if not todo:
            continue
        by_name = {v.name: v for v in hplan.variants}
        levels = [lv for n in todo for lv in by_name[n].levels if lv.repetition == r
                  and (n, lv.id) not in done]
        picked = [f"--variant={n}" for n in todo]
        return {"decided": False,
                "text": (f"{host}: {waiting}: repetition {r} of {', '.join(todo)} "
                         f"({minutes:.1f} measured minutes so far)"),
                "batch": {"variants": todo, "args": [*picked, f"--repetition={r}"],
                          "explain_args": ["--triton-log", *picked], "runtime": None, "todo": len(levels)}}
    return {"decided": True, "batch": None,
            "text": f"{host}: {waiting}; the budget is spent "
                    f"({len(hplan.rounds)} repetitions)"}


def search_round(run_dir: Path, hplan: records.HostPlan) -> dict[str, Any]:
    """A search's next batch on a host (:func:`serve_system.experiment.search.step` on its records).

    Sharded: the search is decided on every host's records (the role asks every host's ``decide``
    after every host's call has come home), and the host measures its share of the batch; a host
    with no share in this round gets an empty batch (the role skips it) and is asked again."""
    assert hplan.search is not None
    host = hplan.host
    rows = tree.collect(run_dir)
    if not hplan.search.get("shard"):
        rows = [r for r in rows if r["host"] == host]
    out = search.step(hplan.search, rows)
    if out.decided:
        return {"decided": True, "batch": None, "text": f"{host}: {out.text}"}
    done = records.done_levels(run_dir / host)
    by_name = {v.name: v for v in hplan.variants}
    # this host's levels of the batch still to measure, per candidate (sharded: its share only)
    left = {n: sum(lv.repetition in out.repetitions and (n, lv.id) not in done for lv in by_name[n].levels)
            for n in out.variants if n in by_name}
    mine = [n for n, k in left.items() if k]
    todo = sum(left.values())
    if not todo:
        return {"decided": False, "text": f"{host}: {out.text}: nothing of it on this host",
                "batch": {"variants": [], "args": [], "explain_args": [], "runtime": None, "todo": 0}}
    picked = [f"--variant={n}" for n in mine]
    reps = [f"--repetition={r}" for r in out.repetitions]
    return {"decided": False, "text": f"{host}: {out.text} ({out.runs} run(s), {out.minutes:.1f} measured "
                                      "minutes so far)",
            "batch": {"variants": mine, "args": [*picked, *reps],
                      "explain_args": ["--triton-log", *picked], "runtime": None, "todo": todo}}
