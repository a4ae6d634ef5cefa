"""How a measured value reads in a Markdown table: one formatting rule for the report and compare."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from .. import metrics


def cell(v: Any, digits: int = 1) -> str:
    """A table cell: ``-`` for no value (None, empty, NaN), floats with thousands separators."""
    if v is None or v == "" or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return str(v)


def ms_cells(row: Mapping[str, Any]) -> Callable[[str], str]:
    """A formatter of the row's time columns in the unit they are shown in (``-`` where absent)."""
    return lambda k: cell(metrics.get(k).show(row[k]), 2) if row.get(k) is not None else "-"
