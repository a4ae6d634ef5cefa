"""What Triton accepts, ``serve-system validate`` accepts: every config.pbtxt of the repository,
of the test fixtures and of the five seeds (tests/unit/fixtures/seed_configs), and configurations
that use the rarer parts of the schema correctly (ensembles, sequence batching, batch I/O, reshape,
priorities, model metrics)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from serve_system.cli import main
from serve_system.triton.pbtxt import load_pbtxt, parse_pbtxt
from serve_system.triton.problems import advice_file, check, check_file

ROOT = Path(__file__).resolve().parents[2]
# the configs the repository ships (git's list: a run's results/ or .cache/ hold variant configs
# renamed per variant folder, which are not model repositories)
REPO_CONFIGS = sorted(ROOT / p for p in subprocess.run(["git", "ls-files", "*config.pbtxt"], cwd=ROOT,
                                                       check=True,
                                                       capture_output=True, text=True).stdout.split())
SEEDS = ROOT / "tests" / "unit" / "fixtures" / "seed_configs"


def test_every_repository_config_is_found() -> None:
    rel = {str(p.relative_to(ROOT)) for p in REPO_CONFIGS}
    assert "model_repository/food_classifier/config.pbtxt" in rel
    assert len([p for p in REPO_CONFIGS if SEEDS in p.parents]) >= 15


@pytest.mark.parametrize("path", REPO_CONFIGS, ids=[str(p.relative_to(ROOT)) for p in REPO_CONFIGS])
def test_repository_and_seed_configs_validate_clean(path: Path) -> None:
    assert check_file(path) == []


def test_validate_command_accepts_the_model_repository(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(ROOT / "model_repository"),
                 str(SEEDS / "mnist_tuned" / "onnx-mnist-cpu")]) == 0
    out = capsys.readouterr().out
    n = len(list((ROOT / "model_repository").glob("*/config.pbtxt")))
    assert n >= 2 and f"{n + 1} file(s) valid" in out
    assert "note: " in out and "max_batch_size 0" in out  # the MNIST write-up's config: accepted, with a note


VALID = {
    "ensemble": '''
name: "ens" platform: "ensemble" max_batch_size: 4
input [ { name: "RAW" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "LABEL" data_type: TYPE_STRING dims: [ 1 ] },
         { name: "LABEL2" data_type: TYPE_STRING dims: [ 1 ] } ]
ensemble_scheduling { step [
  { model_name: "pre" model_version: -1 input_map { key: "IN" value: "RAW" }
    output_map { key: "OUT" value: "pix" } },
  { model_name: "cls" input_map { key: "IN" value: "pix" } output_map [ { key: "OUT" value: "LABEL" },
                                                                        { key: "SCORE" value: "score" } ] },
  { model_name: "log" input_map [ { key: "A" value: "score" }, { key: "B" value: "RAW" } ]
    output_map { key: "OUT" value: "logged" } },
  { model_name: "sink" input_map { key: "X" value: "logged" } output_map { key: "Y" value: "LABEL2" } }
] }''',
    "sequence": '''
name: "seq" backend: "onnxruntime" max_batch_size: 8
input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
sequence_batching {
  max_sequence_idle_microseconds: 5000000
  oldest { max_candidate_sequences: 4 preferred_batch_size: [ 2, 8 ] }
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ] },
    { name: "END" control [ { kind: CONTROL_SEQUENCE_END bool_false_true: [ false, true ] } ] },
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]
  state [ { input_name: "S_IN" output_name: "S_OUT" data_type: TYPE_FP32 dims: [ -1 ]
            initial_state { name: "zero" data_type: TYPE_FP32 dims: [ 1 ] zero_data: true } } ]
}
instance_group [ { count: 2 kind: KIND_CPU } ]''',
    "batch_io_reshape": '''
name: "rag" backend: "python" max_batch_size: 16
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2, 4, -1, 6 ] reshape { shape: [ 8, -1, 1, 6 ] }
          allow_ragged_batch: true },
        { name: "SCALAR" data_type: TYPE_INT32 dims: [ 1 ] reshape { shape: [ ] } } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
batch_input [ { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "INDEX" data_type: TYPE_FP32
                source_input: "IN" } ]
batch_output [ { target_name: "OUT" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "IN" } ]
model_warmup [ { name: "w" batch_size: 4 inputs { key: "IN" value: { data_type: TYPE_FP32 dims: [ 2, 4, 3, 6 ]
                                                                        random_data: true } } } ]''',
    "priorities_metrics": '''
name: "pri" backend: "onnxruntime" max_batch_size: 8
input [ { name: "image" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 3, 224, 224 ] } ]
output [ { name: "probs" data_type: TYPE_FP32 dims: [ 1000 ] } ]
dynamic_batching {
  preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 100
  priority_levels: 2 default_priority_level: 2
  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 1000 }
  priority_queue_policy { key: 1 value: { max_queue_size: 4 } }
}
instance_group [ { count: 1 kind: KIND_GPU gpus: [ 0, 1 ]
                   rate_limiter { resources [ { name: "R1" count: 4 } ] } },
                 { kind: KIND_CPU } ]
model_metrics { metric_control [ { metric_identifier { family: "nv_inference_first_response_histogram_ms" }
                                   histogram_options { buckets: [ 1, 2, 4, 8 ] } } ] }
response_cache { enable: true }''',
    "tensorrt_profiles": '''
name: "trt" platform: "tensorrt_plan" max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP16 dims: [ -1, 3 ] }, { name: "s" data_type: TYPE_INT32 dims: [ 2 ]
          is_shape_tensor: true } ]
output [ { name: "y" data_type: TYPE_FP16 dims: [ -1, 3 ] } ]
instance_group [ { kind: KIND_GPU profile: [ "0", "1" ] } ]''',
}


@pytest.mark.parametrize("name", sorted(VALID))
def test_rarer_schema_parts_used_correctly_are_accepted(name: str) -> None:
    cfg = parse_pbtxt(VALID[name])
    assert check(cfg, folder=cfg.name) == [], name


def test_with_triton_where_no_tritonserver_can_run(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    cfg = ROOT / "model_repository" / "food_classifier" / "config.pbtxt"
    assert main(["validate", "--with-triton", "--tritonserver", str(tmp_path / "tritonserver"),
                 str(cfg)]) == 3
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("serve-system validate: --with-triton skipped: no "
                                               "tritonserver found")
    fake = tmp_path / "bin" / "tritonserver"  # there, but not a server: exits at once
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'error while loading shared libraries: libdcgm.so.4' >&2\nexit 127\n")
    fake.chmod(0o755)
    assert main(["validate", "--with-triton", "--tritonserver", str(fake), str(cfg)]) == 3
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "exited with status 127 before it was ready" in err[0] and "libdcgm" in err[0]


# --- shaped like the configs of Triton's docs/examples/model_repository (written here, not copied):
# a platform without a backend, an image classifier with reshapes and labels, a Python-backend
# identity on strings, a sequence model with the oldest-first batcher and a correlation-id control
TRITON_EXAMPLES = {
    "two_adds": '''
name: "two_adds" platform: "onnxruntime_onnx" max_batch_size: 8
input [ { name: "A" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "B" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "SUM" data_type: TYPE_INT32 dims: [ 16 ] },
         { name: "DIFF" data_type: TYPE_INT32 dims: [ 16 ] } ]''',
    "classifier": '''
name: "classifier" platform: "onnxruntime_onnx" max_batch_size: 0
input [ { name: "pixels" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 3, 224, 224 ]
          reshape { shape: [ 1, 3, 224, 224 ] } } ]
output [ { name: "scores" data_type: TYPE_FP32 dims: [ 1000 ] reshape { shape: [ 1, 1000, 1, 1 ] }
           label_filename: "labels.txt" } ]''',
    "echo_strings": '''
name: "echo_strings" backend: "python" max_batch_size: 8
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ -1 ] } ]
output [ { name: "TEXT_OUT" data_type: TYPE_STRING dims: [ -1 ] } ]''',
    "running_sum": '''
name: "running_sum" platform: "onnxruntime_onnx" max_batch_size: 8
sequence_batching {
  max_sequence_idle_microseconds: 5000000
  oldest { max_candidate_sequences: 64 max_queue_delay_microseconds: 500 }
  control_input [
    { name: "BEGIN" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "LAST" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] },
    { name: "VALID" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] },
    { name: "SEQ_ID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]
}
input [ { name: "VALUE" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "TOTAL" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]''',
}


@pytest.mark.parametrize("name", sorted(TRITON_EXAMPLES))
def test_configs_shaped_like_tritons_examples_are_accepted(name: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / name / "config.pbtxt"
    cfg.parent.mkdir()
    cfg.write_text(TRITON_EXAMPLES[name])
    assert main(["validate", str(cfg)]) == 0
    captured = capsys.readouterr()
    assert "1 file(s) valid" in captured.out and captured.err == ""


# --- custom backends: Triton loads any backend the server has (libtriton_<name>.so, or a Python-based
# backend's model.py): accepted, with a note saying where the server must have it
SEQ_IO = ('input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
          'output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]\n')
CUSTOM = {
    "stateful": ('backend: "implicit_state" max_batch_size: 4\n' + SEQ_IO
                 + 'sequence_batching { control_input [ { name: "START" control [ { kind: '
                   'CONTROL_SEQUENCE_START '
                 'int32_false_true: [ 0, 1 ] } ] } ]\n state [ { input_name: "S_IN" output_name: "S_OUT" '
                 'data_type: TYPE_INT32 dims: [ 1 ] } ] }\ninstance_group [ { kind: KIND_CPU } ]\n'),
    "dyna": ('backend: "dyna_sequence" max_batch_size: 8\n' + SEQ_IO
             + 'sequence_batching { oldest { max_candidate_sequences: 4 } control_input [ { name: "CORRID" '
               'control '
             '[ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] } ] }\n'),
    "my_python_based": 'backend: "my_tokenizer" max_batch_size: 0\n' + SEQ_IO,
}


@pytest.mark.parametrize("folder", sorted(CUSTOM))
def test_custom_backends_are_accepted_with_a_note(folder: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / folder / "config.pbtxt"
    cfg.parent.mkdir()
    cfg.write_text(f'name: "{folder}"\n' + CUSTOM[folder])
    assert check_file(cfg) == []
    assert main(["validate", str(cfg)]) == 0
    out = capsys.readouterr().out
    backend = load_pbtxt(cfg).backend
    (note,) = [ln for ln in out.splitlines() if ln.startswith(f"note: {cfg}: backend: ")]
    assert f"libtriton_{backend}.so" in note and f"/{backend}/model.py" in note and "--with-triton" in note


def test_a_folder_named_model_dot_backend_gives_the_backend(tmp_path: Path) -> None:
    # Triton's custom-backend auto-complete: no backend, no platform, no files: 'add.identity' -> identity
    empty = tmp_path / "add.identity" / "config.pbtxt"
    empty.parent.mkdir()
    empty.write_text("")
    assert check_file(empty) == []
    custom = tmp_path / "add.adder" / "config.pbtxt"
    custom.parent.mkdir()
    custom.write_text(SEQ_IO)
    assert check_file(custom) == []
    (note,) = [n for n in advice_file(custom) if ": backend: " in n]
    assert "'adder' (from the folder name" in note
    plain = tmp_path / "add" / "config.pbtxt"  # no dot, no files: Triton cannot tell the backend
    plain.parent.mkdir()
    plain.write_text(SEQ_IO)
    (prob,) = check_file(plain)
    assert "must specify 'platform' or 'backend'" in prob


# --- rules of model_config.proto that Triton does not enforce: accepted with a note (these were
# refusals once; the reason each is not, from Triton's source, is in the commit that moved them)
HEAD = 'name: "m"\nbackend: "python"\nmax_batch_size: 8\n'
IO = ('input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
      'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]\n')
NOTED = {
    "platform-name-as-backend": (
        'name: "m"\nbackend: "onnxruntime_onnx"\n' + IO, "backend",
        "is a platform name; if you meant it, set platform: \"onnxruntime_onnx\""),
    "platform-with-python-backend": (
        'name: "m"\nplatform: "onnxruntime_onnx"\nbackend: "python"\n' + IO, "platform",
        "Triton ignores platform 'onnxruntime_onnx' for backend 'python'"),
    "unknown-platform-with-python-backend": (
        'name: "m"\nplatform: "onnx"\nbackend: "python"\n' + IO, "platform",
        "Triton ignores platform 'onnx'"),
    "unknown-backend": (
        'name: "m"\nbackend: "torch"\n' + IO, "backend", "(did you mean 'pytorch'?)"),
    "backend-with-space": (
        'name: "m"\nbackend: "onnx runtime"\n' + IO, "backend", "characters backend names"),
    "batch-input-no-target": (
        HEAD + IO + 'batch_input [ { kind: BATCH_ITEM_SHAPE data_type: TYPE_INT32 source_input: "IN" } ]\n',
        "batch_input[0].target_name", "give target_name"),
    "sequence-state-no-output": (
        HEAD + IO + 'sequence_batching { state [ { input_name: "I" data_type: TYPE_FP32 dims: [ 1 ] } ] }\n',
        "sequence_batching.state[0].output_name", "gives no 'output_name'"),
    "sequence-control-without-kind": (
        HEAD + IO + 'sequence_batching { control_input [ { name: "S" } ] }\n',
        "sequence_batching.control_input[0].control", "never sets that tensor"),
    "rate-limiter-resource-no-name": (
        HEAD + IO + "instance_group [ { kind: KIND_CPU rate_limiter { resources [ { count: 2 } ] } } ]\n",
        "instance_group[0].rate_limiter.resources[0].name", "name it"),
    "warmup-batch-too-big": (
        HEAD + IO + 'model_warmup [ { name: "w" batch_size: 16 inputs { key: "IN" value: { '
        "data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]\n",
        "model_warmup[0].batch_size", "sends that many requests of one item each"),
    "warmup-batch-zero": (
        HEAD + IO + 'model_warmup [ { name: "w" batch_size: 0 } ]\n', "model_warmup[0].batch_size",
        "Triton skips this warm-up sample"),
    "buckets-unsorted": (
        HEAD + IO + 'model_metrics { metric_control [ { metric_identifier { family: "f" } '
        "histogram_options { buckets: [ 4, 1 ] } } ] }\n",
        "model_metrics.metric_control[0].histogram_options.buckets", "increasing order"),
    "onnx-input-without-dims": (
        'name: "m"\nbackend: "onnxruntime"\ninput [ { name: "IN" data_type: TYPE_FP32 } ]\n',
        "input[0].dims", "unless the onnxruntime backend fills it in"),
}


@pytest.mark.parametrize("case", sorted(NOTED))
def test_what_triton_does_not_enforce_is_a_note(case: str, tmp_path: Path) -> None:
    text, field, words = NOTED[case]
    cfg = tmp_path / "m" / "config.pbtxt"
    cfg.parent.mkdir()
    cfg.write_text(text)
    assert check_file(cfg) == [], case
    notes = [n for n in advice_file(cfg) if n.startswith(f"{cfg}: {field}: ")]
    assert any(words in n for n in notes), (case, advice_file(cfg))


def test_python_model_that_fills_its_config_in_may_leave_dims_out(tmp_path: Path) -> None:
    cfg = tmp_path / "m" / "config.pbtxt"
    (cfg.parent / "1").mkdir(parents=True)
    cfg.write_text('name: "m"\nbackend: "python"\ninput [ { name: "IN" data_type: TYPE_FP32 } ]\n')
    (cfg.parent / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    (prob,) = check_file(cfg)  # a plain model.py fills nothing in: Triton refuses it
    assert prob.endswith("input[0].dims: model input 'IN' must specify 'dims' (without the batch "
                         "dimension; -1 for a variable-size dimension; [ 1 ] for a scalar per batch item)")
    (cfg.parent / "1" / "model.py").write_text(
        "class TritonPythonModel:\n    @staticmethod\n"
        "    def auto_complete_config(config):\n        return config\n")
    assert check_file(cfg) == []
    assert any("input[0].dims: " in n and "python backend fills it in" in n for n in advice_file(cfg))
