"""What the two web apps share (the FastAPI endpoint ``fastapi_app`` and the web page ``webapp``):
reading their ``SERVE_<APP>_*`` environment variables, the request body limit their image size allows,
and the ``python -m`` launcher that refuses bad settings before uvicorn starts.

Both apps run from the FastAPI image, which ships this module (``images.fastapi.PACKAGE_MODULES``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from .errors import ServeSystemError, UsageError

T = TypeVar("T")

#: room for the JSON around the base64 image in a request body
JSON_ROOM_BYTES = 4096


def env_value(env: Mapping[str, str], prefix: str, name: str) -> str | None:
    """``env[prefix + name]`` stripped, or None where it is unset or blank."""
    value = env.get(prefix + name, "").strip()
    return value or None


def env_number(env: Mapping[str, str], prefix: str, name: str, kind: Callable[[str], T],
               what: str) -> T | None:
    """``env[prefix + name]`` read with ``kind`` (``int``, ``float``); a value it cannot read is a
    :class:`UsageError` naming the variable (``PREFIX_NAME='x': not <what>``)."""
    value = env_value(env, prefix, name)
    if value is None:
        return None
    try:
        return kind(value)
    except ValueError:
        raise UsageError(f"{prefix}{name}={value!r}: not {what}") from None


class BodyLimit:
    """Base of both apps' ``Settings`` (frozen dataclasses that have ``max_image_bytes``)."""

    max_image_bytes: int

    @property
    def max_body_bytes(self) -> int:
        """Largest request body accepted: the base64 of the largest image plus room for JSON."""
        return -(-self.max_image_bytes // 3) * 4 + JSON_ROOM_BYTES


def launch(package: str, argv: Sequence[str] | None, *, description: str | None, port: int,
           check: Callable[[], object], workers: bool = False) -> int:
    """``python -m serve_system.<package> [--host H] [--port P] [--workers N]``: ``check()`` (the
    app's settings from the environment) first, a :class:`ServeSystemError` being one line on stderr
    and exit 2, then uvicorn serves ``serve_system.<package>.app:create_app``."""
    parser = argparse.ArgumentParser(prog=f"python -m serve_system.{package}", description=description)
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=port)
    if workers:
        parser.add_argument("--workers", type=int, default=1,
                            help="uvicorn worker processes (the lab uses 1)")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    try:
        check()  # refuse bad settings before uvicorn starts
    except ServeSystemError as exc:
        print(f"{package}: error: {exc}", file=sys.stderr)
        return 2
    import uvicorn

    extra = {"workers": args.workers} if workers else {}
    uvicorn.run(f"serve_system.{package}.app:create_app", factory=True, host=args.host, port=args.port,
                log_level=args.log_level, **extra)
    return 0
