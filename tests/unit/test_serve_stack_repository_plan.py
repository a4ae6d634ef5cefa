"""roles/serve_stack's filter serve_stack_repository_plan: which files the node's model repository needs
(the lab's weights: test_serve_stack_lab.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "serve_stack_repository", REPO / "roles/serve_stack/filter_plugins/serve_stack_repository.py")
assert _spec and _spec.loader
plugin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plugin)
plan = plugin.serve_stack_repository_plan

ROOT = "/opt/serve-system/model_repository"
WANTED = {"m/config.pbtxt": "aa", "m/1/model.onnx": "bb", "models.json": "cc"}


def found(rel: str, checksum: str, mode: str = "0644", uid: int = 0, gid: int = 0) -> dict[str, Any]:
    # the keys ansible.builtin.find returns (get_checksum: true), among others
    return {"path": f"{ROOT}/{rel}", "checksum": checksum, "mode": mode, "uid": uid, "gid": gid, "size": 1}


def test_a_matching_repository_needs_nothing() -> None:
    files = [found(rel, sha) for rel, sha in WANTED.items()]
    assert plan(files, ROOT + "/", WANTED) == {"copy_files": [], "make_dirs": [], "remove_files": []}


def test_an_empty_node_gets_every_file_and_its_directories() -> None:
    out = plan([], ROOT, WANTED)
    assert out["copy_files"] == sorted(WANTED)
    assert out["make_dirs"] == [ROOT, f"{ROOT}/m", f"{ROOT}/m/1"]
    assert out["remove_files"] == []


def test_changed_content_owner_or_mode_is_copied_again() -> None:
    files = [found("m/config.pbtxt", "edited"), found("m/1/model.onnx", "bb", mode="0600"),
             found("models.json", "cc", uid=1000)]
    assert plan(files, ROOT, WANTED)["copy_files"] == ["m/1/model.onnx", "m/config.pbtxt", "models.json"]


def test_leftovers_are_removed_but_kept_paths_stay() -> None:
    files = [found(rel, sha) for rel, sha in WANTED.items()]
    files += [found("m/1/leftover.txt", "x"), found("old/config.pbtxt", "y"), found("m/1/food11.pth", "z")]
    out = plan(files, ROOT, WANTED, [f"{ROOT}/m/1/food11.pth"])
    assert out == {"copy_files": [], "make_dirs": [],
                   "remove_files": [f"{ROOT}/m/1/leftover.txt", f"{ROOT}/old/config.pbtxt"]}


def test_the_role_uses_it_under_its_registered_name() -> None:
    assert plugin.FilterModule().filters()["serve_stack_repository_plan"] is plan
    tasks = (REPO / "roles/serve_stack/tasks/model_repository.yml").read_text()
    assert "serve_stack_repository_plan(" in tasks
