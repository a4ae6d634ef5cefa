"""``serve-system validate --with-triton`` against the real tritonserver of nvidia-pytriton (the
local tests' venv, scripts/local_triton_venv.sh): Triton's verdict and ours agree on a config
Triton accepts and on configs it refuses, and a disagreement is reported as one (exit 4)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
    # we refuse an empty configuration on purpose, and --with-triton says that we differ
    empty = repo / "auto" / "config.pbtxt"
    (empty.parent / "1").mkdir(parents=True)
    (empty.parent / "1" / "model.py").write_text("# the stand-in model.py is what Triton loads\n")
    empty.write_text("")
    proc = _validate("--with-triton", "--tritonserver", str(binary), str(empty))
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert f"{empty}: DIFFERS: Triton accepts it, we refuse it: " in proc.stdout
