"""The statistics behind the verdicts, on synthetic samples with a known effect."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats as st

from serve_system.results import intervals as iv

SMALLEST = 0.05


def _samples(rng: np.random.Generator, mean: float, cv: float, n: int) -> list[float]:
    """n repetitions of a level whose mean is ``mean`` and whose spread is ``cv`` of it (log-normal)."""
    return [float(x) for x in mean * np.exp(rng.normal(0.0, cv, n) - cv**2 / 2)]


def test_a_summary_is_the_t_interval_of_the_mean() -> None:
    s = iv.summarize([100.0, 104.0, 98.0])
    assert (s.n, s.mean) == (3, pytest.approx(100.6667, abs=1e-4))
    assert s.sd == pytest.approx(3.0551, abs=1e-4)
    low, high = st.t.interval(0.95, 2, loc=s.mean, scale=s.sd / math.sqrt(3))
    assert (s.ci_low, s.ci_high) == (pytest.approx(low), pytest.approx(high))
    assert s.cv == pytest.approx(0.0303, abs=1e-4) and not s.noisy
    assert iv.summarize([80.0, 100.0, 120.0]).noisy  # cv 20 %: pyperf would warn
    one = iv.summarize([42.0])
    assert (one.n, one.mean, one.sd, one.ci_low, one.ci_high, one.cv) == (1, 42.0, None, None, None, None)
    assert iv.summarize([]).mean is None


def test_the_interval_of_a_metric_that_cannot_be_negative_stops_at_zero() -> None:
    p99 = [120_000.0, 900_000.0, 150_000.0]  # three repetitions of a noisy p99 (us)
    low, high = st.t.interval(0.95, 2, loc=sum(p99) / 3, scale=st.tstd(p99) / math.sqrt(3))
    assert low < 0  # the plain t interval reaches below zero
    s = iv.summarize(p99, floor=iv.METRIC_FLOOR)
    assert s.ci_low == 0.0 and s.ci_high == pytest.approx(high)
    signed = iv.summarize([-5.0, 1.0, 2.0])  # a quantity that may be negative (a log ratio) keeps its low end
    assert signed.ci_low is not None and signed.ci_low < -5


def test_the_interval_covers_a_known_effect_about_95_times_in_100() -> None:
    rng = np.random.default_rng(17)
    true = 1.30  # B serves 30 % more
    covered = 0
    for _ in range(600):
        e = iv.effect(_samples(rng, 100, 0.05, 3), _samples(rng, 100 * true, 0.05, 3))
        assert e.low is not None and e.high is not None
        covered += e.low <= true - 1 <= e.high
    assert 0.92 <= covered / 600 <= 0.98


def test_the_effect_is_a_ratio_with_an_asymmetric_interval() -> None:
    a, b = [100.0, 104.0, 98.0], [130.0, 128.0, 135.0]
    e = iv.effect(a, b)
    geo = math.exp(np.mean(np.log(b)) - np.mean(np.log(a))) - 1
    assert e.change == pytest.approx(geo) and e.low is not None and e.high is not None
    assert e.low < e.change < e.high and (e.high - e.change) > (e.change - e.low)  # wider upwards
    assert iv.describe("throughput", e) == "throughput +30 % [+22 %, +39 %], n = 3 per side"
    # the same comparison the other way round: the reciprocal, still a positive ratio
    back = iv.effect(b, a)
    assert back.low == pytest.approx(1 / (1 + e.high) - 1) and back.low > -1


def test_a_strong_effect_is_held() -> None:
    rng = np.random.default_rng(1)
    e = iv.effect(_samples(rng, 100, 0.04, 3), _samples(rng, 150, 0.04, 3))
    assert iv.decide(e, "up", SMALLEST) == iv.Verdict(iv.HELD)
    # a latency claim: B's latency 40 % lower
    lat = iv.effect(_samples(rng, 20_000, 0.04, 3), _samples(rng, 12_000, 0.04, 3))
    assert iv.decide(lat, "down", SMALLEST).word == iv.HELD
    assert iv.decide(lat, "up", SMALLEST).word == iv.NOT_HELD


def test_a_strong_opposite_effect_did_not_hold() -> None:
    rng = np.random.default_rng(2)
    e = iv.effect(_samples(rng, 100, 0.04, 3), _samples(rng, 60, 0.04, 3))
    assert iv.decide(e, "up", SMALLEST).word == iv.NOT_HELD
    # no effect, measured tightly: any improvement is smaller than the smallest effect of interest
    flat = iv.effect(_samples(rng, 100, 0.005, 5), _samples(rng, 100, 0.005, 5))
    assert flat.high is not None and flat.high < SMALLEST
    assert iv.decide(flat, "up", SMALLEST).word == iv.NOT_HELD


def test_a_small_noisy_effect_is_inconclusive_with_how_many_more_repetitions() -> None:
    rng = np.random.default_rng(3)
    e = iv.effect(_samples(rng, 100, 0.06, 3), _samples(rng, 112, 0.06, 3))
    v = iv.decide(e, "up", SMALLEST)
    assert v.word == iv.INCONCLUSIVE and v.more is not None and v.more > 0 and v.reason is None
    assert iv.explain(v).startswith(
        f"inconclusive: about {v.more} more repetitions per side would likely decide it; with this noise "
        f"and n it could have detected a change of {v.mde * 100:.0f} % or more (80 % power)")
    # measuring that many more with the same spread would likely leave the threshold outside the interval
    e2 = iv.effect(_samples(rng, 100, 0.06, 3 + v.more), _samples(rng, 112, 0.06, 3 + v.more))
    assert e2.high is not None and e2.low is not None
    assert (e2.high - e2.low) < (e.high or 0) - (e.low or 0)


def test_one_repetition_gives_no_interval_and_says_what_to_set() -> None:
    e = iv.effect([100.0], [150.0])
    assert e.change == pytest.approx(0.5) and not e.has_interval
    v = iv.decide(e, "up", SMALLEST)
    assert (v.word, v.more, v.reason) == (iv.INCONCLUSIVE, None, iv.ONE_REPETITION)
    assert iv.explain(v) == "inconclusive: one repetition gives no interval: set `repetitions: 3`"
    assert iv.effect_text(e) == "+50 %, n = 1 per side, no interval"
    bad = iv.effect([0.0, 1.0], [2.0, 3.0])
    assert not bad.has_interval and "zero or negative" in (bad.reason or "")


def test_no_effect_names_no_winner() -> None:
    rng = np.random.default_rng(4)
    winners = 0
    for _ in range(200):
        a, b = _samples(rng, 100, 0.05, 3), _samples(rng, 100, 0.05, 3)
        top, runner = (b, a) if np.mean(b) >= np.mean(a) else (a, b)
        winners += iv.lead(iv.effect(runner, top), "max", SMALLEST).word == iv.HELD
    assert winners / 200 <= 0.08  # a winner from noise about 5 times in 100 (the interval's level)
    strong = iv.effect(_samples(rng, 100, 0.03, 3), _samples(rng, 125, 0.03, 3))
    assert iv.lead(strong, "max", SMALLEST).word == iv.HELD
    tie = iv.lead(iv.effect([100.0, 101.0, 99.0], [100.5, 99.5, 100.0]), "max", SMALLEST)
    assert tie.word == iv.NOT_HELD  # within +-5 %: a decided tie


def test_combine_several_comparisons() -> None:
    assert iv.combine([iv.HELD, iv.HELD]) == iv.HELD
    assert iv.combine([iv.HELD, iv.INCONCLUSIVE]) == iv.INCONCLUSIVE
    assert iv.combine([iv.HELD, iv.NOT_HELD, iv.INCONCLUSIVE]) == iv.NOT_HELD
    assert iv.combine([]) == iv.NOT_MEASURABLE
    assert set(iv.MEANINGS) == set(iv.VERDICTS)


def test_a_lead_inside_the_smallest_effect_names_no_winner() -> None:
    # +2 % with a tight interval that excludes zero: a real but unimportant difference is a tie
    small = iv.effect([100.0, 100.2, 99.8, 100.1], [102.0, 102.1, 101.9, 102.0])
    assert small.low is not None and small.low > 0 and small.high is not None and small.high < SMALLEST
    assert iv.lead(small, "max", SMALLEST).word == iv.NOT_HELD
    # the same lead beyond the smallest effect: a winner
    big = iv.effect([100.0, 100.2, 99.8, 100.1], [110.0, 110.1, 109.9, 110.0])
    assert iv.lead(big, "max", SMALLEST).word == iv.HELD


# ------------------------------------------------------------------------------------ the pooled spread

E = math.e


def test_the_pooled_variance_is_the_anova_residual_of_the_logs() -> None:
    """By hand: logs (0, 1, 2) have mean 1 and squares 1 + 0 + 1 = 2; logs (1, 3) mean 2 and squares
    1 + 1 = 2; a single sample adds nothing; a group with a zero has no logarithm and is left out. So
    s_p**2 = (2 + 2) / ((3 - 1) + (2 - 1)) = 4 / 3 with df 3."""
    a, b, one, bad = [1.0, E, E**2], [E, E**3], [E**5], [0.0, 4.0]
    pool = iv.pooled([a, b, one, bad])
    assert pool.df == 3 and pool.var == pytest.approx(4 / 3) and pool.sd == pytest.approx(math.sqrt(4 / 3))
    assert iv.pooled([one]) == iv.Pool(0.0, 0) and iv.pooled([]).df == 0
    # numpy's own: the within-group sum of squares over the within-group df
    groups = [np.log(a), np.log(b)]
    within = sum(float(((g - g.mean()) ** 2).sum()) for g in groups) / sum(len(g) - 1 for g in groups)
    assert pool.var == pytest.approx(within)


def test_a_pooled_effect_uses_the_pools_spread_and_degrees_of_freedom() -> None:
    a, b = [1.0, E, E**2], [E, E**3]
    pool = iv.pooled([a, b, [E**5]])
    e = iv.effect_pooled(a, b, pool)
    se = math.sqrt(4 / 3 * (1 / 3 + 1 / 2))  # d = mean log b - mean log a = 2 - 1 = 1
    low, high = st.t.interval(0.95, 3, loc=1.0, scale=se)
    assert (e.d, e.df, e.n_a, e.n_b) == (pytest.approx(1.0), 3, 3, 2)
    assert e.change == pytest.approx(E - 1)
    assert (e.low, e.high) == (pytest.approx(math.expm1(low)), pytest.approx(math.expm1(high)))
    # a one-sided bound at an adjusted level: t's 1 - 0.05 / 27 quantile
    q = 1 - 0.05 / 27
    adj = iv.effect_pooled(a, b, pool, q)
    assert adj.high == pytest.approx(math.expm1(1 + st.t.ppf(q, 3) * se))
    # one sample a side is enough once the pool has degrees of freedom; without a pool, no interval
    single = iv.effect_pooled([E**5], [E**4], pool)
    assert single.has_interval and single.change == pytest.approx(math.expm1(-1))
    assert not iv.effect_pooled(a, b, iv.Pool(0.0, 0)).has_interval
    assert iv.effect_pooled(a, b, iv.Pool(0.0, 0)).reason == iv.NO_POOL
    assert not iv.effect_pooled([1.0, -1.0], b, pool).has_interval


def test_a_pooled_interval_decides_where_welch_on_two_repetitions_cannot() -> None:
    """28 groups of two, 3 % spread, at the drop rule's level (one-sided 1 - 0.05 / 27): Welch on one
    pair has df 1 to 2 and cannot tell a 15 % difference; the pool over the 28 (df 28) can."""
    rng = np.random.default_rng(5)
    groups = [_samples(rng, 100, 0.03, 2) for _ in range(27)]
    worse = _samples(rng, 85, 0.03, 2)
    pool = iv.pooled([*groups, worse])
    assert pool.df == 28
    leader = max(groups, key=lambda g: float(np.mean(g)))
    q = 1 - 0.05 / 27
    welch = iv.effect(leader, worse, q)
    assert welch.high is not None and welch.high > 0
    decided = iv.effect_pooled(leader, worse, pool, q)
    assert decided.high is not None and decided.high < 0


def test_the_pooled_interval_covers_a_known_effect_about_95_times_in_100() -> None:
    rng = np.random.default_rng(6)
    covered = 0
    for _ in range(400):
        groups = [_samples(rng, 100, 0.05, 2) for _ in range(10)]
        a, b = _samples(rng, 100, 0.05, 2), _samples(rng, 120, 0.05, 2)
        e = iv.effect_pooled(a, b, iv.pooled([*groups, a, b]))
        assert e.low is not None and e.high is not None
        covered += e.low <= 0.20 <= e.high
    assert 0.92 <= covered / 400 <= 0.98


def test_a_group_whose_spread_is_far_larger_than_the_pools_fails_the_f_test() -> None:
    rng = np.random.default_rng(7)
    groups = [_samples(rng, 100, 0.03, 3) for _ in range(20)]
    wild = _samples(rng, 100, 0.30, 3)  # ten times the spread
    pool = iv.pooled([*groups, wild])
    test = iv.spread_test(wild, pool)
    assert test is not None and test.larger and (test.df_own, test.df_rest) == (2, 40)
    assert test.critical == pytest.approx(st.f.ppf(0.99, 2, 40))
    own = float(np.var(np.log(wild), ddof=1))
    rest = iv.pooled(groups).var
    assert test.f == pytest.approx(own / rest)
    tame = iv.spread_test(groups[0], pool)
    assert tame is not None and not tame.larger
    assert iv.spread_test([100.0], pool) is None  # one sample: no spread of its own
    assert iv.spread_test(wild, iv.pooled([wild])) is None  # nothing left to compare with


def test_more_repetitions_of_a_pooled_effect_count_the_pools_degrees_of_freedom() -> None:
    """The estimate for a pooled effect: the smallest m more per side at which t(df + 2m) times the
    pooled standard error falls below the difference (the pool grows by the new repetitions); Welch's
    count (df from the two sides alone) would be larger."""
    a, b = [100.0, 102.0], [102.0, 104.0]
    pool = iv.pooled([a, b, *([99.0, 101.0] for _ in range(10))])
    e = iv.effect_pooled(a, b, pool)
    assert pool.df == 12 and e.has_interval and e.low is not None and e.low < 0

    def needed(df_of: Callable[[int], float]) -> int:
        return next(m for m in range(1, 100)
                    if st.t.ppf(0.975, df_of(m)) * math.sqrt(pool.var * 2 / (2 + m)) < abs(e.d))

    m = iv.more_repetitions(e, 0.0)
    assert m == needed(lambda m: pool.df + 2 * m)
    assert m < needed(lambda m: 2 * (2 + m - 1))
