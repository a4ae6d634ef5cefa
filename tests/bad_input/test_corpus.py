"""Every bad input of the corpus is refused with one clear line, and nothing is written or deleted.

Cases live in ``cases_<area>.py`` modules beside this file (see ``corpus.py``).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .corpus import BadInput

HERE = Path(__file__).parent
REPO = HERE.parents[1]
BIN = Path(sys.executable).parent


def _cases() -> list[BadInput]:
    found: list[BadInput] = []
    for mod in sorted(HERE.glob("cases_*.py")):
        found.extend(importlib.import_module(f"{__package__}.{mod.stem}").CASES)
    ids = [c.id for c in found]
    dupes = {i for i in ids if ids.count(i) > 1}
    assert not dupes, f"duplicate case ids: {sorted(dupes)}"
    return found


CASES = _cases()


def _program(name: str) -> list[str]:
    if name == "serve-system":
        return [sys.executable, "-m", "serve_system.cli"]
    if name.startswith("chi_scripts/"):
        return [sys.executable, str(REPO / name)]
    if name in {"ansible-playbook", "ansible", "ansible-inventory"}:
        return [str(BIN / name)]
    raise AssertionError(f"unknown program {name!r} in the corpus")


def _snapshot(root: Path) -> dict[str, str]:
    """Every path under root with the hash of its content (folders too)."""
    snap: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            snap[rel] = "link:" + os.readlink(p)
        elif p.is_fifo():
            snap[rel] = "fifo"
        elif p.is_dir():
            snap[rel] = "dir"
        else:
            snap[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return snap


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 80, f"the bad-input corpus has {len(CASES)} cases; issue 8 asks for at least 80"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_refused_cleanly(case: BadInput, tmp_path: Path) -> None:
    work = tmp_path / "case"
    work.mkdir()
    for rel, content in case.files.items():
        target = work / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    subst = {"tmp": str(work), "repo": str(REPO)}
    for rel, dest in case.links.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).symlink_to(dest.format(**subst))
    for rel in case.fifos:
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(work / rel)
    before = _snapshot(work)
    argv = _program(case.argv[0]) + [a.format(**subst) for a in case.argv[1:]]
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "PYTHONWARNINGS": "ignore",
           "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), **case.env}
    proc = subprocess.run(argv, cwd=work, env=env, check=False, capture_output=True, text=True,
                          timeout=case.timeout, stdin=subprocess.DEVNULL)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    if case.error_prefix:
        assert case.argv[0] != "serve-system" and not case.argv[0].startswith("chi_scripts/"), \
            "error_prefix is only for programs that are not ours"
        lines = [ln for ln in lines if ln.startswith(case.error_prefix)]
    shown = f"argv={argv}\nrc={proc.returncode}\nstderr:\n{proc.stderr}\nstdout:\n{proc.stdout[-2000:]}"
    assert proc.returncode != 0, shown
    assert "Traceback" not in proc.stderr + proc.stdout, shown
    assert len(lines) == 1, shown
    for want in case.expect:
        assert want.format(**subst) in lines[0], f"{want!r} missing from the line\n{shown}"
    assert _snapshot(work) == before, f"the command changed its folder\n{shown}"
