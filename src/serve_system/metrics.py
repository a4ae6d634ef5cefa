"""The metric table: every measured metric's name, perf_analyzer column, unit, labels and direction.

One record per metric (as Model Analyzer's ``perf_metric_table`` with its increasing and decreasing
records): the name a row, a record and a spec use; the column of perf_analyzer's ``-f`` CSV export that
holds it (None: measured elsewhere, e.g. Triton's statistics or its metrics endpoint); the unit it is
stored in; its labels; whether more of it is better; and whether a spec's objective or constraint may
name it. Every stage reads it: perf parsing (:data:`CSV_COLUMNS`), the results tree's columns, the
spec's ``Metric`` type (:data:`OBJECTIVE`), findings, search, the class comparison and the plots.

Directions: a spec's objective says ``goal: max`` or ``min`` and a claim says a metric moves "up" or
"down"; :func:`goal_direction`, :func:`improves` and :func:`oriented` are the one place that turns
them into "is higher better" (:func:`wants_higher`) and into which side of an interval counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: a claim's or an objective's direction: "up" (more is better, or the claim is that it rises) or "down"
Direction = Literal["up", "down"]
#: a spec objective's goal
Goal = Literal["max", "min"]
#: the goal of an objective that names none
DEFAULT_GOAL: Goal = "max"
#: the metric of an objective that names none
DEFAULT_METRIC = "throughput"
#: the unit every time is stored in (perf_analyzer's microseconds), the unit tables, text and axes show
#: it in, and how many stored units make one shown: the one conversion of a time
TIME_UNIT, TIME_SHOWN, TIME_SCALE = "us", "ms", 1000.0


@dataclass(frozen=True)
class Metric:
    """One metric. ``unit`` is what it is stored in; ``shown`` what tables and axes show it in (the
    stored value divided by ``scale``)."""

    name: str
    column: str | None
    unit: str
    label: str
    short: str
    higher_is_better: bool
    objective: bool = False
    #: a column of the results tree's rows (summary.csv)
    row: bool = True
    #: summarised per level over its repetitions (summary_stats.csv, error bars, noise)
    per_level: bool = False

    @property
    def is_time(self) -> bool:
        """Stored in :data:`TIME_UNIT` (a latency or one of its parts)."""
        return self.unit == TIME_UNIT

    @property
    def shown(self) -> str:
        return TIME_SHOWN if self.is_time else self.unit

    @property
    def scale(self) -> float:
        return TIME_SCALE if self.is_time else 1.0

    def show(self, value: float) -> float:
        """A stored value in the unit it is shown in (:attr:`shown`)."""
        return value / self.scale

    @property
    def axis(self) -> str:
        """The label with the unit it is shown in, e.g. ``p95 (ms)``."""
        return f"{self.label} ({self.shown})" if self.shown else self.label

    @property
    def direction(self) -> Direction:
        return "up" if self.higher_is_better else "down"


_PERF = "Server "  # perf_analyzer's server-side columns
TABLE: tuple[Metric, ...] = (
    Metric("throughput", "Inferences/Second", "/s", "throughput", "throughput", True, True, per_level=True),
    Metric("latency_avg_us", "Avg latency", "us", "average latency", "avg latency", False, True,
           per_level=True),
    Metric("p50_us", "p50 latency", "us", "p50", "p50", False, True, per_level=True),
    Metric("p90_us", "p90 latency", "us", "p90", "p90", False, True, per_level=True),
    Metric("p95_us", "p95 latency", "us", "p95", "p95", False, True, per_level=True),
    Metric("p99_us", "p99 latency", "us", "p99", "p99", False, True, per_level=True),
    Metric("queue_us", _PERF + "Queue", "us", "queue", "queue", False, True),
    Metric("compute_input_us", _PERF + "Compute Input", "us", "compute input", "compute input", False),
    Metric("compute_infer_us", _PERF + "Compute Infer", "us", "compute infer", "compute infer", False, True),
    Metric("compute_output_us", _PERF + "Compute Output", "us", "compute output", "compute output", False),
    Metric("client_send_us", "Client Send", "us", "client send", "client send", False, row=False),
    Metric("network_us", "Network+Server Send/Recv", "us", "network and server send/recv", "network",
           False, row=False),
    Metric("client_recv_us", "Client Recv", "us", "client receive", "client recv", False, row=False),
    Metric("avg_batch_size", None, "", "average batch", "avg batch", True, True),
    Metric("gpu_util", None, "share", "GPU utilisation", "GPU util", True, True),
    Metric("gpu_util_max", None, "share", "busiest GPU's utilisation", "busiest GPU", True),
    Metric("gpu_mem_max_bytes", None, "bytes", "GPU memory peak", "GPU memory", False),
    Metric("cpu_util", None, "share", "CPU utilisation", "CPU util", True),
)

BY_NAME: dict[str, Metric] = {m.name: m for m in TABLE}
#: perf_analyzer's ``-f`` CSV column -> metric name
CSV_COLUMNS: dict[str, str] = {m.column: m.name for m in TABLE if m.column}
#: what a spec's objective or constraint may name, in table order
OBJECTIVE: tuple[str, ...] = tuple(m.name for m in TABLE if m.objective)
#: perf_analyzer's metrics that a results row keeps, in table order
PERF_ROW: tuple[str, ...] = tuple(m.name for m in TABLE if m.column and m.row)
#: summarised per level over the repetitions
PER_LEVEL: tuple[str, ...] = tuple(m.name for m in TABLE if m.per_level)


def get(name: str) -> Metric:
    """The table's record of a metric; KeyError names it and the known ones."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(BY_NAME)}") from None


def is_time(name: str) -> bool:
    """Whether ``name`` is a metric of the table stored as a time (an unknown name is not)."""
    m = BY_NAME.get(name)
    return m is not None and m.is_time


def select(*names: str) -> tuple[str, ...]:
    """``names``, each checked against the table (a module's subset of the metrics)."""
    return tuple(get(n).name for n in names)


def higher_is_better(name: str) -> bool:
    return get(name).higher_is_better


def improves(name: str) -> Direction:
    """The direction in which a metric gets better: "up" for throughput, "down" for a latency."""
    return get(name).direction


def wants_higher(goal: str) -> bool:
    """Whether an objective's goal ranks a higher value first (``max``; anything else minimises)."""
    return goal == "max"


def goal_direction(goal: str) -> Direction:
    return "up" if wants_higher(goal) else "down"


def oriented(direction: Direction, low: float, high: float) -> tuple[float, float]:
    """An interval turned so that positive is the ``direction`` claimed: unchanged for "up",
    negated (and its ends swapped) for "down"."""
    return (low, high) if direction == "up" else (-high, -low)


def sign(direction: Direction) -> float:
    """+1 for "up", -1 for "down": ``sign * x`` grows as ``x`` gets better."""
    return 1.0 if direction == "up" else -1.0
