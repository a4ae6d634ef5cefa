"""Run an Ansible playbook through ansible-runner, one progress line per task and host result."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console

from .errors import ServeSystemError
from .textsafe import clean, markup

_RESULT_EVENTS = {
    "runner_on_ok": "ok",
    "runner_on_failed": "FAILED",
    "runner_on_unreachable": "UNREACHABLE",
    "runner_on_skipped": "skipped",
}


def _progress_handler(console: Console, seen_task: list[bool]) -> Any:
    def handle(event: dict[str, Any]) -> bool:
        kind = event.get("event", "")
        if kind == "playbook_on_task_start":
            seen_task[0] = True
        data = event.get("event_data") or {}
        if kind == "playbook_on_play_start":
            console.print(f"[bold]PLAY[/] {markup(data.get('play', ''))}")
        elif kind == "playbook_on_task_start":
            console.print(clean(f"  TASK {data.get('task', '')}"), markup=False)
        elif kind in _RESULT_EVENTS:
            res = data.get("res") or {}
            word = _RESULT_EVENTS[kind]
            if kind == "runner_on_ok" and res.get("changed"):
                word = "changed"
            if kind == "runner_on_failed" and data.get("ignore_errors"):
                word = "failed (ignored)"
            line = f"    {data.get('host', '?')}: {word}"
            if kind in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors"):
                msg = " ".join(str(res.get("msg") or res.get("stderr") or "").split())
                if msg:
                    line += f" - {msg[:300]}"
            console.print(clean(line), markup=False)
        elif kind == "playbook_on_stats":
            console.print("  recap: " + ", ".join(
                f"{k}={sum((data.get(k) or {}).values())}"
                for k in ("ok", "changed", "failures", "dark", "skipped")))
        return True

    return handle


def run_playbook(
    playbook: Path,
    inventory: Path,
    extravars: dict[str, Any] | None = None,
    limit: str | None = None,
    console: Console | None = None,
    forks: int | None = None,
) -> int:
    """Run ``playbook`` on ``inventory`` and return ansible-playbook's exit code.

    The playbook runs from the directory holding ``playbooks/`` (the repository root), so the
    project's ansible.cfg, roles and collections apply. Output is one line per task and per host
    result; ansible-runner's artifacts go to a temporary directory that is removed afterwards.
    """
    import ansible_runner

    console = console or Console()
    playbook = playbook.resolve()
    inventory = inventory.resolve()
    if not playbook.is_file():
        raise ServeSystemError(f"{playbook}: playbook not found")
    if not inventory.exists():
        raise ServeSystemError(f"{inventory}: inventory not found; run chi_scripts/launch.py first")
    # playbooks/ and experiments/ run from the repository root (its ansible.cfg, roles, plugins)
    in_repo = playbook.parent.name in ("playbooks", "experiments")
    project_dir = playbook.parent.parent if in_repo else playbook.parent
    private = Path(tempfile.mkdtemp(prefix="serve-system-runner-"))
    seen_task = [False]
    # the ansible-playbook of this environment (.venv/bin), even when .venv is not activated
    bindir = Path(sys.executable).parent
    envvars: dict[str, str] = {"PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    if shutil.which("ansible-playbook", path=envvars["PATH"]) is None:
        raise ServeSystemError("ansible-playbook not found: run scripts/bootstrap.sh to set up .venv")
    cfg = project_dir / "ansible.cfg"
    if cfg.is_file():
        envvars["ANSIBLE_CONFIG"] = str(cfg)
    try:
        result = ansible_runner.run(
            private_data_dir=str(private),
            project_dir=str(project_dir),
            playbook=str(playbook),
            inventory=str(inventory),
            extravars=extravars or {},
            limit=limit,
            forks=max(1, forks) if forks else None,  # one fork per node: a class runs at once
            envvars=envvars,
            quiet=True,
            event_handler=_progress_handler(console, seen_task),
        )
        rc = int(result.rc if result.rc is not None else 1)
        if rc != 0 and not seen_task[0]:
            # ansible failed before any task (syntax error, bad inventory): show its own words
            tail = [ln for ln in result.stdout.read().splitlines() if ln.strip()][-5:]
            for line in tail:
                console.print(f"  {clean(line)}", markup=False)
        console.print(clean(f"{playbook.name}: {result.status} (rc={rc})"), markup=False)
        return rc
    finally:
        shutil.rmtree(private, ignore_errors=True)
