"""The endpoint's request/response contract, bad inputs, health, and both runtimes (FastAPI TestClient)."""

from __future__ import annotations

import base64
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from fastapi.testclient import TestClient
from onnx import TensorProto, helper
from PIL import Image

from serve_system.errors import UsageError
from serve_system.fastapi_app.app import create_app
from serve_system.fastapi_app.preprocess import MEAN, STD, to_tensor
from serve_system.fastapi_app.settings import Settings
from serve_system.standin import CLASSES, write_onnx_standin


def image_bytes(fmt: str = "JPEG", size: tuple[int, int] = (320, 240), mode: str = "RGB",
                noisy: bool = False) -> bytes:
    """An image file; smooth (compresses well) unless ``noisy``."""
    rng = np.random.default_rng(len(fmt) + size[0])
    channels = {"RGB": 3, "RGBA": 4, "L": 1}[mode]
    if noisy:
        arr = rng.integers(0, 255, size=(size[1], size[0], channels), dtype=np.uint8)
    else:
        yy, xx = np.mgrid[0:size[1], 0:size[0]]
        base = (xx * 255 // max(size[0], 1) + yy * 128 // max(size[1], 1)) % 256
        arr = np.stack([(base + 40 * c) % 256 for c in range(channels)], axis=-1).astype(np.uint8)
    img = Image.fromarray(arr[..., 0] if channels == 1 else arr, mode)
    buf = io.BytesIO()
    img.save(buf, format=fmt)
    return buf.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(model=tmp_path / "absent.onnx", standin_dir=tmp_path / "standin", max_image_bytes=200_000,
                    max_image_pixels=5_000_000)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as c:
        yield c


# --- the contract ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("fmt", "size", "mode"), [
    ("JPEG", (320, 240), "RGB"), ("PNG", (64, 500), "RGBA"), ("PNG", (1, 1), "L"),
    ("JPEG", (2000, 1500), "RGB"),
])
def test_predict_answers_a_label_and_a_probability(client: TestClient, fmt: str, size: tuple[int, int],
                                                   mode: str) -> None:
    r = client.post("/predict", json={"image": b64(image_bytes(fmt, size, mode))})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"prediction", "probability"}
    assert body["prediction"] in CLASSES
    assert 0.0 <= body["probability"] <= 1.0
    # the stand-in was used (no model file): the response says so
    assert r.headers["X-Serve-System-Standin"] == "true"
    assert r.headers["X-Serve-System-Runtime"] == "onnx"


def test_predictions_vary_with_the_image_and_repeat_for_the_same_image(client: TestClient) -> None:
    answers = {}
    for colour in [(250, 10, 10), (10, 250, 10), (10, 10, 250), (200, 200, 40)]:
        buf = io.BytesIO()
        Image.new("RGB", (100, 80), colour).save(buf, "PNG")
        first = client.post("/predict", json={"image": b64(buf.getvalue())}).json()
        assert client.post("/predict", json={"image": b64(buf.getvalue())}).json() == first
        answers[colour] = first["probability"]
    assert len(set(answers.values())) == len(answers)


def test_data_url_and_line_wrapped_base64_are_accepted(client: TestClient) -> None:
    raw = b64(image_bytes())
    wrapped = "\n".join(raw[i:i + 76] for i in range(0, len(raw), 76))
    for text in (f"data:image/jpeg;base64,{raw}", wrapped):
        assert client.post("/predict", json={"image": text}).status_code == 200


def test_health_says_ok_and_names_the_stand_in(client: TestClient, settings: Settings) -> None:
    r = client.get("/health")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ok" and body["runtime"] == "onnx" and body["classes"] == 11
    assert body["device"] == "CPUExecutionProvider"
    assert body["standin"] is True
    assert any("stand-in" in n and str(settings.model_path) in n for n in body["notes"])


def test_swagger_ui_and_openapi_are_served(client: TestClient) -> None:
    docs = client.get("/docs")
    assert docs.status_code == 200 and "swagger-ui" in docs.text
    spec = client.get("/openapi.json").json()
    assert set(spec["paths"]) >= {"/predict", "/health"}
    assert {"400", "413", "503", "422"} <= set(spec["paths"]["/predict"]["post"]["responses"])


def test_real_model_file_is_served_and_a_stand_in_file_is_recognised(tmp_path: Path) -> None:
    model = write_onnx_standin(tmp_path / "food_classifier_onnx" / "1" / "model.onnx")
    with TestClient(create_app(Settings(model=model, standin="never"))) as c:
        health = c.get("/health").json()
        assert health["model_path"] == str(model) and health["standin"] is True
        assert any("is the generated stand-in" in n for n in health["notes"])
        assert c.post("/predict", json={"image": b64(image_bytes())}).status_code == 200


# --- bad input: a 4xx with a clear message, never a 200 -----------------------------------------------

@pytest.mark.parametrize(("payload", "status", "words"), [
    ({"image": ""}, 400, "image is empty"),
    ({"image": "   \n "}, 400, "image is empty"),
    ({"image": "this is not base64!"}, 400, "not valid base64"),
    ({"image": "QUJ"}, 400, "not valid base64"),
    ({"image": b64(b"just some text, not a picture")}, 400, "not a picture"),
    ({"image": b64(image_bytes("JPEG", noisy=True)[:300])}, 400, "corrupt or truncated"),
    ({"image": b64(image_bytes("PNG", (600, 500), noisy=True))}, 413, "SERVE_FASTAPI_MAX_IMAGE_BYTES"),
])
def test_bad_image_gets_a_4xx_and_says_why(client: TestClient, payload: dict[str, str], status: int,
                                           words: str) -> None:
    r = client.post("/predict", json=payload)
    assert r.status_code == status, r.text
    assert words in r.json()["detail"]


def test_too_many_pixels_gets_413(tmp_path: Path) -> None:
    s = Settings(model=tmp_path / "none.onnx", standin_dir=tmp_path, max_image_pixels=10_000)
    with TestClient(create_app(s)) as c:
        r = c.post("/predict", json={"image": b64(image_bytes("PNG", (101, 100)))})
        assert r.status_code == 413 and "10100 pixels" in r.json()["detail"]
        assert c.post("/predict", json={"image": b64(image_bytes("PNG", (100, 100)))}).status_code == 200


def test_request_body_over_the_limit_is_refused_before_reading_it(client: TestClient,
                                                                   settings: Settings) -> None:
    r = client.post("/predict", content=b'{"image": "' + b"A" * (settings.max_body_bytes + 10) + b'"}',
                    headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert "request body" in r.json()["detail"] and str(settings.max_body_bytes) in r.json()["detail"]


@pytest.mark.parametrize("body", [{}, {"img": "abc"}, {"image": 12}, {"image": None}, ["x"]])
def test_wrong_request_shape_gets_422(client: TestClient, body: object) -> None:
    r = client.post("/predict", json=body)
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert detail.startswith("request body") and 'expected {"image": "<base64>"}' in detail


@pytest.mark.parametrize(("content", "ctype"), [
    (b"\xff\xd8 raw jpeg bytes", "image/jpeg"), (b"\xff\xd8 raw jpeg bytes", "application/json"),
    (b'{"image": ', "application/json"),
])
def test_non_json_body_gets_4xx_not_a_crash(client: TestClient, content: bytes, ctype: str) -> None:
    r = client.post("/predict", content=content, headers={"content-type": ctype})
    assert r.status_code in (400, 422), r.text
    assert 'expected {"image": "<base64>"}' in r.json()["detail"]


# --- a model that cannot load fails the health check ---------------------------------------------------

def _assert_unavailable(settings: Settings, words: str) -> None:
    with TestClient(create_app(settings)) as c:
        health = c.get("/health")
        assert health.status_code == 503
        assert health.json()["status"] == "unavailable" and words in health.json()["detail"]
        r = c.post("/predict", json={"image": b64(image_bytes())})
        assert r.status_code == 503 and words in r.json()["detail"]


def test_missing_model_without_stand_in_fails_health(tmp_path: Path) -> None:
    _assert_unavailable(Settings(model=tmp_path / "gone.onnx", standin="never"), "gone.onnx not found")


def test_corrupt_model_fails_health(tmp_path: Path) -> None:
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"definitely not protobuf" * 10)
    _assert_unavailable(Settings(model=bad), "cannot load")


def test_model_with_the_wrong_number_of_classes_fails_health(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["input"], ["output"], axes=[2, 3], keepdims=0)], "three",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["n", 3, 224, 224])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["n", 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path / "three.onnx"
    onnx.save(model, str(path))
    _assert_unavailable(Settings(model=path), "needs (1, 11) logits")


def test_cuda_demanded_without_a_gpu_fails_health(tmp_path: Path) -> None:
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():  # a GPU build: then CUDA must be used
        with TestClient(create_app(Settings(device="cuda", standin_dir=tmp_path))) as c:
            assert c.get("/health").json()["device"] == "CUDAExecutionProvider"
    else:
        _assert_unavailable(Settings(device="cuda", standin_dir=tmp_path), "no CUDAExecutionProvider")


# --- PyTorch runtime ----------------------------------------------------------------------------------

def _torch():  # type: ignore[no-untyped-def]
    try:
        import torch
    except ImportError:
        return None
    return torch


def test_pytorch_runtime_serves_the_stand_in_or_says_it_is_unavailable(tmp_path: Path) -> None:
    s = Settings(runtime="pytorch", model=tmp_path / "food11.pth", standin_dir=tmp_path / "si")
    if _torch() is None:
        _assert_unavailable(s, "PyTorch runtime unavailable: torch cannot be imported")
        return
    with TestClient(create_app(s)) as c:
        health = c.get("/health").json()
        assert health["status"] == "ok" and health["runtime"] == "pytorch" and health["standin"] is True
        r = c.post("/predict", json={"image": b64(image_bytes())})
        assert r.status_code == 200 and r.headers["X-Serve-System-Runtime"] == "pytorch"
    # the TorchScript stand-in computes what the ONNX stand-in computes
    with TestClient(create_app(Settings(model=tmp_path / "x.onnx", standin_dir=tmp_path / "si"))) as c:
        onnx_answer = c.post("/predict", json={"image": b64(image_bytes())}).json()
    assert onnx_answer["prediction"] == r.json()["prediction"]
    assert abs(onnx_answer["probability"] - r.json()["probability"]) < 1e-3


def test_pytorch_runtime_loads_a_pickled_model_like_the_labs_food11_pth(tmp_path: Path) -> None:
    torch = _torch()
    path = tmp_path / "food11.pth"
    if torch is None:
        _assert_unavailable(Settings(runtime="pytorch", model=path), "torch cannot be imported")
        return
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(3, 11))
    torch.save(net, path)
    with TestClient(create_app(Settings(runtime="pytorch", model=path, standin="never"))) as c:
        health = c.get("/health").json()
        assert health["status"] == "ok" and health["standin"] is False and health["device"] == "cpu"
        body = c.post("/predict", json={"image": b64(image_bytes())}).json()
        assert body["prediction"] in CLASSES and 0 <= body["probability"] <= 1
    torch.save(net.state_dict(), path)
    _assert_unavailable(Settings(runtime="pytorch", model=path), "holds a state_dict")


def test_pytorch_runtime_without_torch_is_reported_unavailable(tmp_path: Path) -> None:
    """In a Python where `import torch` fails, /health is 503 and says what to do."""
    blocker = tmp_path / "block" / "torch"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('torch is blocked for this test')\n")
    code = (
        "from fastapi.testclient import TestClient\n"
        "from serve_system.fastapi_app.app import create_app\n"
        "with TestClient(create_app()) as c:\n"
        "    h = c.get('/health'); p = c.post('/predict', json={'image': 'AAAA'})\n"
        "    print(h.status_code, p.status_code, h.json()['detail'])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(blocker.parent), "SERVE_FASTAPI_RUNTIME": "pytorch",
           "SERVE_FASTAPI_STANDIN_DIR": str(tmp_path / "si")}
    out = subprocess.run([sys.executable, "-c", code], env=env, check=False, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("503 503 PyTorch runtime unavailable: torch cannot be imported")
    assert "SERVE_FASTAPI_RUNTIME=onnx" in out.stdout


# --- settings and preprocessing -------------------------------------------------------------------------

def test_settings_from_the_environment() -> None:
    s = Settings.from_env({"SERVE_FASTAPI_RUNTIME": "PyTorch", "SERVE_FASTAPI_MODEL": "/m/x.pt",
                           "SERVE_FASTAPI_MAX_IMAGE_BYTES": "1000", "SERVE_FASTAPI_DEVICE": "cpu"})
    assert (s.runtime, s.model_path, s.max_image_bytes, s.device) == ("pytorch", Path("/m/x.pt"), 1000, "cpu")
    assert Settings.from_env({}).model_path == Path("/models/food_classifier_onnx/1/model.onnx")
    assert Settings.from_env({"SERVE_FASTAPI_RUNTIME": "pytorch"}).model_path == Path(
        "/models/food_classifier/1/food11.pth")
    assert Settings(max_image_bytes=3).max_body_bytes == 4 + 4096


@pytest.mark.parametrize(("env", "words"), [
    ({"SERVE_FASTAPI_RUNTIME": "tensorflow"},
     "SERVE_FASTAPI_RUNTIME='tensorflow': must be one of onnx, pytorch"),
    ({"SERVE_FASTAPI_DEVICE": "tpu"}, "SERVE_FASTAPI_DEVICE"),
    ({"SERVE_FASTAPI_STANDIN": "maybe"}, "SERVE_FASTAPI_STANDIN"),
    ({"SERVE_FASTAPI_MAX_IMAGE_BYTES": "ten"}, "not an integer"),
    ({"SERVE_FASTAPI_MAX_IMAGE_PIXELS": "0"}, "must be a positive integer"),
])
def test_bad_settings_are_refused_with_the_variable_named(env: dict[str, str], words: str) -> None:
    with pytest.raises(UsageError, match=words.replace("(", r"\(")):
        Settings.from_env(env)


def test_preprocessing_is_the_labs_resize_crop_and_imagenet_normalisation() -> None:
    img = Image.new("RGB", (640, 360), (255, 128, 0))
    x = to_tensor(img)
    assert x.shape == (1, 3, 224, 224) and x.dtype == np.float32
    expected = (np.array([255, 128, 0], dtype=np.float32) / 255.0 - MEAN) / STD
    np.testing.assert_allclose(x[0, :, 100, 100], expected, rtol=1e-6)
    # a gradient survives as a bilinear resize to 224x224 (aspect ratio not kept, as in the lab)
    grad = Image.fromarray(np.tile(np.arange(256, dtype=np.uint8), (50, 1)), "L").convert("RGB")
    row = to_tensor(grad)[0, 0, 25]
    assert np.all(np.diff(row) >= 0) and row[0] < row[-1]
