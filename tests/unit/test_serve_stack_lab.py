"""The lab's repository as the serve stack uses it: what a node does with it (serve_system.labrepo.node_plan,
filters of roles/serve_stack), the node-side check of its weights (roles/serve_stack/library/
serve_stack_lab_files.py: missing, empty, a link or a git-LFS pointer refused in one line; checksums; copies
only where they differ) and the rehearsal's stand-in of it (a bare repository in the lab's layout whose one
commit is the same wherever and whenever it is made)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from serve_system import labrepo

REPO = Path(__file__).resolve().parents[2]
ROOT = "/opt/serve-system"
COMMIT = "012a8b946b432f62e120d315ae974c54c303e9da"
LFS = (b"version https://git-lfs.github.com/spec/v1\n"
       b"oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 9\n")


def _load(rel: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / rel)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


node = _load("roles/serve_stack/library/serve_stack_lab_files.py", "serve_stack_lab_files")
filters = _load("roles/serve_stack/filter_plugins/serve_stack_repository.py", "serve_stack_repository")


# ------------------------------------------------------------------------------------ the node's plan

def test_the_labs_weights_are_checked_and_copied_where_the_stack_serves_them() -> None:
    deployed = ["food_classifier", "food_classifier_onnx", "blip", "onnx-mnist-cpu"]
    gpu = labrepo.node_plan("lab", 2, deployed, deployed[:2], ROOT)
    repo = f"{ROOT}/model_repository"
    assert gpu["files"] == [
        {"path": "models_staging/food_classifier/1/food11.pth",
         "dest": f"{repo}/food_classifier/1/food11.pth"},
        {"path": "models_staging/food_classifier_onnx/1/model.onnx",
         "dest": f"{repo}/food_classifier_onnx/1/model.onnx"},
        {"path": "fastapi_pt/food11.pth", "dest": ""},  # read in place by the FastAPI endpoint
        {"path": "fastapi_onnx/food11.onnx", "dest": ""}]
    assert gpu["keep"] == [f"{repo}/food_classifier/1/food11.pth",
                           f"{repo}/food_classifier_onnx/1/model.onnx"]
    assert gpu["standin"] == [] and gpu["standin_chosen"] is False
    assert gpu["standin_unless_given"] == ["blip", "onnx-mnist-cpu"]  # no weights of the lab's
    assert gpu["fastapi"] == {"onnx": "/lab/fastapi_onnx/food11.onnx",
                              "pytorch": "/lab/fastapi_pt/food11.pth"}
    assert gpu["checkout"] == f"{ROOT}/lab"
    assert [w["dest"] for w in gpu["workspace"]] == ["triton.ipynb", "fastapi.ipynb", "input.json",
                                                      "test_image.jpeg"]
    assert gpu["workspace"][0] == {"src": f"{ROOT}/lab/workspace/triton.ipynb", "dest": "triton.ipynb",
                                   "remote_src": True}
    # without GPUs food_classifier also gets the lab's ONNX export (a Triton without torch serves that)
    cpu = labrepo.node_plan("lab", 0, deployed, deployed[:2], ROOT + "/")
    assert {"path": "models_staging/food_classifier_onnx/1/model.onnx",
            "dest": f"{repo}/food_classifier/1/model.onnx"} in cpu["files"]
    assert f"{repo}/food_classifier/1/model.onnx" in cpu["keep"]


def test_chosen_stand_ins_fetch_no_weights() -> None:
    out = labrepo.node_plan("standin", 1, ["food_classifier", "blip"], ["food_classifier"], ROOT)
    assert out["files"] == [] and out["keep"] == [] and out["fastapi"] == {}
    assert out["standin"] == ["food_classifier"] and out["standin_unless_given"] == ["blip"]
    assert out["standin_chosen"] is True
    assert labrepo.render_options(out, None, "u", COMMIT) == [
        "--standin=food_classifier", "--standin-unless-given=blip", "--standin-chosen"]
    with pytest.raises(ValueError, match="serve_stack_weights is 'random': give lab"):
        labrepo.node_plan("random", 1, [], [], ROOT)


def test_the_render_gets_the_nodes_checksums_and_the_record_lists_every_weights_file() -> None:
    plan = labrepo.node_plan("lab", 1, ["food_classifier"], ["food_classifier"], ROOT)
    checked = {"fastapi_pt/food11.pth": {"sha256": "a" * 64, "size": 3, "standin": False}}
    opts = filters.serve_stack_render_options(plan, checked, "https://x/serve-system-chi.git", COMMIT)
    assert opts[0] == "--lab-weights"
    assert json.loads(opts[1]) == {"repository": "https://x/serve-system-chi.git", "commit": COMMIT,
                                   "files": checked}
    rendered = {"blip/1/model.onnx": "b" * 64, "blip/config.pbtxt": "c" * 64}
    record = filters.serve_stack_weights_record("lab", "https://x", COMMIT, checked, rendered)
    assert record == {"weights": "lab", "repository": "https://x", "commit": COMMIT,
                      "files": [{"path": "fastapi_pt/food11.pth", "sha256": "a" * 64, "size": 3,
                                 "standin": False}],
                      "generated": {"blip/1/model.onnx": "b" * 64}}


def test_a_fetch_that_fails_is_one_line_with_its_fix() -> None:
    unreachable = {"msg": "Failed to init/clone https://github.com/teaching-on-testbeds/serve-system-chi.git",
                   "stderr": "Cloning into '/opt/serve-system/lab'...\nfatal: unable to access "
                             "'https://github.com/teaching-on-testbeds/serve-system-chi.git/': Could not "
                             "resolve host: github.com\n"}
    line = filters.serve_stack_lab_fetch_error(unreachable, {"skipped": True}, "https://github.com/x.git",
                                               COMMIT, "/opt/serve-system/lab")
    assert line == (f"cannot fetch the lab's repository https://github.com/x.git at {COMMIT} into "
                    "/opt/serve-system/lab (fatal: unable to access 'https://github.com/teaching-on-testbeds/"
                    "serve-system-chi.git/': Could not resolve host: github.com): check that the node "
                    "reaches it (git ls-remote https://github.com/x.git), or set serve_stack_lab_repo to a "
                    "copy it reaches (and serve_stack_lab_commit to a commit of that copy)")
    no_commit = {"msg": "Failed to checkout 0123", "stderr": "fatal: reference is not a tree: 0123\n"}
    assert filters.serve_stack_lab_fetch_error(no_commit, {}, "u", COMMIT, "/x").startswith(
        f"the lab's repository u has no commit {COMMIT} (fatal: reference is not a tree: 0123): set "
        "serve_stack_lab_commit to a full commit of it")
    apt = {"msg": "No package matching 'git' is available", "failed_when_result": False}
    no_git = {"msg": "Failed to find required executable \"git\" in paths: /usr/bin:/bin"}
    assert filters.serve_stack_lab_fetch_error(no_git, apt, "u", COMMIT, "/x") == (
        "cannot install git, which fetches the lab's repository (No package matching 'git' is available): "
        "install git on the node (apt-get install git), then run the play again")
    assert "\n" not in filters.serve_stack_lab_fetch_error({"msg": "a\nb\nc"}, {}, "u", COMMIT, "/x")


def test_the_role_calls_them_by_their_registered_names() -> None:
    names = set(filters.FilterModule().filters())
    assert {"serve_stack_lab_plan", "serve_stack_lab_fetch_error", "serve_stack_render_options",
            "serve_stack_weights_record"} <= names
    tasks = "".join(p.read_text() for p in (REPO / "roles/serve_stack/tasks").glob("*.yml"))
    tasks += (REPO / "roles/serve_stack/vars/main.yml").read_text()
    for name in names:
        assert f"{name}(" in tasks, name
    for f in labrepo.WEIGHTS:  # the lab's file names are Python's alone
        assert f.path not in tasks


# ------------------------------------------------------------------------- the node-side check

def _checkout(tmp_path: Path, files: dict[str, bytes]) -> Path:
    root = tmp_path / "lab"
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def _run(root: Path, files: list[dict[str, str]], mode: int = 0o644) -> dict[str, Any]:
    result: dict[str, Any] = node.run(str(root), "https://github.com/t/serve-system-chi.git", COMMIT, files,
                                      mode)
    return result


def test_every_file_is_checksummed_and_copied_once(tmp_path: Path) -> None:
    root = _checkout(tmp_path, {"a/food11.pth": b"torch weights", "b/model.onnx": b"onnx weights"})
    dest = tmp_path / "repo" / "m" / "1" / "food11.pth"
    files = [{"path": "a/food11.pth", "dest": str(dest)}, {"path": "b/model.onnx", "dest": ""}]
    out = _run(root, files)
    assert out["changed"] and out["copied"] == [str(dest)]
    assert out["files"] == {
        "a/food11.pth": {"sha256": hashlib.sha256(b"torch weights").hexdigest(), "size": 13,
                         "standin": False},
        "b/model.onnx": {"sha256": hashlib.sha256(b"onnx weights").hexdigest(), "size": 12, "standin": False}}
    assert dest.read_bytes() == b"torch weights" and oct(dest.stat().st_mode & 0o777) == "0o644"
    assert _run(root, files)["changed"] is False  # the same bytes and mode: nothing written
    dest.chmod(0o600)
    assert _run(root, files)["copied"] == [str(dest)] and oct(dest.stat().st_mode & 0o777) == "0o644"
    dest.write_bytes(b"edited on the node")
    assert _run(root, files)["changed"] and dest.read_bytes() == b"torch weights"
    assert not [p for p in dest.parent.iterdir() if p.name.startswith(".lab-")]  # no temporary left


@pytest.mark.parametrize(("files", "says"), [
    ({}, ("lab/a/food11.pth is missing: https://github.com/t/serve-system-chi.git at "
          f"{COMMIT} has no such file: set serve_stack_lab_commit to a commit of the lab's repository that "
          "holds it, or choose generated stand-ins with -e serve_stack_weights=standin")),
    ({"a/food11.pth": LFS}, (f"lab/a/food11.pth is a git-LFS pointer ({len(LFS)} bytes), not the weights: "
                             f"https://github.com/t/serve-system-chi.git at {COMMIT} keeps this file in git "
                             "LFS; point serve_stack_lab_repo at a copy that holds the files themselves (a "
                             "mirror after `git lfs pull`), or choose generated stand-ins with -e "
                             "serve_stack_weights=standin")),
    ({"a/food11.pth": b""}, "lab/a/food11.pth is empty in https://github.com/t/serve-system-chi.git at"),
])
def test_a_file_that_cannot_be_served_stops_the_play_in_one_line(tmp_path: Path, files: dict[str, bytes],
                                                                 says: str) -> None:
    root = _checkout(tmp_path, {"other": b"x", **files})
    dest = tmp_path / "repo" / "food11.pth"
    with pytest.raises(node.LabFileError) as err:
        _run(root, [{"path": "a/food11.pth", "dest": str(dest)}])
    assert says in str(err.value) and "\n" not in str(err.value)
    assert not dest.exists()  # nothing copied when a file is refused


def test_links_and_paths_outside_the_checkout_are_refused_and_the_others_counted(tmp_path: Path) -> None:
    root = _checkout(tmp_path, {"real.pth": b"w", "b/model.onnx": LFS})
    (root / "a").mkdir()
    os.symlink(root / "real.pth", root / "a" / "food11.pth")
    files = [{"path": "a/food11.pth", "dest": ""}, {"path": "b/model.onnx", "dest": ""}]
    with pytest.raises(node.LabFileError, match=r"a/food11.pth is not a regular file \(a link.* \(and 1 more "
                                                r"file\(s\) of the lab's\)$"):
        _run(root, files)
    with pytest.raises(node.LabFileError, match="../x: not a path inside the lab's checkout"):
        _run(root, [{"path": "../x", "dest": ""}])


def test_a_stand_in_repositorys_files_are_marked_only_with_their_own_checksum(tmp_path: Path) -> None:
    manifest = {"note": "generated", "files": {"a.onnx": hashlib.sha256(b"gen").hexdigest(),
                                               "b.onnx": hashlib.sha256(b"other").hexdigest()}}
    root = _checkout(tmp_path, {"a.onnx": b"gen", "b.onnx": b"replaced",
                                node.STANDIN_MANIFEST: json.dumps(manifest).encode()})
    out = _run(root, [{"path": "a.onnx", "dest": ""}, {"path": "b.onnx", "dest": ""}])
    assert out["files"]["a.onnx"]["standin"] is True and out["files"]["b.onnx"]["standin"] is False


# ------------------------------------------------------------------- the rehearsal's stand-in repository

def _git(*argv: str, cwd: Path | None = None) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    return subprocess.run(["git", *argv], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout


def test_the_stand_in_repository_has_the_labs_layout_and_the_same_commit_wherever_it_is_made(
        tmp_path: Path) -> None:
    one = labrepo.ensure_standin_repo(tmp_path / "one")
    two = labrepo.ensure_standin_repo(tmp_path / "two")
    assert one.commit == two.commit and labrepo.COMMIT.fullmatch(one.commit)
    assert one.path != two.path and one.url == one.path.as_uri()
    assert labrepo.ensure_standin_repo(tmp_path / "one") == one  # made once: found again, not rebuilt
    # cloned as the role clones it, at its commit: the lab's layout, its weights marked as generated
    clone = tmp_path / "clone"
    _git("clone", "-q", one.url, str(clone))
    assert _git("rev-parse", "HEAD", cwd=clone).strip() == one.commit
    assert _git("log", "-1", "--format=%an <%ae> %aI", cwd=clone).strip() == \
        "serve-system <serve-system@localhost> 2025-01-01T00:00:00+00:00"
    wanted = labrepo.standin_files()
    assert {f.path for f in labrepo.WEIGHTS} | set(labrepo.WORKSPACE) <= set(wanted)
    for rel, data in wanted.items():
        assert (clone / rel).read_bytes() == data, rel
    out = _run(clone, [{"path": f.path, "dest": ""} for f in labrepo.WEIGHTS])
    assert all(info["standin"] for info in out["files"].values())
    assert (clone / "models_staging/food_classifier/1/food11.pth").read_text().startswith(
        "serve-system rehearsal stand-in: NOT a PyTorch model.")
    assert (clone / "workspace/test_image.jpeg").read_bytes()[:3] == b"\xff\xd8\xff"  # a JPEG
