"""``serve-system validate --with-triton`` against the real tritonserver of nvidia-pytriton (the
local tests' venv, scripts/local_triton_venv.sh): Triton's verdict and ours agree on a config
Triton accepts, on configs it refuses, on an auto-completed one and on a custom backend this
server lacks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.windows("none")

ROOT = Path(__file__).resolve().parents[2]
ECHO = ROOT / "tests" / "integration" / "local_models" / "echo_local" / "config.pbtxt"
IO = ('input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
      'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
      'instance_group [ { kind: KIND_CPU } ]\n')


def _tritonserver() -> Path:
    venv = Path(subprocess.run(["bash", str(ROOT / "scripts" / "local_triton_venv.sh")], check=True,
                               capture_output=True, text=True).stdout.strip().splitlines()[-1])
    return next(venv.glob("lib/python3*/site-packages/pytriton/tritonserver/bin/tritonserver"))


def _validate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "serve_system.cli", "validate", *args], capture_output=True,
                          text=True, check=False, timeout=600, env={**os.environ, "NO_COLOR": "1"})


def test_triton_and_we_agree_and_disagreements_are_reported(tmp_path: Path) -> None:
    binary = _tritonserver()
    repo = tmp_path / "models"
    good = repo / "echo_local" / "config.pbtxt"
    good.parent.mkdir(parents=True)
    good.write_bytes(ECHO.read_bytes())
    too_big = repo / "too_big" / "config.pbtxt"
    too_big.parent.mkdir()
    too_big.write_text('name: "too_big"\nbackend: "python"\nmax_batch_size: 4\n' + IO
                       + "dynamic_batching { preferred_batch_size: [ 8 ] }\n")
    proc = _validate("--with-triton", "--tritonserver", str(binary), str(good), str(too_big))
    out = proc.stdout.splitlines()
    assert proc.returncode == 1, proc.stdout + proc.stderr  # ours refuses too_big, and Triton agrees
    assert f"{good}: Triton agrees: accepted" in out, proc.stdout
    (line,) = [ln for ln in out if ln.startswith(f"{too_big}: Triton agrees: refused")]
    assert "dynamic batching preferred size must be <= max batch size" in line
    assert "DIFFERS" not in proc.stdout

    # an empty config.pbtxt beside a model.py: Triton fills everything in (auto-complete) and loads it;
    # so do we (with a note)
    empty = repo / "auto" / "config.pbtxt"
    (empty.parent / "1").mkdir(parents=True)
    (empty.parent / "1" / "model.py").write_text("# the stand-in model.py is what Triton loads\n")
    empty.write_text("")
    # a custom backend (as Triton's own qa models use): we accept it with a note; this server has no
    # such backend, and --with-triton says so, then compares the rest of the configuration
    custom = repo / "stateful" / "config.pbtxt"
    custom.parent.mkdir()
    custom.write_text('name: "stateful"\nbackend: "implicit_state"\nmax_batch_size: 4\n' + IO
                      + "sequence_batching { }\n")
    proc = _validate("--with-triton", "--tritonserver", str(binary), str(empty), str(custom))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{empty}: Triton agrees: accepted" in proc.stdout
    assert (f"note: {custom}: backend: backend 'implicit_state' is not one Triton's release images ship"
            in proc.stdout)
    (lacks,
     ) = [ln for ln in proc.stdout.splitlines() if ln.startswith(f"{custom}: Triton: this server has no")]
    assert "'implicit_state'" in lacks  # Triton's own refusal, as this server gives it
    (replaced,) = [ln for ln in proc.stdout.splitlines()
                   if ln.startswith(f"{custom}: Triton (backend replaced")]
    assert "agrees: accepted" in replaced
    assert "DIFFERS" not in proc.stdout
