"""Configuration of the web app, read from ``SERVE_WEBAPP_*`` environment variables.

| variable                     | default                        | meaning |
| ---------------------------- | ------------------------------ | ------- |
| SERVE_WEBAPP_BACKEND         | ``triton``                     | backend selected when the page opens (1) |
| SERVE_WEBAPP_TRITON_URL      | ``http://triton_server:8000``  | Triton's HTTP endpoint |
| SERVE_WEBAPP_TRITON_MODEL    | ``food_classifier``            | the Triton model asked (2) |
| SERVE_WEBAPP_FASTAPI_URL     | ``http://fastapi_server:8000`` | the FastAPI endpoint (``POST /predict``) |
| SERVE_WEBAPP_TIMEOUT_S       | ``30``                         | seconds to wait for a backend's answer |
| SERVE_WEBAPP_MAX_IMAGE_BYTES | ``10485760``                   | largest photo accepted (413 above) |

(1) ``triton`` or ``fastapi``. (2) input INPUT_IMAGE, outputs FOOD_LABEL and PROBABILITY.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from .. import appsettings
from ..errors import UsageError

BACKENDS = ("triton", "fastapi")
PREFIX = "SERVE_WEBAPP_"


@dataclass(frozen=True)
class Settings(appsettings.BodyLimit):
    backend: str = "triton"
    triton_url: str = "http://triton_server:8000"
    triton_model: str = "food_classifier"
    fastapi_url: str = "http://fastapi_server:8000"
    timeout_s: float = 30.0
    max_image_bytes: int = 10 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise UsageError(f"{PREFIX}BACKEND={self.backend!r}: must be one of {', '.join(BACKENDS)}")
        for name, url in (("TRITON_URL", self.triton_url), ("FASTAPI_URL", self.fastapi_url)):
            if not url.startswith(("http://", "https://")):
                raise UsageError(f"{PREFIX}{name}={url!r}: must start with http:// or https://")
        if self.timeout_s <= 0:
            raise UsageError(f"{PREFIX}TIMEOUT_S={self.timeout_s}: must be a positive number of seconds")
        if self.max_image_bytes <= 0:
            raise UsageError(f"{PREFIX}MAX_IMAGE_BYTES={self.max_image_bytes}: must be a positive integer")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        kwargs: dict[str, object] = {}
        for name in ("BACKEND", "TRITON_URL", "TRITON_MODEL", "FASTAPI_URL"):
            if (value := appsettings.env_value(env, PREFIX, name)) is not None:
                kwargs[name.lower()] = value.lower() if name == "BACKEND" else value.rstrip("/")
        for name, kind in (("TIMEOUT_S", float), ("MAX_IMAGE_BYTES", int)):
            if (number := appsettings.env_number(env, PREFIX, name, kind, "a number")) is not None:
                kwargs[name.lower()] = number
        return cls(**kwargs)  # type: ignore[arg-type]  # keys and types checked above
