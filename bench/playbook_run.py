"""What the benches share: one timed ``ansible-playbook`` run of an experiment, and a copy of the
shipped dynbatch spec beside the files it names (a spec's paths stay inside its folder)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parents[1]


def dynbatch_copy(dest: Path, **perf: Any) -> tuple[dict[str, Any], Path]:
    """The shipped dynbatch spec (as data, its ``perf`` updated) and where to write it, in ``dest``
    beside copies of its config and input file."""
    spec = yaml.safe_load((HERE / "experiments" / "specs" / "dynbatch.yml").read_text())
    spec["perf"].update(input_data="food_input.json", **perf)
    (dest / "model_repository" / "food_classifier").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(HERE / "model_repository" / "food_classifier" / "config.pbtxt",
                    dest / "model_repository" / "food_classifier" / "config.pbtxt")
    shutil.copyfile(HERE / "experiments" / "files" / "food_input.json", dest / "food_input.json")
    return spec, dest / "dynbatch.yml"


def write(spec: dict[str, Any], path: Path) -> Path:
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def run_playbook(repo: Path, playbook: str, inventory: Path, limit: str, results: Path, run_id: str,
                 extra: list[str]) -> float:
    """One playbook run of ``repo`` (its package first on the path when it is another checkout), its
    output kept as ``results/<run_id>.log``; its wall seconds. A failed run ends the bench."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(repo / "ansible.cfg"), PYTHONUNBUFFERED="1")
    if repo != HERE:
        env["PYTHONPATH"] = str(repo / "src")
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
           str(repo / "experiments" / playbook), "--limit", limit, "-e", f"run_id={run_id}", *extra]
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    (results / f"{run_id}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(
            f"{repo}: {playbook} failed (rc {proc.returncode}); see {results / (run_id + '.log')}")
    return wall
