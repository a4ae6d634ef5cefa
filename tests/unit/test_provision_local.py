from __future__ import annotations

from pathlib import Path

import pytest

from serve_system.errors import ServeSystemError
from serve_system.images.build import StackImage
from serve_system.labrepo import StandinRepo
from serve_system.provision import local as rehearsal
from serve_system.provision.base import is_ours, server_names


def test_state_dir_is_next_to_the_inventory(tmp_path: Path) -> None:
    assert rehearsal.state_dir(tmp_path / "hosts.yml") == tmp_path / ".rehearsal"
    assert rehearsal.state_dir(tmp_path) == tmp_path / ".rehearsal"


def test_key_is_generated_once(tmp_path: Path) -> None:
    key = rehearsal.ensure_key(tmp_path / "hosts.yml")
    first = key.read_bytes()
    assert key.with_suffix(".pub").read_text().startswith("ssh-ed25519 ")
    assert rehearsal.ensure_key(tmp_path / "hosts.yml").read_bytes() == first


def test_node_names_are_the_same_for_both_providers() -> None:
    assert server_names("rh", 3) == ["rh-1", "rh-2", "rh-3"]
    assert server_names("rh", 1) == ["rh"]
    with pytest.raises(ServeSystemError, match="at least 1"):
        server_names("rh", 0)


def test_is_ours_matches_numbers_and_students_not_longer_prefixes() -> None:
    assert is_ours("rh", "rh") and is_ours("rh-2", "rh") and is_ours("rh-alice", "rh")
    assert not is_ours("rh-x-1", "rh") and not is_ours("rhx-1", "rh") and not is_ours("rh-", "rh")


def test_node_vars_adapt_the_roles(tmp_path: Path) -> None:
    stack = {k: StackImage(k, f"localhost/serve-system-{k}:abc", tmp_path / f"{k}.tar")
             for k in ("triton", "client", "fastapi")}
    lab = StandinRepo(tmp_path / "lab" / "serve-system-chi.git", "f" * 40)
    hv = rehearsal.node_vars_for(stack, lab)
    # the lab's repository: the same fetch as on a real node, from the local stand-in (a file:// URL)
    assert hv["serve_stack_lab_repo"] == f"file://{tmp_path}/lab/serve-system-chi.git"
    assert hv["serve_stack_lab_commit"] == "f" * 40
    assert hv["docker_source"] == "distro"
    assert hv["docker_storage_driver"] == "overlay2"
    assert hv["serve_stack_onnx_serving"] == "python_shim"
    assert hv["serve_stack_triton_image"] == "localhost/serve-system-triton:abc"
    assert hv["serve_stack_fastapi_image"] == "localhost/serve-system-fastapi:abc"
    assert {a["image"] for a in hv["serve_stack_image_archives"]} == {
        "localhost/serve-system-triton:abc", "localhost/serve-system-client:abc",
        "localhost/serve-system-fastapi:abc"}
    assert all(a["remote_src"] for a in hv["serve_stack_image_archives"])
