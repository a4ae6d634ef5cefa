"""The programs' entry: ``serve-system`` (the console script) and ``chi_scripts/NAME.py``.

Run with a Python that lacks the controller's dependencies (the system's ``python3``, a notebook kernel
without them, a virtual environment made but not installed into), a program says in one line what is
missing and what to install, and exits 1, instead of ending in a ``ModuleNotFoundError`` traceback.
Standard library only, and no syntax newer than the oldest Python a user may try it with: this module
is what runs before the controller's dependencies are known to be there.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from pathlib import Path

#: the oldest Python the controller runs on (pyproject's requires-python)
PYTHON = (3, 11)
#: where the README says it
WHERE = 'README: "Without root"'

#: a top-level module the controller imports -> (the distribution that provides it, its extra or "");
#: tests/unit/test_entry.py keeps this in step with pyproject's dependencies
PROVIDERS: dict[str, tuple[str, str]] = {
    "chi": ("python-chi", ""),
    "blazarclient": ("python-blazarclient", ""),
    "openstack": ("openstacksdk", ""),
    "keystoneauth1": ("keystoneauth1", ""),
    "ansible": ("ansible", ""),
    "ansible_runner": ("ansible-runner", ""),
    "tritonclient": ("tritonclient", ""),
    "google": ("protobuf", ""),
    "yaml": ("pyyaml", ""),
    "rich": ("rich", ""),
    "matplotlib": ("matplotlib", ""),
    "numpy": ("numpy", ""),
    "scipy": ("scipy", ""),
    "requests": ("requests", ""),
    "pydantic": ("pydantic", ""),
    "prometheus_client": ("prometheus-client", ""),
    "optuna": ("optuna", ""),
    # the lab's FastAPI endpoint and the stand-in models (pyproject's extra "app")
    "fastapi": ("fastapi", "app"),
    "uvicorn": ("uvicorn", "app"),
    "PIL": ("pillow", "app"),
    "onnxruntime": ("onnxruntime", "app"),
    "onnx": ("onnx", "app"),
}


def _checkout() -> str:
    """The checkout to install from: the one these sources are in, else the current folder."""
    top = Path(__file__).resolve().parents[2]
    return str(top) if (top / "pyproject.toml").is_file() else "."


def _install(extra: str) -> str:
    """The command that installs the controller (with ``extra``) where this Python will find it: into
    this virtual environment, or into a new one (a system's Python is the distribution's to manage)."""
    target = shlex.quote(_checkout() + (f"[{extra}]" if extra else ""))
    if sys.prefix != sys.base_prefix:  # a virtual environment: install into it
        return f"{shlex.quote(sys.executable)} -m pip install -e {target}"
    return f"python3 -m venv ~/serve-venv && ~/serve-venv/bin/pip install -e {target}"


def missing_line(prog: str, exc: ModuleNotFoundError) -> str | None:
    """The one line that says what ``exc`` lacks and what to install, or None: the module missing is
    one of the controller's own (a broken checkout or a bug, whose traceback is the useful answer)."""
    name = exc.name or ""
    top = name.split(".", 1)[0]
    if not top or top == "serve_system":
        return None
    here = f"{sys.executable or 'this Python'}'s environment"
    provider = PROVIDERS.get(top)
    if provider is None:  # a dependency's own dependency: the environment is incomplete
        return (f"{prog}: Python module '{name}' is missing in {here}: install the controller again: "
                f"`{_install('')}` ({WHERE})")
    dist, extra = provider
    what = f"'{dist}' (extra '{extra}')" if extra else f"'{dist}'"
    return (f"{prog}: Python package {what} is missing in {here}: install the controller: "
            f"`{_install(extra)}` ({WHERE})")


def old_python_line(prog: str) -> str | None:
    """The one line that says this Python is too old for the controller, or None."""
    if sys.version_info >= PYTHON:
        return None
    have = ".".join(str(n) for n in sys.version_info[:3])
    need = ".".join(str(n) for n in PYTHON)
    return (f"{prog}: needs Python {need} or newer, {sys.executable or 'this Python'} is {have}: make the "
            f"virtual environment with a newer Python ({WHERE})")


def guarded(prog: str, program: Callable[[], int]) -> int:
    """Run ``program`` (which imports the controller); its exit status, or 1 with one line on stderr
    when this Python is too old or lacks one of the controller's dependencies."""
    line = old_python_line(prog)
    if line is None:
        try:
            return program()
        except ModuleNotFoundError as exc:
            line = missing_line(prog, exc)
            if line is None:
                raise
    print(line, file=sys.stderr)
    return 1


def _serve_system() -> int:
    from .cli import main as cli_main

    return cli_main()


def main() -> int:
    """The ``serve-system`` console script."""
    return guarded("serve-system", _serve_system)
