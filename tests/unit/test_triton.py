"""config.pbtxt parsing, overrides, rendering and what Triton (or the host) would refuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from serve_system.triton.host import adapt_to_host, gpus_needed
from serve_system.triton.inputs import check_shapes, input_dims, request_bytes
from serve_system.triton.pbtxt import (
    KIND_CPU,
    KIND_GPU,
    ConfigError,
    ModelConfig,
    apply_overrides,
    load_api_body,
    load_pbtxt,
    parse_pbtxt,
    render_pbtxt,
)
from serve_system.triton.problems import check
from serve_system.triton.rules import advice

REPO = Path(__file__).parent / "fixtures" / "model_repository"


def test_lab_configs_parse() -> None:
    cfg = load_pbtxt(REPO / "food_classifier" / "config.pbtxt")
    assert (cfg.name, cfg.backend, cfg.max_batch_size) == ("food_classifier", "python", 16)
    assert input_dims(cfg) == {"INPUT_IMAGE": [1]}
    blip = load_pbtxt(REPO / "base_model_cpu" / "config.pbtxt")
    assert list(blip.dynamic_batching.preferred_batch_size) == [1, 2, 4, 8]
    assert input_dims(blip)["input_ids"] == [-1]


def test_unknown_field_names_line_and_column(tmp_path: Path) -> None:
    p = tmp_path / "config.pbtxt"
    p.write_text('name: "m"\nmax_batch_size: 4\ndynamic_batching {\n  prefered_batch_size: [2]\n}\n')
    with pytest.raises(ConfigError) as exc:
        load_pbtxt(p)
    assert str(exc.value).startswith(f"{p}:4:3: ")
    assert "prefered_batch_size" in str(exc.value)


def test_override_replaces_removes_and_rejects_unknown_keys() -> None:
    base = load_pbtxt(REPO / "food_classifier" / "config.pbtxt")
    v = apply_overrides(base, {"dynamic_batching": {"preferred_batch_size": [4, 6],
                                                       "max_queue_delay_microseconds": 100},
                                  "instance_group": [{"count": 2, "kind": "KIND_CPU"}]}, "s: v: config")
    assert list(v.dynamic_batching.preferred_batch_size) == [4, 6]
    assert v.dynamic_batching.max_queue_delay_microseconds == 100
    assert len(v.instance_group) == 1 and v.instance_group[0].count == 2
    assert base.instance_group[0].kind == KIND_GPU  # the base is not changed
    back = apply_overrides(v, {"dynamic_batching": None}, "s: v: config")
    assert not back.HasField("dynamic_batching")
    with pytest.raises(ConfigError, match=r'^s: v: config: dynamic_batching.queue_delay: not a field of '
                                          r'model dynamic batching \(its fields: preferred_batch_size, max_'):
        apply_overrides(base, {"dynamic_batching": {"queue_delay": 5}}, "s: v: config")


@pytest.mark.parametrize("override, says", [
    # protobuf's "repeated field preferred_batch_size must be in [] which is 4, 6, 8"
    ({"dynamic_batching": {"preferred_batch_size": "4, 6, 8"}},
     "dynamic_batching.preferred_batch_size: a list, not one value: give [4, 6, 8]"),
    ({"dynamic_batching": {"preferred_batch_size": 4}},
     "dynamic_batching.preferred_batch_size: a list, not one value: give [4]"),
    ({"dynamic_batching": {"preferred_batch_size": [4, "six"]}},
     "dynamic_batching.preferred_batch_size[1]: six is not a whole number"),
    # protobuf's "Invalid enum value KIND_GUP for enum type inference.ModelInstanceGroup.Kind"
    ({"instance_group": [{"kind": "KIND_GUP"}]},
     "instance_group[0].kind: KIND_GUP is not a kind; use KIND_AUTO, KIND_GPU, KIND_CPU or KIND_MODEL"),
    ({"instance_group": [{"kind": 7}]}, "instance_group[0].kind: 7 is not a kind; use KIND_AUTO"),  # parsed!
    ({"instance_group": {"kind": "KIND_CPU"}},
     "instance_group: a list, not one value: give [{kind: KIND_CPU}]"),
    ({"instance_group": [{"count": "two"}]}, "instance_group[0].count: two is not a whole number"),
    ({"dynamic_batching": {"max_queue_delay_microseconds": -5}},
     "dynamic_batching.max_queue_delay_microseconds: -5 is negative: give 0 or more"),
    ({"max_batch_size": 2**31}, "max_batch_size: 2147483648 is too large: give at most 2147483647"),
    ({"dynamic_batching": {"preserve_ordering": "yes"}},
     "dynamic_batching.preserve_ordering: yes is not true or false"),
    ({"dynamic_batching": 5}, "dynamic_batching: 5 is not a mapping of model dynamic batching's fields"),
    ({"parameters": {"p": {"string_value": 3}}},
     'parameters.p.string_value: 3 is not text: quote it, e.g. "3"'),
    ({"input": [{"name": "x", "data_type": "TYPE_FP3"}]},
     "input[0].data_type: TYPE_FP3 is not a data type; use TYPE_INVALID, TYPE_BOOL,"),
])
def test_a_refused_override_names_its_field_and_the_fix_never_protobufs_words(override, says) -> None:
    base = load_pbtxt(REPO / "food_classifier" / "config.pbtxt")
    with pytest.raises(ConfigError) as exc:
        apply_overrides(base, override, "s.yml: v: config")
    assert str(exc.value).startswith(f"s.yml: v: config: {says}"), str(exc.value)
    for word in ("repeated field", "must be in []", "Invalid enum value", "Failed to parse", "inference."):
        assert word not in str(exc.value)


@pytest.mark.parametrize("text, says", [
    ("instance_group [ { kind: KIND_GUP } ]",
     "KIND_GUP is not a kind; use KIND_AUTO, KIND_GPU, KIND_CPU or KIND_MODEL"),
    ('max_batch_size: "8"', '"8" is not a whole number: give one, e.g. 8'),
    ("max_batch: 8", 'max_batch is not a field of model config (did you mean "max_batch_size"?'),
])
def test_a_refused_config_pbtxt_says_the_fix_at_its_line(text, says) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_pbtxt(text, "c.pbtxt")
    assert str(exc.value).startswith("c.pbtxt:1:") and says in str(exc.value)
    assert "inference." not in str(exc.value) and "Couldn't parse" not in str(exc.value)


def test_render_round_trips_and_load_body_is_json_config() -> None:
    base = load_pbtxt(REPO / "base_model_cpu" / "config.pbtxt")
    assert parse_pbtxt(render_pbtxt(base)) == base
    body = load_api_body(base)
    inner = json.loads(body["parameters"]["config"])
    assert inner["name"] == "base_model_cpu" and inner["platform"] == "onnxruntime_onnx"
    assert inner["dynamic_batching"]["preferred_batch_size"] == [1, 2, 4, 8]
    assert inner["input"][0]["data_type"] == "TYPE_FP32"  # proto field names, enum names


def _cfg(text: str) -> ModelConfig:
    return parse_pbtxt('name: "m"\nbackend: "python"\n' + text)


def test_checks_what_triton_refuses() -> None:
    probs = check(_cfg("max_batch_size: 8\ndynamic_batching { preferred_batch_size: [4, 16] }"))
    assert [str(p) for p in probs] == [
        ("dynamic_batching.preferred_batch_size: preferred batch size 16 > max_batch_size 8 "
        "(Triton: dynamic batching preferred size must be <= max batch size)")]
    nobatch = _cfg("max_batch_size: 0\ndynamic_batching { }")
    assert check(nobatch) == []  # Triton accepts it: a note, not a refusal
    (note,) = advice(nobatch)
    assert note.field == "dynamic_batching" and "max_batch_size 0" in note.message


def test_checks_against_the_host_gpus() -> None:
    two = _cfg("instance_group [ { count: 2 kind: KIND_GPU gpus: [0] }, { count: 2 kind: KIND_GPU gpus: [1] "
               "} ]")
    assert gpus_needed(two) == 2
    assert check(two, 2) == []
    one = check(two, 1)
    assert [str(p) for p in one] == [
        "instance_group[1].gpus: GPU id 1 does not exist on a host with 1 GPU(s)"]
    none = check(two, 0)
    assert [p.field for p in none] == ["instance_group[0].kind", "instance_group[1].kind"]
    trt = _cfg('optimization { execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt" } ] } '
               '}')
    assert gpus_needed(trt) == 1
    assert "tensorrt" in check(trt, 0)[0].message


def test_adapt_to_fewer_gpus() -> None:
    two = _cfg("instance_group [ { count: 4 kind: KIND_GPU gpus: [0] }, { count: 4 kind: KIND_GPU gpus: [1] "
               "} ]")
    cpu, notes = adapt_to_host(two, 0)
    assert [(g.kind, g.count, list(g.gpus)) for g in cpu.instance_group] == [(KIND_CPU, 4, []),
                                                                             (KIND_CPU, 4, [])]
    assert check(cpu, 0) == [] and len(notes) == 2
    spread = _cfg("instance_group [ { count: 2 kind: KIND_GPU gpus: [0, 1] } ]")
    cpu2, _ = adapt_to_host(spread, 0)
    assert cpu2.instance_group[0].count == 4  # 2 per GPU on 2 GPUs
    one, notes1 = adapt_to_host(spread, 1)
    assert list(one.instance_group[0].gpus) == [0] and one.instance_group[0].count == 4
    assert check(one, 1) == [] and "gpus [0, 1] -> [0]" in notes1[0]


def test_shapes_against_inputs() -> None:
    onnx = load_pbtxt(REPO / "food_classifier_onnx" / "config.pbtxt")
    assert check_shapes(onnx, {"input": [3, 224, 224]}) == []
    (p,) = check_shapes(onnx, {"IMAGE": [3, 224, 224]})  # the lab's mistake
    assert str(p) == "shapes.IMAGE: the model has no input named 'IMAGE' (its inputs: input)"
    (p,) = check_shapes(onnx, {"input": [224, 224]})
    assert "2 dims" in p.message
    blip = load_pbtxt(REPO / "base_model_cpu" / "config.pbtxt")
    assert check_shapes(blip, {"pixel_values": [3, 384, 384], "input_ids": [16],
                                  "attention_mask": [16]}) == []


def test_request_bytes_of_generated_inputs() -> None:
    cfg = parse_pbtxt('name: "m"\nmax_batch_size: 16\ninput { name: "input" data_type: TYPE_FP32 '
                         'dims: [3, 224, 224] }\ninput { name: "mask" data_type: TYPE_INT64 dims: [-1] }\n'
                         'output { name: "o" data_type: TYPE_FP32 dims: [11] }\n')
    assert request_bytes(cfg, {}, 1) is None  # a variable dim without a shape: unknown
    assert request_bytes(cfg, {"mask": [16]}, 1) == 3 * 224 * 224 * 4 + 16 * 8
    assert request_bytes(cfg, {"mask": [16]}, 16) == 16 * (3 * 224 * 224 * 4 + 16 * 8)
    text = parse_pbtxt('name: "s"\ninput { name: "t" data_type: TYPE_STRING dims: [1] }\n'
                          'output { name: "o" data_type: TYPE_FP32 dims: [1] }\n')
    assert request_bytes(text, {}, 1) is None
