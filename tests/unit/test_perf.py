"""perf_analyzer output parsing on the labs' real outputs (its command line: test_perfargv.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from serve_system.experiment import perf

FIX = Path(__file__).parent / "fixtures" / "perf"


def _levels(name: str) -> list[perf.Level]:
    return perf.parse_any((FIX / name).read_text())


def test_notebook_single_level_with_server_breakdown() -> None:
    (lv,) = _levels("notebook_01.txt")
    assert (lv.mode, lv.load, lv.status) == ("concurrency", 1, "ok")
    assert lv.throughput == pytest.approx(51.549)
    assert lv.latency_avg_us == 19311
    assert lv.server_latency_us == 18689
    assert (lv.overhead_us, lv.queue_us, lv.compute_input_us, lv.compute_infer_us, lv.compute_output_us) == (
        2, 22, 44, 18570, 49)


def test_notebook_queue_grows_with_concurrency() -> None:
    q = {lv.load: lv.queue_us for name in ("notebook_01.txt", "notebook_02.txt", "notebook_03.txt")
         for lv in _levels(name)}
    assert q == {1: 22, 8: 132341, 16: 283040}


def test_all_seed_logs_parse() -> None:
    files = sorted(FIX.glob("*.txt"))
    assert len(files) == 30
    for f in files:
        levels = perf.parse_any(f.read_text())
        assert levels, f
        assert all(lv.status == "ok" and lv.throughput and lv.throughput > 0 for lv in levels), f


def test_blip_concurrency_range_rows() -> None:
    levels = _levels("blip_03.txt")
    assert [lv.load for lv in levels] == list(range(1, 11))
    assert levels[-1].throughput == pytest.approx(28.3437)
    assert levels[-1].latency_avg_us == 344619


def test_dli_p85_summary_and_client_percentiles() -> None:
    (lv,) = _levels("dli_03.txt")
    assert lv.batch_size == 8
    assert lv.throughput == pytest.approx(207.874)
    assert (lv.p50_us, lv.p90_us, lv.p95_us, lv.p99_us) == (38105, 38739, 39322, 39916)
    assert lv.extra["p85_us"] == 38614  # the summary line's latency is p85, not the average
    assert lv.latency_avg_us is None
    assert lv.queue_us == 65 and lv.compute_infer_us == 37616


def test_dli_truncated_block_without_summary() -> None:
    (lv,) = _levels("dli_04.txt")
    assert lv.throughput == pytest.approx(113.944)
    assert lv.p99_us == 9638


UNSTABLE_LOG = """*** Measurement Settings ***
  Batch size: 1
  Service Kind: TRITON
  Using "time_windows" mode for stabilization
  Stabilizing using average latency and throughput
  Measurement window: 1000 msec
  Using synchronous calls for inference

Request concurrency: 1
  Client:
    Request count: 260
    Throughput: 259.7 infer/sec
    Avg latency: 3840 usec (standard deviation 410 usec)
    p50 latency: 3790 usec
    p90 latency: 4200 usec
    p95 latency: 4410 usec
    p99 latency: 5100 usec
    Avg HTTP time: 3820 usec (send/recv 40 usec + response wait 3780 usec)
  Server:
    Inference count: 260
    Execution count: 260
    Successful request count: 260
    Avg request latency: 3600 usec (overhead 20 usec + queue 30 usec + compute input 10 usec + \
compute infer 3530 usec + compute output 10 usec)

Request concurrency: 4
Failed to obtain stable measurement within 10 measurement windows for concurrency 4. \
Please try to increase the --measurement-interval.
Inferences/Second vs. Client Average Batch Latency
Concurrency: 1, throughput: 259.7 infer/sec, latency 3840 usec
"""


def test_unstable_level_is_reported_not_numbers() -> None:
    levels = perf.parse_stdout(UNSTABLE_LOG)
    assert [(lv.load, lv.status) for lv in levels] == [(1, "ok"), (4, "unmeasured")]
    bad = levels[1].to_json()
    assert bad["status"] == "unmeasured" and bad["throughput"] is None and bad["p99_us"] is None
    assert "Failed to obtain stable measurement" in bad["error"]
    good = levels[0].to_json()
    assert good["p95_us"] == 4410 and good["queue_us"] == 30 and good["batch_size"] == 1


def test_request_rate_summary() -> None:
    text = ("Inferences/Second vs. Client Average Batch Latency\n"
            "Request Rate: 120, throughput: 119.8 infer/sec, latency 7012 usec\n"
            "Request Rate: 180, throughput: 179.1 infer/sec, latency 9120 usec\n")
    levels = perf.parse_stdout(text)
    assert [(lv.mode, lv.load, lv.latency_avg_us) for lv in levels] == [
        ("request_rate", 120, 7012), ("request_rate", 180, 9120)]


CSV = """Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,\
Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,\
p95 latency,p99 latency,Avg latency,request/response,response wait
4,900.5,20,300,1500,15,2600,10,5,4400,5000,5300,6000,4450,3,4400
1,300.2,18,250,20,14,2900,11,4,3200,3400,3500,3900,3217,3,3150
"""


def test_csv_rows_resorted_by_load() -> None:
    levels = perf.parse_csv(CSV, batch_size=1)
    assert [lv.load for lv in levels] == [1, 4]  # the export is sorted by throughput, not load
    lv = levels[1]
    assert (lv.throughput, lv.queue_us, lv.compute_infer_us, lv.p99_us, lv.latency_avg_us) == (
        900.5, 1500, 2600, 6000, 4450)
    assert lv.to_json()["batch_size"] == 1


def test_csv_without_avg_latency_sums_components() -> None:
    text = "\n".join(line.rsplit(",", 3)[0] for line in CSV.strip().splitlines())
    lv = perf.parse_csv(text)[0]
    assert lv.latency_avg_us == 18 + 250 + 20 + 14 + 2900 + 11 + 4


# Real perf_analyzer 2.60.0 outputs, generated against the CPU Triton of the integration fixtures
# (tests/unit/fixtures/perf260/; model echo_local, see tests/integration/local_models).
P260 = Path(__file__).parent / "fixtures" / "perf260"


def test_real_260_unstable_count_windows() -> None:
    text = (P260 / "unstable_count_windows.txt").read_text()
    (lv,) = perf.parse_stdout(text)
    assert (lv.load, lv.status) == (4, "unmeasured")
    assert lv.error.endswith("for concurrency 4")  # type: ignore[union-attr]


def test_real_260_stdout_and_csv_agree() -> None:
    out = perf.parse_stdout((P260 / "concurrency_1_4.stdout").read_text())
    csv_levels = perf.parse_csv((P260 / "concurrency_1_4.csv").read_text(), batch_size=1)
    assert [lv.load for lv in out] == [lv.load for lv in csv_levels] == [1, 4]
    for a, b in zip(out, csv_levels):
        assert a.throughput == b.throughput
        assert (a.p50_us, a.p99_us, a.latency_avg_us, a.queue_us) == (b.p50_us, b.p99_us, b.latency_avg_us,
                                                                      b.queue_us)
    both = perf.combine(csv_levels, out)
    assert both[1].server_latency_us == 21204 and both[1].client_send_us == 109


def test_real_260_request_rate_grpc_p95() -> None:
    (lv,) = perf.parse_stdout((P260 / "rate_40_poisson_grpc.stdout").read_text())
    assert (lv.mode, lv.load, lv.batch_size) == ("request_rate", 40, 2)
    assert lv.p95_us == 38509 and lv.latency_avg_us is None  # the summary latency is p95 here
    (c,) = perf.parse_csv((P260 / "rate_40_poisson_grpc.csv").read_text(), batch_size=2)
    assert c.queue_us == 4544 and c.p95_us == 38509


def test_real_260_same_command_measured() -> None:
    (lv,) = perf.parse_stdout((P260 / "count_windows_4.stdout").read_text())
    assert (lv.load, lv.status, lv.throughput, lv.queue_us) == (4, "ok", 174.541, 14980)


def test_every_measurement_window_is_kept_and_its_spread_measured() -> None:
    """perf_analyzer -v prints each window; the level's numbers are the mean of the last three."""
    levels = perf.parse_stdout((FIX.parent / "perf260" / "verbose_windows_1_4.stdout").read_text())
    c1, c4 = levels
    assert [len(c1.windows), len(c4.windows)] == [6, 3]
    assert c1.windows[0] == {"throughput": 126.968, "latency_stat": "avg", "latency_us": 7701.0,
                             "latency_std_us": 6754.0}
    for lvl in levels:
        last = [w["throughput"] for w in lvl.windows[-perf.STABILITY_WINDOWS:]]
        assert sum(last) / len(last) == pytest.approx(lvl.throughput, rel=0.002)  # their counts / time
    # 123.7, 126.9, 143.7 infer/s: about 8 %; 224.8, 219.3, 172.2: about 14 %, beyond the 10 % flag
    assert perf.window_cv(c1) == pytest.approx(0.082, abs=0.002)
    assert perf.window_cv(c4) == pytest.approx(0.141, abs=0.002)
    assert perf.window_cv(perf.Level(mode="concurrency", load=1, windows=[{"throughput": 5.0}])) is None


def test_windows_of_a_percentile_stabilised_level() -> None:
    text = ("Request concurrency: 2\n"
            "  Pass [1] throughput: 212.305 infer/sec. p95 latency: 12861 usec\n"
            "  Pass [2] throughput: 214.767 infer/sec. p95 latency: 12703 usec\n"
            "Concurrency: 2, throughput: 213.5 infer/sec, latency 12800 usec\n")
    (lvl,) = perf.parse_stdout(text)
    assert lvl.windows[1] == {"throughput": 214.767, "latency_stat": "p95", "latency_us": 12703.0}
    assert perf.window_cv(lvl, "latency_us") == pytest.approx(0.0088, abs=0.0005)
