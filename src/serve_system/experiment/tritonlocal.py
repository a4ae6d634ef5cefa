"""Triton's own verdict on model configurations, from a real local tritonserver.

:func:`compare` loads each config.pbtxt into a scratch model repository of a local tritonserver
(explicit model control, loopback ports; one server for every configuration of a distinct model name,
a fresh one for a name seen again) and prints, one line each,
where Triton's verdict and :func:`serve_system.triton.problems.check_file`'s differ. Triton's refusals
that only say this server lacks something the model needs (a backend library, the model's files, a
GPU it was not asked about) are reported as inconclusive, not as a difference.

Where a tritonserver is found: ``--tritonserver``, ``$SERVE_SYSTEM_TRITONSERVER``, ``tritonserver``
on PATH, the nvidia-pytriton package of this Python, or the project's local Triton venv
(``scripts/local_triton_venv.sh``).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Self, TextIO

import requests

from ..errors import ServeSystemError
from ..textsafe import echo
from ..triton.backends import infer_backend
from ..triton.pbtxt import ConfigError, ModelConfig, load_pbtxt, render_pbtxt
from ..triton.problems import check_file

#: what Triton says when it is this server, not the configuration, that cannot load the model
INCONCLUSIVE = (
    "unable to find backend library", "unable to load backend", "unable to find 'libtriton_",
    "unable to find backend", "failed to open", "no such file", "unable to create stub",
    "contains models that are not available", "model.onnx", "model.plan", "model.pt",
)

#: a Python model that loads and answers nothing: enough for Triton to check the configuration
STUB_MODEL = '''import triton_python_backend_utils as pb_utils  # noqa: F401


class TritonPythonModel:
    def execute(self, requests):
        return [None for _ in requests]
'''


class NoTriton(ServeSystemError):
    """No tritonserver can run here (not found, or it does not start)."""

    exit_code = 3


@dataclass(frozen=True)
class Verdict:
    """Triton's answer for one configuration: accepted, or its error message."""

    accepted: bool
    message: str = ""

    @property
    def conclusive(self) -> bool:
        low = self.message.lower()
        return self.accepted or not any(key in low for key in INCONCLUSIVE)


def find_tritonserver(explicit: Path | None = None) -> Path:
    """The tritonserver binary to use, or :class:`NoTriton` saying where it was looked for."""
    tried: list[str] = []
    for cand in _candidates(explicit):
        tried.append(str(cand))
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand
    where = "; ".join(tried) if tried else "nothing to try"
    raise NoTriton(f"no tritonserver found (looked at: {where}): install nvidia-pytriton==0.7.0 (see "
                   "scripts/local_triton_venv.sh), put tritonserver on PATH or give --tritonserver BIN")


def _candidates(explicit: Path | None) -> list[Path]:
    out: list[Path] = []
    if explicit is not None:
        return [explicit]
    if os.environ.get("SERVE_SYSTEM_TRITONSERVER"):
        return [Path(os.environ["SERVE_SYSTEM_TRITONSERVER"])]
    on_path = shutil.which("tritonserver")
    if on_path:
        out.append(Path(on_path))
    spec = importlib.util.find_spec("pytriton")
    if spec is not None and spec.origin:
        out.append(Path(spec.origin).parent / "tritonserver" / "bin" / "tritonserver")
    for root in {Path.cwd(), Path(__file__).resolve().parents[3]}:
        out += sorted((root / ".cache").glob("local-triton-*/lib/python3*/site-packages/pytriton/"
                                             "tritonserver/bin/tritonserver"))
    out.append(Path("/opt/tritonserver/bin/tritonserver"))
    return out


def free_ports(n: int) -> list[int]:
    """``n`` TCP ports free on 127.0.0.1 right now (for a server started next)."""
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def local_gpus() -> int:
    """GPUs this machine has, as ``nvidia-smi -L`` lists them (0 without it)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def _stage(config: Path, model: Path, as_python: bool) -> None:
    """``config`` (a config.pbtxt) and the small files beside it, as model folder ``model``.

    ``as_python``: the configuration with its backend replaced by the Python backend (platform
    dropped), for a backend this server lacks: Triton then still checks everything else.
    """
    (model / "1").mkdir(parents=True)
    try:
        cfg = load_pbtxt(config)
    except ConfigError:
        cfg = ModelConfig()
    if as_python:
        cfg.backend, cfg.platform = "python", ""
        (model / "config.pbtxt").write_text(render_pbtxt(cfg))
    else:
        shutil.copyfile(config, model / "config.pbtxt")
    inferred = infer_backend(config.resolve().parent) if config.name == "config.pbtxt" else None
    if config.name == "config.pbtxt":  # the files the configuration names (labels), not the weights
        for extra in config.resolve().parent.iterdir():
            if extra.is_file() and extra.name != "config.pbtxt" and extra.stat().st_size < 1 << 20:
                shutil.copyfile(extra, model / extra.name)
    if cfg.backend == "python" or (not cfg.backend and not cfg.platform and inferred == "python"):
        # the model's own model.py may need packages this server lacks: a stub stands in for it
        (model / "1" / "model.py").write_text(STUB_MODEL)


def _folder(config: Path) -> str:
    return config.resolve().parent.name if config.name == "config.pbtxt" else config.stem


class LocalServer:
    """A tritonserver on loopback ports with a scratch model repository (explicit model control),
    started on first use and used for every configuration whose model name it has not loaded yet: a
    name seen again, or a server that died, gets a fresh server (a load never sees another's files)."""

    def __init__(self, binary: Path, timeout: float = 120.0) -> None:
        self.binary, self.timeout = binary, timeout
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._names: set[str] = set()
        self._url = ""
        self._log = Path()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def verdict(self, config: Path, as_python: bool = False) -> Verdict:
        """Triton's answer when it loads ``config`` (see :func:`_stage` for ``as_python``)."""
        name = _folder(config)
        if name in self._names or self._proc is None or self._proc.poll() is not None:
            self.close()
            self._start()
        assert self._tmp is not None
        self._names.add(name)
        _stage(config, Path(self._tmp.name) / "models" / name, as_python)
        return self._load(name)

    def _start(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="serve-system-triton-")
        work = Path(self._tmp.name)
        repo = work / "models"
        repo.mkdir()
        http, grpc, metrics = free_ports(3)
        env = dict(os.environ)
        venv = _venv_of(self.binary)
        if venv is not None:
            env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
        backends = self.binary.parent.parent / "backends"
        argv = [str(self.binary), f"--model-repository={repo}", "--model-control-mode=explicit",
                "--http-address=127.0.0.1", f"--http-port={http}",
                "--grpc-address=127.0.0.1", f"--grpc-port={grpc}",
                "--metrics-address=127.0.0.1", f"--metrics-port={metrics}", "--allow-metrics=false"]
        if backends.is_dir():
            argv.append(f"--backend-directory={backends}")
        self._log = work / "tritonserver.log"
        try:
            with self._log.open("w") as log:
                self._proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        except OSError as exc:
            self.close()
            raise NoTriton(f"{self.binary}: cannot start: {exc.strerror}") from None
        self._url = f"http://127.0.0.1:{http}"
        deadline = time.monotonic() + self.timeout
        while True:
            if self._proc.poll() is not None:
                tail = " ".join(self._log.read_text(errors="replace").split()[-40:])
                code = self._proc.returncode
                self.close()
                raise NoTriton(f"{self.binary} exited with status {code} before it was ready: {tail}")
            try:
                if requests.get(f"{self._url}/v2/health/live", timeout=2).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline:
                log_path = self._log
                self.close()
                raise NoTriton(f"{self.binary} was not live within {self.timeout:.0f} s (see its log: "
                               f"{log_path})")
            time.sleep(0.3)

    def _load(self, name: str) -> Verdict:
        offset = self._log.stat().st_size
        try:
            resp = requests.post(f"{self._url}/v2/repository/models/{name}/load", timeout=self.timeout)
        except requests.RequestException as exc:  # the server died during the load
            reason = _logged_error(self._log, name, offset)
            return Verdict(False, " ".join(f"tritonserver stopped answering: {reason or exc}".split()))
        if resp.status_code == 200:
            return Verdict(True)
        try:
            message = str(resp.json().get("error", resp.text))
        except ValueError:
            message = resp.text
        # the load API's answer can be generic ("failed to poll from model repository"): the
        # server's log has the reason
        reason = _logged_error(self._log, name, offset)
        if reason and reason not in message:
            message = f"{reason} ({message})"
        return Verdict(False, " ".join(message.split()))

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        tmp, self._tmp = self._tmp, None
        if tmp is not None:
            tmp.cleanup()
        self._names = set()


def _logged_error(log: Path, name: str, offset: int = 0) -> str:
    """The last error line about model ``name`` the server logged after ``offset`` (its text after the
    source tag)."""
    found = ""
    with log.open("rb") as fh:
        fh.seek(offset)
        text = fh.read().decode(errors="replace")
    for line in text.splitlines():
        if line.startswith("E") and name in line and "] " in line:
            found = line.split("] ", 1)[1].strip()
    return found


def _venv_of(binary: Path) -> Path | None:
    for parent in binary.resolve().parents:
        if (parent / "pyvenv.cfg").is_file():
            return parent
    return None


def compare(configs: list[Path], explicit: Path | None = None, out: TextIO | None = None) -> int:
    """Print where Triton and we differ for each config.pbtxt; returns how many differ.

    Where this server lacks the model's backend, the configuration is loaded once more with the
    Python backend in its place, and that verdict is compared with ours on everything but the
    platform and backend fields.
    """
    stream = out if out is not None else sys.stdout
    binary = find_tritonserver(explicit)
    gpus = local_gpus()
    with LocalServer(binary) as server:
        return _compare(configs, server, gpus, stream)


def _compare(configs: list[Path], server: LocalServer, gpus: int, stream: TextIO) -> int:
    differ = 0
    for path in configs:
        ours = check_file(path, gpus)
        theirs = server.verdict(path)
        how = "Triton"
        if not theirs.accepted and "unable to find backend library" in theirs.message.lower():
            lacking = theirs.message
            echo(f"{path}: Triton: this server has no backend for it ({lacking[:200]})", file=stream)
            theirs = server.verdict(path, as_python=True)
            how = "Triton (backend replaced by python: this server has none of the model's)"
            ours = [line for line in ours if not line.startswith((f"{path}: platform:", f"{path}: backend:"))]
            if not theirs.conclusive:
                theirs = Verdict(False, lacking)
        if not theirs.conclusive:
            echo(f"{path}: Triton: inconclusive here ({theirs.message[:200]}); ours: "
                 f"{'refused' if ours else 'accepted'}", file=stream)
            continue
        if theirs.accepted == (not ours):
            verdict = "accepted" if theirs.accepted else f"refused ({theirs.message[:200]})"
            echo(f"{path}: {how} agrees: {verdict}", file=stream)
            continue
        differ += 1
        if theirs.accepted:
            echo(f"{path}: DIFFERS: {how} accepts it, we refuse it: {ours[0]}", file=stream)
        else:
            echo(f"{path}: DIFFERS: {how} refuses it ({theirs.message}), we accept it", file=stream)
    return differ
