"""Configuration of the endpoint, read from ``SERVE_FASTAPI_*`` environment variables.

| variable                       | default                       | meaning |
| ------------------------------ | ----------------------------- | ------- |
| SERVE_FASTAPI_RUNTIME          | ``onnx``                      | ``onnx`` (ONNX Runtime), ``pytorch`` |
| SERVE_FASTAPI_MODEL            | :data:`DEFAULT_MODELS`        | model file (1) |
| SERVE_FASTAPI_DEVICE           | ``auto``                      | ``auto`` (GPU if any), ``cpu``, ``cuda`` |
| SERVE_FASTAPI_STANDIN          | ``auto``                      | ``auto`` or ``never`` (2) |
| SERVE_FASTAPI_STANDIN_DIR      | ``/tmp/serve-system-standin`` | where the stand-in is written |
| SERVE_FASTAPI_MAX_IMAGE_BYTES  | ``10485760`` (10 MiB)         | largest decoded image (413 above) |
| SERVE_FASTAPI_MAX_IMAGE_PIXELS | ``40000000``                  | largest width x height (413 above) |

(1) ``.onnx``; TorchScript or pickled ``.pth``. (2) ``auto``: a missing model file is replaced by
the generated stand-in (and every answer says so); ``never``: a missing file fails the health check.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .. import appsettings
from ..errors import UsageError

RUNTIMES = ("onnx", "pytorch")
DEVICES = ("auto", "cpu", "cuda")
STANDIN_POLICIES = ("auto", "never")
#: default model files: the model repository the Triton stack uses, mounted at /models
DEFAULT_MODELS = {
    "onnx": "/models/food_classifier_onnx/1/model.onnx",
    "pytorch": "/models/food_classifier/1/food11.pth",
}
PREFIX = "SERVE_FASTAPI_"


@dataclass(frozen=True)
class Settings(appsettings.BodyLimit):
    """Everything the endpoint is configured with."""

    runtime: str = "onnx"
    model: Path | None = None
    device: str = "auto"
    standin: str = "auto"
    standin_dir: Path = Path("/tmp/serve-system-standin")
    max_image_bytes: int = 10 * 1024 * 1024
    max_image_pixels: int = 40_000_000

    def __post_init__(self) -> None:
        _choice("RUNTIME", self.runtime, RUNTIMES)
        _choice("DEVICE", self.device, DEVICES)
        _choice("STANDIN", self.standin, STANDIN_POLICIES)
        for name, value in (("MAX_IMAGE_BYTES", self.max_image_bytes),
                            ("MAX_IMAGE_PIXELS", self.max_image_pixels)):
            if value <= 0:
                raise UsageError(f"{PREFIX}{name}={value}: must be a positive integer")

    @property
    def model_path(self) -> Path:
        return self.model if self.model is not None else Path(DEFAULT_MODELS[self.runtime])

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        kwargs: dict[str, object] = {}
        for name, key in (("RUNTIME", "runtime"), ("DEVICE", "device"), ("STANDIN", "standin")):
            if (v := appsettings.env_value(env, PREFIX, name)) is not None:
                kwargs[key] = v.lower()
        for name, key in (("MODEL", "model"), ("STANDIN_DIR", "standin_dir")):
            if (v := appsettings.env_value(env, PREFIX, name)) is not None:
                kwargs[key] = Path(v)
        for name, key in (("MAX_IMAGE_BYTES", "max_image_bytes"), ("MAX_IMAGE_PIXELS", "max_image_pixels")):
            if (n := appsettings.env_number(env, PREFIX, name, int, "an integer")) is not None:
                kwargs[key] = n
        return cls(**kwargs)  # type: ignore[arg-type]


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise UsageError(f"{PREFIX}{name}={value!r}: must be one of {', '.join(allowed)}")
