"""Error control when a run looks at its data more than once: ``repetitions: auto`` and halving.

``repetitions: auto`` judges every claim after 3 repetitions, then after each further one up to its
budget's most (``budget.repetitions``), and stops as soon as everything is decided. Judging each look
with a fixed 95 % interval errs more often than 5 %: each look is another chance for noise to cross a
boundary (optional stopping). Here the error budget (:data:`ALPHA`, 5 % per claim) is *spent* over
the planned looks instead (Lan & DeMets 1983, "Discrete sequential boundaries for clinical trials"):

- the plan fixes the looks: at n = ``first``, ``first + 1``, ..., ``last`` repetitions per side, so
  the information fraction of the look at n is ``t = n / last``;
- a spending function ``f(t; a)`` says how much of each side's error ``a = alpha / 2`` may be spent
  by then (symmetric two-sided boundaries, as gsDesign's ``sfLDOF`` and ``sfLDPocock`` with
  ``test.type = 2``): O'Brien-Fleming type (the default) ``2 - 2 Phi(z(1 - a/2) / sqrt(t))`` spends
  almost nothing early and keeps the last look close to a plain 95 %; Pocock type
  ``a ln(1 + (e - 1) t)`` spends evenly;
- the boundary ``c_k`` of each look on the z scale follows from the spending (the chance that a
  standardised Brownian motion observed at ``t_1..t_k`` first leaves ``[-c, c]`` at look k is what
  ``alpha(t_k) - alpha(t_{k-1})`` allows), by the recursive numerical integration of Armitage,
  McPherson & Rowe (1969) on a grid;
- the interval of a comparison judged at look k is a *repeated confidence interval* (Jennison &
  Turnbull, "Group Sequential Methods", ch. 9): the t interval at the nominal level ``1 - 2(1 - Phi(c_k))``
  (t with the comparison's own degrees of freedom at that level: the usual small-sample reading of a
  z boundary). These intervals cover the true effect at every look at once, so a verdict read at
  whatever look the run stopped errs at most as often as one fixed interval does.

**One side or two** (:data:`CLAIM`, :data:`BEST`). A claim ("B raises throughput by at least s") is
one-sided: *held* says the effect is at least s (its interval's low end above s), *did not hold* says
it is less (the high end below s); whatever the true effect, at most one of the two is wrong, and
each is wrong only when the true effect lies past the interval's one end. So a claim spends its 5 %
on one side: each end of its interval is a one-sided 95 % bound (the two-sided 90 % interval; with
looks, boundaries that spend 5 % a side, i.e. the symmetric design at a two-sided 10 %), as in two
one-sided tests (Schuirmann 1987). Naming the best of two is two-sided (either could be named
falsely under A/A): its lead keeps the two-sided 95 % interval (2.5 % a side).

**Looks counted by what was judged** (:meth:`Looks.error_of`). The information of a difference of
two means grows as ``1 / (1/n_a + 1/n_b)``, so a comparison of ``n_a`` against ``n_b`` repetitions is
judged at the information fraction ``h / last`` (``h`` their harmonic mean), after the plan's looks
before it: a judgement after one side alone grew (three or more variants, ``only``, a contended level
measured again) is a look of its own and spends its share, where the smaller n alone would have
judged it again at the same boundary.

Halving's drops are not split here any more: the search's 5 % is split over the pairs each rung
ranks (:func:`serve_system.results.searchrule.rung_share`); :func:`rung_level` (5 % over the
planned rungs) is the level the end's tie is read at, and the rule before.

Pure functions; numpy and scipy.special only (scipy.stats takes half a second to import, scipy.optimize
0.15 s: the boundary's root is found by bisection).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np
from scipy.special import ndtr, ndtri

from .intervals import pct_level

if TYPE_CHECKING:
    from ..node.plans import AdaptivePlan

#: the error budget per verdict: the chance that a claim's verdict, or a named best, is wrong
ALPHA = 0.05
#: a claim's verdict is one-sided: its budget is spent on one side (each end a one-sided 95 % bound)
CLAIM = 1
#: naming the best of two is two-sided: the budget is split over both sides (2.5 % each)
BEST = 2
OBRIEN_FLEMING, POCOCK, NONE = "obrien-fleming", "pocock", "none"
#: the methods of :class:`Looks` (``none``: a fixed 95 % interval at every look, as before)
METHODS = (OBRIEN_FLEMING, POCOCK, NONE)
#: the default method of ``repetitions: auto``
DEFAULT_METHOD = OBRIEN_FLEMING
NAMES = {OBRIEN_FLEMING: "O'Brien-Fleming-type alpha spending (Lan-DeMets)",
         POCOCK: "Pocock-type alpha spending (Lan-DeMets)",
         NONE: "none (a fixed 95 % interval at every look)"}
#: grid points per unit of standard deviation in the recursive integration
_GRID = 32


def spent(t: float, method: str = DEFAULT_METHOD, alpha: float = ALPHA) -> float:
    """The two-sided error a spending function allows by information fraction ``t`` (0 < t <= 1):
    twice what one side's ``f(t; alpha / 2)`` allows (the module's text)."""
    t = min(max(t, 0.0), 1.0)
    side = alpha / 2
    if t <= 0:
        return 0.0
    if method == OBRIEN_FLEMING:
        return float(2 * (2 - 2 * ndtr(ndtri(1 - side / 2) / math.sqrt(t))))
    if method == POCOCK:
        return float(2 * side * math.log1p((math.e - 1) * t))
    raise ValueError(f"spending method {method!r}: use one of {', '.join(METHODS[:2])}")


def _normal_pdf(x: np.ndarray, var: float) -> np.ndarray:
    return np.asarray(np.exp(-x * x / (2 * var)) / math.sqrt(2 * math.pi * var))


def _crossing(grid: np.ndarray, mass: np.ndarray, sd: float, bound: float) -> float:
    """The chance of leaving [-bound, bound] at the next look: the mass at ``grid`` moved by N(0, sd**2)."""
    return float(np.sum(mass * ((1 - ndtr((bound - grid) / sd)) + ndtr((-bound - grid) / sd))))


def _bisect(f: Callable[[float], float], target: float, lo: float, hi: float, xtol: float = 1e-10) -> float:
    """The ``x`` in [lo, hi] where the decreasing ``f`` falls to ``target`` (``f(lo) > target >= f(hi)``),
    to ``xtol``: bisection, 40 steps here (scipy.optimize's root finders cost 0.15 s to import, paid by
    every ``decide`` and ``report``)."""
    while hi - lo > xtol:
        mid = (lo + hi) / 2
        if f(mid) > target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@lru_cache(maxsize=256)
def boundaries(fractions: tuple[float, ...], method: str = DEFAULT_METHOD,
               alpha: float = ALPHA) -> tuple[float, ...]:
    """The two-sided z boundaries ``c_1..c_K`` of looks at the information ``fractions`` (increasing,
    the last at most 1) that spend ``alpha`` by ``method`` (the module's text)."""
    if not fractions or any(b <= a for a, b in pairwise(fractions)) \
            or fractions[0] <= 0 or fractions[-1] > 1 + 1e-12:
        raise ValueError(f"information fractions {fractions!r}: use increasing values in (0, 1]")
    out: list[float] = []
    # the sub-density of S(t) (a standard Brownian motion, Z = S / sqrt(t)) on the continuation region
    grid = np.zeros(0)
    dens = np.zeros(0)
    prev_t, prev_spent = 0.0, 0.0
    for t in fractions:
        target = spent(t, method, alpha) - prev_spent
        if not out:
            c = float(ndtri(1 - target / 2)) if target > 0 else math.inf
            b = c * math.sqrt(t)
            n = max(101, int(2 * min(b, 12 * math.sqrt(t)) / math.sqrt(t) * _GRID) | 1)
            grid = np.linspace(-min(b, 12 * math.sqrt(t)), min(b, 12 * math.sqrt(t)), n)
            dens = _normal_pdf(grid, t)
        else:
            step = t - prev_t
            sd = math.sqrt(step)
            w = np.full(grid.size, grid[1] - grid[0])
            w[0] = w[-1] = w[0] / 2  # trapezoid weights
            mass = dens * w

            if target <= 0:
                b = math.inf
            elif _crossing(grid, mass, sd, 1e-9) <= target:
                b = 1e-9
            else:
                b = _bisect(functools.partial(_crossing, grid, mass, sd), target, 1e-9, 40.0 * math.sqrt(t))
            c = b / math.sqrt(t)
            lim = min(b, 12 * math.sqrt(t))
            n = max(101, int(2 * lim / sd * _GRID) | 1)
            n = min(n, 1601)
            new = np.linspace(-lim, lim, n)
            # density on the new grid: the old mass moved by N(0, step), kept inside the boundary
            dens = (_normal_pdf(new[:, None] - grid[None, :], step) @ mass)
            grid = new
        out.append(c)
        prev_t, prev_spent = t, prev_spent + target
    return tuple(out)


def nominal(c: float) -> float:
    """The two-sided nominal error of a z boundary: ``2 (1 - Phi(c))``."""
    return 0.0 if math.isinf(c) else float(2 * (1 - ndtr(c)))


@dataclass(frozen=True)
class Looks:
    """A sequential plan: looks after ``first``, ``first + 1``, ..., ``last`` repetitions per side,
    the error ``alpha`` spent by ``method`` (:data:`METHODS`)."""

    first: int
    last: int
    method: str = DEFAULT_METHOD
    alpha: float = ALPHA

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"sequential method {self.method!r}: use one of {', '.join(METHODS)}")
        if not 1 <= self.first <= self.last:
            raise ValueError(f"looks from {self.first} to {self.last}: use 1 <= first <= last")

    @property
    def sequential(self) -> bool:
        """Whether more than one look is planned and the error is spent over them."""
        return self.method != NONE and self.last > self.first

    def schedule(self, n: int) -> tuple[int, ...]:
        """The repetitions per side of the looks up to the one at ``n`` (a look before the plan's
        first, e.g. after failed levels, is a look of its own)."""
        n = max(1, min(n, self.last))
        return tuple(range(min(self.first, n), n + 1))

    def error(self, n: int, sides: int = BEST) -> float:
        """The two-sided nominal error of the interval at the look with ``n`` per side: ``sides`` =
        :data:`BEST` spends ``alpha`` over both sides, :data:`CLAIM` ``alpha`` on each (the module's
        text)."""
        budget = fixed_error(sides, self.alpha)
        if not self.sequential:
            return budget
        looks = self.schedule(n)
        if looks[0] == self.first:  # the plan's looks: a prefix of its boundaries (Lan-DeMets)
            full = boundaries(tuple(k / self.last for k in range(self.first, self.last + 1)), self.method,
                              budget)
            return nominal(full[len(looks) - 1])
        return nominal(boundaries((n / self.last,), self.method, budget)[0])

    def fractions(self, n_a: int, n_b: int) -> tuple[float, ...]:
        """The information fractions of the looks up to a comparison judged with ``n_a`` and ``n_b``
        repetitions: its own is ``h / last``, ``h = 2 / (1/n_a + 1/n_b)`` (the information of a
        difference of two means grows as the harmonic mean of the two sides, not as the smaller one),
        after the plan's looks before it (``first .. last`` per side, each an equal-sided look)."""
        h = min(2 / (1 / max(1, n_a) + 1 / max(1, n_b)), float(self.last))
        earlier = [k / self.last for k in range(self.first, self.last + 1) if k < h - 1e-9]
        return (*earlier, h / self.last)

    def error_of(self, n_a: int, n_b: int, sides: int = BEST) -> float:
        """As :meth:`error`, for a comparison of ``n_a`` against ``n_b`` repetitions: the boundary of its
        look at its information fraction (:meth:`fractions`), so that a judgement after one side alone
        grew is a look of its own, spending its share."""
        budget = fixed_error(sides, self.alpha)
        if not self.sequential:
            return budget
        return nominal(boundaries(self.fractions(n_a, n_b), self.method, budget)[-1])

    def quantile_of(self, n_a: int, n_b: int, sides: int = BEST) -> float:
        """The interval's t quantile of a comparison of ``n_a`` against ``n_b`` repetitions
        (:meth:`error_of`)."""
        return 1 - self.error_of(n_a, n_b, sides) / 2

    def quantile(self, n: int, sides: int = BEST) -> float:
        """The interval's t quantile at the look with ``n`` per side (without spending: 0.975 for
        :data:`BEST`, 0.95 for :data:`CLAIM`)."""
        return 1 - self.error(n, sides) / 2

    def level(self, n: int, sides: int = BEST) -> float:
        """The interval's two-sided confidence at the look with ``n`` per side (without spending: 0.95
        for :data:`BEST`, 0.90 for :data:`CLAIM`)."""
        return 1 - self.error(n, sides)

    def text(self) -> str:
        """The report's sentence: the method, the looks and each look's level."""
        if not self.sequential:
            return ""
        def levels(sides: int) -> str:
            return ", ".join(f"{n}: {pct_level(self.level(n, sides))}"
                             for n in range(self.first, self.last + 1))

        return (f"`repetitions: auto` looks at the data after {self.first} to {self.last} repetitions per "
                f"side and stops when every claim is decided; to keep each verdict's error at "
                f"{self.alpha * 100:g} % over these looks, its intervals are repeated confidence intervals "
                f"with {NAMES[self.method]}. A claim is one-sided ({self.alpha * 100:g} % on the side it "
                f"could err): its interval's level at each look (repetitions per side: level) is "
                f"{levels(CLAIM)}; the best variant's lead is two-sided ({self.alpha * 50:g} % a side): "
                f"{levels(BEST)}. A comparison whose sides have different repetitions is judged at its "
                f"information fraction (the harmonic mean of the two sides' repetitions), a look of its own.")


def fixed_error(sides: int = BEST, alpha: float = ALPHA) -> float:
    """The two-sided nominal error of one fixed look's interval: ``alpha`` for :data:`BEST` (the 95 %
    interval), ``2 alpha`` for :data:`CLAIM` (the 90 % interval: each end a one-sided 95 % bound)."""
    if sides not in (CLAIM, BEST):
        raise ValueError(f"sides {sides!r}: use {CLAIM} (a claim) or {BEST} (the best of two)")
    return alpha * (2 if sides == CLAIM else 1)


def fixed_quantile(sides: int = BEST, alpha: float = ALPHA) -> float:
    """The t quantile of one fixed look's interval (0.975 for :data:`BEST`, 0.95 for :data:`CLAIM`)."""
    return 1 - fixed_error(sides, alpha) / 2


def rung_level(rungs: int, alpha: float = ALPHA) -> float:
    """``alpha / rungs``: halving's level a rung, split evenly over its planned rungs (the end's tie,
    and the drop rule before issue 40: per candidate over the rungs)."""
    return alpha / max(1, rungs)


def looks_of(adaptive: AdaptivePlan | None, method: str = DEFAULT_METHOD) -> Looks | None:
    """The looks of a host plan's ``adaptive`` record (``repetitions: auto``: from its ``start`` to its
    ``max``), by ``method``; None for a plan without it or one whose numbers are no plan of looks."""
    if adaptive is None:
        return None
    try:
        return Looks(min(adaptive.start, adaptive.max), adaptive.max, method)
    except ValueError:
        return None
