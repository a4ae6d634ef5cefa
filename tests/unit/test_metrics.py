"""The metric table (:mod:`serve_system.metrics`): every stage's metric names, columns, labels and
directions are read from it, and the direction helpers turn goals and claims into sides of an interval."""

from __future__ import annotations

import dataclasses
import json

import pytest

from serve_system import metrics
from serve_system.experiment import perf
from serve_system.experiment.spec.models import Objective, json_schema
from serve_system.results import classmd, findings, intervals, tree
from serve_system.results.intervals import Effect
from serve_system.results.row import Row


def test_perf_csv_columns_are_the_tables_and_name_level_fields() -> None:
    fields = {f.name for f in dataclasses.fields(perf.Level)}
    assert perf.CSV_COLUMNS == {m.column: m.name for m in metrics.TABLE if m.column}
    assert set(perf.CSV_COLUMNS.values()) <= fields
    header = "Concurrency,Inferences/Second,Client Send,p95 latency,Server Queue\n1,52.5,10,9000,300\n"
    (lvl,) = perf.parse_csv(header)
    assert (lvl.throughput, lvl.client_send_us, lvl.p95_us, lvl.queue_us) == (52.5, 10, 9000, 300)


def test_the_results_rows_and_findings_carry_the_tables_metrics() -> None:
    row_metrics = [m.name for m in metrics.TABLE if m.row]
    assert [c for c in tree.COLUMNS if c in metrics.BY_NAME] == row_metrics
    assert tree.STAT_METRICS == ("throughput", "latency_avg_us", "p50_us", "p90_us", "p95_us", "p99_us")
    assert set(findings.METRICS) <= set(row_metrics)
    assert classmd.METRIC_NAMES["p95_us"] == "p95 (ms)"
    assert classmd.METRIC_NAMES["throughput"] == "throughput (/s)"
    assert classmd.SHORT["latency_avg_us"] == "avg latency"


def test_the_typed_row_is_the_summary_columns() -> None:
    """results.row.Row declares every column tree.collect writes, in order, and the two a row may add (a
    failed level's peak memory, a pooled class row's node): a column added to one is added to both."""
    assert tuple(Row.__annotations__) == (*tree.COLUMNS, "peak_rss_mb", "node")


def test_the_specs_metric_type_is_the_tables_objective_metrics() -> None:
    text = json.dumps(json_schema())
    enum = json.dumps(list(metrics.OBJECTIVE))
    assert f'"enum": {enum}' in text
    assert Objective(metric="p90_us").metric == "p90_us"
    with pytest.raises(ValueError, match="client_send_us"):
        Objective(metric="client_send_us")  # in the table, but no objective may name it


def test_select_refuses_a_metric_the_table_lacks() -> None:
    assert metrics.select("p95_us", "throughput") == ("p95_us", "throughput")
    with pytest.raises(KeyError, match="unknown metric 'p96_us'"):
        metrics.select("p96_us")


def test_directions() -> None:
    assert metrics.improves("throughput") == "up" and metrics.improves("p99_us") == "down"
    assert metrics.higher_is_better("avg_batch_size") and not metrics.higher_is_better("queue_us")
    assert metrics.goal_direction("max") == "up" and metrics.goal_direction("min") == "down"
    assert metrics.oriented("up", -0.1, 0.3) == (-0.1, 0.3)
    assert metrics.oriented("down", -0.1, 0.3) == (-0.3, 0.1)


def _effect(low: float, high: float) -> Effect:
    mid = (low + high) / 2
    return Effect(n_a=3, n_b=3, change=mid, low=low, high=high, d=mid, var_a=0.01, var_b=0.01)


@pytest.mark.parametrize(("low", "high"),
                         [(0.1, 0.3), (-0.3, -0.1), (-0.01, 0.02), (-0.2, 0.2), (0.02, 0.3)])
def test_a_claim_down_is_the_claim_up_of_the_mirrored_interval(low: float, high: float) -> None:
    up = intervals.decide(_effect(low, high), "up", 0.05)
    down = intervals.decide(_effect(-high, -low), "down", 0.05)
    assert up.word == down.word
    lead_max = intervals.lead(_effect(low, high), "max", 0.05)
    lead_min = intervals.lead(_effect(-high, -low), "min", 0.05)
    assert lead_max.word == lead_min.word
