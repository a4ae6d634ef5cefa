"""A results row: one host x variant x load level x repetition (summary.csv's line), as a typed record.

:func:`serve_system.results.tree.collect` makes them from the raw files; every later step reads them. A
:class:`Row` is a :class:`~typing.TypedDict`: summary.csv and summary.json write it as they always did,
and every column a module reads by name is checked (its name, and its type where it has one). A column
named at run time (a metric of :mod:`serve_system.metrics`) is read with :func:`value`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, cast


class Row(TypedDict, total=False):
    """A results row (:data:`serve_system.results.tree.COLUMNS`, every one set by :func:`tree.collect`;
    a row the class comparison pools has fewer). The measured columns hold what the raw files held:
    an int or a float (or None), as summary.csv and summary.json write them."""

    experiment: str
    run_id: str
    host: str
    variant: str
    model: str | None
    mode: str | None
    load: Any
    repetition: Any
    #: a :class:`~serve_system.results.status.Status` (a plain string in a row read back from a summary)
    status: str
    error: str | None
    throughput: Any
    latency_avg_us: Any
    p50_us: Any
    p90_us: Any
    p95_us: Any
    p99_us: Any
    queue_us: Any
    compute_input_us: Any
    compute_infer_us: Any
    compute_output_us: Any
    inference_count: Any
    execution_count: Any
    avg_batch_size: Any
    batch_size_histogram: dict[str, int] | None
    gpu_util: Any
    gpu_util_max: Any
    gpu_mem_max_bytes: Any
    cpu_util: Any
    attempts: Any
    retried: bool | None
    duration_s: Any
    windows: Any
    window_cv: Any
    client_peak_rss_bytes: Any
    stand_in: str | None
    #: the FastAPI client's error count per kind (bench.json)
    errors: Any
    contention: str | None
    other_cpu: Any
    #: a failed level's measuring command's peak memory (MB), where recorded
    peak_rss_mb: float | None
    #: a class comparison's pooled row: the node it stands for
    node: str


def value(row: Row, name: str) -> Any:
    """The column ``name`` of ``row`` (None where it has none): for a column named at run time, a
    metric of :mod:`serve_system.metrics`."""
    return cast(Mapping[str, Any], row).get(name)


def put(row: Row, values: Mapping[str, Any]) -> None:
    """Set the columns ``values`` names in ``row`` (columns named at run time: the metrics a parser
    read, a benchmark client's fields)."""
    cast(dict[str, object], row).update(values)


def blank(columns: tuple[str, ...], base: Row) -> Row:
    """A row with every one of ``columns`` None, in that order (summary.csv/json's), then ``base``."""
    row = cast(Row, dict.fromkeys(columns))
    row.update(base)
    return row
