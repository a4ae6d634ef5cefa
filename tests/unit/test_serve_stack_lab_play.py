"""roles/serve_stack/tasks/lab.yml run for real on the controller itself (connection local, a folder of
tmp_path as the stack's root): the lab's repository cloned with git from a local repository in its
layout (the rehearsal's stand-in), its weights checked and copied; a second run changes nothing; a
git-LFS pointer or an unreachable repository stops the play with one line naming the file or the
repository and the fix. (The same tasks on rehearsal nodes: tests/integration/test_site.py.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from serve_system import labrepo

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
LFS = b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"0" * 64 + b"\nsize 9337\n"

PLAY = """\
- name: The lab's repository on a node
  hosts: all
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  tasks:
    - name: Fetch it and check its weights
      ansible.builtin.include_role:
        name: serve_stack
        tasks_from: lab.yml
    - name: Say what the check found
      ansible.builtin.debug:
        msg: "{{ __serve_stack_lab.files | to_json }}"
"""


def _play(tmp_path: Path, nodes: dict[str, tuple[str, str]]) -> tuple[subprocess.CompletedProcess[str], str]:
    """The play on ``nodes`` ({name: (repository URL, commit)}), each the controller itself with its own
    stack folder ``tmp_path/<name>``."""
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    inventory = tmp_path / "hosts.json"
    hosts = {name: {"serve_stack_root": str(tmp_path / name), "serve_stack_lab_repo": url,
                    "serve_stack_lab_commit": commit, "serve_gpus": 0}
             for name, (url, commit) in nodes.items()}
    inventory.write_text(json.dumps({"all": {"hosts": hosts}}))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    run = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), str(play)], cwd=REPO,
                         env=env, capture_output=True, text=True, check=False, timeout=300)
    return run, run.stdout + run.stderr


def _recap(out: str, host: str) -> dict[str, int]:
    m = re.search(rf"{host}\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", out)
    assert m, out[-3000:]
    return dict(zip(("ok", "changed", "unreachable", "failed"), map(int, m.groups()), strict=True))


def _failure(out: str, host: str) -> str:
    """The failed task's message of ``host`` as printed (the yaml callback: ``msg: ...``, maybe quoted)."""
    m = re.search(rf"\[{host}\]: FAILED! => .*?\n\s*msg: (.*?)(?:\n\S|\n\s*$|\Z)", out, re.DOTALL)
    assert m, out[-3000:]
    said = " ".join(m.group(1).split())
    return said[1:-1].replace("''", "'") if said[:1] == said[-1:] == "'" else said


def test_the_lab_is_cloned_checked_and_copied_once(tmp_path: Path) -> None:
    lab = labrepo.ensure_standin_repo(tmp_path / "lab")
    run, out = _play(tmp_path, {"node": (lab.url, lab.commit)})
    assert run.returncode == 0, out[-4000:]
    assert _recap(out, "node")["changed"] == 2  # the clone, the copies
    root = tmp_path / "node"
    head = subprocess.run(["git", "-C", str(root / "lab"), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert head == lab.commit
    files = labrepo.standin_files()
    onnx = files["models_staging/food_classifier_onnx/1/model.onnx"]
    repo = root / "model_repository"
    assert (repo / "food_classifier_onnx/1/model.onnx").read_bytes() == onnx
    assert (repo / "food_classifier/1/model.onnx").read_bytes() == onnx  # no GPU: the ONNX export too
    assert (repo / "food_classifier/1/food11.pth").read_bytes() == labrepo.PTH_PLACEHOLDER.encode()
    assert '"standin": true' in out and '"standin": false' not in out
    again, out = _play(tmp_path, {"node": (lab.url, lab.commit)})
    assert again.returncode == 0 and _recap(out, "node")["changed"] == 0, out[-4000:]
    assert "Clone the lab's repository" not in out  # skipped: the checkout is at the commit, nothing fetched


def test_a_git_lfs_pointer_or_an_unreachable_repository_stops_the_play_with_one_line(tmp_path: Path) -> None:
    files = {**labrepo.standin_files(), "models_staging/food_classifier/1/food11.pth": LFS}
    (tmp_path / "lfs_repo").mkdir()
    lab = labrepo.build_repo(tmp_path / "lfs_repo" / "serve-system-chi.git", files)
    nowhere, commit = f"file://{tmp_path}/nowhere/serve-system-chi.git", "1" * 40
    run, out = _play(tmp_path, {"lfs": (lab.url, lab.commit), "unreachable": (nowhere, commit)})
    assert run.returncode != 0
    assert _failure(out, "lfs") == (
        f"{tmp_path}/lfs/lab/models_staging/food_classifier/1/food11.pth is a git-LFS pointer ({len(LFS)} "
        f"bytes), not the weights: {lab.url} at {lab.commit} keeps this file in git LFS; point "
        "serve_stack_lab_repo at a copy that holds the files themselves (a mirror after `git lfs pull`), or "
        "choose generated stand-ins with -e serve_stack_weights=standin")
    assert not (tmp_path / "lfs" / "model_repository").exists()  # nothing copied
    said = _failure(out, "unreachable")
    assert said.startswith(f"cannot fetch the lab's repository {nowhere} at {commit} into "
                           f"{tmp_path}/unreachable/lab (")
    assert said.endswith(f"): check that the node reaches it (git ls-remote {nowhere}), or set "
                         "serve_stack_lab_repo to a copy it reaches (and serve_stack_lab_commit to a commit "
                         "of that copy)")
