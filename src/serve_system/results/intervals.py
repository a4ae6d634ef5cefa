"""How sure a number is: summaries with 95 % intervals, effects between two variants, and verdicts.

Pure functions over lists of samples (one sample per repetition of a level); nothing here reads
files. The choices, and why:

- **Summary** (:func:`summarize`): n, mean, sample standard deviation and the 95 % interval of the
  mean by Student's t (``mean +- t(0.975, n - 1) * sd / sqrt(n)``), as pyperf does. Not a bootstrap:
  a run has 2 to 10 repetitions per level, and a bootstrap over so few values can only resample
  n**n arrangements of them; its percentile interval is too narrow (with n = 3 it covers the true
  mean far less often than 95 %), while t widens the interval for the uncertainty of a standard
  deviation estimated from few values. Each repetition's number is itself an average over
  thousands of requests, so it is close to normally distributed, which is what t assumes. One
  repetition gives no spread and no interval. Every metric measured here (rates, latencies,
  utilisations) cannot be negative, so neither can its mean: the interval is cut at zero (a noisy
  p99 over three repetitions would otherwise read "[-40 ms, 900 ms]"); the cut loses no coverage.
- **Effect** (:func:`effect`): B against A as a ratio, ``B / A - 1`` (+0.30 is "30 % more"), with a
  95 % interval by Welch's t on the logarithms of the samples: the difference of the mean logs,
  with Welch's standard error and degrees of freedom (no equal-variance assumption), mapped back
  with ``exp``. So the effect is the ratio of the geometric means, its interval is asymmetric
  (a halving and a doubling are equally far from "no change") and never goes below -100 %. It
  needs two repetitions per side and positive samples (throughput and latencies are).
- **Pooled effect** (:func:`pooled`, :func:`effect_pooled`): where many groups are the same thing
  measured the same way (a search's candidates: one model, one load level, one procedure), their
  run-to-run spread on the log scale is estimated once from all of them: one-way ANOVA's residual
  variance ``s_p**2 = sum_i sum_j (log x_ij - mean_i)**2 / df`` with ``df = sum_i (n_i - 1)``. An
  effect between two groups then has the standard error ``s_p * sqrt(1/n_a + 1/n_b)`` with that df,
  so two repetitions a side (or one, once other groups give the pool its df) yield a usable
  interval, where Welch's t on two groups of two has df 1 to 2 (t 12.7 to 4.3). The assumption (equal
  spread on the log scale) is checked per group by an F test against the pool without it
  (:func:`spread_test`): a group whose own spread is far larger is compared by Welch's t instead.
- **Verdict** (:func:`decide`): a claim says B moves a metric in one direction ("up": more
  throughput; "down": less latency) by at least the spec's smallest effect of interest ``s``
  (``smallest_effect``, 5 % by default). With the effect's interval [lo, hi] (for a claim the 90 %
  interval: each verdict below reads one end only, so each end is a one-sided 95 % bound and a claim
  errs at most 5 % of the time whatever the true effect; :mod:`.sequential`):

  - *held*: the interval lies wholly beyond the smallest effect in the claimed direction
    (up: lo > +s; down: hi < -s);
  - *did not hold*: the interval excludes an improvement as large as the smallest effect
    (up: hi < +s; down: lo > -s): any change there is, is smaller than what matters, or the other way;
  - *inconclusive*: the interval contains the smallest effect; with it an estimate of how many more
    repetitions per side would likely decide it (the interval's half-width shrinks as 1/sqrt(n):
    the n at which the current spread would leave the threshold outside the interval).
- **Winner** (:func:`lead`): the best variant is named only when its lead over the runner-up has
  an interval that excludes zero; otherwise the two are tied.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# the t and F quantiles alone: scipy.stats takes 0.5 s to import
from scipy.special import fdtri, stdtrit

from .. import metrics

HELD, NOT_HELD, INCONCLUSIVE, NOT_MEASURABLE = "held", "did not hold", "inconclusive", "not measurable here"
#: the verdict words, in the report's order
VERDICTS = (HELD, NOT_HELD, INCONCLUSIVE, NOT_MEASURABLE)
#: what each word means (the report prints these)
MEANINGS = {
    HELD: "the effect's one-sided 95 % bound (the near end of its 90 % interval) lies beyond the smallest "
          "effect of interest in the claimed direction",
    NOT_HELD: "the effect's one-sided 95 % bound (the far end of its 90 % interval) excludes an improvement "
              "as large as the smallest effect of interest (the effect is smaller, or goes the other way)",
    INCONCLUSIVE: "the effect's 90 % interval contains the smallest effect of interest (or there is no "
                  "interval: one repetition per side); more repetitions would likely decide it",
    NOT_MEASURABLE: "the run has no data for the claim (its variants or loads were not measured here)",
}
LEVEL = 0.95
#: the least a measured metric (a rate, a latency, a utilisation) can be
METRIC_FLOOR = 0.0
#: a level whose repetitions' standard deviation is at least this share of their mean is noisy (pyperf)
NOISY_CV = 0.10
#: the most repetitions per side an estimate names (a spec allows at most 100)
MAX_REPETITIONS = 100
ONE_REPETITION = "one repetition gives no interval: set `repetitions: 3`"
NO_POOL = "no pooled spread: no group has two repetitions"
#: the level of the F test that finds a group whose own spread is far larger than the pool's
SPREAD_LEVEL = 0.99
#: the two-sided 95 % interval's t quantile
TWO_SIDED = 0.5 + LEVEL / 2

Direction = metrics.Direction


def t_quantile(df: float, quantile: float = TWO_SIDED) -> float:
    """Student's t quantile (two-sided 95 % by default: 0.975)."""
    return float(stdtrit(df, quantile))


@dataclass(frozen=True)
class Summary:
    """n samples of one metric: mean, sample standard deviation, 95 % interval (None where n < 2)."""

    n: int
    mean: float | None
    sd: float | None
    ci_low: float | None
    ci_high: float | None

    @property
    def cv(self) -> float | None:
        """Coefficient of variation (sd / mean); None without a spread or with a zero mean."""
        if self.sd is None or not self.mean:
            return None
        return self.sd / abs(self.mean)

    @property
    def noisy(self) -> bool:
        return self.cv is not None and self.cv >= NOISY_CV


def summarize(samples: Sequence[float], floor: float | None = None) -> Summary:
    """n, mean, sd and the t interval of the mean, its low end no lower than ``floor`` (the least the
    quantity can be: ``METRIC_FLOOR`` for every measured metric; None for a quantity that can be
    negative, such as a log ratio)."""
    xs = [float(x) for x in samples]
    n = len(xs)
    if n == 0:
        return Summary(0, None, None, None, None)
    mean = math.fsum(xs) / n
    if n == 1:
        return Summary(1, mean, None, None, None)
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
    half = t_quantile(n - 1) * sd / math.sqrt(n)
    low = mean - half if floor is None else max(floor, mean - half)
    return Summary(n, mean, sd, low, mean + half)


@dataclass(frozen=True)
class Effect:
    """B against A: ``change`` = B / A - 1 (ratio of geometric means), its 95 % interval [low, high].

    ``low``/``high`` are None with ``reason`` saying why (one repetition, non-positive samples).
    ``d``, ``var_a``, ``var_b`` are the log-scale difference and variances (for :func:`more_repetitions`);
    ``df`` is the pool's degrees of freedom for a pooled effect (:func:`effect_pooled`), else None.
    """

    n_a: int
    n_b: int
    change: float | None
    low: float | None
    high: float | None
    reason: str | None = None
    d: float = 0.0
    var_a: float = 0.0
    var_b: float = 0.0
    df: int | None = None
    #: the t quantile of the interval (0.975: two-sided 95 %; higher at a sequential look)
    quantile: float = TWO_SIDED

    @property
    def level(self) -> float:
        """The interval's confidence (0.95 unless a sequential look widened it)."""
        return 2 * self.quantile - 1

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None


def _var(xs: list[float]) -> float:
    m = math.fsum(xs) / len(xs)
    return math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def _welch(var_a: float, n_a: int, var_b: float, n_b: int) -> tuple[float, float]:
    """(standard error, degrees of freedom) of a difference of two means (Welch-Satterthwaite)."""
    qa, qb = var_a / n_a, var_b / n_b
    se = math.sqrt(qa + qb)
    if se == 0:
        return 0.0, float(n_a + n_b - 2)
    df = (qa + qb) ** 2 / (qa**2 / (n_a - 1) + qb**2 / (n_b - 1))
    return se, df


def _logs(a: Sequence[float], b: Sequence[float]) -> tuple[list[float], list[float], float] | Effect:
    """Both sides' log samples and the difference of their means (B - A), or the Effect that has no
    interval (no samples, a non-positive one)."""
    xa, xb = [float(x) for x in a], [float(x) for x in b]
    na, nb = len(xa), len(xb)
    if not na or not nb:
        return Effect(na, nb, None, None, None, "no samples on one side")
    if min(xa + xb) <= 0:
        ma, mb = math.fsum(xa) / na, math.fsum(xb) / nb
        return Effect(na, nb, (mb / ma - 1) if ma > 0 else None, None, None,
                      "a sample is zero or negative: no ratio interval")
    la, lb = [math.log(x) for x in xa], [math.log(x) for x in xb]
    return la, lb, math.fsum(lb) / nb - math.fsum(la) / na


def _ratio(x: float) -> float:
    """``exp(x) - 1``, a log difference as a change; an interval end past any float (a t quantile of
    few degrees of freedom at a strict level) is the largest one."""
    return math.expm1(x) if x < 700 else math.inf


def effect(a: Sequence[float], b: Sequence[float], quantile: float = TWO_SIDED) -> Effect:
    """The relative effect of B against A with its 95 % interval (Welch's t on log samples); with
    ``quantile``, the interval is ``d +- t(quantile, df) * se`` instead (e.g. a one-sided bound at an
    adjusted level: its one end is that bound)."""
    logs = _logs(a, b)
    if isinstance(logs, Effect):
        return logs
    la, lb, d = logs
    na, nb, change = len(la), len(lb), math.expm1(d)
    if na < 2 or nb < 2:
        return Effect(na, nb, change, None, None, ONE_REPETITION, d)
    va, vb = _var(la), _var(lb)
    se, df = _welch(va, na, vb, nb)
    half = t_quantile(df, quantile) * se
    return Effect(na, nb, change, _ratio(d - half), _ratio(d + half), None, d, va, vb, quantile=quantile)


@dataclass(frozen=True)
class Pool:
    """A run-to-run variance on the log scale pooled over groups (one-way ANOVA's residual mean
    square): ``var`` with ``df`` degrees of freedom; ``var`` is 0.0 where ``df`` is 0 (no spread)."""

    var: float
    df: int

    @property
    def sd(self) -> float:
        return math.sqrt(self.var)


def _log_group(samples: Sequence[float]) -> list[float] | None:
    xs = [float(x) for x in samples]
    return [math.log(x) for x in xs] if xs and min(xs) > 0 else None


def pooled(groups: Iterable[Sequence[float]]) -> Pool:
    """The pooled variance of the groups' log samples: ``sum_i sum_j (log x_ij - mean_i)**2 / df``,
    ``df = sum_i (n_i - 1)``. A group of one sample adds nothing; a group with a zero or negative
    sample (no logarithm) is left out."""
    squares: list[float] = []
    df = 0
    for g in groups:
        logs = _log_group(g)
        if logs is None or len(logs) < 2:
            continue
        m = math.fsum(logs) / len(logs)
        squares += [(x - m) ** 2 for x in logs]
        df += len(logs) - 1
    return Pool(math.fsum(squares) / df if df else 0.0, df)


@dataclass(frozen=True)
class SpreadTest:
    """One group's own log variance against the pool without it: ``f`` = their ratio, ``critical`` the
    F(``df_own``, ``df_rest``) quantile at :data:`SPREAD_LEVEL`; ``larger``: f exceeds it."""

    f: float
    critical: float
    df_own: int
    df_rest: int

    @property
    def larger(self) -> bool:
        return self.f > self.critical


def spread_test(samples: Sequence[float], pool: Pool) -> SpreadTest | None:
    """Whether a group's spread is far larger than the rest's (``pool``: pooled over every group,
    this one included); None where there is nothing to test (fewer than two positive samples, or no
    degrees of freedom left without it)."""
    logs = _log_group(samples)
    if logs is None or len(logs) < 2:
        return None
    own_df = len(logs) - 1
    own = _var(logs)
    rest_df = pool.df - own_df
    if rest_df < 1:
        return None
    rest = max(0.0, (pool.var * pool.df - own * own_df) / rest_df)
    f = math.inf if rest == 0 and own > 0 else (own / rest if rest > 0 else 0.0)
    return SpreadTest(f, float(fdtri(own_df, rest_df, SPREAD_LEVEL)), own_df, rest_df)


def effect_pooled(a: Sequence[float], b: Sequence[float], pool: Pool, quantile: float = TWO_SIDED,
                  extra: float = 0.0) -> Effect:
    """B against A as :func:`effect`, but with the pooled spread: the standard error
    ``pool.sd * sqrt(1/n_a + 1/n_b + extra)`` on the log difference and t with the pool's df, so one
    sample a side is enough once the pool has degrees of freedom. ``quantile`` as in :func:`effect`.
    ``extra``: more variance, in units of the pool's, carried by the samples (samples corrected by a
    mean of m other samples of the same spread carry ``1/m`` more)."""
    logs = _logs(a, b)
    if isinstance(logs, Effect):
        return logs
    la, lb, d = logs
    na, nb, change = len(la), len(lb), math.expm1(d)
    if pool.df < 1:
        return Effect(na, nb, change, None, None, NO_POOL, d)
    half = t_quantile(pool.df, quantile) * pool.sd * math.sqrt(1 / na + 1 / nb + extra)
    return Effect(na, nb, change, _ratio(d - half), _ratio(d + half), None, d, pool.var, pool.var,
                  pool.df, quantile)


def more_repetitions(e: Effect, target: float) -> int | None:
    """About how many more repetitions per side would leave ``target`` (a change, e.g. +0.05) outside
    the interval, if the spread stays as measured; None when no number up to :data:`MAX_REPETITIONS`
    per side would (the effect sits on the threshold) or there is no spread to go by."""
    if not e.has_interval or target <= -1:
        return None
    dist = abs(e.d - math.log1p(target))
    have = min(e.n_a, e.n_b)
    if dist == 0:
        return None
    for m in range(have + 1, MAX_REPETITIONS + 1):
        if e.df is None:
            se, df = _welch(e.var_a, m, e.var_b, m)
        else:  # pooled: the pool gains at least the two sides' new repetitions
            se, df = math.sqrt(e.var_a / m + e.var_b / m), e.df + 2 * (m - have)
        if t_quantile(df, e.quantile) * se < dist:
            return m - have
    return None


#: the power at which :func:`detectable` states what a comparison could have seen
POWER = 0.80


def _se_df(e: Effect, m_a: int, m_b: int) -> tuple[float, float]:
    """The standard error and df of the log difference with ``m_a`` and ``m_b`` repetitions a side
    (pooled: the pool's df grown by the new repetitions)."""
    if e.df is None:
        return _welch(e.var_a, m_a, e.var_b, m_b)
    return math.sqrt(e.var_a / m_a + e.var_b / m_b), e.df + (m_a - e.n_a) + (m_b - e.n_b)


def detectable(e: Effect, power: float = POWER) -> float | None:
    """The minimal detectable effect: the smallest true change (either way, as a share: 0.12 is 12 %)
    that this noise and these repetitions would have told from no change with ``power``, the interval
    at its own level: ``exp((t(q, df) + t(power, df)) * se) - 1``. None without an interval."""
    if not e.has_interval:
        return None
    se, df = _se_df(e, e.n_a, e.n_b)
    if se == 0:
        return 0.0
    return math.expm1((t_quantile(df, e.quantile) + t_quantile(df, power)) * se)


def needed(e: Effect, smallest: float, power: float = POWER) -> int | None:
    """The repetitions per side at which the minimal detectable effect (:func:`detectable`) reaches
    the smallest effect of interest, the spread staying as measured; None past
    :data:`MAX_REPETITIONS` or without an interval."""
    if not e.has_interval or smallest <= 0:
        return None
    target = math.log1p(smallest)
    for m in range(max(2, min(e.n_a, e.n_b)), MAX_REPETITIONS + 1):
        se, df = _se_df(e, max(m, e.n_a), max(m, e.n_b))
        if df >= 1 and (t_quantile(df, e.quantile) + t_quantile(df, power)) * se <= target:
            return m
    return None


@dataclass(frozen=True)
class Verdict:
    word: str
    #: more repetitions per side that would likely decide an inconclusive verdict (None: no estimate)
    more: int | None = None
    #: why it is inconclusive (e.g. one repetition)
    reason: str | None = None
    #: inconclusive: the minimal detectable effect at :data:`POWER` (:func:`detectable`)
    mde: float | None = None
    #: inconclusive: the repetitions per side a decision at the smallest effect of interest needs
    need: int | None = None
    smallest: float | None = None


def _inconclusive(e: Effect, targets: Sequence[float], smallest: float) -> Verdict:
    if not e.has_interval:
        return Verdict(INCONCLUSIVE, None, e.reason)
    mde, need = detectable(e), needed(e, smallest)
    guesses = [m for t in targets if (m := more_repetitions(e, t)) is not None]
    if not guesses:
        return Verdict(INCONCLUSIVE, None, f"the effect lies so close to the threshold that deciding would "
                                           f"take more than {MAX_REPETITIONS} repetitions per side",
                       mde, need, smallest)
    return Verdict(INCONCLUSIVE, min(guesses), None, mde, need, smallest)


def decide(e: Effect, direction: Direction, smallest: float, far: Effect | None = None) -> Verdict:
    """held / did not hold / inconclusive for the claim "B moves the metric ``direction`` by at
    least ``smallest``" (see the module's text). ``far``: the same comparison at a stricter level,
    whose far end alone decides *did not hold* (a claim of several comparisons: Holm over them,
    :mod:`.claim`); held is read from ``e``'s near end."""
    s = metrics.sign(direction) * smallest
    if e.has_interval:
        assert e.low is not None and e.high is not None
        low, high = metrics.oriented(direction, e.low, e.high)  # positive: the claimed direction
        if far is not None and far.has_interval:
            assert far.low is not None and far.high is not None
            high = metrics.oriented(direction, far.low, far.high)[1]
        if low > smallest:
            return Verdict(HELD)
        if high < smallest:
            return Verdict(NOT_HELD)
    return _inconclusive(e, [s], smallest)


def lead(e: Effect, goal: str, smallest: float) -> Verdict:
    """The winner's lead over the runner-up (``e``: the winner B against the runner-up A).

    did not hold: the interval lies within +-smallest (a tie, decided: they differ by less than what
    matters, even where the interval excludes zero: a difference inside the smallest effect of
    interest names no winner); held: otherwise, when it excludes zero (a winner); inconclusive else.
    ``goal``: the objective's (``max``: the winner's values are higher, else lower).
    """
    if e.has_interval:
        assert e.low is not None and e.high is not None
        if e.low > -smallest and e.high < smallest:
            return Verdict(NOT_HELD)
        if metrics.oriented(metrics.goal_direction(goal), e.low, e.high)[0] > 0:
            return Verdict(HELD)
    return _inconclusive(e, [0.0, smallest if e.d >= 0 else -smallest], smallest)


def combine(words: Sequence[str]) -> str:
    """One verdict of several comparisons: did not hold if any did not; held if all held; else
    inconclusive."""
    if not words:
        return NOT_MEASURABLE
    if NOT_HELD in words:
        return NOT_HELD
    return HELD if all(w == HELD for w in words) else INCONCLUSIVE


def combine_all(words: Sequence[str]) -> str:
    """One verdict of several parts that must all be decided (the best variant over its objectives):
    inconclusive while any part is; held if all held; else did not hold. Unlike :func:`combine`, one
    decided part does not decide the whole while another is still open."""
    if not words:
        return NOT_MEASURABLE
    if INCONCLUSIVE in words:
        return INCONCLUSIVE
    return HELD if all(w == HELD for w in words) else NOT_HELD


def pct_level(level: float) -> str:
    """A confidence level as the report prints it: ``95 %``, ``99.2 %``, ``99.97 %``."""
    return f"{level * 100:.3g} %" if level < 0.9995 else f"{level * 100:.2f} %"


def pct(x: float) -> str:
    return f"{x * 100:+.0f} %"


def sides(e: Effect) -> str:
    return f"n = {e.n_a} per side" if e.n_a == e.n_b else f"n = {e.n_a} and {e.n_b}"


def effect_text(e: Effect) -> str:
    """``+30 % [+22 %, +38 %], n = 3 per side``; without an interval
    ``+30 %, n = 1 per side, no interval``."""
    if e.change is None:
        return f"no effect ({e.reason})"
    if not e.has_interval:
        why = "no interval" if e.reason == ONE_REPETITION else f"no interval: {e.reason}"
        return f"{pct(e.change)}, {sides(e)}, {why}"
    assert e.low is not None and e.high is not None
    # an adjusted level (a sequential look, a search's drop rule) is said with the interval
    level = "" if e.quantile == TWO_SIDED else f" ({pct_level(e.level)} interval)"
    return f"{pct(e.change)} [{pct(e.low)}, {pct(e.high)}]{level}, {sides(e)}"


def describe(what: str, e: Effect) -> str:
    """``throughput +30 % [+22 %, +38 %], n = 3 per side`` (no interval: says so)."""
    return f"{what} {effect_text(e)}"


def explain(v: Verdict) -> str:
    """The reason an inconclusive verdict gives, or ''."""
    if v.word != INCONCLUSIVE:
        return ""
    if v.reason:
        return f"inconclusive: {v.reason}" + could_see(v)
    more = f"about {v.more} more repetition{'s' if v.more != 1 else ''}"
    return f"inconclusive: {more} per side would likely decide it" + could_see(v)


def could_see(v: Verdict) -> str:
    """What an inconclusive comparison could have seen: '; it could have detected a change of 12 % or
    more (80 % power); a decision at the smallest effect of interest (5 %) needs about 9 repetitions
    per side' ('' without an interval)."""
    if v.mde is None:
        return ""
    out = (f"; with this noise and n it could have detected a change of {v.mde * 100:.0f} % or more "
           f"({POWER * 100:.0f} % power)")
    if v.smallest is not None:
        at = f"the smallest effect of interest ({v.smallest * 100:g} %)"
        out += (f"; telling {at} from none needs about {v.need} repetitions per side" if v.need is not None
                else f"; telling {at} from none would need more than {MAX_REPETITIONS} repetitions per side")
    return out
