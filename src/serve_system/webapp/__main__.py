"""``python -m serve_system.webapp [--host H] [--port P]``: run the web app with uvicorn."""

from __future__ import annotations

import argparse
import sys

from ..errors import ServeSystemError
from .settings import Settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serve_system.webapp", description=__doc__)
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    try:
        Settings.from_env()  # refuse bad settings before uvicorn starts
    except ServeSystemError as exc:
        print(f"webapp: error: {exc}", file=sys.stderr)
        return 2
    import uvicorn

    uvicorn.run("serve_system.webapp.app:create_app", factory=True, host=args.host, port=args.port,
                log_level=args.log_level)
    return 0


if __name__ == "__main__":
    sys.exit(main())
