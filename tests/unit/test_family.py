"""The error a finding states is the error of what it says (issue 40): a claim of several comparisons
controls its "did not hold" over them (Holm), the best variant its winners over the objectives (a
fixed sequence), halving its drops over the whole search, and a look's information counts both sides."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from serve_system.node import plans
from serve_system.node.plans import ObjectiveRecord
from serve_system.results import adaptive, best, searchdecide, searchrule
from serve_system.results import claim as cl
from serve_system.results import intervals as iv
from serve_system.results import sequential as sq

A = [100.0, 104.0, 96.0]


def _times(xs: list[float], c: float) -> list[float]:
    return [x * c for x in xs]


def _claim(pairs: list[tuple[list[float], list[float]]]) -> cl.Finding:
    """A claim of these comparisons, each "B raises the metric by at least 5 %", Holm over them."""
    def build(split: cl.Split | None) -> cl.Finding:
        verdicts, parts = [], []
        for a, b in pairs:
            e, v = cl.judge(a, b, None, "up", 0.05, split)
            verdicts.append(v)
            parts.append(iv.effect_text(e))
        return cl.finish("x", "B raises it", verdicts, parts, [])
    return cl.holm(build)


def test_did_not_hold_at_some_load_is_read_at_holms_level() -> None:
    # -3 %: its one-sided 95 % bound (+4.0 %) excludes +5 %, its 97.5 % bound (+6.2 %) does not
    near = (A, _times(A, 0.97))
    e = cl.compare(*near, None, sq.CLAIM)
    assert e.high is not None and e.high < 0.05 < (cl.compare(*near, None, sq.CLAIM, 2).high or 0)
    assert _claim([near]).verdict == iv.NOT_HELD  # one comparison: its own 5 %
    # the same at two loads: each is read at 2.5 % first, neither is rejected, the claim stays open
    both = _claim([near, near])
    assert both.verdict == iv.INCONCLUSIVE and both.family == cl.Family(2, "holm", 0.05)
    # one clearly below: rejected at 2.5 %, so the other is read again at 5 % (Holm's step) and rejected
    far = (A, _times(A, 0.90))
    stepped = _claim([far, near])
    assert stepped.verdict == iv.NOT_HELD and "Held at" not in stepped.detail


def test_held_at_every_load_needs_no_split() -> None:
    # +13 %: its one-sided 95 % bound (+5.4 %) is past +5 %, its 97.5 % one (+3.2 %) is not; held at
    # both loads at the claim's own 5 % (an intersection-union test spends no more)
    up = (A, _times(A, 1.13))
    assert cl.compare(*up, None, sq.CLAIM).low > 0.05 > cl.compare(*up, None, sq.CLAIM, 2).low  # type: ignore[operator]
    assert _claim([up, up]).verdict == iv.HELD


def _rows(values: dict[str, dict[str, list[float]]]) -> list[dict[str, object]]:
    return [{"host": "h", "variant": v, "mode": "concurrency", "load": 8.0, "status": "ok", "repetition": r,
             **{m: xs[r - 1] for m, xs in ms.items()}}
            for v, ms in values.items() for r in range(1, 1 + len(next(iter(ms.values()))))]


OBJ = [ObjectiveRecord("thr", "throughput", "max", 8.0), ObjectiveRecord("p95", "p95_us", "min", 8.0)]


def _winner(ev: cl.Evidence) -> str | None:
    """The winner named by a best variant's evidence for one objective."""
    assert isinstance(ev, cl.BestEvidence)
    return ev.winner


def test_the_later_objectives_are_judged_only_after_the_first_named_a_winner() -> None:
    tied = _rows({"a": {"throughput": A, "p95_us": _times(A, 1000)},
                  "b": {"throughput": _times(A, 1.01), "p95_us": _times(A, 700)}})
    f = best.best_variant(tied, OBJ)
    assert [ev.verdict for ev in f.evidence] == [iv.INCONCLUSIVE, best.NOT_JUDGED]
    assert f.verdict == iv.INCONCLUSIVE and "not judged (**thr**, before it, named no winner)" in f.detail
    assert [_winner(ev) for ev in f.evidence] == [None, None]
    # each at its own 5 % (the rule before): p95 alone names `b`
    assert [_winner(ev) for ev in best.best_variant(tied, OBJ, control=False).evidence] == [None, "b"]
    won = _rows({"a": {"throughput": A, "p95_us": _times(A, 1000)},
                 "b": {"throughput": _times(A, 1.3), "p95_us": _times(A, 700)}})
    assert [_winner(ev) for ev in best.best_variant(won, OBJ).evidence] == ["b", "b"]


def test_the_best_variant_is_not_decided_while_an_objective_is_open() -> None:
    assert iv.combine_all([iv.NOT_HELD, iv.INCONCLUSIVE]) == iv.INCONCLUSIVE
    assert iv.combine([iv.NOT_HELD, iv.INCONCLUSIVE]) == iv.NOT_HELD  # a claim: one failure fails it
    assert iv.combine_all([iv.HELD, iv.NOT_HELD]) == iv.NOT_HELD
    assert iv.combine_all([iv.HELD, iv.HELD]) == iv.HELD and iv.combine_all([]) == iv.NOT_MEASURABLE
    # a tie decided at thr (within the smallest effect), p95 judged and still open: not decided
    rows = _rows({"a": {"throughput": [100.0, 100.2, 99.8], "p95_us": [1000.0, 1300.0, 800.0]},
                  "b": {"throughput": [100.1, 100.3, 99.9], "p95_us": [1010.0, 1200.0, 850.0]}})
    f = best.best_variant(rows, OBJ, control=False)
    assert [ev.verdict for ev in f.evidence] == [iv.NOT_HELD, iv.INCONCLUSIVE]
    assert f.verdict == iv.INCONCLUSIVE
    open_claims, variants = adaptive.still_open([f], {"a", "b"})
    assert open_claims == ["best_variant"] and variants == {"a", "b"}


def test_a_looks_information_counts_both_sides() -> None:
    looks = sq.Looks(3, 5)
    for n in (3, 4, 5):
        assert looks.error_of(n, n, sq.CLAIM) == pytest.approx(looks.error(n, sq.CLAIM))
    # 4 against 3: its own look at the harmonic mean 24/7 of 5, after the plan's look at 3
    assert looks.fractions(4, 3) == pytest.approx((0.6, 24 / 7 / 5))
    between = looks.error_of(4, 3, sq.CLAIM)
    assert looks.error(3, sq.CLAIM) < between < looks.error(4, sq.CLAIM)
    # a one-sided growth spends: 5 against 3 is not judged as the look at 3
    assert looks.error_of(5, 3, sq.CLAIM) != pytest.approx(looks.error(3, sq.CLAIM))


def test_halving_splits_its_five_percent_over_the_pairs_it_can_rank() -> None:
    rec = _record(4, plans.SearchBudgetRecord(runs=100))
    assert searchrule.pairs(28) == 756
    # 28 ranked: rungs 2 and 3 could rank 14 and 7 within 100 runs (56 + 28 + 14 = 98)
    assert searchrule.reachable(rec, 1, 28, 56) == [14, 7]
    assert searchrule.rung_share(rec, 1, 28, 56, 0.05) == pytest.approx(0.05 * 756 / (756 + 182 + 42))
    # a budget that no later rung fits: the first spends it all
    small = dataclasses.replace(rec, budget=plans.SearchBudgetRecord(runs=60))
    assert searchrule.rung_share(small, 1, 28, 56, 0.05) == pytest.approx(0.05)
    assert searchrule.rung_share(rec, 3, 1, 98, 0.01) == 0.0
    assert searchrule.drop_quantile(5, 0.01) == pytest.approx(1 - 0.01 / 20)
    assert searchrule.drop_quantile(5, 0.01, split=False) == pytest.approx(1 - 0.01 / 4)
    assert searchrule.rung_family_level(rec) == pytest.approx(0.05 / 3)


def _record(n: int, budget: plans.SearchBudgetRecord) -> plans.SearchPlan:
    """A halving search of ``n`` candidates at throughput, load 8: three rungs of two repetitions."""
    goal = plans.ObjectiveRecord(name="max_throughput", metric="throughput", goal="max", at_load=8.0)
    rungs = [plans.SearchRung([2 * k + 1, 2 * k + 2], 500 * 2**k) for k in range(3)]
    return plans.SearchPlan(strategy="halving", objective=goal, smallest_effect=0.05, budget=budget,
                              candidates=[plans.SearchCandidate(f"c{i}") for i in range(n)], rungs=rungs,
                              calls=4)


def _search(rec: plans.SearchPlan, rng: np.random.Generator, split: bool = True) -> bool:
    rows: list[dict[str, object]] = []
    for _ in range(5):
        out = searchdecide.step(rec, rows, split)
        if out.decided:
            return any(e.dropped is not None for e in out.path)
        rows += [{"host": "h", "variant": n, "mode": "concurrency", "load": 8.0, "status": "ok",
                  "repetition": r, "duration_s": 1.0,
                  "throughput": float(math.exp(math.log(100.0) + rng.normal(0.0, 0.05)))}
                 for n in out.variants for r in out.repetitions]
    raise AssertionError("not decided")


def test_halving_drops_a_tied_best_rarely_over_the_whole_search() -> None:
    """Four candidates alike, 150 seeded searches: the rule before dropped one in 21 of them, the
    shipped in none."""
    rec = _record(4, plans.SearchBudgetRecord())
    shipped = sum(_search(rec, np.random.default_rng(i)) for i in range(150))
    before = sum(_search(rec, np.random.default_rng(i), split=False) for i in range(150))
    assert (shipped, before) == (0, 21)


def test_a_contended_report_says_so_once(tmp_path: Path) -> None:
    """Every level of a three-repetition run measured beside other work: one line before the first
    section says how many counted and why, the levels are a column, the processes are in summary.csv."""
    import json

    from report_trees import lab_run
    from test_adaptive import _plan

    from serve_system.results import report

    run = lab_run(tmp_path / "lab" / "r1", repetitions=3)
    levels = sorted(run.glob("node-1/*/*/level.json"))
    for path in levels:
        data = json.loads(path.read_text())
        data["contention"] = {"seconds": 9.0, "cpus": 2, "busy": 0.99, "steal": 0.0, "pressure": 0.8,
                              "others": 0.6, "measuring": 0.5, "top": ["stress-ng (4242) 9.0 CPU-s"]}
        path.write_text(json.dumps(data))
    _plan(run, plans.AdaptivePlan(start=3, max=5))
    report.write_report(run, partial=True)
    md = (run / "report.md").read_text()
    head = md.split("\n## ", 1)[0]
    assert len(head.split("\n", 1)[1]) <= 1500, len(head)
    assert md.count("**Contention**") == 1 and md.count("measured beside other work") == 1
    assert f"0 of {len(levels)} level(s) counted" in head
    assert "stress-ng" not in md and "stress-ng (4242)" in (run / "summary.csv").read_text()
    assert "| windows cv | noisy | contended |" in md and " | 3 |" in md
