"""The report's plots as specs (:mod:`serve_system.results.plots`): data built from a run's rows, drawn
by :mod:`serve_system.results.drawing`, here or in processes of their own."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from report_trees import fastapi_run, lab_run

from serve_system import safeio

SRC = str(Path(__file__).resolve().parents[2] / "src")
from serve_system.results import drawing, plots, tree
from serve_system.results.stats import CpuSample, GpuSample, Sample


def test_latency_against_load_is_one_series_per_variant_and_percentile_in_ms(tmp_path: Path) -> None:
    run = lab_run(tmp_path / "lab" / "r1", repetitions=3)
    rows = tree.collect(run)
    made, skipped = plots.specs(run, rows)
    by_name = {p.name: p for p in made}
    assert not [s for s in skipped if "latency against" in s]
    (panel,) = by_name["node-1_latency_vs_concurrency.png"].panels
    assert panel.ylabel == "latency (ms)" and panel.xlabel == "concurrent clients"
    # the notebook's perf_analyzer printed no percentiles: the average is drawn, and said
    base = next(s for s in panel.series if s.label == "baseline avg (no percentiles)")
    assert base.x == [1.0, 8.0, 16.0] and base.style["linestyle"] == "-."
    at8 = [r["latency_avg_us"] / 1000 for r in rows if r["variant"] == "baseline" and r["load"] == 8]
    assert len(at8) == 3 and base.y[1] == pytest.approx(statistics.fmean(at8))
    assert base.yerr[0][1] > 0  # three repetitions: an interval
    colours = {s.style["color"] for s in panel.series if s.label and s.label.startswith("baseline ")}
    assert len(colours) == 1  # one colour per variant, a line style per percentile
    (bd,) = by_name["node-1_latency_breakdown.png"].panels
    assert [s.label for s in bd.series if s.kind == "bar"] == ["queue", "compute input", "compute infer",
                                                                "compute output"]


def test_every_spec_is_drawn_to_its_file_and_nothing_is_drawn_through_a_link(tmp_path: Path) -> None:
    run = fastapi_run(tmp_path / "fastapi" / "r1")
    made, skipped = plots.specs(run, tree.collect(run))
    assert [p.name for p in made] == ["node-1_latency_vs_concurrency.png", "node-1_throughput_latency.png",
                                      "node-1_fastapi_latency.png"]
    assert any("server-side latency breakdown" in s for s in skipped)
    fastapi = made[-1]
    assert [p.title for p in fastapi.panels] == ["node-1: FastAPI latency distribution",
                                                 "per variant and senders"]
    path = drawing.draw(fastapi, run / "plots")
    assert path == run / "plots" / "node-1_fastapi_latency.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "fastapi" / "r2").mkdir()
    (tmp_path / "fastapi" / "r2" / "plots").symlink_to(elsewhere)
    with pytest.raises(safeio.UnsafeFile):
        drawing.draw(fastapi, tmp_path / "fastapi" / "r2" / "plots")
    assert list(elsewhere.iterdir()) == []


def test_a_long_title_is_wrapped_to_its_panel() -> None:
    """A title is wrapped to the width of its panel (a long host name ran past the figure's edge); a
    short one stays as it is."""
    from serve_system.results.drawing import _fitted

    long = ("node-serve-system-root: server-side latency breakdown (mean; bars: 95 % interval over "
            "repetitions)")
    lines = _fitted(long, 6.0, 10).splitlines()
    assert len(lines) == 2 and all(len(line) <= 72 for line in lines) and " ".join(lines) == long
    assert _fitted("short", 6.0, 10) == "short"


#: draws a run's plots in forked processes (a process of its own: pytest's has threads, and a process
#: with threads draws in itself), made before reading the run imports numpy (its BLAS starts threads),
#: as the report command makes them
FORKED = """
import sys
from pathlib import Path
from serve_system.results import drawing
run = Path(sys.argv[1])
with drawing.Drawing(3) as d:
    assert d.forked
    from serve_system.results import plots, tree
    made, _ = plots.specs(run, tree.collect(run))
    d.start(made)
    print("\\n".join(str(p) for p in d.files(Path(sys.argv[2]))))
"""


def test_plots_drawn_in_several_processes_are_the_files_drawn_in_one(tmp_path: Path) -> None:
    """Drawing draws in forked processes where there are CPUs for them: the same files, byte for byte,
    written in the specs' order, as drawing each here; a plot folder that is a link is refused."""
    run = lab_run(tmp_path / "lab" / "r1", repetitions=3)
    made, _ = plots.specs(run, tree.collect(run))
    assert len(made) >= 5
    with drawing.Drawing(1) as here:
        assert not here.forked
        here.start(made)
        one = here.files(tmp_path / "one" / "plots")
    done = subprocess.run([sys.executable, "-c", FORKED, str(run), str(tmp_path / "several" / "plots")],
                          capture_output=True, text=True, check=False, env={**os.environ, "PYTHONPATH": SRC})
    assert done.returncode == 0, done.stderr
    several = [Path(line) for line in done.stdout.splitlines()]
    assert [p.name for p in one] == [p.name for p in several] == [p.name for p in made]
    assert [p.parent for p in several] == [tmp_path / "several" / "plots"] * len(made)
    assert [p.read_bytes() for p in one] == [p.read_bytes() for p in several]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "plots").symlink_to(elsewhere)
    with drawing.Drawing(1) as here, pytest.raises(safeio.UnsafeFile):
        here.start(made)
        here.files(tmp_path / "linked" / "plots")
    assert list(elsewhere.iterdir()) == []


def test_a_process_with_threads_draws_in_itself_and_nothing_is_written_before_files(tmp_path: Path) -> None:
    """No process is forked from one with other threads (a lock one of them held stays held in the
    child); and nothing is written until files() is asked for, however the plots are drawn."""
    run = lab_run(tmp_path / "lab" / "r1", repetitions=3)
    made, _ = plots.specs(run, tree.collect(run))
    import numpy  # noqa: F401  (its BLAS's threads, which threading does not count, are threads too)

    with drawing.Drawing(2) as d:
        assert not d.forked
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        with drawing.Drawing(2) as d:
            assert not d.forked
            d.start(made)
            assert not (tmp_path / "out").exists()
            assert [p.name for p in d.files(tmp_path / "out" / "plots")] == [p.name for p in made]
    finally:
        release.set()
        other.join()
    with drawing.Drawing(2) as d:
        d.start([])
        assert d.files(tmp_path / "none" / "plots") == []
    assert not (tmp_path / "none").exists()


def test_utilisation_and_memory_over_time_from_typed_samples() -> None:
    """Per GPU: utilisation in %, memory used in MiB with the total as a line, each variant's span
    shaded; a host whose samples report no GPU gets its CPU's utilisation instead."""

    def gpu(t: float, util: float, used: float) -> Sample:
        return Sample(t, {"GPU-a": GpuSample(util, used, memory_total=2**31)}, CpuSample(0.1))

    made, skipped = plots.over_time({("n1", "v1"): [gpu(100.0, 0.5, 2**30), gpu(101.0, 0.25, 2**29)],
                                     ("n1", "v2"): [gpu(102.0, 1.0, 2**30)],
                                     ("n2", "v1"): [Sample(50.0, {}, CpuSample(0.75))]})
    by_name = {p.name: p.panels[0].series for p in made}
    assert sorted(by_name) == ["n1_gpu_memory.png", "n1_gpu_utilisation.png", "n2_cpu_utilisation.png"]
    util, *spans = by_name["n1_gpu_utilisation.png"]
    assert (util.label, util.x, util.y) == ("GPU-a", [0.0, 1.0, 2.0], [50.0, 25.0, 100.0])
    assert [(s.label, s.x) for s in spans] == [("v1", [0.0, 1.0]), ("v2", [2.0, 2.0])]
    used, total = by_name["n1_gpu_memory.png"][:2]
    assert used.y == [1024.0, 512.0, 1024.0] and (total.kind, total.y) == ("hline", [2048.0])
    (cpu, _) = by_name["n2_cpu_utilisation.png"]
    assert (cpu.x, cpu.y) == ([0.0], [75.0]) and not skipped
