from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from serve_system import modelcost, standin
from serve_system.errors import ServeSystemError
from serve_system.standin import CLASSES, STANDINS, is_standin, standin_bytes, write_onnx_standin
from serve_system.triton.pbtxt import load_pbtxt as parse_config

REPO = Path(__file__).resolve().parents[2] / "model_repository"
NP_TYPES = {"TYPE_FP32": np.float32, "TYPE_INT64": np.int64}


def _session(model: str) -> ort.InferenceSession:
    return ort.InferenceSession(standin_bytes(model), providers=["CPUExecutionProvider"])


def test_food11_standin_has_the_lab_signature_and_batches(tmp_path: Path) -> None:
    path = write_onnx_standin(tmp_path / "1" / "model.onnx")
    assert is_standin(path)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (inp,) = sess.get_inputs()
    (out,) = sess.get_outputs()
    assert inp.name == "input" and inp.shape[1:] == [3, 224, 224]
    assert out.name == "output" and out.shape[1:] == [len(CLASSES)]
    x = np.random.default_rng(0).random((5, 3, 224, 224), dtype=np.float32)
    (y,) = sess.run(None, {"input": x})
    assert y.shape == (5, 11) and y.dtype == np.float32 and np.isfinite(y).all()
    # batched rows equal single-image runs (nothing mixes images of a batch)
    (y0,) = sess.run(None, {"input": x[:1]})
    np.testing.assert_allclose(y[:1], y0, rtol=1e-4, atol=1e-4)
    # deterministic: the same seed gives the same model bytes
    assert write_onnx_standin(tmp_path / "b.onnx").read_bytes() == path.read_bytes()


def test_food11_standin_is_mobilenet_v2_sized() -> None:
    model = onnx.load_from_string(standin_bytes("food_classifier_onnx"))
    params = modelcost.count_parameters(model)
    macs = modelcost.count_macs(model, STANDINS["food_classifier_onnx"].feeds(1, np.random.default_rng(0)))
    # MobileNetV2 1.0/224: 3.50 M parameters with the 1000-class head, 2.22 M with 11 classes; ~300 M MACs
    assert 2_100_000 < params < 2_400_000
    assert 290e6 < macs < 310e6
    ops = {n.op_type for n in model.graph.node}
    assert {"Conv", "Clip", "Add", "GlobalAveragePool", "Gemm"} <= ops
    assert sum(n.op_type == "Conv" for n in model.graph.node) == 52  # 17 blocks, stem and head convolutions


def test_the_python_backend_classifier_runs_the_same_graph_as_the_onnx_one() -> None:
    # food_classifier's model.py decodes images, then runs this graph (model.onnx next to it)
    assert standin_bytes("food_classifier") == standin_bytes("food_classifier_onnx")


@pytest.mark.parametrize("model", sorted(set(STANDINS) - {"food_classifier"}))
def test_each_standin_matches_its_committed_config(model: str) -> None:
    """The stand-in takes and gives exactly what model_repository/<model>/config.pbtxt declares."""
    config = parse_config(REPO / model / "config.pbtxt")
    sess = _session(model)
    assert [i.name for i in sess.get_inputs()] == [i.name for i in config.input]
    assert [o.name for o in sess.get_outputs()] == [o.name for o in config.output]
    from serve_system.triton.protos import model_config_pb2 as pb

    rng = np.random.default_rng(1)
    feeds = STANDINS[model].feeds(3, rng)
    for i in config.input:
        dims = [16 if d == -1 else d for d in i.dims]
        assert list(feeds[i.name].shape) == [3, *dims]
        assert feeds[i.name].dtype == NP_TYPES[pb.DataType.Name(i.data_type)]
    outs = sess.run(None, feeds)
    for o, arr in zip(config.output, outs):
        assert arr.shape[0] == 3 and arr.dtype == np.float32 and np.isfinite(arr).all()
        assert [d for d in o.dims if d != -1] == [d for d, c in zip(arr.shape[1:], o.dims) if c != -1]
    props = onnx.load_from_string(standin_bytes(model)).metadata_props
    assert any(p.key == standin.STANDIN_KEY for p in props)


def test_token_inputs_out_of_range_are_still_served() -> None:
    """perf_analyzer's random integers may exceed the vocabulary: ids are taken modulo its size."""
    sess = _session("bertQA-onnx")
    big = np.full((1, 384), 10**9, dtype=np.int64)
    start, end = sess.run(None, {"input__0": big, "input__1": big, "input__2": np.ones((1, 384), np.int64)})
    assert start.shape == end.shape == (1, 384)


def test_standin_for_an_unknown_model_says_which_exist() -> None:
    with pytest.raises(ServeSystemError, match="no stand-in for model 'nope'.*blip"):
        standin_bytes("nope")


def test_measure_reports_parameters_compute_and_time() -> None:
    m = modelcost.measure("onnx-mnist-cpu", repeats=3)
    assert m.parameters == 32 * 9 + 32 + 64 * 32 * 9 + 64 + 64 * 14 * 14 * 128 + 128 + 128 * 10 + 10
    # conv1 28x28x32x9 + conv2 28x28x64x288 + dense 12544x128 + 128x10
    assert m.macs == 28 * 28 * 32 * 9 + 28 * 28 * 64 * 288 + 12544 * 128 + 128 * 10
    assert m.cpu_ms_p50 > 0 and m.cpu_ms_per_item_b8 > 0 and m.cpu_time_ms > 0
    assert m.size_bytes > m.parameters * 4


def test_standin_is_built_once_per_machine_and_cached(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVE_SYSTEM_CACHE", str(tmp_path))
    standin._standin_bytes.cache_clear()
    try:
        built = standin_bytes("onnx-mnist-cpu")
        assert built == bytes(STANDINS["onnx-mnist-cpu"].build().SerializeToString())
        (cached,) = (tmp_path / "standins").iterdir()
        assert cached.name.startswith("mnist-") and cached.read_bytes() == built
        standin._standin_bytes.cache_clear()  # a new process: the file is read, not rebuilt
        cached.write_bytes(built + b"marker")
        assert standin_bytes("onnx-mnist-cpu") == built + b"marker"
    finally:
        standin._standin_bytes.cache_clear()
