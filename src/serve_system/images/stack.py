"""The rehearsal images as a set: the node's and the serve stack's (Triton, client, FastAPI, with their
archives), built concurrently in the order their bases allow, and described for
``serve-system rehearsal images``.

The build plan (:func:`plan`), each step after the ones it needs:

* three bases, one debootstrap each: Debian 13 slim, Debian 12 slim, Debian 13 node. The two
  Debian 13 ones run one after the other (slim first: more images wait for it), so the second copies
  most of its .debs from the first's download cache; the Debian 12 one runs beside them;
* four images on them, each ``podman build`` (+ ``podman save`` for the stack's): the client and
  FastAPI images on the Debian 13 slim base, Triton on the Debian 12 one, the node on its own.

Every step keeps the single-image rules of :mod:`.build`: the tags are the recipes' hashes (so a
concurrent build makes the same tags as one after the other), a per-image lock, archives written
under a temporary name and renamed into place.

Imports go one way: :mod:`.stack` uses :mod:`.build` (the recipes and the builder), :mod:`.schedule`
(the concurrent runner) and :mod:`.fastapi` (the FastAPI endpoint's image), which uses :mod:`.build`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from ..podman import image_exists, podman
from . import fastapi, schedule
from .build import (
    ALL_IMAGES,
    BOOKWORM_SLIM,
    NODE,
    STACK_IMAGES,
    TRIXIE_NODE,
    TRIXIE_SLIM,
    BaseSpec,
    Report,
    StackImage,
    archive_path,
    ensure_archive,
    ensure_base,
    ensure_image,
)
from .fastapi import ensure_rehearsal_image

#: every image a rehearsal needs: the node's and the serve stack's (each archive is one of the stack's)
IMAGE_KEYS = ("node", "triton", "client", "fastapi")
#: the bases in the order they are made; two of one suite go one after the other (see the docstring)
BASES: tuple[BaseSpec, ...] = (TRIXIE_SLIM, BOOKWORM_SLIM, TRIXIE_NODE)
#: the image steps in the order they start when slots are few (the longest builds first)
_IMAGE_ORDER = ("triton", "client", "fastapi", "node")


def _quiet(_: str) -> None:
    return None


def base_of(key: str) -> BaseSpec:
    """The base image ``key`` is built on."""
    return TRIXIE_SLIM if key == "fastapi" else ALL_IMAGES[key].base


def stack_refs() -> dict[str, StackImage]:
    """The serve stack's refs and archive paths, known from the recipes before anything is built."""
    out = {key: StackImage(key, spec.ref, archive_path(spec)) for key, spec in STACK_IMAGES.items()}
    out["fastapi"] = fastapi.rehearsal_image()
    return out


def is_built(key: str) -> bool:
    """Whether image ``key`` needs no build: the node's image is in podman's storage, a stack image's
    archive is in the cache (what the nodes load)."""
    if key == "node":
        return image_exists(NODE.ref)
    return stack_refs()[key].archive.is_file()


def _base(base: BaseSpec, keys: Sequence[str], report: Report) -> str:
    """Make ``base`` unless every image of ``keys`` on it is built already (then nothing needs it)."""
    if all(is_built(k) for k in keys if base_of(k) == base):
        return base.ref
    return ensure_base(base, report)


def _build(key: str, report: Report) -> StackImage | str:
    if key == "node":
        return ensure_image(NODE, report)
    if key == "fastapi":
        # the FastAPI endpoint's image: its recipe and context live with the app (fastapi_app/image)
        return ensure_rehearsal_image(report)
    spec = STACK_IMAGES[key]
    return StackImage(key, spec.ref, ensure_archive(spec, report))


def plan(keys: Sequence[str] = IMAGE_KEYS, report: Report = _quiet) -> list[schedule.Step]:
    """The steps that make the images ``keys``: their bases (``base:<name>-<tag>``), then each image
    (``image:<key>``, with its archive for the stack's)."""
    unknown = [k for k in keys if k not in IMAGE_KEYS]
    if unknown:
        raise ValueError(f"no rehearsal image named {', '.join(unknown)} (known: {', '.join(IMAGE_KEYS)})")
    wanted = {base_of(k) for k in keys}
    steps: list[schedule.Step] = []
    last_of_suite: dict[str, str] = {}
    for base in BASES:
        if base not in wanted:
            continue
        key = base_step(base)
        before = last_of_suite.get(base.suite)
        steps.append(schedule.Step(key, f"the Debian {base.suite} base {base.ref}",
                                   (before,) if before else (), partial(_base, base, keys, report)))
        last_of_suite[base.suite] = key
    for key in _IMAGE_ORDER:
        if key in keys:
            steps.append(schedule.Step(f"image:{key}", f"the {key} image", (base_step(base_of(key)),),
                                       partial(_build, key, report)))
    return steps


def base_step(base: BaseSpec) -> str:
    return f"base:{base.name}-{base.tag}"


def ensure_images(keys: Sequence[str] = IMAGE_KEYS, report: Report = _quiet,
                  extra: Sequence[schedule.Step] = (), workers: int = schedule.WORKERS,
                  on_done: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Build (or reuse) the images ``keys`` concurrently, with ``extra`` steps that may need them
    (``image:<key>``; the pool has one more slot per extra step); every step's result by its key."""
    return schedule.run([*plan(keys, report), *extra], workers + len(extra), on_done)


def stack_of(results: dict[str, Any]) -> dict[str, StackImage]:
    """The serve stack's images out of :func:`ensure_images`' results."""
    return {key: results[f"image:{key}"] for key in ("triton", "client", "fastapi")}


def image_size(ref: str) -> int:
    """Size in bytes podman reports for ``ref`` (0 when absent)."""
    proc = podman("image", "inspect", "--format", "{{.Size}}", ref, check=False)
    try:
        return int(proc.stdout.strip())
    except ValueError:
        return 0


def describe() -> list[dict[str, object]]:
    """One row per image: key, ref, whether built, size, archive path (for `rehearsal images`)."""
    rows: list[dict[str, object]] = []
    for key, spec in ALL_IMAGES.items():
        built = image_exists(spec.ref)
        arch = archive_path(spec) if key in STACK_IMAGES else None
        rows.append({
            "image": key,
            "ref": spec.ref,
            "built": built,
            "size_mb": round(image_size(spec.ref) / 1e6) if built else None,
            "archive": str(arch) if arch else None,
            "archive_mb": round(arch.stat().st_size / 1e6) if arch and arch.is_file() else None,
        })
    return rows


def ensure_all(report: Report = _quiet) -> None:
    """Every rehearsal image: the node's and the serve stack's."""
    ensure_images(IMAGE_KEYS, report)


if __name__ == "__main__":  # pragma: no cover - manual use: python -m serve_system.images.stack
    ensure_all(print)
    for row in describe():
        print(row)
