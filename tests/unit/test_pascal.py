"""The lab's own hardware: Chameleon's gpu_p100 nodes are Pascal (compute capability 6.0), where
TensorRT 10 (Triton 24.10) does not run. A TensorRT accelerator is dropped there with a note, as on a
host without GPU; a TensorRT plan is refused; 7.0 and an unknown capability keep the config as written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from serve_system.cli import main
from serve_system.experiment import plan as exp
from serve_system.experiment.nodelook import read_look
from serve_system.experiment.spec.messages import SpecError
from serve_system.experiment.spec.reader import load_spec
from serve_system.triton.host import adapt_to_host, compute_capability_of, needs_adapting
from serve_system.triton.pbtxt import KIND_GPU, ModelConfig, parse_pbtxt
from serve_system.triton.problems import check

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "experiments" / "specs"
DROPPED = ("optimization: GPU accelerator tensorrt dropped (TensorRT 10 needs compute capability 7.0; "
           "the host's GPUs have 6.0)")
UNKNOWN = ("compute capability unknown (the node's nvidia-smi answered neither compute_cap nor a GPU name in "
           "NVIDIA's table): TensorRT kept as written; it needs 7.0 or newer and fails to load on older GPUs "
           "(a P100 is 6.0)")

TRT = parse_pbtxt('''
name: "m" backend: "onnxruntime" max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [4] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [4] } ]
instance_group [ { count: 1 kind: KIND_GPU gpus: [0] } ]
optimization { execution_accelerators {
  gpu_execution_accelerator [ { name: "tensorrt" parameters { key: "precision_mode" value: "FP16" } },
                              { name: "cuda" } ] } }
''')


def _accelerators(cfg: ModelConfig) -> list[str]:
    return [a.name for a in cfg.optimization.execution_accelerators.gpu_execution_accelerator]


def test_tensorrt_accelerator_dropped_below_7_0_only() -> None:
    out, notes = adapt_to_host(TRT, 2, 6.0)
    assert notes == [DROPPED]
    assert _accelerators(out) == ["cuda"]  # the other accelerator and the GPU instances stay
    assert out.instance_group[0].kind == KIND_GPU and list(out.instance_group[0].gpus) == [0]
    assert _accelerators(TRT) == ["tensorrt", "cuda"]  # the input is not changed
    for cc in (7.0, 8.6, None):
        same, notes = adapt_to_host(TRT, 2, cc)
        assert notes == [] and _accelerators(same) == ["tensorrt", "cuda"]
    assert needs_adapting(TRT, 2, 6.0) and needs_adapting(TRT, 2, 6.1)
    assert not needs_adapting(TRT, 2, 7.0) and not needs_adapting(TRT, 2, None)


def test_check_names_tensorrt_on_pascal() -> None:
    problems = check(TRT, 2, compute_capability=6.0)
    assert [p.field for p in problems] == ["optimization.execution_accelerators.gpu_execution_accelerator"]
    assert "compute capability 6.0: TensorRT 10 needs 7.0" in problems[0].message
    assert check(TRT, 2, compute_capability=7.5) == []
    plan_cfg = parse_pbtxt('name: "p" platform: "tensorrt_plan" max_batch_size: 8\n'
                              'input [ { name: "x" data_type: TYPE_FP32 dims: [4] } ]\n'
                              'output [ { name: "y" data_type: TYPE_FP32 dims: [4] } ]\n')
    assert [p.field for p in check(plan_cfg, 2, compute_capability=6.0)] == ["platform"]
    assert check(plan_cfg, 2, compute_capability=8.0) == []


def test_shipped_tensorrt_variants_on_a_p100_node() -> None:
    blip = {p.name: p for p in exp.plan(load_spec(SPECS / "blip.yml"), 2, compute_capability=6.0)}
    assert DROPPED in blip["tensorrt"].notes and "tensorrt" not in blip["tensorrt"].config_pbtxt
    assert "KIND_GPU" in blip["tensorrt"].config_pbtxt  # still on the GPU, without TensorRT
    assert not any("tensorrt" in n for n in blip["two_gpus"].notes)
    dli = exp.plan(load_spec(SPECS / "dli_bert.yml"), 2, compute_capability=6.0)
    trt = [p for p in dli if "trt" in p.name]
    assert trt and all(DROPPED in p.notes and "tensorrt" not in p.config_pbtxt for p in trt)
    # on a V100 (7.0) they run as written
    v100 = {p.name: p for p in exp.plan(load_spec(SPECS / "blip.yml"), 2, compute_capability=7.0)}
    assert "tensorrt" in v100["tensorrt"].config_pbtxt
    assert not any("tensorrt" in n for n in v100["tensorrt"].notes)


def test_refuse_policy_refuses_tensorrt_on_pascal(tmp_path: Path) -> None:
    text = (SPECS / "blip.yml").read_text().replace("on_missing_gpus: adapt", "on_missing_gpus: refuse")
    spec = tmp_path / "blip.yml"
    spec.write_text(text)
    with pytest.raises(SpecError, match=r"tensorrt: config\.optimization\.execution_accelerators"
                                        r"\.gpu_execution_accelerator: TensorRT accelerator on GPUs of "
                                        r"compute capability 6\.0"):
        exp.plan(load_spec(spec), 2, compute_capability=6.0, repository=ROOT / "model_repository")


def test_plan_command_takes_nvidia_smis_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "blip" / "r1"
    argv = ["plan", str(SPECS / "blip.yml"), "--run-dir", str(run), "--host=n1=2", "--host=n2=2",
            "--compute-capability=n1=6.0,6.0", "--compute-capability=n2=", "--only", "tensorrt"]
    assert main(argv) == 0, capsys.readouterr().err
    p1 = json.loads((run / "n1" / "plan.json").read_text())
    p2 = json.loads((run / "n2" / "plan.json").read_text())
    assert p1["compute_capability"] == 6.0 and p2["compute_capability"] is None
    trt1 = next(v for v in p1["variants"] if v["name"] == "tensorrt")
    trt2 = next(v for v in p2["variants"] if v["name"] == "tensorrt")
    assert DROPPED in trt1["notes"] and not any("tensorrt" in n for n in trt2["notes"])
    assert UNKNOWN in trt2["notes"]  # unknown is said, TensorRT kept
    for bad, says in ((["--compute-capability=n1=sixty"], "'sixty' is not a compute capability"),
                      (["--compute-capability=n9=6.0"], "'n9' is not one of the --host names")):
        assert main(argv[:6] + bad) == 1
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("name,cap", [
    ("Tesla P100-PCIE-16GB", 6.0), ("Tesla P100-SXM2-16GB", 6.0), ("Tesla V100-SXM2-32GB", 7.0),
    ("Quadro RTX 6000", 7.5), ("NVIDIA A100-PCIE-40GB", 8.0), ("Tesla K80", 3.7), ("Tesla M40 24GB", 5.2),
    ("NVIDIA H100 80GB HBM3", 9.0), ("NVIDIA GH200 480GB", 9.0), ("Tesla P40", 6.1), ("NVIDIA L40S", 8.9),
    ("NVIDIA GeForce RTX 4090", None), ("", None), ("Tesla P1000", None),
])
def test_compute_capability_by_the_name_nvidia_smi_prints(name: str, cap: float | None) -> None:
    assert compute_capability_of(name) == cap


def test_a_driver_that_refuses_compute_cap_still_has_tensorrt_dropped_on_a_p100(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Old drivers (470) refuse --query-gpu=compute_cap; the look's GPU names decide then."""
    look = "os=Ubuntu 24.04.1 LTS\ngpu=Tesla P100-PCIE-16GB\ngpu=Tesla P100-PCIE-16GB\n"
    facts = read_look("n1", 2, look).facts
    assert facts["gpu_compute_capability"] == ["6.0", "6.0"]
    assert facts["gpu_compute_capability_from"] == "name (nvidia-smi refused compute_cap)"
    # an answer that is no number ("[N/A]") counts as refused; an answer that is one wins over the names
    p100 = "gpu=Tesla P100-PCIE-16GB\n"
    assert read_look("n1", 2, "cap=[N/A]\n" + p100).facts["gpu_compute_capability"] == ["6.0"]
    assert read_look("n1", 2, "cap=7.0\n" + p100).facts["gpu_compute_capability"] == ["7.0"]
    unknown = read_look("n1", 2, "gpu=Mystery GPU 9000\n").facts
    assert unknown["gpu_compute_capability"] == []
    assert "Mystery GPU 9000 is not in NVIDIA's table" in unknown["gpu_compute_capability_from"]

    run = tmp_path / "blip" / "r1"
    argv = ["plan", str(SPECS / "blip.yml"), "--run-dir", str(run), "--host=n1=2", "--host=n2=2",
            f"--node-facts=n1={look}", "--node-facts=n2=gpu=Mystery GPU 9000", "--only", "tensorrt"]
    assert main(argv) == 0, capsys.readouterr().err
    p1 = json.loads((run / "n1" / "plan.json").read_text())
    p2 = json.loads((run / "n2" / "plan.json").read_text())
    assert p1["compute_capability"] == 6.0 and p2["compute_capability"] is None
    assert DROPPED in next(v for v in p1["variants"] if v["name"] == "tensorrt")["notes"]
    assert UNKNOWN in next(v for v in p2["variants"] if v["name"] == "tensorrt")["notes"]
