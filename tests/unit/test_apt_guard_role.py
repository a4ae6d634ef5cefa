"""Role apt_guard, run by ansible-playbook on this machine over a directory laid out as /etc/apt.

The roles docker, nvidia_container_toolkit and nvtop import it before their first apt task; here it runs
alone (connection local, ``apt_guard_etc_apt`` a temporary directory), so every case of a node set up by
hand is played for real: the find, the reads, the move aside, the stop, and the second run that
changes nothing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from test_aptwait import held
from treesnap import snapshot

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DOCKER = "https://download.docker.com/linux/ubuntu"
NVIDIA_LIST = "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)"
NVIDIA = "https://nvidia.github.io/libnvidia-container/stable/deb/amd64"
KEYRING = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"

#: the lab's notebook's list, with its experimental line enabled
EXPERIMENTAL_LIST = "https://nvidia.github.io/libnvidia-container/experimental/deb/$(ARCH)"
NOTEBOOK = f"deb [signed-by={KEYRING}] {NVIDIA_LIST} /\ndeb [signed-by={KEYRING}] {EXPERIMENTAL_LIST} /\n"
#: the play's own NVIDIA file, as deb822_repository writes it on a first run
OWN_NVIDIA = (f"X-Repolib-Name: nvidia-container-toolkit\nTypes: deb\nURIs: {NVIDIA}\nSuites: /\n"
              "Signed-By: /etc/apt/keyrings/nvidia-container-toolkit.asc\n")
UBUNTU = "deb http://archive.ubuntu.com/ubuntu noble main\n"


def _play(tmp_path: Path, etc_apt: Path, repositories: list[str],
          **more: Any) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of the role on this machine, its lock files in ``tmp_path``
    (not this machine's apt)."""
    play = tmp_path / "guard.yml"
    play.write_text("- hosts: localhost\n  gather_facts: false\n  roles:\n    - role: apt_guard\n")
    extra = {"apt_guard_etc_apt": str(etc_apt), "apt_guard_repositories": repositories,
             "apt_guard_locks": [str(tmp_path / "lock-frontend"), str(tmp_path / "lock")],
             "ansible_python_interpreter": sys.executable, **more}
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_ROLES_PATH=str(REPO / "roles"), ANSIBLE_STDOUT_CALLBACK="default",
               PYTHONUNBUFFERED="1")
    return ([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(play),
             "-e", json.dumps(extra)], env)


def _run(tmp_path: Path, etc_apt: Path, repositories: list[str],
         **more: Any) -> subprocess.CompletedProcess[str]:
    argv, env = _play(tmp_path, etc_apt, repositories, **more)
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False, timeout=300)


def _changed(out: str) -> int:
    recap = out[out.rindex("PLAY RECAP"):]
    return int(recap.split("changed=")[1].split()[0])





def test_a_notebook_list_added_after_a_first_run_is_moved_aside_by_the_first_role_with_apt(
        tmp_path: Path) -> None:
    """The reverse order: the play's NVIDIA file is there, the notebook's list (experimental on) came
    later. The docker role's guard (adding only Docker's repository) moves it aside and says that the
    experimental channel went with it; unrelated files are left as they are; a second run changes
    nothing."""
    etc = tmp_path / "apt"
    d = etc / "sources.list.d"
    d.mkdir(parents=True)
    (d / "nvidia-container-toolkit.sources").write_text(OWN_NVIDIA)
    (d / "nvidia-container-toolkit.list").write_text(NOTEBOOK)
    (d / "docker.list").write_text(
        f"deb [arch=amd64 signed-by=/usr/share/keyrings/docker.gpg] {DOCKER} noble stable\n")
    (d / "ubuntu.list").write_text(UBUNTU)
    (etc / "sources.list").write_text(UBUNTU)

    first = _run(tmp_path, etc, [DOCKER])
    assert first.returncode == 0, first.stdout + first.stderr
    names = sorted(p.name for p in d.iterdir())
    assert names == ["docker.list.disabled", "nvidia-container-toolkit.list.disabled",
                     "nvidia-container-toolkit.sources", "ubuntu.list"], names
    assert (d / "nvidia-container-toolkit.list.disabled").read_text() == NOTEBOOK  # moved, not edited
    assert (d / "ubuntu.list").read_text() == UBUNTU and (etc / "sources.list").read_text() == UBUNTU
    out = " ".join(first.stdout.replace("''", "'").split())  # the yaml callback folds and quotes
    assert f"{d}/nvidia-container-toolkit.list defined {NVIDIA} already" in out
    assert "also enabled https://nvidia.github.io/libnvidia-container/experimental/deb/amd64" in out
    assert _changed(first.stdout) == 1  # the move (one task, two items)

    second = _run(tmp_path, etc, [DOCKER])
    assert second.returncode == 0, second.stdout + second.stderr
    assert _changed(second.stdout) == 0
    assert sorted(p.name for p in d.iterdir()) == names


def test_a_file_mixing_a_guarded_repository_with_others_stops_and_nothing_moves(tmp_path: Path) -> None:
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    mixed = UBUNTU + f"deb [signed-by=/usr/share/keyrings/docker.gpg] {DOCKER} noble stable\n"
    (etc / "sources.list").write_text(mixed)
    before = snapshot(etc)
    proc = _run(tmp_path, etc, [DOCKER])
    assert proc.returncode != 0
    assert f"{etc}/sources.list line(s) 2" in " ".join(proc.stdout.split())
    assert snapshot(etc) == before


def test_links_and_files_of_other_repositories_are_left_alone(tmp_path: Path) -> None:
    """A link named like a list file is not followed or moved (the find takes plain files only); a file
    of another repository on the same host (NVIDIA's experimental channel alone) is no conflict."""
    etc = tmp_path / "apt"
    d = etc / "sources.list.d"
    d.mkdir(parents=True)
    outside = tmp_path / "outside.list"
    outside.write_text(f"deb [signed-by={KEYRING}] {NVIDIA_LIST} /\n")
    (d / "evil.list").symlink_to(outside)
    (d / "experimental.list").write_text(f"deb [signed-by={KEYRING}] {EXPERIMENTAL_LIST} /\n")
    before = snapshot(etc)
    proc = _run(tmp_path, etc, [NVIDIA])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert snapshot(etc) == before
    assert outside.exists() and _changed(proc.stdout) == 0


def test_the_role_waits_for_a_held_dpkg_lock_and_says_who_held_it(tmp_path: Path) -> None:
    """A lock held when the role starts (apt and dpkg's fcntl lock, by another process): the role waits
    for it, names the holder at once, and says how long it waited once the lock is free."""
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    argv, env = _play(tmp_path, etc, [DOCKER])
    lines = []
    with held(tmp_path, 120, "lock-frontend", "lock") as holder:
        play = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        assert play.stdout is not None
        for line in play.stdout:  # the holder lets go 2 s after the play says it waits
            lines.append(line)
            if "waiting before apt" in line:
                time.sleep(2)
                break
    lines += play.stdout.readlines()
    assert play.wait(timeout=300) == 0, "".join(lines)
    out = " ".join("".join(lines).split())
    assert f"localhost: waiting before apt (0 s of 900 s, apt_guard_lock_timeout): pid {holder.pid} (" in out
    assert f"holds {tmp_path}/lock-frontend, {tmp_path}/lock" in out
    waited = re.search(rf"localhost: waited (\d+) s for apt's locks \(pid {holder.pid} \(", out)
    assert waited is not None and 2 <= int(waited[1]) < 60 and "; all free now" in out
    assert _changed(out) == 0


def test_past_the_bound_the_role_stops_with_one_line_naming_the_holder(tmp_path: Path) -> None:
    etc = tmp_path / "apt"
    d = etc / "sources.list.d"
    d.mkdir(parents=True)
    (d / "docker.list").write_text(
        f"deb [arch=amd64 signed-by=/usr/share/keyrings/docker.gpg] {DOCKER} noble stable\n")
    before = snapshot(etc)
    with held(tmp_path, 120, "lock") as holder:
        proc = _run(tmp_path, etc, [DOCKER], apt_guard_lock_timeout=2)
    assert proc.returncode != 0
    out = " ".join(proc.stdout.split())
    assert (f"localhost: still not free after 2 s (apt_guard_lock_timeout): pid {holder.pid} (") in out
    assert "or wait longer with -e apt_guard_lock_timeout=900" in out
    assert snapshot(etc) == before  # stopped before the guard moved anything


def _apt_tasks(tasks: list[Any]) -> list[dict[str, Any]]:
    found = []
    for task in tasks or []:
        for key in ("block", "rescue", "always"):
            found += _apt_tasks(task.get(key, []))
        if "ansible.builtin.apt" in task or "apt" in task:
            found.append(task)
    return found


def test_every_apt_task_of_the_roles_waits_as_long_as_the_guard() -> None:
    """A lock taken again between two tasks (unattended-upgrades starting over) is waited for by the apt
    task itself, as long as the guard would wait: apt's own 60 s are not enough on a first boot."""
    tasks = {}
    for f in sorted((REPO / "roles").glob("*/tasks/*.yml")):
        for task in _apt_tasks(yaml.safe_load(f.read_text())):
            tasks[f"{f.relative_to(REPO)}: {task['name']}"] = task
    assert len(tasks) >= 8  # docker (distro and upstream), nvidia_container_toolkit, nvtop
    for where, task in tasks.items():
        args = task.get("ansible.builtin.apt", task.get("apt"))
        assert args.get("lock_timeout") == "{{ apt_guard_lock_timeout }}", where
    for role in {where.split("/")[1] for where in tasks}:
        text = "".join(f.read_text() for f in (REPO / "roles" / role / "tasks").glob("*.yml"))
        assert "name: apt_guard" in text, f"role {role} has apt tasks but does not import apt_guard"
