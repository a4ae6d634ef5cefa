"""``python -m serve_system.webapp [--host H] [--port P]``: run the web app with uvicorn."""

from __future__ import annotations

import sys

from ..appsettings import launch
from .settings import Settings


def main(argv: list[str] | None = None) -> int:
    return launch("webapp", argv, description=__doc__, port=5000, check=Settings.from_env)


if __name__ == "__main__":
    sys.exit(main())
