"""The FastAPI endpoint's container image: its build context, its recipe hash, its build arguments.

The recipe is ``fastapi_app/image/`` (Containerfile, requirements.txt, constraints.txt, torch.txt)
plus ``images/pincheck.py``. A build context holds that recipe, ``ca/`` (extra CA certificates; only
a README unless asked for) and the few modules of the ``serve_system`` package the app imports, plus
the stack's web page (``serve_system.webapp``, which runs from this same image instead of an image
of its own). The image tag is the hash of exactly those files plus the build arguments, so a change
to the app or its recipe makes a new tag (and a rebuild), and an unchanged one reuses what was built.

Two ways to build it:

* on a Chameleon node (the ``serve_stack`` role): ``python:3.12.12-slim-bookworm`` (by digest) with
  onnxruntime-gpu and PyTorch 2.7.1's CUDA 12.6 build, every package pinned (:data:`CHAMELEON_ARGS`,
  the Containerfile's defaults);
* for rehearsal nodes, with podman on the controller from a local Debian base (:data:`REHEARSAL_ARGS`:
  CPU onnxruntime, no torch), saved as a docker-archive for ``serve_stack_image_archives``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from .. import ownedtree
from . import build as images

#: the serve_system package (the image ships a few of its modules)
PACKAGE_DIR = Path(__file__).resolve().parent.parent
RECIPE_DIR = PACKAGE_DIR / "fastapi_app" / "image"
IMAGE_NAME = "serve-system-fastapi"
#: the package modules the app imports (everything under the APP_PACKAGES folders is added)
PACKAGE_MODULES = ("__init__.py", "errors.py", "appsettings.py", "standin.py")
#: sub-packages shipped whole: the endpoint and the web page that runs from the same image
APP_PACKAGES = ("fastapi_app", "webapp")
#: the files of those sub-packages that belong in the image
APP_SUFFIXES = (".py", ".html")
CA_DIR = Path("/usr/local/share/ca-certificates")
CA_README = ("Extra CA certificates (*.crt) the image should trust; "
             "empty unless the build machine needs them.\n")

#: the Containerfile's defaults: GPU node with CUDA 12.6 wheels (P100 = sm_60 still supported)
CHAMELEON_ARGS: dict[str, str] = {}
#: rehearsal nodes: CPU only, no PyTorch (its runtime then answers "unavailable")
REHEARSAL_ARGS: dict[str, str] = {"ONNXRUNTIME": "onnxruntime==1.31.1", "TORCH": ""}


def context_files() -> dict[str, bytes]:
    """Relative path -> content of every file of a build context (without ca/)."""
    files: dict[str, bytes] = {}
    for path in sorted(RECIPE_DIR.iterdir()):
        if path.is_file():
            files[path.name] = path.read_bytes()
    # the check that pip installed only what the pins name (the Triton and Flask images run it too)
    files["pincheck.py"] = (PACKAGE_DIR / "images" / "pincheck.py").read_bytes()
    for name in PACKAGE_MODULES:
        files[f"serve_system/{name}"] = (PACKAGE_DIR / name).read_bytes()
    for package in APP_PACKAGES:
        app_dir = PACKAGE_DIR / package
        for path in sorted(app_dir.rglob("*")):
            if path.is_file() and path.suffix in APP_SUFFIXES and "__pycache__" not in path.parts:
                files[f"serve_system/{package}/{path.relative_to(app_dir).as_posix()}"] = path.read_bytes()
    return files


def recipe_tag(build_args: dict[str, str] | None = None, base: str = "") -> str:
    """12 hex digits naming this recipe, these build arguments and this base image."""
    h = hashlib.sha256()
    for rel, data in context_files().items():
        h.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
    h.update(json.dumps({"args": build_args or {}, "base": base}, sort_keys=True).encode())
    return h.hexdigest()[:12]


def image_ref(build_args: dict[str, str] | None = None, base: str = "") -> str:
    return f"{IMAGE_NAME}:{recipe_tag(build_args, base)}"


def write_context(dest: Path, host_cas: bool = False, *, private: bool = False, force: bool = False) -> bool:
    """Write a build context into ``dest``, a folder the tool owns (:class:`~.ownedtree.OwnedFolder`: a
    user's non-empty folder is refused, unless ``force``; only the tool's earlier files are replaced or
    removed); True when anything changed. ``private``: a scratch folder of the tool's own, mirrored
    exactly (every other file in it goes too).

    ``host_cas`` copies this machine's extra CA certificates into ``ca/`` (needed where pip reaches
    PyPI through an intercepting proxy, as on the project's build machines).
    """
    wanted = dict(context_files())
    wanted["ca/README"] = CA_README.encode()
    if host_cas and CA_DIR.is_dir():
        for crt in sorted(CA_DIR.glob("*.crt")):
            wanted[f"ca/{crt.name}"] = crt.read_bytes()
    return ownedtree.sync_tree(dest, wanted, private=private, force=force, option="DIR")


def build_arg_flags(build_args: dict[str, str]) -> list[str]:
    out: list[str] = []
    for key, value in sorted(build_args.items()):
        out += ["--build-arg", f"{key}={value}"]
    return out


def rehearsal_build_args(base_ref: str) -> dict[str, str]:
    """Build arguments of the rehearsal image on a local base (its ref is part of the tag)."""
    return {**REHEARSAL_ARGS, "BASE_IMAGE": base_ref}


def rehearsal_image() -> images.StackImage:
    """The rehearsal image's ref and archive path (known from the recipe, built or not)."""
    tag = recipe_tag(rehearsal_build_args(images.TRIXIE_SLIM.ref))
    return images.StackImage("fastapi", f"localhost/{IMAGE_NAME}:{tag}",
                             images.cache_dir() / "images" / f"{IMAGE_NAME}-{tag}.tar")


def ensure_rehearsal_image(report: Callable[[str], None] | None = None) -> images.StackImage:
    """Build (or reuse) the rehearsal image and its docker-archive; an ``images.StackImage``.
    An archive already in the cache is used as it is (the image need not be in podman's storage).

    The base is the rehearsal images' Debian 13 base with python3-venv; the build runs with
    ``--format docker`` so the image keeps its HEALTHCHECK.
    """
    import tempfile
    import time

    from ..podman import image_exists, run_streamed

    say = report or (lambda _msg: None)
    planned = rehearsal_image()
    if planned.archive.is_file():  # what the nodes load: there already (like the other stack images)
        return planned
    base = images.ensure_base(images.TRIXIE_SLIM, say)
    args = rehearsal_build_args(base)
    tag = planned.ref.rpartition(":")[2]
    ref, archive = planned.ref, planned.archive
    with images.lock(f"{IMAGE_NAME}-{tag}"):
        if not image_exists(ref):
            say(f"podman build {ref}")
            started = time.monotonic()
            with tempfile.TemporaryDirectory(prefix=f"{IMAGE_NAME}-", dir=images.scratch_dir()) as tmp:
                ctx = Path(tmp)
                write_context(ctx, host_cas=True, private=True)  # its own scratch folder
                run_streamed(["podman", "build", "--pull=never", "--squash-all", "--network=host",
                              "--layers=false", "--format", "docker", *build_arg_flags(args), "-t", ref,
                              "-f", str(ctx / "Containerfile"), str(ctx)],
                             images.cache_dir() / "logs" / f"{IMAGE_NAME}-{tag}.build.log", f"building {ref}")
            say(f"built {ref} in {time.monotonic() - started:.0f} s")
        if not archive.is_file():
            images.save_archive(ref, archive, say)
    return images.StackImage("fastapi", ref, archive)
