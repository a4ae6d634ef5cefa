"""Experiment specs: schema, expansion, validation messages, adaptation, and the shipped specs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from serve_system.experiment import plan as exp
from serve_system.experiment.spec.messages import SpecError
from serve_system.experiment.spec.models import FastapiSpec, expand_levels
from serve_system.experiment.spec.reader import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "experiments" / "specs"
REPO = Path(__file__).parent / "fixtures" / "model_repository"


def _write(tmp_path: Path, data: dict) -> Path:  # type: ignore[type-arg]
    (tmp_path / "food_classifier").mkdir(exist_ok=True)
    (tmp_path / "food_classifier" / "config.pbtxt").write_text(
        (REPO / "food_classifier" / "config.pbtxt").read_text())
    p = tmp_path / "spec.yml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def _spec(**kw) -> dict:  # type: ignore[no-untyped-def, type-arg]
    base = {"name": "t", "model": "food_classifier", "base_config": "food_classifier/config.pbtxt",
            "on_missing_gpus": "adapt", "load": {"mode": "concurrency", "levels": [1, 8]},
            "perf": {"batch_size": 1},
            "variants": [{"name": "baseline"},
                         {"name": "dyn", "config": {"dynamic_batching": {"preferred_batch_size": [4, 8]}}}]}
    base.update(kw)
    return base


def test_plan_renders_each_variant_and_level(tmp_path: Path) -> None:
    spec = load_spec(_write(tmp_path, _spec(repetitions=2)))
    plans = exp.plan(spec, 0, url="triton_server:8000", node_work_dir="/work/t/r1")
    assert [p.name for p in plans] == ["baseline", "dyn"]
    dyn = plans[1]
    assert [lv.id for lv in dyn.levels] == ["c1_r1", "c8_r1", "c1_r2", "c8_r2"]
    assert "dynamic_batching" in dyn.config_pbtxt and "KIND_CPU" in dyn.config_pbtxt  # adapted to 0 GPUs
    assert dyn.notes == ["instance_group[0]: KIND_GPU x1 -> KIND_CPU x1 (host has no GPU)"]
    lv = dyn.levels[1]
    assert lv.argv[-3:] == ["-f", "/work/t/r1/dyn/c8_r1/perf.csv", "--verbose-csv"]
    assert "--concurrency-range" in lv.argv and lv.argv[lv.argv.index("--concurrency-range") + 1] == "8"
    assert len(lv.retry_argv) == 1 and "--measurement-interval" in lv.retry_argv[0]
    assert dyn.warmup_argv and "-f" not in dyn.warmup_argv
    on_gpu = exp.plan(spec, 2)
    assert on_gpu[0].notes == [] and "KIND_GPU" in on_gpu[0].config_pbtxt



def test_grpc_variants_aim_at_tritons_grpc_endpoint(tmp_path: Path) -> None:
    """perf.protocol grpc sends every perf_analyzer run (levels, retries, warm-up) to the gRPC URL."""
    data = _spec(perf={"batch_size": 1, "protocol": "grpc"},
                 variants=[{"name": "g"}, {"name": "h", "perf": {"protocol": "http"}}])
    g, h = exp.plan(load_spec(_write(tmp_path, data)), 0, url="ts:8000", grpc_url="ts:8001")
    for argv in [*(lv.argv for lv in g.levels), *g.levels[0].retry_argv, g.warmup_argv]:
        assert argv[argv.index("-u") + 1:argv.index("-i") + 2] == ["ts:8001", "-i", "grpc"]
    for argv in [*(lv.argv for lv in h.levels), h.warmup_argv]:
        assert argv[argv.index("-u") + 1:argv.index("-i") + 2] == ["ts:8000", "-i", "http"]

def test_refuse_policy_stops_before_anything_runs(tmp_path: Path) -> None:
    p = _write(tmp_path, _spec(on_missing_gpus="refuse"))
    with pytest.raises(SpecError) as exc:
        exp.plan(load_spec(p), 0)
    assert exc.value.lines[0] == (f"{p}: baseline: instance_group: uses 1 GPU(s), the host has 0: run it "
                                  "on a GPU node, or set on_missing_gpus: adapt")
    assert len(exc.value.lines) == 2


def test_validation_messages_name_spec_variant_field(tmp_path: Path) -> None:
    data = _spec(bogus=1, load={"mode": "concurrency", "levels": "8:1"},
                 variants=[{"name": "big", "config": {"dynamic_batching": {"preferred_batch_size": [32]}}},
                           {"name": "typo", "config": {"instance_groups": []}},
                           {"name": "shape", "perf": {"shapes": {"IMAGE": [3, 224, 224]}}},
                           {"name": "big", "colour": "red"}])
    p = _write(tmp_path, data)
    with pytest.raises(SpecError) as exc:
        load_spec(p)
    lines = exc.value.lines
    assert f"{p}: bogus: unknown key (known: " in "\n".join(lines)
    assert (f"{p}: load.levels: a range needs start > 0, step > 0 and end >= start (its end 1 is below its "
            "start 8)") in lines
    assert f"{p}: variants[3].colour: unknown key (known: " in "\n".join(lines)
    assert len(lines) == 3  # the duplicate name is reported once the keys are right
    data["bogus"] = None
    del data["bogus"]
    data["load"] = {"levels": [1]}
    data["variants"] = data["variants"][:3]
    with pytest.raises(SpecError) as exc:
        exp.plan(load_spec(_write(tmp_path, data)), 1)
    lines = exc.value.lines
    assert lines[0] == (f"{p}: big: config.dynamic_batching.preferred_batch_size: preferred batch size 32 > "
                        "max_batch_size 16 (Triton: dynamic batching preferred size must be <= max batch "
                        "size)")
    assert lines[1].startswith(f"{p}: typo: config: ") and '"instance_groups"' in lines[1]
    assert lines[2] == (f"{p}: shape: perf.shapes.IMAGE: the model has no input named 'IMAGE' "
                        "(its inputs: INPUT_IMAGE)")


def test_level_ranges() -> None:
    assert expand_levels("1:4:1") == [1, 2, 3, 4]
    assert expand_levels("1:8") == list(range(1, 9))
    assert expand_levels({"start": 120, "end": 300, "step": 60}) == [120, 180, 240, 300]
    assert expand_levels([16]) == [16]
    with pytest.raises(ValueError):
        expand_levels([0])
    assert exp.level_id("request_rate", 120, 1) == "rr120_r1"
    assert exp.level_id("request_rate", 2.5, 3) == "rr2p5_r3"


def test_sweep_expands_typed_values(tmp_path: Path) -> None:
    data = _spec(variants=None, sweep={"name": "i{n}_d{d}", "grid": {"n": [1, 2], "d": [100, 200]},
                                       "config": {"instance_group": [{"count": "{n}", "kind": "KIND_CPU"}],
                                                  "dynamic_batching": {
                                                      "max_queue_delay_microseconds": "{d}"}}})
    spec = load_spec(_write(tmp_path, data))
    assert [v.name for v in spec.all_variants] == ["i1_d100", "i1_d200", "i2_d100", "i2_d200"]
    plans = exp.plan(spec, 0)
    assert ("count: 2" in plans[3].config_pbtxt
            and "max_queue_delay_microseconds: 200" in plans[3].config_pbtxt)


def test_resume_marks_done_levels(tmp_path: Path) -> None:
    spec = load_spec(_write(tmp_path, _spec()))
    plans = exp.plan(spec, 0, done={("baseline", "c1_r1")})
    assert [(lv.id, lv.done) for lv in plans[0].levels] == [("c1_r1", True), ("c8_r1", False)]
    assert not any(lv.done for lv in plans[1].levels)


EXPECTED = {"dynbatch", "instances", "backends", "arrivals", "dli_bert", "blip", "mnist_cpu_sweep", "fastapi",
            "noise"}


def test_every_shipped_spec_is_valid_on_a_two_gpu_node() -> None:
    names = set()
    for f in sorted(SPECS.glob("*.yml")):
        spec = load_spec(f)
        if isinstance(spec, FastapiSpec):
            plans = exp.plan_fastapi(spec)
        else:
            plans = exp.plan(spec, 2, repository=REPO if (REPO / spec.model).is_dir() else None)
        assert plans and all(p.levels for p in plans), f
        names.add(spec.name)
    assert names == EXPECTED
    # and each has a playbook pointing the generic role at it
    for name in EXPECTED:
        play = yaml.safe_load((ROOT / "experiments" / f"{name}.yml").read_text())
        assert play[0]["roles"][0]["role"] == "experiment"
        assert play[0]["roles"][0]["experiment_spec"].endswith(f"specs/{name}.yml")


def test_shipped_specs_on_a_rehearsal_node_adapt_or_refuse() -> None:
    adapted = exp.plan(load_spec(SPECS / "instances.yml"), 0, repository=REPO)
    assert [p.config_pbtxt.count("KIND_CPU") for p in adapted] == [1, 2, 2]
    assert "count: 4" in adapted[2].config_pbtxt
    blip = {p.name: p for p in exp.plan(load_spec(SPECS / "blip.yml"), 0)}
    bound = [n for n in blip["cpu"].notes if n.startswith("requests of 1.77 MB: count windows of 200 ")]
    assert blip["cpu"].notes == bound and len(bound) == 1  # the tutorial's CPU config runs as is
    assert blip["two_gpus"].notes == ["instance_group[0]: KIND_GPU x2 -> KIND_CPU x2 (host has no GPU)",
                                      *bound]
    assert "optimization: GPU accelerator tensorrt dropped (host has no GPU)" in blip["tensorrt"].notes
    assert "tensorrt" not in blip["tensorrt"].config_pbtxt
    dli = exp.plan(load_spec(SPECS / "dli_bert.yml"), 0)
    assert all("optimization: GPU accelerator tensorrt dropped (host has no GPU)" in p.notes for p in dli)
    sweep = load_spec(SPECS / "mnist_cpu_sweep.yml")
    assert len(sweep.all_variants) == 28
    # a halving search: 3 rungs of 2 measurements at the objective's concurrency 8 only
    assert [(lv.load, lv.repetition) for lv in exp.plan(sweep, 0)[0].levels] == [(8, r) for r in range(1, 7)]


def test_node_base_configs_keep_their_serving_edits(tmp_path: Path) -> None:
    """A node's rendered config (CPU, ONNX shim, stand-in weights) is the base the overrides apply to."""
    node = tmp_path / "node_base" / "food_classifier_onnx"
    node.mkdir(parents=True)
    (node / "config.pbtxt").write_text(
        'name: "food_classifier_onnx"\nbackend: "python"\nmax_batch_size: 16\n'
        'input [ { name: "input" data_type: TYPE_FP32 dims: [3, 224, 224] } ]\n'
        'output [ { name: "output" data_type: TYPE_FP32 dims: [11] } ]\n'
        'instance_group [ { count: 1 kind: KIND_CPU } ]\n'
        'parameters { key: "serve_system_served_by" value { string_value: "onnx_python_shim: no onnxruntime" '
        '} }\nparameters { key: "serve_system_weights" value { string_value: "stand-in: generated" } }\n')
    plans = exp.plan(load_spec(SPECS / "arrivals.yml"), 0, repository=tmp_path / "node_base")
    dyn = plans[2]
    assert 'backend: "python"' in dyn.config_pbtxt and "preferred_batch_size: 4" in dyn.config_pbtxt
    assert dyn.stand_in == "stand-in: generated"
    assert dyn.notes[0] == "served by: onnx_python_shim: no onnxruntime"
    assert any("KIND_GPU x1 -> KIND_CPU x1" in n for n in dyn.notes)  # the variant itself asked for GPU 0
    with pytest.raises(SpecError,
                       match="python: base_config: .*/food_classifier/config.pbtxt:1:1: cannot read"):
        exp.plan(load_spec(SPECS / "backends.yml"), 0, repository=tmp_path / "node_base")


def _node_onnx_config(tmp_path: Path, *params: tuple[str, str]) -> Path:
    node = tmp_path / "node_base" / "food_classifier_onnx"
    node.mkdir(parents=True)
    (node / "config.pbtxt").write_text(
        'name: "food_classifier_onnx"\nbackend: "onnxruntime"\nmax_batch_size: 16\n'
        'input [ { name: "input" data_type: TYPE_FP32 dims: [3, 224, 224] } ]\n'
        'output [ { name: "output" data_type: TYPE_FP32 dims: [11] } ]\n'
        'instance_group [ { count: 1 kind: KIND_GPU gpus: [0] } ]\n'
        + "".join(f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}\n' for k, v in params))
    return tmp_path / "node_base"


def test_a_gpu_nodes_stand_in_weights_are_measured_only_where_chosen(tmp_path: Path) -> None:
    """A GPU node serving generated weights nobody chose is refused in one line (whatever the number of
    variants); chosen stand-ins (serve_stack_weights: standin) and a node without GPUs are planned."""
    spec = load_spec(SPECS / "arrivals.yml")
    weights = ("serve_system_weights", "stand-in: generated stand-in model")
    base = _node_onnx_config(tmp_path / "a", weights)
    with pytest.raises(SpecError) as refused:
        exp.plan(spec, 1, repository=base)
    assert len(refused.value.lines) == 1 and len(spec.all_variants) > 1
    assert refused.value.lines[0].endswith(
        "arrivals.yml: model food_classifier_onnx: the GPU node serves generated stand-in weights, which "
        "nobody chose: deploy the lab's weights (serve_stack_weights: lab; the model's own in "
        "model_repository/food_classifier_onnx/1/ for a model the lab has none of), or choose stand-ins with "
        "-e serve_stack_weights=standin, then run playbooks/deploy.yml")
    assert all(p.stand_in for p in exp.plan(spec, 0, repository=base))  # no GPU: measured, marked
    chosen = _node_onnx_config(tmp_path / "b", weights,
                               ("serve_system_standin_chosen", "serve_stack_weights=standin"))
    assert all(p.stand_in for p in exp.plan(spec, 1, repository=chosen))
    lab = _node_onnx_config(tmp_path / "c", ("serve_system_weights", "lab: 1/model.onnx <- ..."))
    assert not any(p.stand_in for p in exp.plan(spec, 1, repository=lab))


def test_a_base_moved_off_gpus_at_deploy_is_an_adaptation_of_the_variants_that_run_it(tmp_path: Path) -> None:
    """serve_system_instances (written by the render for a node without GPU) becomes each variant's note,
    unless the variant brings its own instance groups (then the planner's own adaptation says it)."""
    node = tmp_path / "node_base" / "food_classifier"
    node.mkdir(parents=True)
    moved = "instance_group[0]: KIND_GPU x3 -> KIND_CPU x3 (host has no GPU)"  # as the deploy wrote it
    (node / "config.pbtxt").write_text(
        'name: "food_classifier"\nbackend: "python"\nmax_batch_size: 16\n'
        'input [ { name: "INPUT_IMAGE" data_type: TYPE_STRING dims: [1] } ]\n'
        'output [ { name: "FOOD_LABEL" data_type: TYPE_STRING dims: [1] } ]\n'
        'instance_group [ { count: 1 kind: KIND_CPU } ]\n'
        f'parameters {{ key: "serve_system_instances" value {{ string_value: "{moved}" }} }}\n')
    plans = {p.name: p
             for p in exp.plan(load_spec(SPECS / "instances.yml"), 0, repository=tmp_path / "node_base")}
    assert all(moved not in p.notes for p in plans.values())  # each variant sets its own instance groups
    assert plans["gpus01_2x2"].notes[0] == "instance_group[0]: KIND_GPU x2 -> KIND_CPU x2 (host has no GPU)"
    dyn = {p.name: p
           for p in exp.plan(load_spec(SPECS / "dynbatch.yml"), 0, repository=tmp_path / "node_base")}
    assert dyn["baseline"].notes == [moved] and dyn["dynbatch"].notes == [moved]


def _count(argv: list[str], flag: str) -> int | None:
    return int(argv[argv.index(flag) + 1]) if flag in argv else None


def test_large_generated_inputs_are_bounded_by_a_request_count() -> None:
    """perf_analyzer keeps ~2 copies of every request's inputs of a window: image-sized generated inputs
    get a request count within the memory budget (warm-up included), whatever the server's speed."""
    from serve_system.experiment import perfargv

    image = 3 * 224 * 224 * 4
    most = perfargv.request_limit(image)
    assert most * perfargv.RETAINED_COPIES * image <= perfargv.REQUEST_MEMORY_BUDGET < (most + 1) * 2 * image
    plans = {p.name: p for p in exp.plan(load_spec(SPECS / "backends.yml"), 0)}
    two = plans["onnx_2gpus"]  # the lab's 500 + 3000 requests: ~4.2 GB, past the 4096 MB cap
    for lv in two.levels:
        warm, count = _count(lv.argv, "--warmup-request-count"), _count(lv.argv, "--request-count")
        assert warm is not None and count is not None and warm + count <= most and warm <= most // 4
        assert count == most - warm
    assert any("request_count" in n and "instead of request_count 3000" in n for n in two.notes), two.notes
    assert _count(plans["onnx"].levels[0].argv, "--request-count") == 600  # within the budget: as given
    assert not any("request_count" in n for n in plans["onnx"].notes)
    assert _count(plans["onnx_batch16"].levels[0].argv, "--request-count") == 100  # 16 images a request
    assert _count(plans["python"].levels[0].argv, "--request-count") is None  # a JSON input file
    rate = exp.plan(load_spec(SPECS / "arrivals.yml"), 0)[0]  # time windows: count windows instead
    argv = rate.levels[0].argv
    assert argv[argv.index("--measurement-mode") + 1] == "count_windows"
    assert _count(argv, "--measurement-request-count") == perfargv.COUNT_WINDOW
    assert _count(rate.levels[0].retry_argv[0], "--measurement-request-count") == 2 * perfargv.COUNT_WINDOW
    assert _count(argv, "--request-count") is None and any("instead of time windows" in n for n in rate.notes)
    short = perfargv.PerfSettings(measurement_mode="count_windows", measurement_request_count=12)
    assert perfargv.bound_requests(short, image) == (short, None)  # small count windows: bounded already
    big, note = perfargv.bound_requests(dataclasses.replace(short, measurement_request_count=5000), image)
    assert big.measurement_request_count == most // 2 and note and "count windows of 5000" in note
    small = exp.plan(load_spec(SPECS / "mnist_cpu_sweep.yml"), 0)[0]  # 1x28x28: windows kept
    assert all(_count(lv.argv, "--request-count") is None for lv in small.levels)
