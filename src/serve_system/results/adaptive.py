"""``repetitions: auto``: whether one host's run needs another repetition, and of which variants.

After the first repetitions (every variant, :data:`~..experiment.spec.models.AUTO_START` of them), the
``experiment`` role asks :func:`next_round` (``serve-system decide``) after each runner call: the
findings are judged on everything measured so far, and the variants of every comparison still
*inconclusive* get one more repetition, in the plan's next round and its order. It stops when every
claim is decided (held, did not hold, or not measurable here), or the budget is spent: the plan's
last round, or the measured minutes (the levels' own time, ``budget.minutes``). Each look judges the
claims with the repeated intervals of :mod:`.sequential` (the error spent over the planned looks, so
that stopping at the first look where all is decided keeps each claim's error at 5 %). A level the
runner measured under contention (:class:`~serve_system.node.records.Contention`) is not
counted: its variant gets another repetition in its place while its load has fewer than ``start``
uncontended ones, within the same budget.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ServeSystemError
from ..experiment import runnercall
from ..node import archive, plans, records
from . import findings as fnd
from . import reasons as why_
from . import searchdecide as search
from . import sequential, tree
from .claim import Finding
from .row import Row
from .runs import read_manifest
from .searchrule import Outcome


def undecided_variants(found: list[Finding]) -> set[str]:
    """The variants of the comparisons that are still inconclusive."""
    out: set[str] = set()
    for f in found:
        for ev in f.evidence:
            if ev.verdict == fnd.INCONCLUSIVE:
                out.update(ev.variants())
    return out


def still_open(found: list[Finding], variants: set[str]) -> tuple[list[str], set[str]]:
    """The stop rule of ``repetitions: auto``: (the claims still inconclusive, the variants of their
    undecided comparisons among ``variants``, those that one more repetition could decide); the run
    stops when the second is empty."""
    open_claims = [f.key for f in found if f.verdict == fnd.INCONCLUSIVE]
    return open_claims, (undecided_variants(found) & variants if open_claims else set())


def contended(rows: list[Row], start: int) -> set[str]:
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


@dataclass
class Decision:
    """``serve-system decide``'s answer for a host (the role reads it as JSON): whether it is done, what
    the role prints, and the next runner call, as ``plan --role`` gives the first (None when decided, or
    when a sharded search has nothing for this host in this round)."""

    decided: bool
    text: str
    call: runnercall.RunnerCall | None = None


def next_round(run_dir: Path, host: str) -> Decision:
    """The host's next runner call, or why there is none (:class:`Decision`).

    The host's fetched archive is put into the results first (a sharded search's: every host's), and
    only what its decision needs is read: its own records, or a sharded search's shared view
    (:func:`shared_step`).
    """
    if host in ("", ".", "..") or "/" in host or "\0" in host:
        raise ServeSystemError(f"--host {host!r}: not a host of the run (the name of its folder under "
                               f"{run_dir}): give the inventory name the run was planned with")
    try:
        hplan = records.read(run_dir / host / "plan.json", plans.HostPlan)
        # only the host's own records, but a sharded search's: it is decided on every host's
        archive.collect_run(run_dir, None if _sharded(hplan) else {host})
    except records.RecordError as exc:
        raise ServeSystemError(str(exc)) from None
    if hplan.search:
        return search_round(run_dir, hplan)
    if not hplan.adaptive:
        return Decision(True, f"{host}: every planned repetition is measured")
    manifest = read_manifest(run_dir)
    every = tree.collect(run_dir, {host})  # the host is judged on its own levels: no other host's is read
    rows = why_.counted(every)  # a level measured under contention does not count: it is measured again
    setups = tree.variant_setups(run_dir, {host})
    redo = contended(every, max(1, hplan.adaptive.start)) & {v.name for v in hplan.variants}
    found = fnd.evaluate(rows, setups, manifest.objectives, manifest.smallest_effect,
                         sequential.looks_of(hplan.adaptive))
    open_claims, undecided = still_open(found, {v.name for v in hplan.variants})
    undecided |= redo
    if hplan.adaptive.only:  # -e variants: repetitions only of those
        undecided &= set(hplan.adaptive.only)
    if not undecided:
        return Decision(True, f"{host}: every claim is decided" if not open_claims else
                        f"{host}: {', '.join(open_claims)} undecided, but no variant's repetition can "
                        "decide it")
    done = records.done_levels(run_dir / host)
    measured = {(v.name, lv.repetition) for v in hplan.variants for lv in v.levels if (v.name, lv.id) in done}
    # every measured level spends the budget, a contended one too (counted as the runner counts it)
    minutes = records.measured_minutes(run_dir / host)
    budget = hplan.adaptive.minutes
    waiting = "; ".join(([f"{', '.join(open_claims)} undecided"] if open_claims else [])
                        + ([", ".join(f"`{n}`" for n in sorted(redo)) + " measured under contention (not "
                            "counted)"] if redo else []))
    if budget is not None and minutes >= budget:
        return Decision(True, f"{host}: {waiting}; the budget is spent "
                              f"({minutes:.1f} of {budget:g} measured minutes)")
    for r, names in enumerate(hplan.rounds, 1):
        todo = [n for n in names if n in undecided and (n, r) not in measured]
        if not todo:
            continue
        by_name = {v.name: v for v in hplan.variants}
        levels = [lv for n in todo for lv in by_name[n].levels if lv.repetition == r
                  and (n, lv.id) not in done]
        return Decision(False, (f"{host}: {waiting}: repetition {r} of {', '.join(todo)} "
                                f"({minutes:.1f} measured minutes so far)"),
                        # the plan's last round: no call can follow it, so it restores the baseline itself
                        _call(hplan, todo, [r], len(levels), f"r{r}", restore=r == len(hplan.rounds),
                              restore_past=None if budget is None else float(budget)))
    return Decision(True, f"{host}: {waiting}; the budget is spent ({len(hplan.rounds)} repetitions)")


def search_round(run_dir: Path, hplan: plans.HostPlan) -> Decision:
    """A search's next batch on a host (:func:`serve_system.results.searchdecide.step` on its records).

    Sharded: the search is decided on every host's records (the role asks every host's ``decide``
    after every host's call has come home), once per round (:func:`shared_step`), and the host
    measures its share of the batch; a host with no share in this round gets no call and is asked
    again."""
    assert hplan.search is not None
    host = hplan.host
    if _sharded(hplan):
        out = shared_step(run_dir, hplan.search)
    else:
        out = search.step(hplan.search, tree.collect(run_dir, {host}))
    if out.decided:
        return Decision(True, f"{host}: {out.text}")
    done = records.done_levels(run_dir / host)
    by_name = {v.name: v for v in hplan.variants}
    # this host's levels of the batch still to measure, per candidate (sharded: its share only)
    left = {n: sum(lv.repetition in out.repetitions and (n, lv.id) not in done for lv in by_name[n].levels)
            for n in out.variants if n in by_name}
    mine = [n for n, k in left.items() if k]
    todo = sum(left.values())
    if not todo:
        return Decision(False, f"{host}: {out.text}: nothing of it on this host")
    return Decision(False, f"{host}: {out.text} ({out.runs} run(s), {out.minutes:.1f} measured minutes "
                           "so far)", _call(hplan, mine, out.repetitions, todo, f"s{out.runs}"))


def _call(hplan: plans.HostPlan, variants: list[str], repetitions: list[int], todo: int,
          label: str, restore: bool = False, restore_past: float | None = None) -> runnercall.RunnerCall:
    """The runner call of a further round, as the role runs it (:func:`runnercall.runner_call`)."""
    token = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{label}"
    return runnercall.runner_call(hplan.runner, variants, repetitions, token=token, todo=todo,
                                  restore=restore, restore_past=restore_past)


def _sharded(hplan: plans.HostPlan) -> bool:
    return hplan.search is not None and hplan.search.shard is not None


#: where the controller keeps a sharded search's decision, under the run folder (its own, hidden folder)
KEPT = ".decide"


@dataclass
class KeptStep:
    """A sharded search's next batch as decided on the records in one state (what :func:`search_round`
    uses of :class:`~serve_system.results.searchrule.Outcome`)."""

    #: :func:`tree.records_state` of the records it was decided on
    records: str
    decided: bool
    text: str
    variants: list[str]
    repetitions: list[int]
    runs: int
    minutes: float


def shared_step(run_dir: Path, rec: plans.SearchPlan) -> Outcome:
    """A sharded search's next batch, decided on every host's records once per state of them.

    Every host's ``decide`` asks it each round: the first reads all the records and keeps the outcome
    in ``<run>/.decide/search-<the search's digest>.json`` with the records' state
    (:func:`tree.records_state`); the others, finding the records unchanged, read it there. Under the
    run folder's lock, so that the calls made at once decide once. A kept file that is not the
    controller's own (a link, not a regular file, malformed) is not used: the search is decided on the
    records, as without one."""
    # the search as every host's plan holds it (each host's share of the candidates left out)
    same = {k: v for k, v in records.to_json(rec).items() if k != "share"}
    key = hashlib.sha256(json.dumps(same, sort_keys=True, default=str).encode()).hexdigest()[:16]
    folder = run_dir / KEPT
    path = folder / f"search-{key}.json"
    with archive.run_lock(run_dir):
        state = tree.records_state(run_dir)
        kept = _read_kept(path)
        if kept is not None and kept.records == state:
            return Outcome(decided=kept.decided, text=kept.text, variants=kept.variants,
                                  repetitions=kept.repetitions, runs=kept.runs, minutes=kept.minutes)
        out = search.step(rec, tree.collect(run_dir))
        if _ours(folder, stat.S_ISDIR, missing_ok=True) and _ours(path, stat.S_ISREG, missing_ok=True):
            with contextlib.suppress(OSError):  # not kept (a read-only run folder): decided again next time
                records.write(path, KeptStep(records=state, decided=out.decided, text=out.text,
                                             variants=out.variants, repetitions=out.repetitions,
                                             runs=out.runs, minutes=out.minutes))
    return out


#: a kept decision is a few hundred bytes; anything much bigger is not one
_KEPT_MAX_BYTES = 1 << 20


def _ours(path: Path, kind: Callable[[int], bool], missing_ok: bool = False) -> bool:
    """Whether ``path`` is of that kind itself (not a link to one; a file: of a kept decision's size),
    or absent (``missing_ok``)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return missing_ok
    except OSError:
        return False
    return kind(st.st_mode) and (not stat.S_ISREG(st.st_mode) or st.st_size <= _KEPT_MAX_BYTES)


def _read_kept(path: Path) -> KeptStep | None:
    if not (_ours(path.parent, stat.S_ISDIR) and _ours(path, stat.S_ISREG)):
        return None
    try:
        return records.read(path, KeptStep)
    except records.RecordError:
        return None
