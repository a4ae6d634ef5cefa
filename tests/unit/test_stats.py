"""Triton statistics deltas (the lab notebook's real stats JSON) and metrics parsing."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path

import pytest

from serve_system.errors import ServeSystemError
from serve_system.results import stats

AFTER = json.loads((Path(__file__).parent / "fixtures" / "notebook_stats_after.json").read_text())


def _snapshot(doc: dict) -> stats.Snapshot:
    """``doc`` written to a file and read back as :func:`stats.load_snapshot` reads a node's."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "stats.json"
        path.write_text(json.dumps(doc))
        return stats.load_snapshot(path, within=d)


def test_delta_since_load_from_the_notebook() -> None:
    (d,) = stats.delta(None, _snapshot(AFTER))
    assert (d.name, d.version, d.inference_count, d.execution_count) == ("food_classifier", "1", 1436, 386)
    assert d.avg_batch_size == pytest.approx(1436 / 386)
    assert d.histogram == {1: 26, 2: 127, 3: 55, 4: 9, 5: 73, 6: 82, 7: 14}
    assert sum(k * v for k, v in d.histogram.items()) == 1436  # the histogram accounts for every inference
    assert d.avg_us("queue") == pytest.approx(64542800676 / 1436 / 1000)


def test_delta_between_snapshots() -> None:
    before = copy.deepcopy(AFTER)
    m = before["model_stats"][0]
    m["inference_count"], m["execution_count"] = 436, 186
    m["batch_stats"] = [{"batch_size": 1, "compute_infer": {"count": 26, "ns": 1}},
                        {"batch_size": 2, "compute_infer": {"count": 27, "ns": 1}}]
    m["inference_stats"]["queue"] = {"count": 436, "ns": 1000}
    (d,) = stats.delta(_snapshot(before), _snapshot(AFTER))
    assert (d.inference_count, d.execution_count) == (1000, 200)
    assert d.avg_batch_size == 5.0
    assert d.histogram == {2: 100, 3: 55, 4: 9, 5: 73, 6: 82, 7: 14}
    assert d.counts["queue"] == 1000 and not d.reset


def test_counters_reset_by_reload() -> None:
    before = copy.deepcopy(AFTER)
    before["model_stats"][0]["execution_count"] = 10_000
    (d,) = stats.delta(_snapshot(before), _snapshot(AFTER))
    assert d.reset and d.execution_count == 386


def test_a_snapshot_is_parsed_into_typed_model_statistics() -> None:
    """gRPC JSON's counters (strings) read as numbers; a phase or batch entry left out counts 0."""
    doc = {"model_stats": [{"name": "m", "version": 2, "inference_count": "12", "execution_count": 4,
                            "inference_stats": {"queue": {"count": "12", "ns": "3000"}, "fail": {}},
                            "batch_stats": [{"batch_size": "3", "compute_infer": {"count": 4}},
                                            {"batch_size": 1}]}]}
    (m,) = _snapshot(doc).models
    assert (m.name, m.version, m.inference_count, m.execution_count) == ("m", "2", 12, 4)
    assert m.phase("queue") == stats.PhaseStat(12, 3000) and m.phase("fail") == m.phase("success") == \
        stats.PhaseStat(0, 0)
    assert m.histogram == {3: 4, 1: 0}
    assert _snapshot({"model_stats": []}).models == ()


def test_bad_snapshot_file(tmp_path: Path) -> None:
    p = tmp_path / "s.json"
    p.write_text('{"nope": 1}')
    with pytest.raises(ServeSystemError, match="no 'model_stats' list"):
        stats.load_snapshot(p)
    p.write_text("{")
    with pytest.raises(ServeSystemError, match=r"s.json:1:2: not JSON"):
        stats.load_snapshot(p)


GPU_METRICS = """# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{gpu_uuid="GPU-aaa"} 0.75
nv_gpu_utilization{gpu_uuid="GPU-bbb"} 0.25
nv_gpu_memory_used_bytes{gpu_uuid="GPU-aaa"} 1.2e+09
nv_gpu_memory_total_bytes{gpu_uuid="GPU-aaa"} 17071734784
nv_cpu_utilization 0.5
nv_inference_count{model="food_classifier",version="1"} 1436
"""

CPU_ONLY = """nv_inference_count{model="echo_local",version="1"} 0
nv_cpu_utilization 1
nv_cpu_memory_total_bytes 25276502016
"""


def test_metrics_with_and_without_gpu(tmp_path: Path) -> None:
    u = stats.utilisation(GPU_METRICS)
    assert u.gpus["GPU-aaa"] == stats.GpuSample(util=0.75, memory_used=1.2e9, memory_total=17071734784.0)
    assert u.gpus["GPU-bbb"] == stats.GpuSample(util=0.25) and u.cpu == stats.CpuSample(util=0.5)
    assert stats.utilisation(CPU_ONLY, 7.0) == stats.Sample(
        7.0, {}, stats.CpuSample(util=1.0, memory_total=25276502016.0))
    f = tmp_path / "metrics.jsonl"
    f.write_text("\n".join([json.dumps({"t": 1.0, "text": GPU_METRICS}), "garbage",
                            json.dumps({"t": 2.0, "error": "timed out"}),
                            json.dumps({"t": 3.0, "text": GPU_METRICS.replace("0.75", "0.25")})]) + "\n")
    samples = stats.read_samples(f)
    assert [s.t for s in samples] == [1.0, 3.0]
    assert stats.mean_gpu_util(samples) == pytest.approx((0.75 + 0.25 + 0.25 + 0.25) / 4)
    assert stats.max_gpu_mem(samples) == 1.2e9
    cpu = [stats.utilisation(CPU_ONLY)]
    assert stats.mean_gpu_util(cpu) is None and stats.mean_cpu_util(cpu) == 1.0


def test_samples_read_again_are_parsed_once_unless_the_file_changed(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The report reads each level's samples twice (its row, the plots over time): the same file is
    parsed once; a file written again, or a link put in its place, is read again through safeio."""
    f = tmp_path / "metrics.jsonl"
    f.write_text(json.dumps({"t": 1.0, "text": GPU_METRICS}) + "\n")
    parsed = []
    real = stats.utilisation
    monkeypatch.setattr(stats, "utilisation", lambda text, t: parsed.append(text) or real(text, t))
    first = stats.read_samples(f, within=tmp_path)
    assert stats.read_samples(f, within=tmp_path) == first and len(parsed) == 1
    first.clear()  # a caller's list is its own
    assert len(stats.read_samples(f, within=tmp_path)) == 1
    f.write_text(json.dumps({"t": 1.0, "text": CPU_ONLY}) + "\n" + json.dumps({"t": 2.0, "text": CPU_ONLY})
                 + "\n")
    again = stats.read_samples(f, within=tmp_path)
    assert [s.cpu.util for s in again] == [1.0, 1.0] and len(parsed) == 3
    outside = tmp_path.parent / f"{tmp_path.name}-outside.jsonl"
    outside.write_text(json.dumps({"t": 1.0, "text": GPU_METRICS}) + "\n")
    f.unlink()
    f.symlink_to(outside)
    for _ in range(2):
        with pytest.raises(ServeSystemError):
            stats.read_samples(f, within=tmp_path)
    f.unlink()
    assert stats.read_samples(f, within=tmp_path) == []


def test_metrics_torn_scrape_keeps_the_samples_before_the_tear() -> None:
    torn = CPU_ONLY + 'nv_cpu_memory_used_bytes{le="0.5" 12'
    assert stats.utilisation(torn).cpu == stats.CpuSample(util=1.0, memory_total=25276502016.0)
    assert stats.parse_metrics("not prometheus text at all {") == []


def test_a_sample_is_summarised_from_its_kept_families_alone() -> None:
    """Only the kept families are parsed: the same triples as parsing the whole scrape and keeping them,
    with HELP/TYPE lines, other families between them and a label holding a kept name."""
    scrape = ("# HELP nv_inference_count Number of inferences\n# TYPE nv_inference_count counter\n"
              'nv_inference_count{model="nv_cpu_utilization",version="1"} 7\n'
              "# HELP nv_cpu_utilization CPU utilization rate [0.0 - 1.0]\n# TYPE nv_cpu_utilization gauge\n"
              "nv_cpu_utilization 0.5\n# TYPE nv_energy_consumption counter\n"
              'nv_energy_consumption{gpu_uuid="GPU-aaa"} 1e3\n' + GPU_METRICS)
    whole = [t for t in stats.parse_metrics(scrape) if t[0] in stats.KEPT_METRICS]
    assert stats.parse_metrics(stats.kept_families(scrape)) == whole
    assert len(whole) == 6 and stats.kept_families("nv_inference_count 1\n") == ""
    assert stats.utilisation(scrape).cpu == stats.CpuSample(util=0.5)
