"""The web app: ``GET /`` (the page), ``GET /api/config``, ``POST /api/classify``, ``GET /health``.

``POST /api/classify`` takes ``{"backend": "triton"|"fastapi", "image": "<base64 or data: URL>",
"filename": "..."}``, checks that the photo is a picture, asks the backend and answers
``{"backend", "backend_label", "prediction", "probability", "standin", "elapsed_ms"}``. Every error
is ``{"detail": "<one sentence>"}`` with a fitting status: 400 (not a picture, empty), 413 (too
large), 422 (not that JSON shape), 502/503/504 (the backend failed, is down, or timed out).
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any, Literal

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..fastapi_app.preprocess import BadImage, open_image
from .backends import LABELS, BackendError, ask, describe
from .settings import BACKENDS, Settings

log = logging.getLogger("serve_system.webapp")
MAX_PIXELS = 40_000_000


class ClassifyRequest(BaseModel):
    backend: Literal["triton", "fastapi"] = Field(..., description="which model server to ask")
    image: str = Field(..., description="the photo's bytes as base64 (a data: URL is accepted)")
    filename: str = Field("photo", max_length=255, description="the file's name, for messages")


class ClassifyResponse(BaseModel):
    backend: str
    backend_label: str
    prediction: str
    probability: float
    standin: bool | None = Field(None, description="true when the backend serves generated stand-in weights")
    elapsed_ms: float


def _photo_bytes(body: ClassifyRequest, max_bytes: int) -> bytes:
    text = body.image
    if text.startswith("data:") and "," in text:
        text = text.split(",", 1)[1]
    compact = "".join(text.split())
    if not compact:
        raise HTTPException(400, f"{body.filename} is empty: choose a JPEG or PNG photo")
    try:
        data = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        raise HTTPException(400, f"{body.filename}: the upload is not valid base64 "
                                 "(reload the page and retry)") from None
    if not data:
        raise HTTPException(400, f"{body.filename} is empty: choose a JPEG or PNG photo")
    if len(data) > max_bytes:
        raise HTTPException(413, f"{body.filename} is {len(data)} bytes; the limit is {max_bytes} bytes")
    try:
        open_image(data, MAX_PIXELS)
    except BadImage as exc:
        raise HTTPException(exc.status, f"{body.filename}: {exc}") from None
    return data


def create_app(settings: Settings | None = None) -> FastAPI:
    """The web app, configured by ``settings`` (default: the ``SERVE_WEBAPP_*`` environment)."""
    settings = settings if settings is not None else Settings.from_env()
    app = FastAPI(title="Food-11 classifier", version=__version__,
                  description="Upload a food photo; Triton or the FastAPI endpoint classifies it "
                              "(serve-system-chi)")
    page = resources.files(__package__).joinpath("page.html").read_text(encoding="utf-8")

    @app.middleware("http")
    async def body_limit(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > settings.max_body_bytes:
            return JSONResponse(status_code=413, content={
                "detail": f"the upload is {length} bytes; "
                          f"the limit is {settings.max_image_bytes} bytes of photo"})
        return await call_next(request)

    @app.exception_handler(RequestValidationError)
    async def bad_shape(request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = [f"{'.'.join(str(x) for x in e.get('loc', ()) if x != 'body') or 'body'}: "
                 f"{e.get('msg', 'invalid')}"
                 for e in exc.errors()[:3]]
        return JSONResponse(status_code=422, content={
            "detail": f"request not understood: {'; '.join(parts)} "
                      f"(expected {{\"backend\": \"{'|'.join(BACKENDS)}\", \"image\": \"<base64>\"}})"})

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail
        if exc.status_code == 400 and detail == "There was an error parsing the body":
            detail = "request body is not valid JSON"
        return JSONResponse(status_code=exc.status_code, content={"detail": detail})

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s", request.url.path)
        return JSONResponse(status_code=500, content={
            "detail": f"internal error ({type(exc).__name__}); the web app's log has the details"})

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index() -> HTMLResponse:
        return HTMLResponse(page)

    @app.get("/api/config")
    def config() -> dict[str, Any]:
        return {"default": settings.backend,
                "backends": [{"name": b, "label": LABELS[b], "description": describe(settings, b)}
                             for b in BACKENDS],
                "max_image_bytes": settings.max_image_bytes}

    @app.post("/api/classify", response_model=ClassifyResponse)
    def classify(body: ClassifyRequest) -> ClassifyResponse:
        data = _photo_bytes(body, settings.max_image_bytes)
        try:
            result = ask(settings, body.backend, base64.b64encode(data).decode("ascii"))
        except BackendError as exc:
            log.warning("%s: %s", body.backend, exc)
            raise HTTPException(exc.status, str(exc)) from None
        return ClassifyResponse(backend=result.backend, backend_label=describe(settings, result.backend),
                                prediction=result.prediction, probability=result.probability,
                                standin=result.standin, elapsed_ms=round(result.elapsed_ms, 1))

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok", "default_backend": settings.backend}

    return app
