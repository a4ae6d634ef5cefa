"""The FastAPI image's build context: complete, self-sufficient, reproducible, tagged by content."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from serve_system.cli import main
from serve_system.images import fastapi as fi


def test_context_holds_what_the_containerfile_copies_and_is_rewritten_only_on_change(tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    assert fi.write_context(ctx) is True
    names = {p.relative_to(ctx).as_posix() for p in ctx.rglob("*") if p.is_file()}
    assert {"Containerfile", "requirements.txt", "ca/README", "serve_system/__init__.py",
            "serve_system/fastapi_app/app.py", "serve_system/standin.py"} <= names
    assert not any("__pycache__" in n for n in names)
    containerfile = (ctx / "Containerfile").read_text()
    for src in re.findall(r"^COPY (\S+)", containerfile, flags=re.MULTILINE):
        assert (ctx / src).exists(), src
    assert fi.write_context(ctx) is False
    (ctx / "stray.txt").write_text("a user's file")
    (ctx / "serve_system" / "standin.py").write_text("# edited")
    assert fi.write_context(ctx) is True
    assert (ctx / "stray.txt").read_text() == "a user's file"  # not the tool's: kept
    assert fi.write_context(ctx, private=True) is True  # a scratch folder of its own: mirrored
    assert not (ctx / "stray.txt").exists()
    assert (ctx / "serve_system" / "standin.py").read_bytes() == (fi.PACKAGE_DIR / "standin.py").read_bytes()


def test_the_app_runs_from_the_context_alone(tmp_path: Path) -> None:
    """The image holds only these modules of the package: they must be enough to serve (both apps)."""
    ctx = tmp_path / "ctx"
    fi.write_context(ctx)
    code = (
        "import serve_system, base64\n"
        f"assert serve_system.__file__.startswith({str(ctx)!r}), serve_system.__file__\n"
        "from fastapi.testclient import TestClient\n"
        "from serve_system.fastapi_app.app import create_app\n"
        "import serve_system.fastapi_app.__main__, serve_system.webapp.__main__, serve_system.webapp.app\n"
        "with TestClient(create_app()) as c:\n"
        "    print(c.get('/health').status_code)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ctx), "SERVE_FASTAPI_STANDIN_DIR": str(tmp_path / "si")}
    out = subprocess.run([sys.executable, "-c", code], env=env, check=False, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "200"


def test_tag_depends_on_build_arguments_and_base() -> None:
    a = fi.recipe_tag({})
    assert re.fullmatch(r"[0-9a-f]{12}", a) and fi.recipe_tag({}) == a
    assert fi.recipe_tag(fi.REHEARSAL_ARGS) != a
    assert fi.recipe_tag({}, base="localhost/x:1") != a
    assert fi.image_ref(fi.REHEARSAL_ARGS) == f"serve-system-fastapi:{fi.recipe_tag(fi.REHEARSAL_ARGS)}"
    assert fi.build_arg_flags({"TORCH": "", "A": "b"}) == ["--build-arg", "A=b", "--build-arg", "TORCH="]


def test_requirements_pin_what_the_tests_run_with() -> None:
    from importlib.metadata import version

    pins = dict(line.split("==") for line in (fi.RECIPE_DIR / "requirements.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    for name in ("fastapi", "uvicorn", "pillow", "numpy", "onnx"):
        assert pins[name] == version(name), name
    assert fi.REHEARSAL_ARGS["ONNXRUNTIME"] == f"onnxruntime=={version('onnxruntime')}"


def test_cli_writes_the_context_and_prints_the_tag(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["fastapi", "context", str(tmp_path / "c"), "--rehearsal"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["changed"] is True and out["build_args"] == fi.REHEARSAL_ARGS
    assert out["image"] == fi.image_ref(fi.REHEARSAL_ARGS)
    assert main(["fastapi", "context", str(tmp_path / "c"), "--rehearsal"]) == 0
    assert json.loads(capsys.readouterr().out)["changed"] is False
