"""Every check of an upstream tool's version in roles/ is a minimum, never a pinned major.

Docker's repository ships Compose 5 since 2025-12 (``docker compose version --short`` prints ``5.5.0``);
a check for "2." stopped every real node. The checks are evaluated here the way ``ansible-playbook``
evaluates them (ansible-core's ``Templar.evaluate_conditional`` on the task's own text, loaded from the
role's YAML), over the oldest version the project supports, today's upstream versions and the next
majors.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLES = Path(__file__).resolve().parents[2] / "roles"


def _tasks(path: Path) -> list[dict[str, Any]]:
    """Every task of a task file, blocks flattened."""
    out: list[dict[str, Any]] = []
    todo = list(yaml.safe_load(path.read_text(encoding="utf-8")) or [])
    while todo:
        task = todo.pop(0)
        out.append(task)
        for key in ("block", "rescue", "always"):
            todo.extend(task.get(key) or [])
    return out


def _task(path: Path, name_start: str) -> dict[str, Any]:
    found = [t for t in _tasks(path) if str(t.get("name", "")).startswith(name_start)]
    assert len(found) == 1, f"{path}: expected one task named {name_start!r}..., found {len(found)}"
    return found[0]


def _conditions(task: dict[str, Any]) -> list[str]:
    for module in ("ansible.builtin.assert", "assert"):
        if module in task:
            that = task[module]["that"]
            return [that] if isinstance(that, str) else list(that)
    return [task["failed_when"]]


def _evaluate(conditions: list[str], variables: dict[str, Any]) -> bool:
    templar = Templar(loader=DataLoader(), variables=variables)
    return all(templar.evaluate_conditional(trust_as_template(c)) for c in conditions)


def _role_vars(role: str) -> dict[str, Any]:
    return dict(yaml.safe_load((ROLES / role / "vars" / "main.yml").read_text(encoding="utf-8")) or {})


COMPOSE_CHECK = ROLES / "serve_stack" / "tasks" / "checks.yml"

#: what `docker compose version --short` prints: the oldest supported, Debian's, older Docker
#: releases (with a "v"), today's Compose 5 (without), the next majors
COMPOSE_ACCEPTED = ["2.18.0", "2.24.6", "2.26.1", "v2.40.3", "5.5.0", "v5.5.0", "5.5.12", "6.0.0", "v7.1.0",
                    "10.0.0", "2.18.0-desktop.1"]
COMPOSE_REFUSED = ["1.29.2", "v1.27.4", "2.17.9", "2.0.0", "garbage", "",
                   "docker: 'compose' is not a docker command."]


@pytest.mark.parametrize("printed", COMPOSE_ACCEPTED)
def test_serve_stack_accepts_every_compose_from_the_minimum_on(printed: str) -> None:
    check = _conditions(_task(COMPOSE_CHECK, "Check that Docker Compose is at least"))
    variables = {**_role_vars("serve_stack"),
                 "__serve_stack_compose_version": {"rc": 0, "stdout": printed + "\n"}}
    assert _evaluate(check, variables), f"{printed!r} refused by roles/serve_stack/tasks/checks.yml"


@pytest.mark.parametrize("printed", COMPOSE_REFUSED)
def test_serve_stack_refuses_compose_below_the_minimum_or_unreadable(printed: str) -> None:
    check = _conditions(_task(COMPOSE_CHECK, "Check that Docker Compose is at least"))
    variables = {**_role_vars("serve_stack"), "__serve_stack_compose_version": {"rc": 0, "stdout": printed}}
    assert not _evaluate(check, variables), f"{printed!r} accepted by roles/serve_stack/tasks/checks.yml"


def test_serve_stack_refuses_a_compose_that_did_not_answer() -> None:
    check = _conditions(_task(COMPOSE_CHECK, "Check that Docker Compose is at least"))
    variables = {**_role_vars("serve_stack"),
                 "__serve_stack_compose_version": {"rc": 1, "stdout": "5.5.0", "stderr": "error"}}
    assert not _evaluate(check, variables)


#: a regular expression anchored on a version's major (`^v?2\.`, `^2\.`, `^29`), a startswith of a
#: version number, or Ansible's version test with an equality or an upper bound
_PINNED = [
    re.compile(r"regex_search\(\s*['\"]\^v?\??\\?\d"),
    re.compile(r"is\s+match\(\s*['\"]v?\??\d"),
    re.compile(r"startswith\(\s*['\"]v?\d"),
    re.compile(r"version\([^)]*,\s*['\"](==|=|eq|<=|le|!=|ne)['\"]"),
]


def test_nothing_in_roles_pins_a_version() -> None:
    offenders = []
    for path in sorted(ROLES.rglob("*")):
        if path.suffix not in (".yml", ".yaml", ".j2", ".py") or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if any(p.search(line) for p in _PINNED):
                offenders.append(f"{path.relative_to(ROLES)}:{number}: {line.strip()}")
    assert not offenders, ("version checks must be minimums (`is version(MIN, '>=')`):\n"
                           + "\n".join(offenders))


def test_the_pin_scan_sees_the_check_that_stopped_real_nodes() -> None:
    """The scan above is not vacuous: it flags the old check, and the new one's minimum passes it."""
    old = "failed_when: out.rc != 0 or not (out.stdout | trim | regex_search('^v?2\\\\.'))"
    assert any(p.search(old) for p in _PINNED)
    assert any(p.search("x is version('2.18', '==')") for p in _PINNED)
    assert not any(p.search("x is version(__serve_stack_compose_minimum, '>=')") for p in _PINNED)


def test_the_installed_community_docker_parses_compose_5() -> None:
    """community.docker 4.8.5 is the first to parse Compose 5's events (pyproject's ansible floor for
    Python 3.11, 12.3, ships it); on Python 3.12+ pyproject asks for ansible 14.3+, whose 5.2.2 also
    reports Compose's own error when `docker compose images` fails. Minimums, checked on what the test
    command installed."""
    import sys

    import ansible_collections.community.docker as collection
    from ansible.module_utils.compat.version import LooseVersion

    manifest = Path(next(iter(collection.__path__))) / "MANIFEST.json"
    found = yaml.safe_load(manifest.read_text(encoding="utf-8"))["collection_info"]["version"]
    floor, ansible = ("5.2.2", "ansible>=14.3") if sys.version_info >= (3, 12) else ("4.8.5", "ansible>=12.3")
    assert LooseVersion(found) >= LooseVersion(floor), \
        f"community.docker {found} < {floor}: pip install '{ansible}'"
