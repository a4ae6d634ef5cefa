"""The FastAPI application: ``POST /predict``, ``GET /health``, Swagger UI at ``/docs``.

Unlike the lab's app, a request the endpoint cannot serve never gets a 200 with an error inside:
bad input gets 400 (not base64, empty, not an image), 413 (over the configured size), 422 (not the
``{"image": "..."}`` shape), and a model that is not loaded gets 503 on both ``/predict`` and
``/health`` (which the container's HEALTHCHECK uses). Every response carries
``X-Serve-System-Runtime`` and ``X-Serve-System-Standin`` so a benchmark can tell what it measured.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..standin import CLASSES
from .preprocess import BadImage, decode_base64, open_image, softmax, to_tensor
from .runtimes import ModelInfo, Runtime, RuntimeUnavailable, load_runtime
from .settings import Settings

log = logging.getLogger("serve_system.fastapi_app")
EXPECTED_BODY = '{"image": "<base64>"} as JSON'


class ImageRequest(BaseModel):
    image: str = Field(..., description="the image file (JPEG, PNG, ...) encoded as base64")


class PredictionResponse(BaseModel):
    prediction: str = Field(..., description="one of the 11 Food-11 classes")
    probability: float = Field(..., ge=0, le=1, description="softmax probability of that class")


class HealthResponse(BaseModel):
    status: str = Field(..., description="'ok' when the model is loaded, else 'unavailable'")
    runtime: str
    device: str | None = None
    model_path: str | None = None
    standin: bool | None = Field(default=None, description="true when serving the generated stand-in model")
    classes: int = len(CLASSES)
    detail: str | None = None
    notes: list[str] = []


class ErrorResponse(BaseModel):
    detail: str


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    try:
        app.state.runtime = load_runtime(settings)
    except RuntimeUnavailable as exc:
        app.state.runtime, app.state.load_error = None, str(exc)
        log.error("model not loaded: %s", exc)
    else:
        info: ModelInfo = app.state.runtime.info
        log.info("serving %s with %s on %s", info.model_path, info.runtime, info.device)
        for note in info.notes:
            log.warning("%s", note)
    yield
    app.state.runtime = None


#: what ``/predict`` answers besides 200 (its OpenAPI ``responses``)
_PREDICT_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorResponse, "description": "not base64, empty, or not an image"},
    422: {"model": ErrorResponse,
          "description": 'the body is not JSON of the form {"image": "<base64>"}'},
    413: {"model": ErrorResponse, "description": "image or request body over the configured limit"},
    503: {"model": ErrorResponse, "description": "the model is not loaded (see /health)"},
}


async def _bad_request_shape(request: Request, exc: RequestValidationError) -> JSONResponse:
    # FastAPI's default handler echoes the input back (and fails on non-UTF-8 bodies): say it in one line
    return JSONResponse(status_code=422, content={"detail": _validation_message(exc)})


async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    detail = exc.detail
    if exc.status_code == 400 and detail == "There was an error parsing the body":  # FastAPI's own words
        detail = f"request body is not valid JSON (expected {EXPECTED_BODY})"
    return JSONResponse(status_code=exc.status_code, content={"detail": detail}, headers=exc.headers)


def create_app(settings: Settings | None = None) -> FastAPI:
    """The endpoint, configured by ``settings`` (default: the ``SERVE_FASTAPI_*`` environment)."""
    settings = settings if settings is not None else Settings.from_env()
    app = FastAPI(
        title="Food Classification API",
        description="Classifies food images into the 11 Food-11 classes (serve-system-chi's lab endpoint)",
        version=__version__,
        lifespan=_lifespan,
    )
    app.state.settings = settings
    app.state.runtime = None
    app.state.load_error = "model is still loading"

    def runtime_of(request: Request) -> Runtime:
        runtime: Runtime | None = request.app.state.runtime
        if runtime is None:
            raise HTTPException(status_code=503, detail=f"model not loaded: {request.app.state.load_error}")
        return runtime

    @app.middleware("http")
    async def limits_and_headers(request: Request,
                                 call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > settings.max_body_bytes:
            response: Response = JSONResponse(status_code=413, content={
                "detail": f"request body is {length} bytes; the limit is {settings.max_body_bytes} bytes "
                          f"(base64 of SERVE_FASTAPI_MAX_IMAGE_BYTES={settings.max_image_bytes})"})
        else:
            response = await call_next(request)
        runtime: Runtime | None = request.app.state.runtime
        response.headers["X-Serve-System-Runtime"] = settings.runtime
        if runtime is not None:
            response.headers["X-Serve-System-Device"] = runtime.info.device
            response.headers["X-Serve-System-Standin"] = "true" if runtime.info.standin else "false"
        return response

    app.exception_handler(RequestValidationError)(_bad_request_shape)
    app.exception_handler(StarletteHTTPException)(_http_error)

    @app.post("/predict", response_model=PredictionResponse, responses=_PREDICT_ERRORS)
    def predict(body: ImageRequest, request: Request) -> PredictionResponse:
        # a plain (sync) handler, like the lab's: FastAPI runs it in its thread pool
        runtime = runtime_of(request)
        try:
            data = decode_base64(body.image, settings.max_image_bytes)
            tensor = to_tensor(open_image(data, settings.max_image_pixels))
        except BadImage as exc:
            raise HTTPException(status_code=exc.status, detail=str(exc)) from None
        try:
            logits = runtime.logits(tensor)
        except RuntimeUnavailable as exc:
            log.error("inference failed: %s", exc)
            raise HTTPException(status_code=503, detail=str(exc)) from None
        probs = softmax(logits)[0]
        idx = int(probs.argmax())
        return PredictionResponse(prediction=CLASSES[idx], probability=min(1.0, max(0.0, float(probs[idx]))))

    @app.get("/health", response_model=HealthResponse, responses={503: {"model": HealthResponse}})
    def health(request: Request) -> Any:
        runtime: Runtime | None = request.app.state.runtime
        if runtime is None:
            body = HealthResponse(status="unavailable", runtime=settings.runtime,
                                  model_path=str(settings.model_path), detail=request.app.state.load_error)
            return JSONResponse(status_code=503, content=body.model_dump())
        info = runtime.info
        return HealthResponse(status="ok", runtime=info.runtime, device=info.device,
                              model_path=info.model_path, standin=info.standin, notes=info.notes)

    return app


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body") or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return f"request body is not valid: {'; '.join(parts)} (expected {EXPECTED_BODY})"
