"""Running podman with the project's settings (never /etc's).

Every podman call of the project goes through :func:`podman`, which points ``CONTAINERS_CONF`` at
``images/containers.conf`` (runc, no default ulimits: what this kind of host needs) and turns a
missing podman, a non-root user or a failed command into a :class:`ServeSystemError` with one line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from .errors import ServeSystemError

#: the project's podman settings file (used through CONTAINERS_CONF)
CONTAINERS_CONF = Path(__file__).resolve().parent / "images" / "containers.conf"


def podman_env() -> dict[str, str]:
    """The environment podman runs in: ours plus ``CONTAINERS_CONF``."""
    env = dict(os.environ)
    env["CONTAINERS_CONF"] = str(CONTAINERS_CONF)
    return env


def require_tool(name: str, package: str) -> str:
    """The path of ``name``, or an error telling how to install it."""
    path = shutil.which(name)
    if path is None:
        raise ServeSystemError(
            f"{name} not found: rehearsal nodes need it; run `bash scripts/bootstrap.sh` "
            f"(or `apt-get install {package}`)"
        )
    return path


def run_tool(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    """``argv`` run to its end (2 min at most), its output captured; a failure is one line."""
    try:
        return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=120, **kw)
    except subprocess.CalledProcessError as exc:
        raise ServeSystemError(f"{argv[0]} failed: {(exc.stderr or exc.stdout).strip()[-400:]}") from exc


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise ServeSystemError(
            f"{what} needs root (privileged systemd containers and debootstrap): run it as root or with sudo"
        )


def require_podman() -> str:
    require_root("rehearsal nodes")
    require_tool("runc", "runc")
    return require_tool("podman", "podman runc")


def podman(
    *args: str,
    check: bool = True,
    input: bytes | str | None = None,
    timeout: float | None = None,
    stdin: int | IO[bytes] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``podman ARGS`` with the project's settings; output is captured as text."""
    exe = require_podman()
    try:
        proc = subprocess.run(
            [exe, *args],
            env=podman_env(),
            capture_output=True,
            text=True,
            input=input if not isinstance(input, bytes) else input.decode(),
            timeout=timeout,
            check=False,
            stdin=stdin,
        )
    except subprocess.TimeoutExpired as exc:
        raise ServeSystemError(f"podman {' '.join(args[:2])} did not finish within {timeout:.0f} s") from exc
    if check and proc.returncode != 0:
        raise ServeSystemError(f"podman {' '.join(_short(args))} failed: "
                               f"{last_line(proc.stderr or proc.stdout)}")
    return proc


def run_streamed(cmd: Sequence[str], log: Path, what: str, cwd: Path | None = None) -> None:
    """Run a long command (a build), its output into ``log``; on failure name the log and its tail."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as fh:
        proc = subprocess.run(
            list(cmd), env=podman_env(), stdout=fh, stderr=subprocess.STDOUT, cwd=cwd, check=False
        )
    if proc.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-15:]
        raise ServeSystemError(
            f"{what} failed (exit {proc.returncode}); full log: {log}; last lines: " + " | ".join(tail)
        )


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"


def _short(args: Sequence[str]) -> list[str]:
    return [a if len(a) < 60 else a[:57] + "..." for a in args[:4]]


def image_exists(ref: str) -> bool:
    return podman("image", "exists", ref, check=False).returncode == 0
