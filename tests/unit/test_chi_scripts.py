"""chi_scripts/: the lab's four commands as scripts, all over one entry point (chi_scripts/_entry.py).

What each command does is tested against the fake Chameleon (test_chameleon_*.py, which also run
every script's ``--help``); here: which scripts there are, and how a script finds the project.
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

from serve_system.commands.provision import SCRIPT_COMMANDS

SCRIPTS = Path(__file__).resolve().parents[2] / "chi_scripts"


def test_each_script_is_a_command_script_main_runs() -> None:
    names = {p.stem for p in SCRIPTS.glob("*.py") if not p.name.startswith("_")}
    assert names == {"lease", "launch", "status", "teardown"}
    assert names <= set(SCRIPT_COMMANDS)
    for name in names:  # one line of each script names its command to the shared entry point
        assert f'sys.exit(main("{name}"))' in (SCRIPTS / f"{name}.py").read_text(encoding="utf-8")


def test_a_checkout_without_the_project_installed_runs_from_its_sources(tmp_path: Path) -> None:
    # -S skips site.py, so the editable install's .pth is not read: the dependencies are importable
    # (the virtual environment's site-packages on PYTHONPATH), the project itself is not
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
           "PYTHONPATH": os.pathsep.join(site.getsitepackages())}
    probe = subprocess.run([sys.executable, "-S", "-c", "import serve_system"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=60, check=False)
    assert probe.returncode == 1 and "No module named 'serve_system'" in probe.stderr
    for name in ("lease", "status"):
        proc = subprocess.run([sys.executable, "-S", str(SCRIPTS / f"{name}.py"), "--help"], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(f"usage: {name}.py")
