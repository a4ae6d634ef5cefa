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


NODE_PLAY = """\
- name: Commands on the node through the experiment role's action
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  tasks:
    - name: Words a shell would split, expand or quote
      experiment_node:
        argv: "{{ words }}"
      register: words_said
    - name: A file's bytes on stdin
      experiment_node:
        argv: [cat]
        stdin_file: "{{ here }}/bundle.bin"
      register: file_said
    - name: The archive home (base64 on the output)
      experiment_node:
        argv: "{{ fetch }}"
        dest: "{{ here }}/home/.fetch/results.tar.gz"
        too_large_rc: 3
      register: fetched
    - name: One too large for the output
      experiment_node:
        argv: "{{ fetch[:-1] + ['10'] }}"
        dest: "{{ here }}/home/.fetch/large.tar.gz"
        too_large_rc: 3
      register: large
    - name: Never written through a link
      experiment_node:
        argv: "{{ fetch }}"
        dest: "{{ here }}/linked/.fetch/results.tar.gz"
      register: linked
      ignore_errors: true
    - name: A command that fails
      experiment_node:
        argv: [sh, -c, "echo out; echo why it failed >&2; exit 7"]
      register: failed
      ignore_errors: true
    - name: Keep what each said
      ansible.builtin.copy:
        content: "{{ {'words': words_said, 'file': file_said, 'fetched': fetched, 'large': large,
                      'linked': linked, 'failed': failed} | to_json }}"
        dest: "{{ here }}/said.json"
        mode: "0644"
"""


def test_the_roles_node_commands_run_word_for_word_and_bring_files_home_never_through_a_link(
        tmp_path: Path) -> None:
    """``experiment_node`` (the role's every command on the node, over the connection itself): argv
    reaches the command word for word, a controller file's bytes reach its stdin, a records archive comes
    home byte for byte (base64 on the output, written atomically), one too large says so without
    failing (the role fetches it), a folder that is a link out of the host folder is refused, and a
    failing command fails the task with its own stderr."""
    import json

    from serve_system.experiment import runnercall
    from serve_system.node import plans

    words = ["printf", "%s\\n", "it's", "two words", "$(touch pwned)", "a;b", "", "*", "\\n"]
    bundle = bytes(range(256)) * 40
    (tmp_path / "bundle.bin").write_bytes(bundle)
    node = tmp_path / "node"
    node.mkdir()
    archive = os.urandom(300_000)
    (node / "results.tar.gz").write_bytes(archive)
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / ".fetch").symlink_to(outside)
    fetch = runnercall.fetch_argv(plans.RunnerSettings(node_dir=str(node)))
    play = tmp_path / "play.yml"
    play.write_text(NODE_PLAY)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_ACTION_PLUGINS=str(REPO / "roles" / "experiment" / "action_plugins"))
    extra = json.dumps({"words": words, "here": str(tmp_path), "fetch": fetch})
    run = subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", str(play), "-e", extra],
                         cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    said = json.loads((tmp_path / "said.json").read_text())
    assert said["words"]["stdout"].split("\n") == words[2:] and not (tmp_path / "pwned").exists()
    assert said["file"]["stdout"].encode("latin-1", "replace")[:10] == bundle[:10]
    assert (tmp_path / "home" / ".fetch" / "results.tar.gz").read_bytes() == archive
    assert said["fetched"]["size"] == len(archive) and said["fetched"]["stdout"] == ""
    assert said["large"].get("too_large") and not said["large"].get("failed")
    assert not (tmp_path / "home" / ".fetch" / "large.tar.gz").exists()
    assert said["linked"]["failed"] and "link" in said["linked"]["msg"]
    assert list(outside.iterdir()) == []
    assert said["failed"]["failed"] and said["failed"]["rc"] == 7
    assert said["failed"]["msg"] == "why it failed" and said["failed"]["stdout"] == "out"


CUDA_PLAY = """\
- name: The CUDA check of a GPU node whose Docker does not answer
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
    serve_gpus: 2
  tasks:
    - name: Run serve_stack's CUDA check
      ansible.builtin.include_role:
        name: serve_stack
        tasks_from: cuda_check.yml
      vars:
        __serve_stack_cuda_image: serve-system-triton-gpu:24.10-test
"""


def test_the_cuda_check_stops_the_play_with_one_line_when_its_container_cannot_run(tmp_path: Path) -> None:
    """roles/serve_stack/tasks/cuda_check.yml end to end on the controller: the toolkit's version read from
    an ``nvidia-ctk`` first on PATH (printing as NVIDIA's does), the check container asked of a Docker
    that does not answer (DOCKER_HOST: a socket nobody listens on), the verdict's one line failing the
    play. A container that runs needs a GPU node (docs/real-node.md)."""
    ctk = tmp_path / "bin" / "nvidia-ctk"
    ctk.parent.mkdir()
    ctk.write_text("#!/bin/sh\necho 'NVIDIA Container Toolkit CLI version 1.19.0'\necho 'commit: 3f2a8e1'\n")
    ctk.chmod(0o755)
    play = tmp_path / "play.yml"
    play.write_text(CUDA_PLAY)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=f"{ctk.parent}{os.pathsep}{os.environ.get('PATH', '')}",
               DOCKER_HOST=f"unix://{tmp_path / 'no-docker.sock'}")
    run = subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", str(play)], cwd=REPO, env=env,
                         capture_output=True, text=True, check=False, timeout=300)
    out = " ".join((run.stdout + run.stderr).split())
    assert run.returncode != 0, out
    assert ("localhost: CUDA does not initialize in a container of serve-system-triton-gpu:24.10-test with "
            "the stack's GPU request (driver nvidia, count all, capabilities gpu; NVIDIA Container Toolkit "
            "1.19.0): the container did not run (Error connecting") in out
    assert "fix: start Docker (sudo systemctl start docker; role docker does) and run site.yml again" in out
