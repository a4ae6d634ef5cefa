"""The typed spec model: every shipped spec loads; each class of bad spec is refused with one line
naming the file and the field; the JSON Schema describes both kinds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from serve_system.experiment.spec.messages import SpecError
from serve_system.experiment.spec.models import MAX_BYTES, FastapiSpec, TritonSpec, json_schema
from serve_system.experiment.spec.reader import load_spec, read_objectives

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "experiments" / "specs"

TRITON = {"name": "t", "model": "m", "base_config_text": 'name: "m"\nplatform: "onnxruntime_onnx"\n',
          "load": {"levels": [1, 8]}, "variants": [{"name": "a"}, {"name": "b", "config": {}}],
          "objectives": [{"metric": "throughput", "at_load": 8}]}
FASTAPI = {"kind": "fastapi", "name": "fastapi", "description": "x",
           "variants": [{"name": "onnx", "runtime": "onnx"}, {"name": "pytorch", "runtime": "pytorch"}],
           "levels": [{"senders": 1, "requests": 100}, {"senders": 16, "requests": 1000}],
           "repetitions": 1, "warmup": {"requests": 0}, "request_timeout_s": 60}


def _write(tmp_path: Path, data: object, name: str = "spec.yml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data, sort_keys=False) if not isinstance(data, str) else data)
    return p


def _refused(p: Path) -> list[str]:
    before = sorted(p.parent.rglob("*"))
    with pytest.raises(SpecError) as exc:
        load_spec(p)
    assert sorted(p.parent.rglob("*")) == before  # nothing written
    for line in exc.value.lines:
        assert line.startswith(f"{p}"), line
        assert "\n" not in line
    return exc.value.lines


def test_every_shipped_spec_loads() -> None:
    files = sorted(SPECS.glob("*.yml"))
    assert len(files) >= 7
    for f in files:
        s = load_spec(f)
        if s.kind == "fastapi":  # experiments/specs/fastapi.yml: the lab's FastAPI benchmark
            assert isinstance(s, FastapiSpec) and s.variants and s.levels, f
        else:
            assert isinstance(s, TritonSpec) and s.kind == "triton" and s.all_variants, f
        assert s.path == f and s.data["name"] == s.name


def test_both_kinds_load(tmp_path: Path) -> None:
    t = load_spec(_write(tmp_path, TRITON))
    assert isinstance(t, TritonSpec)
    assert [v.name for v in t.all_variants] == ["a", "b"]
    assert t.goals()[0].record().to_json() == {"name": "max_throughput", "metric": "throughput",
                                               "goal": "max", "at_load": 8.0, "constraints": {}}
    assert t.warmup.requests == 20 and t.repetitions == 1 and t.on_missing_gpus == "refuse"
    assert t.smallest_effect == 0.05
    f = load_spec(_write(tmp_path, FASTAPI, "f.yml"))
    assert isinstance(f, FastapiSpec)
    assert [(lv.senders, lv.requests) for lv in f.levels] == [(1, 100), (16, 1000)]
    assert [v.runtime for v in f.variants] == ["onnx", "pytorch"] and f.request_timeout_s == 60


@pytest.mark.parametrize(("change", "expect"), [
    ({"bogus": 1}, "spec.yml: bogus: unknown key ("),
    ({"varaints": []}, "spec.yml: varaints: unknown key (did you mean 'variants'?"),
    ({"kind": "tritn"}, "spec.yml: kind: 'tritn' is not a kind of spec (did you mean 'triton'?"),
    ({"kind": {"a": 1}}, "spec.yml: kind: {'a': 1} is not a kind of spec (use triton or fastapi)"),
    ({"repetitions": 0}, "spec.yml: repetitions: is 0: use a whole number from 1 to 100, or auto"),
    ({"repetitions": "two"}, "spec.yml: repetitions: is 'two': use a whole number"),
    ({"smallest_effect": 5},
     "spec.yml: smallest_effect: is 5.0: use a share between 0 and 1, e.g. 0.05 for 5 %"),
    ({"smallest_effect": "5 %"}, "spec.yml: smallest_effect: is '5 %': use a number"),
    ({"name": "../escape"}, "spec.yml: name: '../escape' is not a plain name"),
    ({"model": "{{ lookup('pipe', 'id') }}"},
     "spec.yml: model: \"{{ lookup('pipe', 'id') }}\" holds a Jinja"),
    ({"variants": [{"name": "a"}, {"name": "a"}]},
     "spec.yml: variants[1].name: 'a' is a duplicate variant name"),
    ({"variants": []}, "spec.yml: variants: no variants"),
    ({"load": {"levels": [1, -8]}}, "spec.yml: load.levels: level -8 is not a positive number"),
    ({"load": {"levels": [1.5, 8]}}, "spec.yml: load.levels: concurrency levels are whole numbers"),
    ({"objectives": [{"at_load": 4}]},
     "spec.yml: objectives[0].at_load: 4 is not a load level of any variant"),
    ({"objectives": [{"metric": "speed"}]}, "spec.yml: objectives[0].metric: is 'speed': use 'throughput'"),
    ({"base_config_text": None, "base_config": "../../../etc/passwd"},
     "spec.yml: base_config: '../../../etc/passwd' points outside the spec's folder"),
    ({"perf": {"input_data": "/etc/shadow"}}, "spec.yml: perf.input_data: '/etc/shadow' points outside"),
    ({"perf": {"batch_size": -1}}, "spec.yml: perf.batch_size: is -1: use a number >= 1"),
    ({"variants": [{"name": "a", "perf": {"percentil": 9}}]},
     "spec.yml: variants[0].perf.percentil: unknown key (did you mean 'percentile'?"),
])
def test_bad_triton_specs_refused_in_one_line(tmp_path: Path, change: dict[str, object], expect: str) -> None:
    data = {**TRITON, **change}
    data = {k: v for k, v in data.items() if v is not None}
    lines = _refused(_write(tmp_path, data))
    assert len(lines) == 1, lines
    assert lines[0].startswith(str(tmp_path) + "/") and expect in lines[0], lines


@pytest.mark.parametrize(("change", "expect"), [
    ({"variants": [{"name": "x", "runtime": "tensorflow"}]}, "f.yml: variants[0].runtime: is 'tensorflow'"),
    ({"levels": []}, "f.yml: levels: is empty"),
    ({"levels": [{"senders": 0, "requests": 10}]}, "f.yml: levels[0].senders: is 0: use a number >= 1"),
    ({"levels": [{"senders": 8, "requests": 4}]}, "f.yml: levels[0].requests: 4 requests for 8 senders"),
    ({"request_timeout_s": -1}, "f.yml: request_timeout_s: is -1: use a number > 0"),
    ({"smallest_effect": 0}, "f.yml: smallest_effect: is 0.0: use a share between 0 and 1"),
    ({"model": "food_classifier"}, "f.yml: model: unknown key ("),
])
def test_bad_fastapi_specs_refused_in_one_line(tmp_path: Path, change: dict[str, object],
                                               expect: str) -> None:
    lines = _refused(_write(tmp_path, {**FASTAPI, **change}, "f.yml"))
    assert len(lines) == 1 and expect in lines[0], lines


def test_file_level_limits(tmp_path: Path) -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi"))
    (line,) = _refused(_write(tmp_path, bomb, "bomb.yml"))
    assert "bomb.yml:" in line and "expands to more than" in line
    big = tmp_path / "big.yml"
    big.write_text("description: '" + "x" * (MAX_BYTES + 10) + "'\n")
    (line,) = _refused(big)
    assert "larger than 1024 KiB" in line
    latin = tmp_path / "latin.yml"
    latin.write_bytes(b"name: t\ndescription: caf\xe9\n")
    (line,) = _refused(latin)
    assert line.startswith(
        f"{latin}:2: (file): not UTF-8 text (byte 0xe9") and "save the file as UTF-8" in line
    twice = _write(tmp_path, "name: a\nname: b\n", "twice.yml")
    (line,) = _refused(twice)
    assert line == f"{twice}:2:1: name: key given twice: keep one"
    (line,) = _refused(_write(tmp_path, "a: &a [*a]\n", "rec.yml"))
    assert "refers to itself" in line or "expands" in line
    (line,) = _refused(_write(tmp_path, "name: " + "[" * 5000 + "]" * 5000 + "\n", "deep.yml"))
    assert "nested deeper than 64 levels" in line  # refused from the event stream, before composing recurses
    (line,) = _refused(_write(tmp_path, "- 1\n", "list.yml"))
    assert "a spec is a mapping" in line
    (line,) = _refused(_write(tmp_path, "name: [\n", "syntax.yml"))
    assert "not valid YAML" in line


def test_null_settings_mean_the_default(tmp_path: Path) -> None:
    """An explicit null in perf or load falls back to the default (the spec's setting is dropped)."""
    from serve_system.experiment import plan as exp

    data = {**TRITON, "perf": {"batch_size": 1, "protocol": "grpc"},
            "variants": [
                {"name": "a", "perf": {"batch_size": None, "protocol": None}, "load": {"mode": None}}]}
    s = load_spec(_write(tmp_path, data))
    assert isinstance(s, TritonSpec)
    assert s.merged_perf(s.all_variants[0]) == {} and s.merged_load(s.all_variants[0]) == {"levels": [1, 8]}
    argv = exp.plan(s, 0)[0].levels[0].argv
    assert argv[argv.index("-i") + 1] == "http" and argv[argv.index("-b") + 1] == "1"


def test_aliases_within_limits_are_fine() -> None:
    # dli_bert.yml shares one optimization block between variants with an anchor and aliases
    s = load_spec(SPECS / "dli_bert.yml")
    assert isinstance(s, TritonSpec)
    assert s.all_variants[1].config and s.all_variants[1].config["optimization"] == s.all_variants[0].config[
        "optimization"]  # type: ignore[index]  # config is a plain mapping


def test_json_schema_covers_both_kinds() -> None:
    schema = json_schema()
    json.dumps(schema)
    assert {"TritonSpec", "FastapiSpec", "Variant", "Perf", "Objective"} <= set(schema["$defs"])
    triton = schema["$defs"]["TritonSpec"]
    assert triton["additionalProperties"] is False and "variants" in triton["properties"]
    assert "async" in schema["$defs"]["Perf"]["properties"]
    assert schema["$defs"]["FastapiSpec"]["required"] == ["kind", "name", "variants", "levels"]


def test_shipped_schema_is_current_and_accepts_every_shipped_spec() -> None:
    """experiments/specs/spec.schema.json is what `serve-system schema` prints, and an editor checking
    the shipped specs with it (JSON Schema 2020-12) finds nothing wrong, while a typo is flagged."""
    import jsonschema

    shipped = json.loads((SPECS / "spec.schema.json").read_text())
    assert shipped == json_schema(), "regenerate: serve-system schema -o experiments/specs/spec.schema.json"
    validator = jsonschema.Draft202012Validator(shipped)
    for f in sorted(SPECS.glob("*.yml")):
        errors = list(validator.iter_errors(yaml.safe_load(f.read_text())))
        assert not errors, (f, [e.message for e in errors])
    assert not list(validator.iter_errors(FASTAPI))
    assert list(validator.iter_errors({**TRITON, "varaints": []}))
    assert list(validator.iter_errors({**FASTAPI, "levels": [{"senders": 0, "requests": 1}]}))


def test_report_reads_objectives_through_the_model(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.json"
    assert [o.title for o in read_objectives(None, manifest)] == ["max_throughput"]
    got = read_objectives([{"name": "fast", "metric": "p95_us", "goal": "min", "at_load": 8,
                                    "constraints": {"throughput": {"min": 10}}}], manifest)
    assert got[0].record().to_json() == {"name": "fast", "metric": "p95_us", "goal": "min", "at_load": 8.0,
                                  "constraints": {"throughput": {"min": 10.0}}}
    with pytest.raises(SpecError) as exc:
        read_objectives([{"metric": "throughput"}, {"metric": "speed"}], manifest)
    assert exc.value.lines == [(f"{manifest}: objectives[1].metric: is 'speed': use 'throughput', "
                               "'latency_avg_us', 'p50_us', 'p90_us', 'p95_us', 'p99_us', 'queue_us', "
                               "'compute_infer_us', 'avg_batch_size' or 'gpu_util'")]
