"""Session helpers for the local integration tests: a real CPU Triton (nvidia-pytriton's
tritonserver, Python backend) on free loopback ports, and the real perf_analyzer 2.60.0 in a
Debian 13 podman image. Both are built by the project's scripts (cached by recipe hash)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from serve_system.experiment.tritonlocal import free_ports

ROOT = Path(__file__).resolve().parents[2]
MODELS = Path(__file__).parent / "local_models"
CONTAINERS_CONF = ROOT / "scripts" / "local_containers.conf"


@dataclass
class LocalTriton:
    proc: subprocess.Popen  # type: ignore[type-arg]
    repo: Path
    http: int
    grpc: int
    metrics: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def start_triton(workdir: Path, models: Path = MODELS, ports: tuple[int, int, int] | None = None,
                 copy: bool = True) -> LocalTriton:
    """Start tritonserver on a copy of ``models`` (a model repository) in ``workdir`` (or on ``models``
    itself, ``copy=False``), on free ports or the given (http, grpc, metrics) ones."""
    venv = Path(subprocess.run(["bash", str(ROOT / "scripts" / "local_triton_venv.sh")], check=True,
                               capture_output=True, text=True).stdout.strip().splitlines()[-1])
    tri = next(venv.glob("lib/python3*/site-packages/pytriton/tritonserver"))
    repo = workdir / "model_repository" if copy else models
    if copy:
        shutil.copytree(models, repo)
    http, grpc, metrics = ports or free_ports(3)
    log = workdir / "tritonserver.log"
    env = {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '')}"}
    proc = subprocess.Popen(
        [str(tri / "bin" / "tritonserver"), f"--model-repository={repo}",
         f"--backend-directory={tri / 'backends'}",
         "--model-control-mode=explicit", "--load-model=echo_local",
         "--http-address=127.0.0.1", f"--http-port={http}", "--grpc-address=127.0.0.1", f"--grpc-port={grpc}",
         "--metrics-address=127.0.0.1", f"--metrics-port={metrics}"],
        stdout=log.open("a"), stderr=subprocess.STDOUT, env=env)
    server = LocalTriton(proc, repo, http, grpc, metrics, log)
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"tritonserver exited: {log.read_text()[-2000:]}")
        try:
            if requests.get(f"{server.url}/v2/models/echo_local/ready", timeout=2).status_code == 200:
                return server
        except requests.ConnectionError:
            pass
        time.sleep(0.5)
    server.stop()
    raise RuntimeError(f"tritonserver not ready in 120 s: {log.read_text()[-2000:]}")


def perf_client_image() -> str:
    out = subprocess.run(["bash", str(ROOT / "scripts" / "local_client_image.sh")], check=True,
                         capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]
