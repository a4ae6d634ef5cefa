"""The controller set up without root (README: "Without root"), as a Chameleon-only user or a JupyterHub
user does it: a fresh virtual environment made and filled by a user who is not root, no podman, no test
extras.

The controller's dependencies are collected once into a wheelhouse with this machine's pip settings
(what bootstrap.sh installs from; the package's own wheel is built for that). Then the user ``nobody``,
in a folder of its own holding a copy of the checkout, makes a virtual environment with the system's
Python (a Python that user can run), sees what a script says before anything is installed (one line:
what to install), runs README's ``pip install -e .`` from the wheelhouse alone, and runs
``serve-system --help``, ``validate`` and ``plan`` on a shipped spec, ``launch --dry-run`` against the
fake Chameleon site (tests/fakes/chameleon.py, served in the command's own process by a hook this test
adds to that environment, as tests/unit/chi_command.py does), then a real ``launch`` from another
folder, which writes the checkout's default inventory.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the fakes package
from fakes.chameleon import RESOURCE_API, FakeChameleon
from fakes.loopback import listen_all

pytestmark = pytest.mark.windows("none")

REPO = Path(__file__).resolve().parents[2]
#: a user that is not root and exists on every Debian/Ubuntu machine
USER = "nobody"
#: what a user's checkout holds that the install and the commands read
CHECKOUT = ("ansible.cfg", "pyproject.toml", "README.md", "chi_scripts", "experiments", "inventory",
            "model_repository", "playbooks", "roles", "src")
#: the hook that serves the fake site inside a command's process when FAKE_CHAMELEON names its state
HOOK = '''\
import os
if os.environ.get("FAKE_CHAMELEON"):
    import atexit, sys
    from pathlib import Path
    sys.path.insert(0, os.environ["FAKE_CHAMELEON_FAKES"])
    import requests_mock
    from fakes.chameleon import FakeChameleon
    _state = Path(os.environ["FAKE_CHAMELEON"])
    _fake = FakeChameleon.load(_state)
    _mocker = requests_mock.Mocker()
    _mocker.start()
    _fake.install(_mocker)
    atexit.register(_fake.dump, _state)
'''


def _python_for(user: str) -> str:
    """A Python >= 3.11 with venv that ``user`` can run (the system's: root's own may be out of reach)."""
    for cand in ("python3.13", "python3.12", "python3.11", "python3"):
        path = shutil.which(cand, path="/usr/local/bin:/usr/bin:/bin")
        if path and subprocess.run(
                ["runuser", "-u", user, "--", path, "-c",
                 "import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))"],
                check=False, capture_output=True).returncode == 0:
            return path
    pytest.fail(f"no Python >= 3.11 with venv that {user} can run in /usr/local/bin, /usr/bin, /bin: "
                "install python3-venv (scripts/bootstrap.sh does)")


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A folder every user can reach (pytest's own are root's alone), removed afterwards."""
    if os.geteuid() != 0:
        pytest.fail("this test acts as another user (runuser): run it as root, as the suite runs")
    path = Path(tempfile.mkdtemp(prefix="serve-system-noroot-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def _copy(src: Path, dest: Path, *ignore: str) -> None:
    if src.is_dir():
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", *ignore))
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)


def _own(path: Path, uid: int, gid: int) -> None:
    for p in [path, *path.rglob("*")]:
        os.chown(p, uid, gid, follow_symlinks=False)


def test_install_and_run_as_a_user_without_root(scratch: Path) -> None:
    started = time.monotonic()
    account = pwd.getpwnam(USER)
    python = _python_for(USER)
    # the wheelhouse: the package's wheel, built from a copy of its sources (a build writes beside them),
    # its dependencies, setuptools and wheel (an editable install's build) and requests-mock (the fake's
    # transport, for this test only); the user installs from this folder alone
    src = scratch / "src"
    for name in ("pyproject.toml", "README.md", "src"):
        _copy(REPO / name, src / name)
    wheels = scratch / "wheels"
    fetch = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "-w", str(wheels), str(src),
                            "setuptools>=77", "wheel", "requests-mock"], check=False, capture_output=True,
                           text=True)
    assert fetch.returncode == 0, fetch.stderr[-3000:]
    prepared = time.monotonic()

    # the user's own folder: a copy of the checkout, its home
    home = scratch / "home"
    work = home / "serve-system-chi"
    for name in CHECKOUT:
        _copy(REPO / name, work / name, "hosts.yml", "known_hosts")
    _copy(REPO / "tests" / "fakes", home / "fakes" / "fakes")
    fake = FakeChameleon()
    fake.add_lease("serve_system_tester")
    state = home / "fake.json"
    fake.dump(state)
    _own(home, account.pw_uid, account.pw_gid)
    wheels.chmod(0o755)
    for w in wheels.iterdir():
        w.chmod(0o644)
    env = {"HOME": str(home), "USER": "tester", "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
           "COLUMNS": "200", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}

    def as_user(*argv: str | Path, extra: dict[str, str] | None = None,
                cwd: Path = work) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["runuser", "-u", USER, "--", "env", "-i",
                               *(f"{k}={v}" for k, v in {**env, **(extra or {})}.items()), *map(str, argv)],
                              check=False, cwd=cwd, capture_output=True, text=True, timeout=600)

    venv = home / "serve-venv"
    made = as_user(python, "-m", "venv", venv)
    assert made.returncode == 0, made.stderr
    bin_ = venv / "bin"
    # before the install: the lab's script, run with that environment's Python, says what to install
    bare = as_user(bin_ / "python", "chi_scripts/launch.py", "--help")
    assert bare.returncode == 1 and bare.stdout == "", bare
    assert bare.stderr.count("\n") == 1, bare.stderr
    assert bare.stderr.startswith(
        f"launch.py: Python package 'rich' is missing in {bin_ / 'python'}'s environment: install the "
        f"controller: `{bin_ / 'python'} -m pip install -e {work}`"), bare.stderr

    installing = time.monotonic()
    # README's command; --no-compile: what the commands import compiles as they import it (the venv is
    # the user's); the rest, Ansible's collections above all, would cost minutes here and prove nothing more
    pip = as_user(bin_ / "pip", "install", "-q", "--no-compile", "--no-index", "--find-links", wheels,
                  "-e", ".", "requests-mock")
    install_s = time.monotonic() - installing
    assert pip.returncode == 0, pip.stderr[-3000:]
    assert all(p.stat().st_uid == account.pw_uid for p in (venv, bin_ / "serve-system"))
    site = next((venv / "lib").glob("python3.*/site-packages"))
    # what the base install leaves out: podman's and the tests' tools, the FastAPI app, CUDA, gRPC
    for absent in ("pytest", "fastapi", "onnxruntime", "cuda", "grpc", "perf_analyzer", "selenium"):
        assert not (site / absent).exists(), absent
    du = subprocess.run(["du", "-sm", str(venv)], capture_output=True, text=True, check=True)
    size_mb = int(du.stdout.split()[0])

    helped = as_user(bin_ / "serve-system", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "validate" in helped.stdout and "launch" in helped.stdout and "report" in helped.stdout

    spec = "experiments/specs/dynbatch.yml"
    valid = as_user(bin_ / "serve-system", "validate", spec)
    assert valid.returncode == 0, valid.stderr
    assert valid.stdout == "1 file(s) valid\n", valid.stdout

    run = home / "results" / "dynbatch" / "r1"
    plan = as_user(bin_ / "serve-system", "plan", spec, "--run-dir", run, "--host", "node-1=0", "--host",
                   "node-2=2", "--node-work-dir", "/work/dynbatch/r1")
    assert plan.returncode == 0, plan.stderr
    planned = json.loads(plan.stdout)
    assert set(planned) == {"node-1", "node-2"} and planned["node-1"]["models"] == ["food_classifier"]
    assert "KIND_GPU" in (run / "node-2" / "dynbatch" / "config.pbtxt").read_text()
    assert (run / "node-1" / ".node.pyz").stat().st_uid == account.pw_uid

    # launch against the fake site: the hook serves it in the command's process
    (site / "fake_chameleon_hook.py").write_text(HOOK)
    (site / "fake_chameleon_hook.pth").write_text("import fake_chameleon_hook\n")
    chi = {"FAKE_CHAMELEON": str(state), "FAKE_CHAMELEON_FAKES": str(home / "fakes"),
           "CHI_RESOURCE_API_URL": RESOURCE_API, "OS_APPLICATION_CREDENTIAL_ID": "appcred-id",
           "OS_APPLICATION_CREDENTIAL_SECRET": "appcred-secret"}
    socks, port = listen_all(["127.0.0.1"], backlog=4)  # the node's "sshd": accepts, says nothing
    try:
        opts = ("--key-name", "mykey", "--key-path", home / "id_test", "--ssh-port", str(port),
                "--ssh-timeout", "30", "--poll", "0.01", "--lease-timeout", "5", "--server-timeout", "30")
        dry = as_user(bin_ / "serve-system", "launch", "--dry-run", *opts, extra=chi)
        assert dry.returncode == 0, dry.stderr
        assert "node-serve-system-tester" in dry.stdout and "nothing was changed" in dry.stdout, dry.stdout
        after = FakeChameleon.load(state)
        assert after.writes() == [] and after.servers == {}
        assert not (work / "inventory" / "hosts.yml").exists()

        # from another folder: the editable install knows its checkout
        launched = as_user(bin_ / "serve-system", "launch", *opts, extra=chi, cwd=home)
        assert launched.returncode == 0, launched.stderr
    finally:
        for s in socks:
            s.close()
    after = FakeChameleon.load(state)
    assert [s["name"] for s in after.servers.values()] == ["node-serve-system-tester"]
    # the inventory lands in the checkout the command ran in, owned by the user
    inventory = work / "inventory" / "hosts.yml"
    assert "node-serve-system-tester" in inventory.read_text()
    assert inventory.stat().st_uid == account.pw_uid
    print(f"\nnon-root install: wheelhouse {prepared - started:.0f} s, pip install -e . {install_s:.0f} s, "
          f"environment {size_mb} MB (no bytecode), whole test {time.monotonic() - started:.0f} s")
