"""The web page's server: its contract, bad uploads, a backend that is down, and a real FastAPI backend.

The FastAPI backend here is the project's real endpoint (stand-in ONNX model) served by uvicorn on a
loopback port; Triton answers are covered on a rehearsal node (tests/integration/test_webapp.py).
"""

from __future__ import annotations

import base64
import io
import socket
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
import uvicorn
from fastapi.testclient import TestClient
from PIL import Image

from serve_system.errors import UsageError
from serve_system.fastapi_app.app import create_app as create_endpoint
from serve_system.fastapi_app.settings import Settings as EndpointSettings
from serve_system.standin import CLASSES
from serve_system.webapp.app import create_app
from serve_system.webapp.settings import Settings


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _jpeg(size: tuple[int, int] = (200, 150), colour: tuple[int, int, int] = (190, 120, 40)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="JPEG")
    return buf.getvalue()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@pytest.fixture(scope="module")
def fastapi_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real FastAPI endpoint (stand-in model) on a loopback port, for the length of this module."""
    tmp = tmp_path_factory.mktemp("endpoint")
    app = create_endpoint(EndpointSettings(model=tmp / "absent.onnx", standin_dir=tmp / "standin"))
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "the FastAPI endpoint did not start"
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def client(fastapi_url: str) -> Iterator[TestClient]:
    # Triton points at a loopback port nobody listens on: "backend down"
    settings = Settings(backend="fastapi", fastapi_url=fastapi_url, triton_url=f"http://127.0.0.1:{_free_port()}",
                        timeout_s=20, max_image_bytes=100_000)
    with TestClient(create_app(settings)) as c:
        yield c


def test_page_and_config(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for element in ('id="photo"', 'id="backends"', 'id="prediction"', 'id="probability"', 'id="error"'):
        assert element in page.text
    config = client.get("/api/config").json()
    assert config["default"] == "fastapi"
    assert [b["name"] for b in config["backends"]] == ["triton", "fastapi"]
    assert client.get("/health").json() == {"status": "ok", "default_backend": "fastapi"}


def test_fastapi_backend_answers_a_class_and_a_probability(client: TestClient) -> None:
    resp = client.post("/api/classify",
                       json={"backend": "fastapi", "image": _b64(_jpeg()), "filename": "a.jpg"})
    assert resp.status_code == 200, resp.text
    answer = resp.json()
    assert answer["prediction"] in CLASSES and 0.0 <= answer["probability"] <= 1.0
    assert answer["backend"] == "fastapi" and answer["standin"] is True  # the endpoint serves the stand-in
    assert answer["elapsed_ms"] > 0 and "/predict" in answer["backend_label"]
    # a data: URL (what the page's FileReader sends) gives the same answer
    again = client.post("/api/classify",
                        json={"backend": "fastapi", "image": "data:image/jpeg;base64," + _b64(_jpeg())})
    assert again.status_code == 200 and again.json()["prediction"] == answer["prediction"]


def test_backend_down_is_a_503_sentence(client: TestClient) -> None:
    resp = client.post("/api/classify",
                       json={"backend": "triton", "image": _b64(_jpeg()), "filename": "a.jpg"})
    assert resp.status_code == 503
    detail = resp.json()["detail"]
    assert detail.startswith("Triton cannot be reached at http://127.0.0.1:")
    assert "connection refused" in detail and "serve_stack_mode=triton" in detail
    assert "Traceback" not in resp.text


@pytest.mark.parametrize(("image", "filename", "status", "words"), [
    (_b64(b"this is a text file, not a photo\n"), "notes.txt", 400, "notes.txt: image is not a picture"),
    (_b64(_jpeg()[:200]), "cut.jpg", 400, "cut.jpg: image data is corrupt or truncated"),
    ("", "empty.jpg", 400, "empty.jpg is empty"),
    ("@@not base64@@", "x.jpg", 400, "not valid base64"),
])
def test_bad_uploads_get_a_400_sentence_and_never_reach_a_backend(
        client: TestClient, image: str, filename: str, status: int, words: str) -> None:
    # backend triton is down: a 400 (not 503) proves the upload was refused before any backend was asked
    resp = client.post("/api/classify", json={"backend": "triton", "image": image, "filename": filename})
    assert resp.status_code == status, resp.text
    assert words in resp.json()["detail"]


def test_photo_over_the_limit_gets_413(client: TestClient) -> None:
    noise = np.random.default_rng(7).integers(0, 255, size=(300, 300, 3), dtype=np.uint8)
    big = Image.fromarray(noise, "RGB")  # noise does not compress: about 270 kB of PNG
    buf = io.BytesIO()
    big.save(buf, format="PNG")
    assert len(buf.getvalue()) > 100_000
    resp = client.post("/api/classify",
                       json={"backend": "fastapi", "image": _b64(buf.getvalue()), "filename": "big.png"})
    assert resp.status_code == 413 and "the limit is 100000 bytes" in resp.json()["detail"]


@pytest.mark.parametrize("body", [{"image": "x"}, {"backend": "tensorflow", "image": "x"},
                                  ["not", "an", "object"]])
def test_wrong_request_shape_gets_422_sentence(client: TestClient, body: object) -> None:
    resp = client.post("/api/classify", json=body)
    assert resp.status_code == 422
    assert resp.json()["detail"].startswith("request not understood:")


def test_unanswering_backend_times_out_with_504(fastapi_url: str) -> None:
    with socket.socket() as listener:  # accepts connections, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        settings = Settings(backend="triton", triton_url=f"http://127.0.0.1:{port}", timeout_s=0.5)
        with TestClient(create_app(settings)) as c:
            resp = c.post("/api/classify", json={"backend": "triton", "image": _b64(_jpeg())})
    assert resp.status_code == 504 and resp.json()["detail"] == "Triton did not answer within 0.5 s"


@pytest.mark.parametrize(("env", "words"), [
    ({"SERVE_WEBAPP_BACKEND": "onnx"}, "SERVE_WEBAPP_BACKEND='onnx': must be one of triton, fastapi"),
    ({"SERVE_WEBAPP_TRITON_URL": "triton_server:8000"}, "must start with http://"),
    ({"SERVE_WEBAPP_TIMEOUT_S": "soon"}, "SERVE_WEBAPP_TIMEOUT_S='soon': not a number"),
    ({"SERVE_WEBAPP_MAX_IMAGE_BYTES": "0"}, "must be a positive integer"),
])
def test_bad_settings_are_refused(env: dict[str, str], words: str) -> None:
    with pytest.raises(UsageError, match=words.replace("(", r"\(").replace("+", r"\+")):
        Settings.from_env(env)


def test_settings_from_env() -> None:
    s = Settings.from_env({"SERVE_WEBAPP_BACKEND": "FastAPI", "SERVE_WEBAPP_FASTAPI_URL": "http://x:8000/",
                           "SERVE_WEBAPP_TIMEOUT_S": "2.5"})
    assert (s.backend, s.fastapi_url, s.timeout_s, s.triton_model) == \
        ("fastapi", "http://x:8000", 2.5, "food_classifier")


def test_the_page_ships_in_the_fastapi_image_context() -> None:
    from serve_system.images import fastapi as fastapi_image

    files = fastapi_image.context_files()
    assert {"serve_system/webapp/app.py", "serve_system/webapp/page.html", "serve_system/webapp/backends.py",
            "serve_system/webapp/__main__.py"} <= set(files)
    assert fastapi_image.PACKAGE_DIR.joinpath("webapp", "page.html").read_bytes() == \
        files["serve_system/webapp/page.html"]
