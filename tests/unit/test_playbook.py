"""serve_system.playbook.run_playbook: a real ansible-playbook run through ansible-runner (localhost)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from serve_system.errors import ServeSystemError
from serve_system.playbook import run_playbook

PLAY = """\
- name: Exercise the runner
  hosts: all
  gather_facts: false
  tasks:
    - name: Say hello
      ansible.builtin.debug:
        msg: "hello {{ greeting | default('nobody') }}"
    - name: Write a file
      ansible.builtin.copy:
        content: "{{ greeting | default('nobody') }}\\n"
        dest: "{{ out_dir }}/{{ inventory_hostname }}.txt"
        mode: "0644"
    - name: Fail when asked
      ansible.builtin.fail:
        msg: asked to fail
      when: inventory_hostname in (fail_on | default([]))
"""


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "playbooks").mkdir()
    pb = tmp_path / "playbooks" / "site.yml"
    pb.write_text(PLAY)
    inv = tmp_path / "hosts.yml"
    inv.write_text("all:\n  vars:\n    ansible_connection: local\n"
                   "    ansible_python_interpreter: '{{ ansible_playbook_python }}'\n"
                   "  hosts:\n    box1:\n    box2:\n")
    return pb, inv


def test_run_playbook_progress_and_rc(tmp_path: Path) -> None:
    pb, inv = _setup(tmp_path)
    console = Console(record=True, width=200)
    rc = run_playbook(pb, inv, extravars={"greeting": "world", "out_dir": str(tmp_path), "fail_on": ["box2"]},
                      console=console)
    text = console.export_text()
    assert rc == 2, text  # box2 failed
    assert (tmp_path / "box1.txt").read_text() == "world\n"
    assert "TASK Say hello" in text and "box1: ok" in text
    assert "TASK Write a file" in text and "box1: changed" in text
    assert "box1: skipped" in text  # the fail task
    assert "box2: FAILED - asked to fail" in text
    assert "recap: ok=4, changed=2, failures=1" in text


def test_run_playbook_missing_files(tmp_path: Path) -> None:
    pb, inv = _setup(tmp_path)
    with pytest.raises(ServeSystemError, match="playbook not found"):
        run_playbook(tmp_path / "nope.yml", inv)
    with pytest.raises(ServeSystemError, match="inventory not found"):
        run_playbook(pb, tmp_path / "nope.yml")
