"""A built apt repository served over HTTP on podman's bridge (:func:`bridge_address`: only the
rehearsal nodes reach it), every path requested recorded (:func:`serve`)."""

from __future__ import annotations

import http.server
import json
import os
import posixpath
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ServeSystemError
from ..podman import podman


def bridge_address(network: str = "podman") -> str:
    """The host's address on podman's bridge ``network`` (its gateway): rehearsal nodes reach it."""
    proc = podman("network", "inspect", network)
    try:
        data = json.loads(proc.stdout or "[]")
        info = data[0] if isinstance(data, list) and data else {}
        subnets = info.get("subnets") or []
        if not subnets:  # CNI's plugin list form
            subnets = [r for p in info.get("plugins", []) for rs in p.get("ipam", {}).get("ranges", [])
                       for r in rs]
        gateway = next(str(s["gateway"]) for s in subnets
                       if s.get("gateway") and ":" not in str(s["gateway"]))
    except (ValueError, StopIteration, AttributeError, KeyError, TypeError) as exc:
        raise ServeSystemError(f"podman network {network}: no IPv4 gateway address found") from exc
    return gateway


@dataclass
class Server:
    """A site served over HTTP: its base URL and every path requested (in order, normalized)."""

    base_url: str
    requests: list[str]


@contextmanager
def serve(root: Path, host: str, port: int = 0) -> Iterator[Server]:
    """Serve ``root`` (read-only, GET/HEAD) on ``host``:``port`` (0: a free one) until the block ends."""
    requests: list[str] = []
    lock = threading.Lock()
    directory = os.fspath(root)

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=directory, **kwargs)

        def log_message(self, format: str, *args: Any) -> None:
            return None

        def send_head(self) -> Any:
            # recorded as the file it names (apt asks a flat repository for ".../amd64/./Packages")
            path = posixpath.normpath(urllib.parse.unquote(self.path.split("?", 1)[0]))
            with lock:
                requests.append(path)
            return super().send_head()

    try:
        httpd = http.server.ThreadingHTTPServer((host, port), Handler)
    except OSError as exc:
        raise ServeSystemError(
            f"cannot serve the rehearsal repository on {host}:{port or '(a free port)'} ({exc.strerror}): "
            "podman's bridge has its address while a container runs on it; start a rehearsal node first "
            "(serve-system launch --provider local)") from exc
    thread = threading.Thread(target=httpd.serve_forever, name="rehearsal-apt-repository", daemon=True)
    thread.start()
    try:
        yield Server(f"http://{host}:{httpd.server_address[1]}", requests)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)
