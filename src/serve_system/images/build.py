"""Locally built rehearsal images, tagged by the hash of their recipe.

No registry can be reached, so every image starts from a Debian root file system made by
``debootstrap`` and imported into podman (a *base*), then ``podman build --squash-all`` adds the rest
(one layer: quick to load into the Docker engine inside rehearsal nodes). Each image's tag is the
hash of everything that defines it (suite, packages, Containerfile, files next to it, pinned pip
packages), so a recipe change rebuilds it and an unchanged recipe reuses it, across worktrees and
sessions. The serve-stack images are also saved as docker-archive tarballs in the cache directory,
which is how they reach the nodes (``serve_stack_image_archives``).

Images:

* ``node``   Debian 13 + systemd + sshd + sudo user ``cc``: the rehearsal node itself.
* ``triton`` Debian 12 / Python 3.11 + the real ``tritonserver`` from ``nvidia-pytriton`` (CPU).
* ``client`` Debian 13 + perf_analyzer 2.60.0 + tritonclient + JupyterLab: the lab's Jupyter container,
  started as docker-stacks' images start (tini, then a switch to the notebook user jovyan, uid 1000).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..podman import image_exists, podman, require_podman, require_root, require_tool, run_streamed

#: the recipes: one folder per image (Containerfile and the files beside it)
RECIPES = Path(__file__).resolve().parent
#: the Python packages the models import: the one list the GPU Triton image installs too
MODEL_REQUIREMENTS = RECIPES.parents[2] / "model_repository" / "requirements.txt"
MIRROR = "http://deb.debian.org/debian"
CA_DIR = Path("/usr/local/share/ca-certificates")

Report = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


@dataclass(frozen=True)
class BaseSpec:
    """A debootstrap root file system imported as a podman image."""

    suite: str
    include: tuple[str, ...]
    components: tuple[str, ...] = ("main", "contrib")
    variant: str = "minbase"

    @property
    def name(self) -> str:
        return f"serve-system-base-{self.suite}"

    def recipe(self) -> dict[str, object]:
        return {
            "suite": self.suite,
            "include": sorted(self.include),
            "components": list(self.components),
            "variant": self.variant,
            "mirror": MIRROR,
        }

    @property
    def tag(self) -> str:
        return _digest(json.dumps(self.recipe(), sort_keys=True).encode())

    @property
    def ref(self) -> str:
        return f"localhost/{self.name}:{self.tag}"


@dataclass(frozen=True)
class ImageSpec:
    """An image built with ``podman build`` from a recipe directory under ``images/``."""

    key: str
    base: BaseSpec
    params: dict[str, str] = field(default_factory=dict)
    #: files from elsewhere in the repository put into the build context: {name in the context: source}
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"serve-system-{self.key}"

    @property
    def recipe_dir(self) -> Path:
        return RECIPES / self.key

    @property
    def tag(self) -> str:
        h = hashlib.sha256()
        h.update(self.base.ref.encode())
        h.update(json.dumps(self.params, sort_keys=True).encode())
        for path in sorted(p for p in self.recipe_dir.rglob("*") if p.is_file()):
            h.update(path.relative_to(self.recipe_dir).as_posix().encode())
            h.update(path.read_bytes())
        for name, src in sorted(self.files.items()):
            h.update(name.encode())
            h.update(src.read_bytes())
        return h.hexdigest()[:12]

    @property
    def ref(self) -> str:
        return f"localhost/{self.name}:{self.tag}"

    def containerfile(self) -> str:
        text = (self.recipe_dir / "Containerfile").read_text(encoding="utf-8")
        text = text.replace("{{BASE}}", self.base.ref)
        for key, value in self.params.items():
            text = text.replace("{{" + key + "}}", value)
        return text


# --- the project's images ----------------------------------------------------------------------

TRIXIE_NODE = BaseSpec(
    "trixie",
    ("systemd", "systemd-sysv", "dbus", "python3", "openssh-server", "sudo", "iproute2", "ca-certificates",
     "curl", "procps"),
)
#: the client's and the FastAPI endpoint's base; tini is the client's entrypoint (as in docker-stacks' images)
TRIXIE_SLIM = BaseSpec("trixie", ("python3", "python3-venv", "curl", "ca-certificates", "tini"),
                       components=("main",))
BOOKWORM_SLIM = BaseSpec("bookworm", ("python3", "python3-pip", "libpython3.11", "ca-certificates", "curl"),
                         components=("main",))

#: packages the docker / nvtop / serve_stack roles install on a rehearsal node, pre-downloaded (not
#: installed; git: serve_stack clones the lab's repository with it)
NODE_PREFETCH = ("docker.io", "docker-cli", "docker-compose", "nvtop", "python3-requests", "python3-yaml",
                 "rsync", "pciutils", "git")

NODE = ImageSpec("node", TRIXIE_NODE, {"PREFETCH": " ".join(NODE_PREFETCH)})
TRITON = ImageSpec(
    "triton",
    BOOKWORM_SLIM,
    {"PIP_PACKAGES": "nvidia-pytriton==0.7.0"},
    files={"models-requirements.txt": MODEL_REQUIREMENTS},
)
CLIENT = ImageSpec(
    "client",
    TRIXIE_SLIM,
    {"PIP_PACKAGES": "perf-analyzer==2.60.0 'tritonclient[http,grpc]==2.60.0' 'numpy>=2,<3' 'pillow>=11,<13' "
                     "'jupyterlab>=4.2,<5'"},
)
#: images that run in the serve stack on a node (shipped as docker-archive tarballs)
STACK_IMAGES: dict[str, ImageSpec] = {"triton": TRITON, "client": CLIENT}
ALL_IMAGES: dict[str, ImageSpec] = {"node": NODE, **STACK_IMAGES}


def cache_dir() -> Path:
    """Where bases, archives and build logs live: $SERVE_SYSTEM_CACHE or ~/.cache/serve-system."""
    env = os.environ.get("SERVE_SYSTEM_CACHE")
    if env:
        return Path(env).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "serve-system"


@contextlib.contextmanager
def lock(name: str) -> Iterator[None]:
    """A cross-process lock, so two sessions never build the same image at once."""
    path = cache_dir() / "locks" / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


def ensure_base(spec: BaseSpec, report: Report = _quiet) -> str:
    """The podman ref of ``spec``, made by debootstrap + ``podman import`` unless it exists."""
    require_podman()
    if image_exists(spec.ref):
        return spec.ref
    with lock(f"{spec.name}-{spec.tag}"):
        if image_exists(spec.ref):
            return spec.ref
        require_root("debootstrap")
        debootstrap = require_tool("debootstrap", "debootstrap")
        report(f"debootstrap {spec.suite} ({len(spec.include)} extra packages) -> {spec.ref}")
        logs = cache_dir() / "logs"
        started = time.monotonic()
        # one download cache per suite, used by one debootstrap at a time (debootstrap writes it
        # without locking): the second base of a suite copies most of its .debs from there
        with lock(f"debs-{spec.suite}"), \
                tempfile.TemporaryDirectory(prefix=f"{spec.name}-", dir=scratch_dir()) as tmp:
            rootfs = Path(tmp) / "rootfs"
            run_streamed(
                [debootstrap, f"--variant={spec.variant}", f"--components={','.join(spec.components)}",
                 f"--include={','.join(spec.include)}", f"--cache-dir={deb_cache(spec.suite)}",
                 spec.suite, str(rootfs), MIRROR],
                logs / f"{spec.name}-{spec.tag}.debootstrap.log",
                f"debootstrap {spec.suite}",
            )
            # a smaller image: no apt lists or downloaded .debs from the bootstrap itself
            for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
                for p in (rootfs / sub).glob("*"):
                    if p.is_file():
                        p.unlink()
            tar = subprocess.Popen(["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."],
                                   stdout=subprocess.PIPE)
            try:
                podman("import", "--change", 'CMD ["/bin/bash"]', "-", spec.ref, stdin=tar.stdout,
                       timeout=900)
            finally:
                if tar.stdout:
                    tar.stdout.close()
                tar.wait()
        report(f"made {spec.ref} in {time.monotonic() - started:.0f} s")
    return spec.ref


def deb_cache(suite: str) -> Path:
    """The folder of ``suite``'s downloaded .debs that debootstrap reuses (``--cache-dir``).

    Its ``partial/`` subfolder makes debootstrap download there first and rename a file into place
    once its checksum is right, so an interrupted download never leaves a broken .deb behind.
    """
    path = cache_dir() / "debs" / suite
    (path / "partial").mkdir(parents=True, exist_ok=True)
    return path


def scratch_dir() -> Path:
    """A folder for build contexts, on the cache's file system."""
    path = cache_dir() / "tmp"
    path.mkdir(parents=True, exist_ok=True)
    return path


def ensure_image(spec: ImageSpec, report: Report = _quiet) -> str:
    """The podman ref of ``spec``, built (squashed, from its local base) unless it exists."""
    require_podman()
    if image_exists(spec.ref):
        return spec.ref
    ensure_base(spec.base, report)
    with lock(f"{spec.name}-{spec.tag}"):
        if image_exists(spec.ref):
            return spec.ref
        report(f"podman build {spec.ref}")
        with tempfile.TemporaryDirectory(prefix=f"{spec.name}-", dir=scratch_dir()) as tmp:
            ctx = Path(tmp)
            for path in spec.recipe_dir.iterdir():
                if path.is_file() and path.name != "Containerfile":
                    shutil.copy2(path, ctx / path.name)
            for name, src in spec.files.items():
                shutil.copy2(src, ctx / name)
            (ctx / "Containerfile").write_text(spec.containerfile(), encoding="utf-8")
            # the build machine's extra CA certificates, so pip inside the build trusts its TLS path
            (ctx / "ca").mkdir()
            for crt in sorted(CA_DIR.glob("*.crt")) if CA_DIR.is_dir() else []:
                shutil.copy2(crt, ctx / "ca" / crt.name)
            started = time.monotonic()
            run_streamed(
                ["podman", "build", "--pull=never", "--squash-all", "--network=host", "--layers=false",
                 "-t", spec.ref, "-f", str(ctx / "Containerfile"), str(ctx)],
                cache_dir() / "logs" / f"{spec.name}-{spec.tag}.build.log",
                f"building {spec.ref}",
            )
            report(f"built {spec.ref} in {time.monotonic() - started:.0f} s")
    return spec.ref


def archive_path(spec: ImageSpec) -> Path:
    return cache_dir() / "images" / f"{spec.name}-{spec.tag}.tar"


def ensure_archive(spec: ImageSpec, report: Report = _quiet) -> Path:
    """The docker-archive tarball of ``spec`` (built and saved unless cached)."""
    path = archive_path(spec)
    if path.is_file():
        return path
    ref = ensure_image(spec, report)
    with lock(f"{spec.name}-{spec.tag}.archive"):
        if path.is_file():
            return path
        save_archive(ref, path, report)
    return path


def save_archive(ref: str, path: Path, report: Report = _quiet) -> None:
    """``podman save`` ``ref`` as a docker-archive at ``path``, never leaving a half-written file."""
    report(f"podman save {ref} -> {path}")
    with written_as(path) as tmp:
        podman("save", "--format", "docker-archive", "-o", str(tmp), ref, timeout=1800)


@contextlib.contextmanager
def written_as(path: Path) -> Iterator[Path]:
    """A temporary name next to ``path`` to write to; renamed to ``path`` when the block ends well,
    removed when it fails, so ``path`` is either absent or complete (never half-written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    tmp.unlink(missing_ok=True)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@dataclass(frozen=True)
class StackImage:
    """A serve-stack image and its archive, as the serve_stack role takes them."""

    key: str
    ref: str
    archive: Path

    def role_item(self) -> dict[str, str]:
        return {"image": self.ref, "archive": str(self.archive)}
