"""The rehearsal images as a set: the serve stack's (Triton, client, FastAPI) built with their archives,
every image described for ``serve-system rehearsal images``.

Imports go one way: :mod:`.stack` uses :mod:`.build` (the recipes and the builder) and :mod:`.fastapi`
(the FastAPI endpoint's image), which uses :mod:`.build`.
"""

from __future__ import annotations

from ..podman import image_exists, podman
from .build import (
    ALL_IMAGES,
    NODE,
    STACK_IMAGES,
    Report,
    StackImage,
    archive_path,
    ensure_archive,
    ensure_image,
)
from .fastapi import ensure_rehearsal_image


def _quiet(_: str) -> None:
    return None


def ensure_stack_images(report: Report = _quiet) -> dict[str, StackImage]:
    """Build (or reuse) the Triton and client images and their archives."""
    out: dict[str, StackImage] = {}
    for key, spec in STACK_IMAGES.items():
        archive = ensure_archive(spec, report)
        out[key] = StackImage(key, spec.ref, archive)
    # the FastAPI endpoint's image: its recipe and context live with the app (fastapi_app/image)
    out["fastapi"] = ensure_rehearsal_image(report)
    return out


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
    ensure_image(NODE, report)
    ensure_stack_images(report)


if __name__ == "__main__":  # pragma: no cover - manual use: python -m serve_system.images.stack
    ensure_all(print)
    for row in describe():
        print(row)
