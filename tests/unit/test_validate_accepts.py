"""What Triton accepts, ``serve-system validate`` accepts: every config.pbtxt of the repository,
of the test fixtures and of the five seeds (tests/unit/fixtures/seed_configs), and configurations
that use the rarer parts of the schema correctly (ensembles, sequence batching, batch I/O, reshape,
priorities, model metrics)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from serve_system.cli import main
from serve_system.experiment import tritonconfig as tc

ROOT = Path(__file__).resolve().parents[2]
# the configs the repository ships (git's list: a run's results/ or .cache/ hold variant configs
# renamed per variant folder, which are not model repositories)
REPO_CONFIGS = sorted(ROOT / p for p in subprocess.run(["git", "ls-files", "*config.pbtxt"], cwd=ROOT, check=True,
                                                       capture_output=True, text=True).stdout.split())
SEEDS = ROOT / "tests" / "unit" / "fixtures" / "seed_configs"


def test_every_repository_config_is_found() -> None:
    rel = {str(p.relative_to(ROOT)) for p in REPO_CONFIGS}
    assert "model_repository/food_classifier/config.pbtxt" in rel
    assert len([p for p in REPO_CONFIGS if SEEDS in p.parents]) >= 15


@pytest.mark.parametrize("path", REPO_CONFIGS, ids=[str(p.relative_to(ROOT)) for p in REPO_CONFIGS])
def test_repository_and_seed_configs_validate_clean(path: Path) -> None:
    assert tc.check_file(path) == []


def test_validate_command_accepts_the_model_repository(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(ROOT / "model_repository"), str(SEEDS / "mnist_tuned" / "onnx-mnist-cpu")]) == 0
    out = capsys.readouterr().out
    n = len(list((ROOT / "model_repository").glob("*/config.pbtxt")))
    assert n >= 2 and f"{n + 1} file(s) valid" in out
    assert "note: " in out and "max_batch_size 0" in out  # the MNIST write-up's config: accepted, with a note


VALID = {
    "ensemble": '''
name: "ens" platform: "ensemble" max_batch_size: 4
input [ { name: "RAW" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "LABEL" data_type: TYPE_STRING dims: [ 1 ] }, { name: "LABEL2" data_type: TYPE_STRING dims: [ 1 ] } ]
ensemble_scheduling { step [
  { model_name: "pre" model_version: -1 input_map { key: "IN" value: "RAW" } output_map { key: "OUT" value: "pix" } },
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
instance_group [ { count: 1 kind: KIND_GPU gpus: [ 0, 1 ] rate_limiter { resources [ { name: "R1" count: 4 } ] } },
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
    cfg = tc.parse_pbtxt(VALID[name])
    assert tc.check(cfg, folder=cfg.name) == [], name


def test_with_triton_where_no_tritonserver_can_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = ROOT / "model_repository" / "food_classifier" / "config.pbtxt"
    assert main(["validate", "--with-triton", "--tritonserver", str(tmp_path / "tritonserver"), str(cfg)]) == 3
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
