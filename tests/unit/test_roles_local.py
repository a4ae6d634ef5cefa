"""Role tasks that read the node and change nothing, run on the controller itself (connection local).

The NVIDIA driver check (roles/nvidia_container_toolkit/tasks/driver.yml) of a node whose GPU is there
but whose driver is not: an ``nvidia-smi`` first on PATH fails as NVIDIA's does without a driver."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SMI_FAILS = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
             "Make sure that the latest NVIDIA driver is installed and running.")

PLAY = """\
- name: The driver check of a GPU node
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
    __nvidia_container_toolkit_gpus: 2
  tasks:
    - name: Run the role's driver check
      ansible.builtin.include_role:
        name: nvidia_container_toolkit
        tasks_from: driver.yml
"""


def _driver_check(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(f"#!/bin/sh\necho \"{SMI_FAILS}\"\nexit 9\n")
    smi.chmod(0o755)
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=f"{smi.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", str(play), *extra], cwd=REPO,
                          env=env, capture_output=True, text=True, check=False, timeout=300)


def test_a_gpu_without_a_working_driver_fails_and_says_why(tmp_path: Path) -> None:
    run = _driver_check(tmp_path)
    out = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0, out
    assert "localhost has 2 NVIDIA GPU(s) but nvidia-smi fails (NVIDIA-SMI has failed" in out
    assert "set nvidia_container_toolkit_require_driver=false to skip" in out


def test_require_driver_false_warns_and_skips(tmp_path: Path) -> None:
    run = _driver_check(tmp_path, "-e", '{"nvidia_container_toolkit_require_driver": false}')
    out = " ".join((run.stdout + run.stderr).split())
    assert run.returncode == 0, out
    # (the yaml callback doubles the apostrophe of "couldn't" in its quoted output)
    assert "WARNING: localhost has 2 NVIDIA GPU(s) but nvidia-smi fails (NVIDIA-SMI has failed" in out
    assert "the latest NVIDIA driver is installed and running.): skipping" in out
    assert "skipping the NVIDIA container toolkit (nvidia_container_toolkit_require_driver is false)" in out
