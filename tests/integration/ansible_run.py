"""Running the repository's playbooks from tests and reading their PLAY RECAP."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_RECAP = re.compile(
    r"^(?P<host>\S+)\s*:\s*ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)\s+"
    r"failed=(?P<failed>\d+)"
)


@dataclass(frozen=True)
class PlaybookResult:
    """What one ansible-playbook run did: exit code, output, seconds, and its PLAY RECAP per host."""

    playbook: str
    rc: int
    stdout: str
    seconds: float
    recap: dict[str, dict[str, int]] = field(default_factory=dict)

    def host_ok(self, host: str) -> bool:
        r = self.recap.get(host)
        return r is not None and r["failed"] == 0 and r["unreachable"] == 0

    @property
    def flat(self) -> str:
        """The output with all whitespace runs collapsed (the yaml callback wraps long messages)."""
        return " ".join(self.stdout.split())

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.stdout.splitlines()[-lines:])


def parse_recap(stdout: str) -> dict[str, dict[str, int]]:
    recap: dict[str, dict[str, int]] = {}
    in_recap = False
    for line in stdout.splitlines():
        if line.startswith("PLAY RECAP"):
            in_recap = True
            continue
        m = _RECAP.match(line.strip()) if in_recap else None
        if m:
            recap[m["host"]] = {k: int(v) for k, v in m.groupdict().items() if k != "host"}
    return recap


def ansible_bin(name: str) -> str:
    """The venv's ansible tool next to the running Python (the project's pinned ansible)."""
    cand = Path(sys.executable).parent / name
    return str(cand) if cand.exists() else name


def run_playbook(
    playbook: str, inventory: Path, *extra: str, limit: str | None = None, timeout: float = 1800
) -> PlaybookResult:
    """Run playbooks/<playbook> against ``inventory`` from the repository root."""
    cmd = [ansible_bin("ansible-playbook"), "-i", str(inventory), str(REPO / "playbooks" / playbook), *extra]
    if limit:
        cmd += ["--limit", limit]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", PYTHONUNBUFFERED="1")
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)
    out = proc.stdout + ("\n" + proc.stderr if proc.stderr else "")
    return PlaybookResult(playbook, proc.returncode, out, time.monotonic() - started,
                          parse_recap(proc.stdout))
