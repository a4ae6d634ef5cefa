"""The two backends the page can ask: Triton (``food_classifier``) and the lab's FastAPI endpoint.

Standard library HTTP only (the app runs in the FastAPI endpoint's slim image). Each call returns a
:class:`Prediction` or raises :class:`BackendError` with the HTTP status the page gets (502: the
backend answered with an error or nonsense; 503: it cannot be reached; 504: it did not answer in
time) and one sentence saying what happened.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from .settings import Settings

LABELS = {"triton": "Triton", "fastapi": "FastAPI"}
#: what to do when a backend cannot be reached (the stack runs one model server at a time)
HINTS = {
    "triton": "is the stack running in triton mode (serve_stack_mode=triton)?",
    "fastapi": "is the stack running in fastapi mode (serve_stack_mode=fastapi)?",
}


@dataclass(frozen=True)
class Prediction:
    backend: str
    prediction: str
    probability: float
    #: True when the backend serves generated stand-in weights, None when it does not say
    standin: bool | None
    elapsed_ms: float


class BackendError(Exception):
    def __init__(self, message: str, status: int = 502):
        super().__init__(message)
        self.status = status


def describe(settings: Settings, backend: str) -> str:
    if backend == "triton":
        return f"Triton ({settings.triton_model} at {settings.triton_url})"
    return f"FastAPI ({settings.fastapi_url}/predict)"


def _call(backend: str, url: str, body: dict[str, Any] | None, timeout: float) -> tuple[Any, dict[str, str]]:
    """JSON in, JSON out; every failure becomes a :class:`BackendError` naming the backend."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET",
                                 headers={"Content-Type": "application/json", "Accept": "application/json"})
    name = LABELS[backend]
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            headers = {k.lower(): v for k, v in resp.headers.items()}
    except urllib.error.HTTPError as exc:
        raise BackendError(f"{name} refused the request (HTTP {exc.code}): "
                           f"{_error_text(exc.read())}") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, TimeoutError):
            raise BackendError(f"{name} did not answer within {timeout:g} s", status=504) from None
        raise BackendError(f"{name} cannot be reached at {url.split('/v2/')[0].removesuffix('/predict')} "
                           f"({_reason_text(reason)}): {HINTS[backend]}", status=503) from None
    except TimeoutError:
        raise BackendError(f"{name} did not answer within {timeout:g} s", status=504) from None
    except OSError as exc:
        raise BackendError(f"{name} connection failed ({_reason_text(exc)}): {HINTS[backend]}",
                           status=503) from None
    try:
        return json.loads(raw), headers
    except ValueError:
        raise BackendError(f"{name} answered something that is not JSON ({raw[:80]!r})") from None


def _reason_text(reason: object) -> str:
    if isinstance(reason, socket.gaierror):
        return "its host name does not resolve"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    return str(reason)


def _error_text(raw: bytes) -> str:
    try:
        doc = json.loads(raw)
    except ValueError:
        return raw[:200].decode("utf-8", "replace").strip() or "(no message)"
    if isinstance(doc, dict):
        for key in ("error", "detail"):  # Triton says "error", FastAPI "detail"
            if key in doc:
                return str(doc[key])
    return str(doc)[:200]


def _probability(value: object, name: str) -> float:
    try:
        p = float(value)  # type: ignore[arg-type]  # checked by the except below
    except (TypeError, ValueError):
        raise BackendError(f"{name} answered a probability that is not a number: {value!r}") from None
    if not 0.0 <= p <= 1.0:
        raise BackendError(f"{name} answered a probability outside [0, 1]: {p}")
    return p


def ask_triton(settings: Settings, image_b64: str) -> Prediction:
    """The lab's request to ``food_classifier``: one BYTES input [1, 1] holding the base64 photo."""
    base = f"{settings.triton_url}/v2/models/{settings.triton_model}"
    body = {
        "inputs": [{"name": "INPUT_IMAGE", "shape": [1, 1], "datatype": "BYTES", "data": [image_b64]}],
        "outputs": [{"name": "FOOD_LABEL"}, {"name": "PROBABILITY"}],
    }
    started = time.perf_counter()
    doc, _ = _call("triton", f"{base}/infer", body, settings.timeout_s)
    elapsed = (time.perf_counter() - started) * 1000
    try:
        outputs = {o["name"]: o["data"] for o in doc["outputs"]}
        label, prob = str(outputs["FOOD_LABEL"][0]), outputs["PROBABILITY"][0]
    except (KeyError, IndexError, TypeError):
        raise BackendError("Triton's answer has no FOOD_LABEL and PROBABILITY outputs: "
                           f"{str(doc)[:200]}") from None
    config, _ = _call("triton", f"{base}/config", None, settings.timeout_s)
    weights = ((config.get("parameters") or {}).get("serve_system_weights") or {}).get("string_value", "")
    return Prediction("triton", label, _probability(prob, "Triton"), weights.startswith("stand-in"), elapsed)


def ask_fastapi(settings: Settings, image_b64: str) -> Prediction:
    """The lab's FastAPI request: ``POST /predict`` with ``{"image": "<base64>"}``."""
    started = time.perf_counter()
    doc, headers = _call("fastapi", f"{settings.fastapi_url}/predict", {"image": image_b64},
                         settings.timeout_s)
    elapsed = (time.perf_counter() - started) * 1000
    if not isinstance(doc, dict) or "prediction" not in doc or "probability" not in doc:
        raise BackendError(f"FastAPI's answer has no prediction and probability: {str(doc)[:200]}")
    standin_header = headers.get("x-serve-system-standin")
    standin = None if standin_header is None else standin_header == "true"
    return Prediction("fastapi", str(doc["prediction"]), _probability(doc["probability"], "FastAPI"),
                      standin, elapsed)


def ask(settings: Settings, backend: str, image_b64: str) -> Prediction:
    return ask_triton(settings, image_b64) if backend == "triton" else ask_fastapi(settings, image_b64)
