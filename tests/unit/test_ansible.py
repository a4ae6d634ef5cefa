"""Playbooks and roles: syntax, ansible-lint (production profile), argument checks without nodes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = sorted((REPO / "playbooks").glob("*.yml"))
BIN = Path(sys.executable).parent


def _env() -> dict[str, str]:
    return dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")


@pytest.mark.parametrize("playbook", PLAYBOOKS, ids=lambda p: p.name)
def test_syntax_check(playbook: Path) -> None:
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "--syntax-check", "-i", str(REPO / "inventory" / "hosts.example.yml"),
         str(playbook)],
        cwd=REPO, env=_env(), capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ansible_lint_production_profile() -> None:
    proc = subprocess.run(
        [str(BIN / "ansible-lint"), "--profile", "production", "--offline", "playbooks", "roles"],
        # ansible.cfg makes a missing inventory an error; ansible-lint's syntax checks get the example one
        cwd=REPO, env={**_env(), "ANSIBLE_INVENTORY": str(REPO / "inventory" / "hosts.example.yml")}, capture_output=True, text=True, check=False, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]


def _run_role(tmp_path: Path, role: str, extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The role's first tasks (its checks) on localhost; they fail before anything is changed."""
    play = tmp_path / "play.yml"
    play.write_text(
        f"- hosts: localhost\n  gather_facts: false\n  roles:\n    - role: {role}\n"
    )
    args = [arg for k, v in extra.items() for arg in ("-e", f"{k}={v}")]
    return subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(play), "--check", *args],
        cwd=REPO, env=dict(_env(), ANSIBLE_ROLES_PATH=str(REPO / "roles")), capture_output=True, text=True,
        check=False, timeout=300,
    )


@pytest.mark.parametrize("role,var", [
    ("docker", "docker_sorce"), ("nvtop", "nvtop_package"), ("serve_stack", "serve_stack_modell"),
    ("nvidia_container_toolkit", "nvidia_container_toolkit_verfy"),
])
def test_unknown_role_variable_is_named(tmp_path: Path, role: str, var: str) -> None:
    proc = _run_role(tmp_path, role, {var: "x"})
    assert proc.returncode != 0
    assert f"unknown variable(s) {var} for role {role}" in proc.stdout


@pytest.mark.parametrize("role,var,value", [
    ("docker", "docker_source", "snap"), ("docker", "docker_cgroupfs_driver", "maybe"),
    ("serve_stack", "serve_stack_wait_timeout", "soon"), ("serve_stack", "serve_stack_onnx_serving", "tensorrt"),
])
def test_wrong_type_or_choice_is_rejected_by_argument_specs(tmp_path: Path, role: str, var: str, value: str) -> None:
    proc = _run_role(tmp_path, role, {var: value})
    assert proc.returncode != 0
    assert var in proc.stdout
    assert "argument" in proc.stdout.lower() or "validation" in proc.stdout.lower()
