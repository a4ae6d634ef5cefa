"""Playbooks and roles: syntax, ansible-lint (production profile), argument checks without nodes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from serve_system.provision.nodes import Node, write_inventory

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


def _fresh_clone(dest: Path) -> Path:
    """The working tree as a fresh clone of it holds it: tracked and new (not ignored) files, in a new git
    repository; nothing generated (no inventory/hosts.yml, no .venv)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, capture_output=True, check=True)
    for rel in filter(None, listed.stdout.decode().split("\0")):
        src = REPO / rel
        if src.exists() or src.is_symlink():  # not deleted in the working tree
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel, follow_symlinks=False)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    return dest


def _write_rehearsal_inventory(repo: Path) -> None:
    """inventory/hosts.yml and known_hosts as the README's main job (scripts/rehearse.sh: local rehearsal
    nodes, two here) leaves them."""
    from serve_system.images.build import StackImage
    from serve_system.labrepo import StandinRepo
    from serve_system.provision.local import node_vars_for

    stack = {k: StackImage(k, f"localhost/serve-system-{k}:1",
                           Path(f"/root/.cache/serve-system/images/{k}.tar"))
             for k in ("triton", "client", "fastapi")}
    lab = StandinRepo(Path("/root/.cache/serve-system/lab/0/serve-system-chi.git"), "f" * 40)
    nodes = [Node(name=f"serve-system-rehearsal-{i}", address="127.0.0.1", user="cc", port=2200 + i,
                  key_path=str(repo / "inventory" / "rehearsal.key"), provider="local",
                  provider_ids={"container": f"serve-system-rehearsal-{i}",
                                "image": "localhost/serve-system-node:1"},
                  vars=node_vars_for(stack, lab)) for i in (1, 2)]
    known_hosts = repo / "inventory" / "known_hosts"
    known_hosts.write_text("[127.0.0.1]:2201 ssh-ed25519 AAAA\n[127.0.0.1]:2202 ssh-ed25519 AAAA\n")
    write_inventory(nodes, repo / "inventory" / "hosts.yml", known_hosts)


@pytest.mark.parametrize("state", ["fresh clone", "after the main job"])
def test_ansible_lint_production_profile(tmp_path: Path, state: str) -> None:
    """Plain `ansible-lint` (no arguments, no ANSIBLE_* variables) at the root of a fresh clone passes, as a
    newcomer runs it: before and after launch has written inventory/hosts.yml. .ansible-lint sets the
    production profile; experiments/ and inventory/ are linted along with playbooks/ and roles/."""
    repo = _fresh_clone(tmp_path / "clone")
    if state == "after the main job":
        _write_rehearsal_inventory(repo)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    # as after `source .venv/bin/activate` (README); NO_COLOR keeps the output plain
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", NO_COLOR="1")
    proc = subprocess.run([str(BIN / "ansible-lint")], cwd=repo, env=env, capture_output=True, text=True,
                          check=False, timeout=600)
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "Profile 'production' was required, and it passed" in out, out[-2000:]


def _default_inventory_run(tmp_path: Path, *args: str, hosts_yml: str | None,
                           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``ansible-playbook`` without -i, so with ansible.cfg's inventory, in a copy of ansible.cfg and
    inventory/ whose hosts.yml is ``hosts_yml`` (None: missing, as in a fresh clone)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REPO / "ansible.cfg", tmp_path / "ansible.cfg")
    shutil.copytree(REPO / "inventory", tmp_path / "inventory",
                    ignore=shutil.ignore_patterns("hosts.yml", "known_hosts", "*.key", "*.key.pub",
                                                  ".rehearsal"))
    if hosts_yml is not None:
        (tmp_path / "inventory" / "hosts.yml").write_text(hosts_yml)
    (tmp_path / "play.yml").write_text(
        "- name: Reach the nodes\n  hosts: serve_nodes\n  gather_facts: false\n  tasks:\n"
        "    - name: Nothing\n      ansible.builtin.meta: noop\n"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    return subprocess.run(
        [str(BIN / "ansible-playbook"), *args, "play.yml"],
        cwd=tmp_path, env={**base, "ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
                           **(env or {})},
        capture_output=True, text=True, check=False, timeout=120,
    )


def test_default_inventory_without_hosts_yml_is_an_error(tmp_path: Path) -> None:
    """ansible.cfg lists inventory/empty.yml after hosts.yml (for ansible-lint); a real run still stops."""
    missing = _default_inventory_run(tmp_path / "missing", "--list-hosts", hosts_yml=None)
    assert missing.returncode != 0
    assert f"Completely failed to parse inventory source {tmp_path / 'missing' / 'inventory' / 'hosts.yml'}" \
        in missing.stderr, missing.stdout + missing.stderr
    broken = _default_inventory_run(tmp_path / "broken", "--list-hosts", hosts_yml="all:\n  hosts: [\n")
    assert broken.returncode != 0
    assert "Completely failed to parse inventory source" in broken.stderr, broken.stdout + broken.stderr
    # the one setting ansible-lint relaxes for its syntax checks: then empty.yml alone is enough
    lint = _default_inventory_run(tmp_path / "lint", "--syntax-check", hosts_yml=None,
                                  env={"ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "False"})
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_default_inventory_hosts_are_those_of_hosts_yml(tmp_path: Path) -> None:
    inv = tmp_path / "hosts.yml"
    write_inventory([Node(name="node-a", address="127.0.0.1", user="cc", key_path="/k", port=2201)], inv)
    proc = _default_inventory_run(tmp_path / "repo", "--list-hosts", hosts_yml=inv.read_text())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "hosts (1):" in proc.stdout and "node-a" in proc.stdout, proc.stdout


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
    ("serve_stack", "serve_stack_wait_timeout", "soon"),
    ("serve_stack", "serve_stack_onnx_serving", "tensorrt"),
])
def test_wrong_type_or_choice_is_rejected_by_argument_specs(tmp_path: Path, role: str, var: str,
                                                            value: str) -> None:
    proc = _run_role(tmp_path, role, {var: value})
    assert proc.returncode != 0
    assert var in proc.stdout
    assert "argument" in proc.stdout.lower() or "validation" in proc.stdout.lower()


def test_a_required_role_variable_left_out_stops_the_role_at_its_argument_check(tmp_path: Path) -> None:
    """experiment_spec is required and, by the rule of serve_system.roledocs, has no default anywhere: a play
    that forgets it stops at Ansible's argument check, naming it, before any task of the role."""
    proc = _run_role(tmp_path, "experiment", {})
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "missing required arguments: experiment_spec" in out, out
    assert "TASK [experiment : Validating arguments against arg spec 'main'" in proc.stdout
    assert proc.stdout.count("TASK [") == 1, proc.stdout
