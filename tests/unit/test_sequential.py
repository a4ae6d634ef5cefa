"""Error control over looks (results/sequential.py), what an inconclusive could have seen, and
contention recorded per level (the runner's /proc readings, the report's flag, auto's re-measure)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from report_trees import lab_run
from scipy import stats
from test_adaptive import _plan

from serve_system.node import nodeproc, plans, records
from serve_system.results import adaptive, findings, report, tree
from serve_system.results import claim as cl
from serve_system.results import intervals as iv
from serve_system.results import sequential as sq


@pytest.mark.parametrize(("looks", "published"), [
    # gsDesign(k = 3 / 5, test.type = 2, sfu = sfLDOF, alpha = 0.025): the upper bounds
    (3, (3.7103, 2.5114, 1.9930)),
    (5, (4.8769, 3.3570, 2.6803, 2.2898, 2.0310)),
])
def test_obrien_fleming_boundaries_match_published_values(looks: int, published: tuple[float, ...]) -> None:
    got = sq.boundaries(tuple(k / looks for k in range(1, looks + 1)))
    assert got == pytest.approx(published, abs=2e-3)


def test_the_boundaries_spend_exactly_the_budget() -> None:
    """A simulated Brownian motion observed at the looks crosses its boundaries 5 % of the time (both
    methods), where a fixed 1.96 at each look crosses far more often."""
    import numpy as np

    rng = np.random.default_rng(7)
    t = np.array([3 / 5, 4 / 5, 1.0])
    s = (rng.normal(size=(200_000, 3)) * np.sqrt(np.diff(np.r_[0, t]))).cumsum(1) / np.sqrt(t)
    for method in (sq.OBRIEN_FLEMING, sq.POCOCK):
        c = np.array(sq.boundaries(tuple(t), method))
        assert (np.abs(s) >= c).any(1).mean() == pytest.approx(0.05, abs=0.003)
    assert (np.abs(s) >= 1.96).any(1).mean() > 0.08


def test_a_claims_boundaries_spend_five_percent_on_its_one_side() -> None:
    """A claim is one-sided: its boundaries are the symmetric design at a two-sided 10 %. The first
    look's boundary in closed form (Lan-DeMets: one side's f(t) = 2 - 2 Phi(z(0.975) / sqrt(t))), and a
    simulated Brownian motion crosses the upper boundary 5 % of the time at the shipped looks."""
    import numpy as np

    got = sq.boundaries((1 / 3, 2 / 3, 1.0), sq.OBRIEN_FLEMING, 2 * sq.ALPHA)
    first = stats.norm.ppf(1 - (2 - 2 * stats.norm.cdf(stats.norm.ppf(0.975) / math.sqrt(1 / 3))))
    assert first == pytest.approx(3.2001, abs=1e-4) and got[0] == pytest.approx(first, abs=1e-3)
    assert got[0] > got[1] > got[2] > stats.norm.ppf(0.95)
    rng = np.random.default_rng(11)
    t = np.array([3 / 5, 4 / 5, 1.0])
    z = (rng.normal(size=(200_000, 3)) * np.sqrt(np.diff(np.r_[0, t]))).cumsum(1) / np.sqrt(t)
    looks = sq.Looks(3, 5)
    c = np.array([stats.norm.ppf(looks.quantile(n, sq.CLAIM)) for n in (3, 4, 5)])
    assert (z >= c).any(1).mean() == pytest.approx(0.05, abs=0.003)
    # the best of two stays two-sided: 2.5 % a side
    c2 = np.array([stats.norm.ppf(looks.quantile(n, sq.BEST)) for n in (3, 4, 5)])
    assert (z >= c2).any(1).mean() == pytest.approx(0.025, abs=0.002)


def test_one_fixed_look_judges_a_claim_at_its_one_sided_95_percent_bound() -> None:
    """One look, no spending: a claim's interval is the 90 % one (each end a one-sided 95 % bound, t(0.95)),
    the best's lead the 95 % one; a hand computation of the bound decides the claim."""
    assert sq.fixed_quantile(sq.CLAIM) == pytest.approx(0.95) and sq.fixed_quantile(sq.BEST) == 0.975
    assert sq.Looks(5, 5).level(5, sq.CLAIM) == pytest.approx(0.90) and sq.Looks(5, 5).level(5) == 0.95
    with pytest.raises(ValueError, match="sides"):
        sq.fixed_error(3)
    a = [100 * math.exp(x) for x in (-0.1, 0.0, 0.1)]
    b = [x * 1.3 for x in a]  # log difference 0.2624, sd 0.1 a side, Welch's df 4
    claim, best = cl.compare(a, b, None, sq.CLAIM), cl.compare(a, b)
    se = math.sqrt(0.01 / 3 + 0.01 / 3)
    assert claim.low == pytest.approx(math.expm1(math.log(1.3) - 2.1318468 * se), rel=1e-6)  # t(0.95, 4)
    assert best.low == pytest.approx(math.expm1(math.log(1.3) - 2.7764451 * se), rel=1e-6)  # t(0.975, 4)
    # +30 % against a smallest effect of 5 %: the one-sided bound (+9.2 %) holds it, the two-sided
    # 95 % interval's end (+3.6 %) would not
    assert iv.decide(claim, "up", 0.05).word == iv.HELD
    assert iv.decide(best, "up", 0.05).word == iv.INCONCLUSIVE


def test_looks_levels_widen_early_and_none_is_the_fixed_interval() -> None:
    looks = sq.Looks(3, 5)
    assert looks.sequential and 0.95 < looks.level(5) < looks.level(4) < looks.level(3) < 1
    assert looks.level(5) == pytest.approx(1 - 2 * (1 - stats.norm.cdf(sq.boundaries((0.6, 0.8, 1.0))[-1])))
    assert sq.Looks(3, 5, sq.NONE).level(3) == sq.Looks(5, 5).level(5) == pytest.approx(0.95)
    claim = [looks.level(n, sq.CLAIM) for n in (5, 4, 3)]
    assert 0.90 < claim[0] < claim[1] < claim[2] < looks.level(3)
    assert sq.Looks(3, 5, sq.NONE).level(3, sq.CLAIM) == pytest.approx(0.90)
    assert "O'Brien-Fleming" in looks.text() and "3 to 5" in looks.text()
    assert sq.looks_of(plans.AdaptivePlan(start=3, max=5)) == looks and sq.looks_of(None) is None
    assert sq.looks_of(plans.AdaptivePlan(start=0, max=5)) is None  # no plan of looks: the fixed interval
    with pytest.raises(ValueError, match="sequential method"):
        sq.Looks(3, 5, "bonferroni")


def test_halving_splits_its_level_over_the_rungs() -> None:
    from serve_system.node import plans
    from serve_system.results import searchrule as search

    goal = plans.ObjectiveRecord(name="best", metric="throughput", goal="max", at_load=8.0)
    rec = plans.SearchPlan(strategy="halving", objective=goal, candidates=[], calls=0,
                             rungs=[plans.SearchRung([2 * k + 1, 2 * k + 2], 500) for k in range(3)])
    assert search.rung_family_level(rec) == pytest.approx(0.05 / 3)
    assert search.drop_quantile(5, 0.05 / 3, split=False) == pytest.approx(1 - 0.05 / 3 / 4)


def test_minimal_detectable_effect_against_a_hand_computation() -> None:
    # log samples -0.1, 0, 0.1 a side: sample variance 0.01 each, Welch's df = 4
    a = [100 * math.exp(x) for x in (-0.1, 0.0, 0.1)]
    b = [x * 1.02 for x in a]
    e = iv.effect(a, b)
    se = math.sqrt(0.01 / 3 + 0.01 / 3)
    hand = math.expm1((2.7764451 + 0.9409646) * se)  # t(0.975, 4) + t(0.80, 4), from the t table
    assert iv.detectable(e) == pytest.approx(hand, rel=1e-6)
    assert iv.detectable(e) == pytest.approx(0.3546, abs=5e-4)
    # the repetitions a side at which 5 % becomes detectable: the first n whose MDE reaches it
    n = iv.needed(e, 0.05)
    assert n is not None

    def mde(m: int) -> float:
        return ((stats.t.ppf(0.975, 2 * m - 2) + stats.t.ppf(0.8, 2 * m - 2)) * math.sqrt(0.02 / m))

    assert mde(n) <= math.log(1.05) < mde(n - 1)
    v = iv.decide(e, "up", 0.05)
    assert v.word == iv.INCONCLUSIVE and v.mde == pytest.approx(hand)
    assert f"could have detected a change of {hand * 100:.0f} % or more (80 % power)" in iv.explain(v)
    assert f"needs about {n} repetitions per side" in iv.explain(v)


def test_the_sequential_decision_on_a_recorded_tree(tmp_path: Path) -> None:
    """The lab's run, three repetitions: judged at the first of three looks, every interval is the
    look's repeated interval (wider than a fixed look's: the claims' one-sided, the best's two-sided),
    so nothing is decided that the fixed interval did not decide, and the report states the method and
    both levels."""
    run = lab_run(tmp_path / "lab" / "r1", repetitions=3, spread=(1.0, 0.9, 1.1))
    rows = tree.collect(run)
    setups = tree.variant_setups(run)
    objectives = [plans.ObjectiveRecord("most", "throughput", "max")]
    looks = sq.Looks(3, 5)
    fixed = findings.evaluate(rows, setups, objectives, 0.05)
    seq = findings.evaluate(rows, setups, objectives, 0.05, looks)
    assert [f.key for f in fixed] == [f.key for f in seq]
    levels = {round(ev.lead.level, 6) for f in seq for ev in f.evidence if isinstance(ev, cl.BestEvidence)}
    assert levels == {round(looks.level(3), 6)}
    claim = {round(ev.throughput_effect.level, 6) for f in seq for ev in f.evidence
             if isinstance(ev, cl.BatchingEvidence) and ev.throughput_effect is not None}
    assert claim == {round(looks.level(3, sq.CLAIM), 6)}
    fixed_claim = {round(ev.throughput_effect.level, 6) for f in fixed for ev in f.evidence
                   if isinstance(ev, cl.BatchingEvidence) and ev.throughput_effect is not None}
    assert fixed_claim == {0.9}  # one fixed look: each end a one-sided 95 % bound
    changed = 0
    for f0, f1 in zip(fixed, seq, strict=True):
        if f1.verdict in (iv.HELD, iv.NOT_HELD):
            assert f0.verdict == f1.verdict
        changed += f0.verdict != f1.verdict
    # the wider interval leaves the lead the fixed one decided on three noisy repetitions undecided;
    # the claims, one-sided, are decided at the first look as at a fixed one
    assert {f.key for f0, f in zip(fixed, seq, strict=True) if f0.verdict != f.verdict} == {
        "best_variant"} and changed == 1
    text = "\n".join(findings.markdown(seq, None, 0.05, looks))
    assert "repeated confidence intervals with O'Brien-Fleming-type alpha spending" in text
    assert iv.pct_level(looks.level(3)) in text and iv.pct_level(looks.level(3, sq.CLAIM)) in text


def _proc(root: Path, total: tuple[int, ...], pressure_us: int, procs: dict[int, tuple[str, int]]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "stat").write_text("cpu  " + " ".join(map(str, total)) + "\ncpu0 1 2 3\ncpu1 1 2 3\n")
    (root / "pressure").mkdir(exist_ok=True)
    (root / "pressure" / "cpu").write_text(f"some avg10=1.00 avg60=1.00 avg300=1.00 total={pressure_us}\n"
                                           "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    for pid, (comm, ticks) in procs.items():
        (root / str(pid)).mkdir(exist_ok=True)
        (root / str(pid) / "stat").write_text(f"{pid} ({comm}) R 1 1 1 0 -1 0 0 0 0 0 {ticks} 0 0 0 20 0\n")


def test_the_runner_reads_what_else_used_the_cpu(tmp_path: Path) -> None:
    """Two readings of a node's /proc (its layout: stat, pressure/cpu, <pid>/stat): the hog's CPU
    time is named, Triton's and perf_analyzer's are not counted, steal and pressure are shares."""
    tick = 100
    _proc(tmp_path / "a", (100, 0, 100, 1000, 0, 0, 0, 0), 0,
          {10: ("tritonserver", 50), 11: ("perf_analyzer", 10), 12: ("stress-ng", 0)})
    before = nodeproc.cpu_snapshot(tmp_path / "a")
    _proc(tmp_path / "b", (500, 0, 300, 1100, 0, 0, 0, 100), 5_000_000,
          {10: ("tritonserver", 250), 11: ("perf_analyzer", 60), 12: ("stress-ng", 2 * 10 * tick // 2),
           13: ("sshd", 5)})
    after = nodeproc.cpu_snapshot(tmp_path / "b")
    before["t"], after["t"] = 0.0, 10.0
    c = nodeproc.contention(before, after)
    assert c.cpus == 2 and c.seconds == 10.0
    assert c.steal == pytest.approx(100 / 800) and c.busy == pytest.approx(1 - (100 + 100) / 800)
    assert c.pressure == pytest.approx(0.5)
    assert c.others == pytest.approx((10 + 0.05) / 20, abs=1e-3)  # the hog's 10 CPU-s and sshd's
    assert c.measuring == pytest.approx((2 + 0.5) / 20)  # Triton's 2 CPU-s, perf_analyzer's 0.5
    assert c.top[0] == "stress-ng (12) 10.0 CPU-s" and not any("triton" in t or "perf" in t for t in c.top)
    assert c.cause is not None and "stress-ng (12)" in c.cause and "stole 12 %" in c.cause
    # only the container's processes visible (no Triton among them): no share of others is claimed
    _proc(tmp_path / "c", (100, 0, 100, 1000, 0, 0, 0, 0), 0, {5: ("jupyter-lab", 1)})
    quiet = nodeproc.contention(nodeproc.cpu_snapshot(tmp_path / "c"), nodeproc.cpu_snapshot(tmp_path / "c"))
    assert quiet.others is None and quiet.cause is None


def _contend(run: Path, variant: str, level: str, others: float) -> None:
    path = run / "node-1" / variant / level / "level.json"
    data = json.loads(path.read_text())
    data["contention"] = {"seconds": 9.0, "cpus": 2, "busy": 0.99, "steal": 0.0, "pressure": 0.8,
                          "others": others, "measuring": 0.5, "top": ["stress-ng (4242) 9.0 CPU-s"]}
    path.write_text(json.dumps(data))


def test_a_contended_level_is_flagged_and_measured_again_by_auto(tmp_path: Path) -> None:
    run = lab_run(tmp_path / "lab" / "r1", repetitions=3, spread=(1.0, 1.0, 1.0))
    _plan(run, plans.AdaptivePlan(start=3, max=4))
    _contend(run, "onnx", "c1_r2", 0.6)
    row = next(r for r in tree.collect(run) if r["variant"] == "onnx" and r["repetition"] == 2)
    assert row["other_cpu"] == 0.6 and "stress-ng (4242)" in row["contention"]
    assert "other processes took 60 % of the node's CPU" in row["contention"]
    nxt = adaptive.next_round(run, "node-1")
    assert not nxt.decided and nxt.call is not None and "onnx" in nxt.call.variants, nxt
    assert "`onnx` measured under contention" in nxt.text
    assert "--repetition=4" in nxt.call.start
    # below the threshold: counted like any other level
    _contend(run, "onnx", "c1_r2", 0.1)
    assert not tree.collect(run)[0].get("contention")
    assert adaptive.contended(tree.collect(run), 3) == set()
    _contend(run, "onnx", "c1_r2", 0.6)
    note = "\n".join(report.contention_note(tree.collect(run), auto=True))
    assert note.startswith("> **Contention**: ") and f"{len(tree.collect(run)) - 1} of " in note
    assert "stress-ng (4242)" not in note and "`contention` and `other_cpu` in `summary.csv`" in note
    assert "did not count them" in note


def test_contention_threshold() -> None:
    c = records.Contention(seconds=5, cpus=2, others=0.24, steal=0.09, pressure=0.9, busy=0.5, measuring=0.2)
    assert records.contention_cause(c) is None  # pressure alone is no cause: Triton's own threads wait
    c.busy = 0.95  # a saturated CPU (a machine shared beyond the node): the share of what the node got
    assert (records.contention_cause(c) or "").startswith("the CPU was saturated (busy 95 %) and other "
                                                          "processes took 55 % of the CPU time")
    c.others, c.measuring = 0.05, 0.5
    assert records.contention_cause(c) is None
    c.others = 0.25
    assert (records.contention_cause(c) or "").startswith("other processes took 25 %")
    # a process names itself: its name reaches the report as plain words only
    c.top = ["x\n# owned | `rm` <b> (66) 9.0 CPU-s"]
    assert (records.contention_cause(c) or "").endswith(": x?? owned ? ?rm? ?b? (66) 9.0 CPU-s; some task "
                                                         "waited for a CPU 90 % of the time")


def test_the_report_of_an_auto_run_judges_at_its_look(tmp_path: Path) -> None:
    """A recorded run planned with repetitions: auto (looks 3..5), stopped at 3: the report states the
    method and the look's level, and its best-variant line agrees with the findings (no winner named
    on an interval the look does not allow); the same run read as fixed names one."""
    run = lab_run(tmp_path / "lab" / "r1", repetitions=3, spread=(1.0, 0.85, 1.15))
    report.write_report(run)
    assert json.loads((run / "summary.json").read_text())["findings"][-1]["verdict"] == iv.HELD
    fixed = (run / "report.md").read_text()
    _plan(run, plans.AdaptivePlan(start=3, max=5))
    report.write_report(run, partial=True)
    text = (run / "report.md").read_text()
    assert "repeated confidence intervals" not in fixed and "repeated confidence intervals" in text
    assert iv.pct_level(sq.Looks(3, 5).level(3)) in text
    best = json.loads((run / "summary.json").read_text())["findings"][-1]
    assert best["key"] == "best_variant" and best["verdict"] == iv.INCONCLUSIVE
    headline = text.split("## Best variant per objective")[1].split("\n\n")[1]
    assert "**tied**" in headline and f"({iv.pct_level(sq.Looks(3, 5).level(3))} interval" in headline
    assert "**tied**" not in fixed.split("## Best variant per objective")[1].split("\n\n")[1]
