"""Every claim not measurable here, every failed level and every adapted variant says its true reason
(:mod:`serve_system.results.reasons`), in the fixed order of causes, on recorded run trees."""

from __future__ import annotations

import json
from pathlib import Path

from report_trees import (
    DYN,
    FIX,
    FOOD_ONNX,
    NB,
    P260,
    config,
    instances,
    level,
    manifest,
    rehearsal_backends_run,
    stats_snapshot,
    variant,
)

from serve_system.node import records
from serve_system.results import findings as fnd
from serve_system.results import reasons, setups
from serve_system.results import tree as res
from serve_system.results.claim import Finding
from serve_system.results.report import write_report


def _findings(run: Path) -> dict[str, Finding]:
    return {f.key: f for f in write_report(run)["findings"]}


def _failed_level(run: Path, host: str, name: str, lid: str, load: float, error: str,
                  peak_mb: float | None = None, **extra: object) -> None:
    d = run / host / name / lid
    d.mkdir(parents=True)
    rec = records.LevelRecord(
        variant=name, level=lid, mode="concurrency", load=load, repetition=1, status=records.FAILED,
        error=error,
        start=1.0, end=2.0, attempts=[records.Attempt(argv=["perf_analyzer"], rc=-9, start=1.0, end=2.0,
                                                      max_rss_mb=peak_mb)])
    (d / "level.json").write_text(json.dumps({**records.to_json(rec), **extra}))


def test_onnx_through_the_python_shim_names_the_shim(tmp_path: Path) -> None:
    """The issue's case: the backends spec on a rehearsal node, onnx and python both measured at 1, 8
    and 16; the rehearsal Triton served the ONNX model through the Python shim."""
    run = rehearsal_backends_run(tmp_path / "backends" / "r1", tmp_path)
    rows = res.collect(run)
    at = {(r["variant"], r["load"]) for r in rows if r["status"] == "ok"}
    assert {("python", 1), ("python", 8), ("python", 16), ("onnx", 1), ("onnx", 8), ("onnx", 16)} <= at
    f = _findings(run)["onnx_backend"]
    assert f.verdict == fnd.NOT_MEASURABLE
    assert f.detail == (
        "`onnx`, `onnx_2gpus`, `onnx_batch16` were served by the serve-system ONNX shim (Triton's Python "
        "backend running onnxruntime), not by Triton's onnxruntime backend (Triton has no onnxruntime "
        "backend here): no variant on Triton's onnxruntime backend or FastAPI's onnx runtime was measured.")
    md = (run / "report.md").read_text()
    adapted = md.split("\n## Adapted to the host\n", 1)[1].split("\n## ", 1)[0]
    assert ("- node-1/onnx: served by the serve-system ONNX shim (Triton's Python backend running "
            "onnxruntime), not by Triton's onnxruntime backend (Triton has no onnxruntime backend here)\n"
            "- node-1/onnx: instance_group[0]: KIND_GPU x1 -> KIND_CPU x1 (host has no GPU)\n") in adapted
    assert "- node-1/onnx_2gpus: instance_group[0]: KIND_GPU x4 -> KIND_CPU x4 (host has no GPU)" in adapted
    # no variant measured at its spec's settings is missing from the run, so nothing else is named
    assert "No ONNX and Python-backend variants" not in md


def test_nothing_measured_comes_first(tmp_path: Path) -> None:
    run = tmp_path / "none" / "r1"
    manifest(run, "none", [{"name": "most", "metric": "throughput", "goal": "max"}])
    variant(run, "n1", "python", config(instance_group=instances(1)))
    _failed_level(run, "n1", "python", "c1_r1", 1, "killed by the runner: time cap 900 s reached")
    _failed_level(run, "n1", "python", "c8_r1", 8, "killed by the runner: time cap 900 s reached")
    found = _findings(run)
    text = ("Nothing was measured in this run: all 2 level(s) or variant(s) failed, e.g. `python`: killed "
            "by the runner: time cap 900 s reached.")
    assert {f.key: f.detail for f in found.values()} == {k: text for k in found}
    assert all(f.verdict == fnd.NOT_MEASURABLE for f in found.values())


def test_a_variant_the_spec_lacks_is_named_as_missing_before_anything_measured(tmp_path: Path) -> None:
    run = tmp_path / "absent" / "r1"
    manifest(run, "absent", [])
    variant(run, "n1", "baseline", config(instance_group=instances(1), dynamic_batching=None))
    level(run, "n1", "baseline", "c8_r1", load=8, stdout=NB / "notebook_02.txt", stats=stats_snapshot(False))
    variant(run, "n1", "dynbatch", config(instance_group=instances(1), dynamic_batching=None))  # no batching
    level(run, "n1", "dynbatch", "c8_r1", load=8, stdout=NB / "notebook_05.txt", stats=stats_snapshot(True))
    found = _findings(run)
    assert found["dynamic_batching"].detail == (
        "The spec as run has no Triton variant with dynamic batching (its variants: `baseline`, `dynbatch`).")
    assert found["onnx_backend"].detail == (
        "The spec as run has no variant on Triton's onnxruntime backend or FastAPI's onnx runtime (its "
        "variants: `baseline`, `dynbatch`).")
    assert found["poisson"].detail == (
        "The spec as run has no variant with Poisson arrivals (its variants: `baseline`, `dynbatch`).")
    assert found["instances"].detail == ("All the Triton variants measured ran the same instance count: "
                                         "`baseline` 1x GPU; `dynbatch` 1x GPU.")


def test_failed_levels_carry_their_own_reason_and_peak_memory(tmp_path: Path) -> None:
    run = tmp_path / "failed" / "r1"
    manifest(run, "failed", [])
    variant(run, "n1", "python", config(instance_group=instances(1)))
    level(run, "n1", "python", "c1_r1", load=1, stdout=NB / "notebook_01.txt")
    variant(run, "n1", "onnx", config(FOOD_ONNX))
    # killed by the kernel: the peak the runner sampled is the only sign of memory
    _failed_level(run, "n1", "onnx", "c1_r1", 1,
                  "perf_analyzer was killed by SIGKILL (the kernel's OOM killer?)", peak_mb=3900.4)
    # killed at the runner's cap: its own text says the resident size
    _failed_level(run, "n1", "onnx", "c8_r1", 8, "killed by the runner: memory cap 4096 MB reached (resident "
                  "4101 MB)", peak_mb=4101.0)
    # the kernel's exact count (the level's client_peak_rss_bytes) wins over the runner's samples
    _failed_level(run, "n1", "python", "c8_r1", 8, "perf_analyzer was killed by SIGKILL (the kernel's OOM "
                  "killer?)", peak_mb=100.0, client_peak_rss_bytes=5 * 2**30)
    found = _findings(run)
    assert found["onnx_backend"].detail == (
        "Run but not measured: `onnx` failed at all 2 level(s): perf_analyzer was killed by SIGKILL (the "
        "kernel's OOM killer?), at a peak of 3900 MB resident; killed by the runner: memory cap 4096 MB "
        "reached (resident 4101 MB).")
    assert found["queue_delay"].detail == (
        "No Triton variant with one instance and no dynamic batching was measured at two or more "
        "concurrency levels: `python` at concurrency 1 only (failed at concurrency 8: perf_analyzer was "
        "killed by SIGKILL (the kernel's OOM killer?), at a peak of 5120 MB resident).")
    md = (run / "report.md").read_text()
    assert ("- n1 / onnx @ concurrency 8 (repetition 1): failed: killed by the runner: memory cap 4096 MB "
            "reached (resident 4101 MB)\n") in md
    assert ("- n1 / onnx @ concurrency 1 (repetition 1): failed: perf_analyzer was killed by SIGKILL (the "
            "kernel's OOM killer?), at a peak of 3900 MB resident\n") in md


def test_a_refused_variant_says_triton_refused_it(tmp_path: Path) -> None:
    run = tmp_path / "refused" / "r1"
    manifest(run, "refused", [])
    variant(run, "n1", "python", config(instance_group=instances(1)))
    level(run, "n1", "python", "c1_r1", load=1, stdout=NB / "notebook_01.txt")
    variant(run, "n1", "onnx", config(FOOD_ONNX), status=records.UNAVAILABLE,
            error="onnxruntime is not installed in the endpoint's image")
    found = _findings(run)
    assert found["onnx_backend"].detail == (
        "Run but not measured: `onnx`: its runtime was unavailable: onnxruntime is not installed in the "
        "endpoint's image.")
    assert "- n1 / onnx: unavailable: its runtime was unavailable: onnxruntime is not installed" in \
        (run / "report.md").read_text()


def test_measured_apart_names_what_differed(tmp_path: Path) -> None:
    run = tmp_path / "apart" / "r1"
    manifest(run, "apart", [])
    variant(run, "n1", "python", config(instance_group=instances(1)))
    level(run, "n1", "python", "c8_r1", load=8, stdout=NB / "notebook_02.txt")
    variant(run, "n1", "onnx", config(FOOD_ONNX))
    level(run, "n1", "onnx", "c1_r1", load=1, stdout=NB / "notebook_08.txt")
    variant(run, "n1", "onnx_b16", config(FOOD_ONNX))
    level(run, "n1", "onnx_b16", "c8_r1", load=8, stdout=NB / "notebook_09.txt", batch_size=16)
    variant(run, "n1", "dynbatch", config(instance_group=instances(2), dynamic_batching=DYN))
    level(run, "n1", "dynbatch", "c8_r1", load=8, stdout=NB / "notebook_05.txt", stats=stats_snapshot(True))
    found = _findings(run)
    assert found["onnx_backend"].detail == (
        "No ONNX and Python-backend variants were measured at a common load, batch and instance count: "
        "`python` vs `onnx`: loads concurrency 8 vs concurrency 1, none in common; "
        "`python` vs `onnx_b16`: client batch 1 vs 16.")
    assert found["dynamic_batching"].detail == (
        "No two variants differ only by dynamic batching: `python` vs `dynbatch`: instances 1x GPU vs "
        "2x GPU, dynamic batching off vs on.")


def test_constant_and_poisson_at_different_rates_name_the_rates(tmp_path: Path) -> None:
    run = tmp_path / "rates" / "r1"
    manifest(run, "rates", [])
    cfg = config(instance_group=instances(1), dynamic_batching=None)
    for name, rate, out in (("constant", 120, FIX / "rehearsal" / "arrivals_constant_120"),
                            ("poisson", 40, P260 / "rate_40_poisson_grpc")):
        variant(run, "n1", name, cfg)
        level(run, "n1", name, f"rr{rate}_r1", mode="request_rate", load=rate, distribution=name,
              stdout=out.with_suffix(".stdout"), csv=out.with_suffix(".csv"))
    found = _findings(run)
    assert found["poisson"].detail == (
        "No variants with constant and Poisson arrivals were measured at a common load, batch and instance "
        "count: `constant` vs `poisson`: loads request rate 120 vs request rate 40, none in common.")


def test_a_need_that_ran_adapted_says_how_the_host_changed_it() -> None:
    """The walk's fifth cause: planned as the claim needs, measured, but the host changed it."""
    def setup(variant_: str, kind: str, adapted: tuple[str, ...] = ()) -> setups.Setup:
        return setups.Setup("n1", variant_, "m", "python", 2, kind, False, "constant", 1, 4, "{}", "{}",
                            "{}", None, adapted)

    moved = ("instance_group[0]: KIND_GPU x2 -> KIND_CPU x2 (host has no GPU)",)
    ran = {("n1", "a"): setup("a", "CPU", moved), ("n1", "b"): setup("b", "CPU")}
    rows = [{"host": "n1", "variant": v, "status": "ok", "load": 1} for v in ("a", "b")]
    gpu = reasons.Need("variant on GPU instances", lambda s: s.instance_kind == "GPU" or bool(s.adapted),
                       lambda s: s.instance_kind == "GPU")
    assert reasons.why([gpu], ran, rows) == (
        "Adapted to the host, so no variant on GPU instances ran as planned: `a` on n1: instance_group[0]: "
        "KIND_GPU x2 -> KIND_CPU x2 (host has no GPU).")
    # the causes before it win: the same need with nothing measured
    assert reasons.why([gpu], ran, [{**r, "status": "failed", "error": "x"} for r in rows]) == (
        "Nothing was measured in this run: all 2 level(s) or variant(s) failed, e.g. `a`: x.")


def test_a_variant_that_does_not_qualify_for_an_objective_says_why(tmp_path: Path) -> None:
    run = tmp_path / "best" / "r1"
    manifest(run, "best", [{"name": "at_8", "metric": "throughput", "goal": "max", "at_load": 8}])
    variant(run, "n1", "python", config(instance_group=instances(1)))
    for load, nb in ((1, "notebook_01.txt"), (8, "notebook_02.txt")):
        level(run, "n1", "python", f"c{load}_r1", load=load, stdout=NB / nb)
    variant(run, "n1", "onnx", config(FOOD_ONNX))
    level(run, "n1", "onnx", "c1_r1", load=1, stdout=NB / "notebook_08.txt")
    variant(run, "n1", "onnx2", config(FOOD_ONNX))
    _failed_level(run, "n1", "onnx2", "c8_r1", 8, "killed by the runner: time cap 900 s reached")
    variant(run, "n1", "onnx3", config(FOOD_ONNX), status=records.REFUSED, error="unable to find backend")
    assert _findings(run)["best_variant"].detail == (
        "Fewer than two variants qualify for any objective: **at_8**: only `python` qualifies, nothing to "
        "compare (`onnx`: not measured at load 8 (only at concurrency 1); `onnx2`: failed at load 8: killed "
        "by the runner: time cap 900 s reached; `onnx3`: Triton refused its configuration: unable to find "
        "backend).")


def test_a_variant_that_would_have_matched_but_failed_is_named_after_what_differed(tmp_path: Path) -> None:
    run = tmp_path / "gone" / "r1"
    manifest(run, "gone", [])
    variant(run, "n1", "python", config(instance_group=instances(1)))
    level(run, "n1", "python", "c8_r1", load=8, stdout=NB / "notebook_02.txt")
    variant(run, "n1", "onnx", config(FOOD_ONNX))
    level(run, "n1", "onnx", "c1_r1", load=1, stdout=NB / "notebook_08.txt")
    variant(run, "n1", "onnx_at_8", config(FOOD_ONNX))
    _failed_level(run, "n1", "onnx_at_8", "c8_r1", 8, "killed by the runner: memory cap 4096 MB reached "
                  "(resident 4101 MB)")
    assert _findings(run)["onnx_backend"].detail == (
        "No ONNX and Python-backend variants were measured at a common load, batch and instance count: "
        "`python` vs `onnx`: loads concurrency 8 vs concurrency 1, none in common. Not measured: "
        "`onnx_at_8` failed at all 1 level(s): killed by the runner: memory cap 4096 MB reached (resident "
        "4101 MB).")
