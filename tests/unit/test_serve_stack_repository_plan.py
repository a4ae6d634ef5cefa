"""roles/serve_stack's filters: which files the node's model repository needs (serve_stack_repository_plan),
which weights it fetches and which models get a stand-in (serve_stack_weights)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from serve_system.modelrepo import WEIGHTS

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "serve_stack_repository", REPO / "roles/serve_stack/filter_plugins/serve_stack_repository.py")
assert _spec and _spec.loader
plugin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plugin)
plan = plugin.serve_stack_repository_plan
weights = plugin.serve_stack_weights

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


def test_without_urls_every_deployed_model_with_fetched_weights_gets_its_standin() -> None:
    out = weights({"food_classifier": "", "food_classifier_onnx": ""}, ["food_classifier", "simple"])
    assert out == {"models": ["food_classifier", "food_classifier_onnx"], "standin": ["food_classifier"],
                   "keep": [], "fetch": []}


def test_a_url_fetches_the_weights_file_named_in_python_and_keeps_it() -> None:
    url = "https://example.org/food11.pth?token=x"
    out = weights({"food_classifier": url, "food_classifier_onnx": ""}, ["food_classifier_onnx"])
    assert out["standin"] == ["food_classifier_onnx"]
    assert out["keep"] == [f"food_classifier/1/{WEIGHTS['food_classifier']}"]
    assert out["fetch"] == []  # food_classifier is not deployed: kept on the node, not fetched
    out = weights({"food_classifier": url}, ["food_classifier", "food_classifier_onnx"])
    assert out["fetch"] == [{"model": "food_classifier", "url": url, "path": "food_classifier/1/food11.pth"}]
    assert out["standin"] == ["food_classifier_onnx"]


def test_a_url_for_a_model_without_a_known_weights_file_is_refused() -> None:
    with pytest.raises(ValueError, match="no weights file is known for blip"):
        weights({"blip": "https://example.org/blip.onnx"}, ["blip"])


def test_the_role_uses_them_under_their_registered_names() -> None:
    assert plugin.FilterModule().filters() == {"serve_stack_repository_plan": plan,
                                               "serve_stack_weights": weights}
    tasks = (REPO / "roles/serve_stack/tasks/model_repository.yml").read_text()
    role_vars = (REPO / "roles/serve_stack/vars/main.yml").read_text()
    assert "serve_stack_repository_plan(" in tasks and "serve_stack_weights(" in role_vars
    for name in WEIGHTS.values():  # the file names are Python's alone
        assert name not in tasks and name not in role_vars
