"""The lab's own repository (``teaching-on-testbeds/serve-system-chi``) as the serve stack uses it.

The lab clones its repository on the node and serves the weights committed there; so does the
``serve_stack`` role: ``serve_stack_lab_repo`` at the full commit ``serve_stack_lab_commit``, fetched with
git on the node into ``{{ serve_stack_root }}/lab``. This module is the one list of what the stack takes
from it:

* :data:`WEIGHTS`: each weights file, the model (or FastAPI runtime) it serves and where it goes;
* :data:`WORKSPACE`: the lab's own notebooks and files, put into Jupyter's work folder;
* :func:`node_plan`: for one node, which files the role checks and copies, which models get stand-ins.

The role's node-side check (``roles/serve_stack/library/serve_stack_lab_files.py``) refuses a file that is
missing, empty or a git-LFS pointer in one line, and answers each file's sha256 (:class:`LabWeights`);
the render writes it into the model's config and the model table (:func:`weights_text`), the role into
``{{ serve_stack_root }}/weights.json``, which the experiment role's look reads into every level's
provenance (:mod:`serve_system.experiment.nodelook`).

Rehearsal nodes cannot reach GitHub: :func:`ensure_standin_repo` builds, on the controller, a bare git
repository in the lab's layout holding generated weights (:mod:`serve_system.standin`), with one commit
whose author, dates and message are fixed, so its SHA follows from the files alone. Its
:data:`STANDIN_MANIFEST` lists those files with their sha256: every model table, config and record
marks them as stand-ins. Its ``food11.pth`` files are a short text saying so (no PyTorch model can be
made without torch, and the rehearsal's Triton has none: ``food_classifier`` serves the ONNX stand-in
there, :data:`CPU_FALLBACK`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import posixpath
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from .errors import ServeSystemError, UsageError

#: the two ways a node gets its weights (the role's ``serve_stack_weights``)
CHOICES = ("lab", "standin")
#: the lab's folder on the node, under the stack's root; the FastAPI endpoint sees it at the same name
CHECKOUT = "lab"
FASTAPI_MOUNT = "/lab"
#: a full commit: the role fetches nothing else
COMMIT = re.compile(r"[0-9a-f]{40}")
#: the file of a rehearsal stand-in repository that lists its generated files (path -> sha256)
STANDIN_MANIFEST = ".serve-system-standin.json"


@dataclass(frozen=True)
class LabFile:
    """A weights file of the lab's repository: ``path`` there, what it serves (a model of the model
    repository, or ``fastapi:<runtime>``), and ``dest``, its path in the node's model repository (None:
    read where it is, in the checkout: the FastAPI endpoint mounts it)."""

    path: str
    serves: str
    dest: str | None


#: the lab's weights (its Triton models' and its FastAPI apps')
WEIGHTS: tuple[LabFile, ...] = (
    LabFile("models_staging/food_classifier/1/food11.pth", "food_classifier", "food_classifier/1/food11.pth"),
    LabFile("models_staging/food_classifier_onnx/1/model.onnx", "food_classifier_onnx",
            "food_classifier_onnx/1/model.onnx"),
    LabFile("fastapi_pt/food11.pth", "fastapi:pytorch", None),
    LabFile("fastapi_onnx/food11.onnx", "fastapi:onnx", None),
)
#: on a node without GPUs, food_classifier also gets the lab's ONNX export beside food11.pth: a Triton
#: without torch (the rehearsal's) serves it through onnxruntime (model.py's ``auto`` engine)
CPU_FALLBACK = LabFile("models_staging/food_classifier_onnx/1/model.onnx", "food_classifier",
                       "food_classifier/1/model.onnx")
#: on a GPU node, a model's engine (its ``serve_system_engine`` parameter): the lab runs food11.pth
#: through torch on the GPU, never silently another way
ENGINE_ON_GPU = {"food_classifier": "pytorch"}
#: the lab's own files put into Jupyter's work folder (copied only when missing there)
WORKSPACE: tuple[str, ...] = ("workspace/triton.ipynb", "workspace/fastapi.ipynb", "workspace/input.json",
                              "workspace/test_image.jpeg")
#: the lab's models (served from its weights)
LAB_MODELS: tuple[str, ...] = tuple(dict.fromkeys(f.serves for f in WEIGHTS if f.dest is not None))


def lab_files(gpus: int) -> list[LabFile]:
    """The lab's weights files a node with ``gpus`` GPUs uses (:data:`CPU_FALLBACK` without GPUs)."""
    return list(WEIGHTS) + ([] if gpus > 0 else [CPU_FALLBACK])


def fastapi_model(runtime: str) -> str:
    """The FastAPI endpoint's model file for ``runtime`` (onnx, pytorch), as its container sees it."""
    path = next(f.path for f in WEIGHTS if f.serves == f"fastapi:{runtime}")
    return f"{FASTAPI_MOUNT}/{path}"


def node_plan(choice: str, gpus: int, deployed: Iterable[str], loaded: Iterable[str],
              root: str) -> dict[str, Any]:
    """What the ``serve_stack`` role does with the lab's weights on one node (filter
    ``serve_stack_lab_plan``). ``choice``: ``lab`` or ``standin`` (``serve_stack_weights``);
    ``deployed``: every model put into the repository; ``loaded``: those Triton loads at start
    (``serve_stack_models``); ``root``: the stack's folder on the node.

    Returns ``checkout`` (the lab's folder on the node), ``workspace`` (``[{src, dest, remote_src}]``:
    the lab's files for Jupyter's work folder, on the node), ``files`` (``[{path, dest}]`` for the
    node-side check: every lab weights file, ``dest`` the absolute path it is copied to, or ``""``),
    ``keep`` (absolute paths in the model repository the copy owns), ``standin`` and
    ``standin_unless_given`` (models for the render's options),
    ``standin_chosen``, ``fastapi`` (``{runtime: model file}``, empty: the endpoint's own default) and
    ``fastapi_mount`` (where the FastAPI endpoint sees the checkout)."""
    if choice not in CHOICES:
        raise ValueError(f"serve_stack_weights is {choice!r}: give lab (the lab's weights) or standin "
                         "(generated stand-ins, chosen)")
    root = root.rstrip("/")
    deployed = list(dict.fromkeys(deployed))
    loaded = set(loaded)
    lab = choice == "lab"
    served = [f for f in lab_files(gpus) if f.dest is not None and f.serves in deployed] if lab else []
    files: dict[str, list[str]] = {f.path: [] for f in WEIGHTS} if lab else {}
    for f in served:
        files[f.path].append(f"{root}/model_repository/{f.dest}")
    keep = [f"{root}/model_repository/{f.dest}" for f in served]
    own = set(LAB_MODELS)
    checkout = f"{root}/{CHECKOUT}"
    return {
        "checkout": checkout,
        "fastapi_mount": FASTAPI_MOUNT,
        "workspace": [{"src": f"{checkout}/{path}", "dest": posixpath.basename(path), "remote_src": True}
                      for path in WORKSPACE],
        "files": [{"path": path, "dest": dest} for path, dests in files.items() for dest in (dests or [""])],
        "keep": keep,
        # the lab's models: the generated stand-in only where chosen; a model the repository only holds
        # (not loaded at start): its stand-in unless its source folder holds weights
        "standin": ([m for m in deployed if m in own] if not lab else []),
        "standin_unless_given": [m for m in deployed if m not in own and m not in loaded],
        "standin_chosen": not lab,
        "fastapi": ({rt: fastapi_model(rt) for rt in ("onnx", "pytorch")} if lab else {}),
    }


def render_options(plan: dict[str, Any], checked: dict[str, Any] | None, repository: str,
                   commit: str) -> list[str]:
    """``serve-system models render``'s options for the weights (filter ``serve_stack_render_options``):
    the plan's stand-ins, and the lab's files as the node's check found them (``checked``: its ``files``;
    None where it did not run)."""
    out = [f"--standin={m}" for m in plan["standin"]]
    out += [f"--standin-unless-given={m}" for m in plan["standin_unless_given"]]
    if plan["standin_chosen"]:
        out.append("--standin-chosen")
    if checked is not None:
        out += ["--lab-weights", json.dumps({"repository": repository, "commit": commit, "files": checked},
                                            sort_keys=True)]
    return out


# ------------------------------------------------------------------------------ what the node said

@dataclass(frozen=True)
class FileInfo:
    """A lab file as the node-side check found it."""

    sha256: str
    size: int
    standin: bool


@dataclass(frozen=True)
class LabWeights:
    """The lab's weights on one node: the repository and commit fetched, each file checked."""

    repository: str
    commit: str
    files: dict[str, FileInfo]

    @classmethod
    def from_json(cls, text: str, where: str = "--lab-weights") -> LabWeights:
        """``{"repository", "commit", "files": {path: {"sha256", "size", "standin"}}}`` (what the role
        hands the render); refused in one line naming the field."""
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise UsageError(f"{where}: not JSON ({exc}): give what the serve_stack role passes") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("files"), dict):
            raise UsageError(f"{where}: give an object with repository, commit and files")
        repo, commit = doc.get("repository"), doc.get("commit")
        if not isinstance(repo, str) or not repo:
            raise UsageError(f"{where}: repository: give the lab repository's URL")
        if not isinstance(commit, str) or not COMMIT.fullmatch(commit):
            raise UsageError(f"{where}: commit {commit!r}: give a full commit (40 hexadecimal digits)")
        files: dict[str, FileInfo] = {}
        for path, info in doc["files"].items():
            ok = (isinstance(info, dict) and isinstance(info.get("sha256"), str)
                  and re.fullmatch(r"[0-9a-f]{64}", info["sha256"]) is not None
                  and isinstance(info.get("size"), int) and not isinstance(info.get("size"), bool)
                  and info["size"] >= 0 and isinstance(info.get("standin"), bool))
            if not ok:
                raise UsageError(f"{where}: files.{path}: give sha256 (64 hexadecimal digits), size and "
                                 "standin")
            files[str(path)] = FileInfo(info["sha256"], info["size"], info["standin"])
        return cls(repo, commit, files)

    def for_model(self, model: str, gpus: int) -> list[tuple[LabFile, FileInfo]]:
        """The model's lab files (none: not one of the lab's models); one the node did not check is an
        error naming it."""
        out = []
        for f in lab_files(gpus):
            if f.serves != model or f.dest is None:
                continue
            if f.path not in self.files:
                raise UsageError(f"--lab-weights: files: {f.path} (the weights of {model}) is not among the "
                                 "checked files: give what the serve_stack role's check of the node answered")
            out.append((f, self.files[f.path]))
        return out


def repository_name(url: str) -> str:
    """``owner/name`` of a repository URL (the last two parts of its path, ``.git`` dropped)."""
    path = urlparse(url).path if "://" in url else url.rpartition(":")[2]
    parts = [p for p in path.rstrip("/").removesuffix(".git").split("/") if p]
    return "/".join(parts[-2:]) or url


def weights_text(model: str, files: list[tuple[LabFile, FileInfo]], lab: LabWeights) -> tuple[str, str]:
    """The model's weights as its config and the model table say them (``serve_system_weights``: starts
    with ``stand-in`` where the repository's files are generated ones), and every file's full sha256
    (``serve_system_weights_sha256``)."""
    from .standin import STANDIN_NOTE

    where = f"{repository_name(lab.repository)}@{lab.commit[:12]}"
    parts = ", ".join(f"1/{posixpath.basename(f.dest or f.path)} <- {f.path} (sha256 {i.sha256[:12]})"
                      for f, i in files)
    sums = ", ".join(f"{posixpath.basename(f.dest or f.path)}={i.sha256}" for f, i in files)
    if any(i.standin for _, i in files):
        # no apostrophe: the text is a config's string, which Triton's text format escapes
        text = f"stand-in: {STANDIN_NOTE}; from the rehearsal stand-in of the lab repository {where}: {parts}"
        return text, sums
    return f"lab: {parts} at {where}", sums


def weights_record(choice: str, repository: str, commit: str, checked: dict[str, Any] | None,
                   rendered: dict[str, str]) -> dict[str, Any]:
    """``{{ serve_stack_root }}/weights.json`` (filter ``serve_stack_weights_record``): what the node
    serves and where it came from, read into every level's provenance. ``checked``: the node-side
    check's ``files`` (lab weights), None where stand-ins were chosen; ``rendered``: the rendered
    repository's files with their sha256 (its stand-in weights are listed)."""
    files = [{"path": path, "sha256": info["sha256"], "size": info["size"], "standin": info["standin"]}
             for path, info in sorted((checked or {}).items())]
    standins = {rel: sha for rel, sha in sorted(rendered.items()) if rel.endswith((".onnx", ".pth", ".pt"))}
    return {"weights": choice, "repository": repository, "commit": commit, "files": files,
            "generated": standins}


# ------------------------------------------------------------------ the rehearsal's stand-in of it

REPO_NAME = "serve-system-chi"
BRANCH = "main"
#: who and when of the stand-in repository's one commit: fixed, so its SHA follows from its files
_IDENTITY = {
    "GIT_AUTHOR_NAME": "serve-system", "GIT_AUTHOR_EMAIL": "serve-system@localhost",
    "GIT_AUTHOR_DATE": "2025-01-01T00:00:00+0000",
    "GIT_COMMITTER_NAME": "serve-system", "GIT_COMMITTER_EMAIL": "serve-system@localhost",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00+0000",
}
_MESSAGE = ("Rehearsal stand-in of teaching-on-testbeds/serve-system-chi: the lab's layout, generated "
            "weights\n")
#: what the stand-in repository holds as food11.pth: no PyTorch model can be made without torch
PTH_PLACEHOLDER = (
    "serve-system rehearsal stand-in: NOT a PyTorch model.\n"
    "The lab's food11.pth is in teaching-on-testbeds/serve-system-chi; rehearsal nodes cannot fetch it\n"
    "and their Triton has no torch, so food_classifier serves the generated ONNX stand-in\n"
    "(models_staging/food_classifier_onnx/1/model.onnx) through onnxruntime there, marked as a stand-in.\n"
)
#: where the rehearsal's input.json and test photo come from (a generated 96x96 JPEG, ours)
FOOD_INPUT = Path(__file__).resolve().parents[2] / "experiments" / "files" / "food_input.json"


def _notebook(name: str) -> bytes:
    cell = {"cell_type": "markdown", "id": "standin", "metadata": {}, "source": [
        f"# Rehearsal stand-in of the lab's `{name}`\n", "\n",
        "This node is a rehearsal node: its lab repository is serve-system's stand-in of\n",
        "`teaching-on-testbeds/serve-system-chi` (generated weights). On a real node the serve_stack role\n",
        f"puts the lab's own `{name}` here. `serve_lab.ipynb` holds the lab's commands for this stack.\n"]}
    doc = {"cells": [cell], "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                        "name": "python3"}},
           "nbformat": 4, "nbformat_minor": 5}
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()


def standin_files() -> dict[str, bytes]:
    """The stand-in repository's files (path -> bytes), the lab's layout: its weights generated, its
    notebooks saying what they are, input.json and test_image.jpeg from ``experiments/files``."""
    from .standin import STANDIN_NOTE, standin_bytes  # numpy and onnx: only where the repository is made

    readme = (
        "# Rehearsal stand-in of teaching-on-testbeds/serve-system-chi\n\n"
        "Made by serve-system (`serve_system.labrepo`) for rehearsal nodes, which cannot reach GitHub: the\n"
        "lab repository's layout, so the serve_stack role runs the same fetch as on a real node, with\n"
        f"generated weights ({STANDIN_NOTE}). `{STANDIN_MANIFEST}` lists them. Not the lab's repository.\n"
    )
    onnx = standin_bytes("food_classifier_onnx")
    pth = PTH_PLACEHOLDER.encode()
    weights = {"models_staging/food_classifier/1/food11.pth": pth,
               "models_staging/food_classifier_onnx/1/model.onnx": onnx,
               "fastapi_pt/food11.pth": pth, "fastapi_onnx/food11.onnx": onnx}
    assert set(weights) == {f.path for f in WEIGHTS}
    food_input = FOOD_INPUT.read_bytes()
    photo = base64.b64decode(json.loads(food_input)["data"][0]["INPUT_IMAGE"]["content"][0])
    manifest = {"note": STANDIN_NOTE,
                "files": {p: hashlib.sha256(b).hexdigest() for p, b in sorted(weights.items())}}
    return {
        **weights,
        "workspace/triton.ipynb": _notebook("triton.ipynb"),
        "workspace/fastapi.ipynb": _notebook("fastapi.ipynb"),
        "workspace/input.json": food_input,
        "workspace/test_image.jpeg": photo,
        "README.md": readme.encode(),
        STANDIN_MANIFEST: (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode(),
    }


@dataclass(frozen=True)
class StandinRepo:
    """A bare repository in the lab's layout and its one commit."""

    path: Path
    commit: str

    @property
    def url(self) -> str:
        return self.path.as_uri()


def _git(argv: list[str], env: dict[str, str], data: bytes | None = None) -> str:
    from .podman import require_tool

    git = require_tool("git", "git")
    try:
        proc = subprocess.run([git, *argv], env=env, input=data, capture_output=True, check=True, timeout=120)
    except subprocess.CalledProcessError as exc:
        err = exc.stderr.decode(errors="replace").strip().splitlines()
        said = err[-1] if err else f"exit {exc.returncode}"
        raise ServeSystemError(f"git {' '.join(argv)}: {said}") from None
    return proc.stdout.decode().strip()


def _git_env(git_dir: Path, home: Path) -> dict[str, str]:
    """git with no user's or system's configuration (no hooks, signing or templates of theirs)."""
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR")}
    return {**keep, **_IDENTITY, "GIT_DIR": str(git_dir), "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0"}


def build_repo(dest: Path, files: dict[str, bytes]) -> StandinRepo:
    """A new bare repository at ``dest`` (must not exist) holding ``files`` in one commit on
    :data:`BRANCH`, of fixed author, dates and message."""
    with tempfile.TemporaryDirectory(prefix=".lab-", dir=dest.parent) as tmp:
        bare = Path(tmp) / "repo.git"
        env = _git_env(bare, Path(tmp))
        _git(["init", "-q", "--bare", str(bare)], env)
        _git(["symbolic-ref", "HEAD", f"refs/heads/{BRANCH}"], env)
        env["GIT_INDEX_FILE"] = str(Path(tmp) / "index")
        for path, data in sorted(files.items()):
            blob = _git(["hash-object", "-w", "--stdin"], env, data)
            _git(["update-index", "--add", "--cacheinfo", f"100644,{blob},{path}"], env)
        tree = _git(["write-tree"], env)
        commit = _git(["commit-tree", "--no-gpg-sign", tree], env, _MESSAGE.encode())
        _git(["update-ref", f"refs/heads/{BRANCH}", commit], env)
        os.replace(bare, dest)
    return StandinRepo(dest, commit)


def ensure_standin_repo(root: Path) -> StandinRepo:
    """The rehearsal's stand-in of the lab's repository under ``root`` (made once per content: its folder
    is named by the files' digest, so every session and worktree with the same files shares it, and
    the same files always give the same commit)."""
    from .images.build import lock

    files = standin_files()
    digest = hashlib.sha256(b"".join(hashlib.sha256(p.encode() + b"\0" + b).digest()
                                     for p, b in sorted(files.items()))).hexdigest()[:16]
    path = root / digest / f"{REPO_NAME}.git"
    with lock(f"lab-repo-{digest}"):
        if not (path / "refs" / "heads" / BRANCH).is_file():
            if path.exists():
                shutil.rmtree(path)  # an interrupted build of ours: this folder is named by our digest
            path.parent.mkdir(parents=True, exist_ok=True)
            return build_repo(path, files)
        env = _git_env(path, path.parent)
        return StandinRepo(path, _git(["rev-parse", "--verify", f"refs/heads/{BRANCH}^{{commit}}"], env))
