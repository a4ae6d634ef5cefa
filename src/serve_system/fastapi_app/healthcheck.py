"""``python -m serve_system.fastapi_app.healthcheck [URL]``: exit 0 when ``/health`` answers 200.

For the container's HEALTHCHECK (slim images have no curl); standard library only.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    port = os.environ.get("SERVE_FASTAPI_PORT", "8000")
    url = args[0] if args else f"http://127.0.0.1:{port}/health"
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            print(resp.read().decode("utf-8", "replace"))
            return 0 if resp.status == 200 else 1
    except urllib.error.HTTPError as exc:
        print(f"{url}: HTTP {exc.code}: {exc.read().decode('utf-8', 'replace')}", file=sys.stderr)
    except OSError as exc:
        print(f"{url}: {exc}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
