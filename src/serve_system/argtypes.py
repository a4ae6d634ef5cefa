"""Bounded numbers for the command line: argparse ``type=`` callables that refuse, in one usage line naming
the option, what is not a number, not finite, or outside the range the option allows."""

from __future__ import annotations

import argparse
import math


class Whole:
    """A whole number from ``low`` to ``high`` (both included); ``hint`` ends the error line."""

    def __init__(self, low: int, high: int, hint: str = "") -> None:
        self.low, self.high, self.hint = low, high, hint
        self.__name__ = f"whole number {low} to {high}"

    def __call__(self, text: str) -> int:
        t = text.strip()
        digits = t.removeprefix("-").removeprefix("+")
        if not (digits.isascii() and digits.isdigit()) or len(digits) > 30:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number: give {self._range()}")
        value = int(t)
        if not self.low <= value <= self.high:
            raise argparse.ArgumentTypeError(f"{value if len(digits) < 20 else t[:20] + '...'} is out of "
                                             f"range: give {self._range()}")
        return value

    def _range(self) -> str:
        return f"{self.low} to {self.high}" + (f" ({self.hint})" if self.hint else "")


class Number:
    """A finite number from ``low`` to ``high`` (both included; ``open_low``: above ``low``)."""

    def __init__(self, low: float, high: float, *, open_low: bool = False, hint: str = "") -> None:
        self.low, self.high, self.open_low, self.hint = low, high, open_low, hint
        self.__name__ = f"number {low:g} to {high:g}"

    def __call__(self, text: str) -> float:
        try:
            value = float(text) if len(text) <= 64 else math.nan
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a finite number: give {self._range()}")
        if value < self.low or value > self.high or (self.open_low and value == self.low):
            raise argparse.ArgumentTypeError(f"{value:g} is out of range: give {self._range()}")
        return value

    def _range(self) -> str:
        low = f"more than {self.low:g}" if self.open_low else f"{self.low:g}"
        return f"{low} to {self.high:g}" + (f" ({self.hint})" if self.hint else "")
