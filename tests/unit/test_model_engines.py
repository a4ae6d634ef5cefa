"""What runs a model inside Triton's Python backend (food_classifier/1/model.py, the ONNX shim): a KIND_CPU
instance on onnxruntime's CPU provider, a KIND_GPU one on its CUDA provider or not at all (never the CPU in
its place), and the log line says which. Run with the real onnxruntime of this machine (CPU providers only)
and a minimal stand-in of the backend's ``triton_python_backend_utils`` (it exists only inside Triton)."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from serve_system.modelrepo import SHIM
from serve_system.standin import write_onnx_standin

REPO = Path(__file__).resolve().parents[2]
FOOD = REPO / "model_repository" / "food_classifier" / "1" / "model.py"


class TritonModelException(Exception):
    pass


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    utils = types.ModuleType("triton_python_backend_utils")
    utils.TritonModelException = TritonModelException  # type: ignore[attr-defined]
    utils.triton_string_to_numpy = lambda t: {"TYPE_FP32": np.float32}[t]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", utils)
    return utils


def _model(source: Path, folder: Path) -> Any:
    """``source`` as ``folder/1/model.py`` (its weights beside it), imported as Triton's stub does."""
    (folder / "1").mkdir(parents=True, exist_ok=True)
    (folder / "1" / "model.py").write_bytes(source.read_bytes())
    spec = importlib.util.spec_from_file_location(f"model_{folder.name}", folder / "1" / "model.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TritonPythonModel()


def _args(name: str, kind: str, **params: str) -> dict[str, str]:
    config = {"name": name, "input": [{"name": "input", "data_type": "TYPE_FP32"}],
              "output": [{"name": "output", "data_type": "TYPE_FP32"}],
              "parameters": {k: {"string_value": v} for k, v in params.items()}}
    return {"model_config": json.dumps(config), "model_instance_kind": kind, "model_instance_device_id": "0"}


def test_food_classifier_on_a_cpu_instance_says_its_provider_and_that_the_weights_are_generated(
        backend: types.ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _model(FOOD, tmp_path / "food_classifier")
    write_onnx_standin(tmp_path / "food_classifier" / "1" / "model.onnx")
    model.initialize(_args("food_classifier", "CPU", serve_system_weights="stand-in: generated"))
    line = capsys.readouterr().out.strip()
    assert line.startswith("food_classifier: serving with onnxruntime ")
    assert ("(CPUExecutionProvider) from model.onnx, a generated stand-in; weights: stand-in: generated"
            in line)
    assert model.infer(np.zeros((2, 3, 224, 224), np.float32)).shape == (2, 11)


@pytest.mark.parametrize("source", [FOOD, SHIM], ids=["food_classifier", "onnx_shim"])
def test_a_gpu_instance_without_the_cuda_provider_is_refused_not_run_on_the_cpu(
        backend: types.ModuleType, tmp_path: Path, source: Path) -> None:
    import onnxruntime

    assert "CUDAExecutionProvider" not in onnxruntime.get_available_providers()  # this machine's CPU build
    model = _model(source, tmp_path / "m")
    write_onnx_standin(tmp_path / "m" / "1" / "model.onnx")
    refused = (r"a KIND_GPU instance, but onnxruntime .* has no CUDAExecutionProvider \(available: "
               r".*CPUExecutionProvider\): install onnxruntime-gpu in the Triton image, or give the model a "
               r"KIND_CPU instance group")
    with pytest.raises(TritonModelException, match=refused):
        model.initialize(_args("m", "GPU"))


def test_the_shim_on_a_cpu_instance_names_its_provider(backend: types.ModuleType, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    model = _model(SHIM, tmp_path / "food_classifier_onnx")
    write_onnx_standin(tmp_path / "food_classifier_onnx" / "1" / "model.onnx")
    model.initialize(_args("food_classifier_onnx", "CPU"))
    assert ", CPUExecutionProvider), not by Triton's onnxruntime backend" in capsys.readouterr().out


def test_the_pytorch_engine_without_torch_refuses_to_load(backend: types.ModuleType, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU node's food_classifier (serve_system_engine: pytorch) never falls back to another engine."""
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError, as in the rehearsal
    model = _model(FOOD, tmp_path / "food_classifier")
    (tmp_path / "food_classifier" / "1" / "food11.pth").write_bytes(b"weights")
    write_onnx_standin(tmp_path / "food_classifier" / "1" / "model.onnx")
    with pytest.raises(TritonModelException, match="serve_system_engine=pytorch but torch is not installed"):
        model.initialize(_args("food_classifier", "GPU", serve_system_engine="pytorch"))


def test_the_gpu_triton_image_runs_onnxruntime_on_cuda_at_the_lists_version() -> None:
    """The GPU image swaps the list's onnxruntime for onnxruntime-gpu of the same version, and its build
    fails where the CUDA provider is missing (the rehearsal image keeps the CPU build)."""
    import re

    requirements = (REPO / "model_repository" / "requirements.txt").read_text()
    pinned = re.search(r"^onnxruntime==([0-9.]+)$", requirements, re.MULTILINE)
    dockerfile = (REPO / "roles" / "serve_stack" / "files" / "triton_gpu" / "Dockerfile").read_text()
    assert pinned
    constraints = (REPO / "roles" / "serve_stack" / "files" / "triton_gpu" / "constraints.txt").read_text()
    assert "pip uninstall -y onnxruntime;" in dockerfile
    assert re.search(r"pip install [^;]*-c /opt/serve-system/constraints\.txt onnxruntime-gpu;", dockerfile)
    assert re.search(rf"^onnxruntime-gpu=={re.escape(pinned[1])}$", constraints, re.MULTILINE)
    assert 'assert "CUDAExecutionProvider" in onnxruntime.get_available_providers()' in dockerfile
