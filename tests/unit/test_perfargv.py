"""perf_analyzer's command line: one level's argv and the longer window of a retry."""

from __future__ import annotations

from serve_system.experiment import perfargv
from serve_system.experiment.perfargv import PerfSettings
from serve_system.node import defaults


def test_build_argv_concurrency_and_rate() -> None:
    argv = perfargv.build_argv(model="food_classifier_onnx", url="triton_server:8000", mode="concurrency",
                               load=8, perf=PerfSettings(batch_size=1, shapes={"input": [3, 224, 224]},
                                                         warmup_request_count=500,
                                                         request_count=20000, percentile=95),
                               csv_path="/work/x/perf.csv")
    assert argv[:8] == ["perf_analyzer", "-m", "food_classifier_onnx", "-u", "triton_server:8000", "-i",
                        "http", "-v"]
    s = " ".join(argv)
    assert "--concurrency-range 8" in s and "--shape input:3,224,224" in s
    assert "--warmup-request-count 500 --request-count 20000" in s and "--percentile 95" in s
    assert s.endswith("-f /work/x/perf.csv --verbose-csv")
    rate = perfargv.build_argv(model="m", url="u", mode="request_rate", load=120,
                               perf=PerfSettings(distribution="poisson", protocol="grpc"))
    assert "--request-rate-range 120 --request-distribution poisson" in " ".join(rate)
    assert rate[rate.index("-i") + 1] == "grpc"


def test_longer_window_doubles_the_window() -> None:
    assert perfargv.longer_window(PerfSettings(measurement_interval_ms=2000)).measurement_interval_ms == 4000
    cw = perfargv.longer_window(PerfSettings(measurement_mode="count_windows", measurement_request_count=50))
    assert cw.measurement_request_count == 100 and cw.max_trials == 20
    # nothing given: perf_analyzer's defaults (node.defaults), doubled
    plain = perfargv.longer_window(PerfSettings())
    assert plain.measurement_interval_ms == 2 * defaults.WINDOW_MS
    assert plain.max_trials == 2 * defaults.MAX_TRIALS


def test_the_settings_keep_the_specs_names_in_the_plan() -> None:
    """The host plan keeps the settings as the spec names them (``async``), only those given."""
    record = {"batch_size": 4, "async": True, "measurement_mode": "count_windows"}
    perf = PerfSettings.of(record)
    assert perf.async_ is True and perf.batch == 4 and not perf.timed and perf.record() == record
    assert "--async" in perfargv.build_argv(model="m", url="u", mode="concurrency", load=1, perf=perf)
    assert PerfSettings().record() == {} and PerfSettings().batch == defaults.BATCH_SIZE
