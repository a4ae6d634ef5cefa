"""``python -m serve_system.fastapi_app [--host H] [--port P] [--workers N]``: run the endpoint with
uvicorn."""

from __future__ import annotations

import sys

from ..appsettings import launch
from .settings import Settings


def main(argv: list[str] | None = None) -> int:
    return launch("fastapi_app", argv, description=__doc__, port=8000, check=Settings.from_env, workers=True)


if __name__ == "__main__":
    sys.exit(main())
