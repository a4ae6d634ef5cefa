"""The programs run with a Python that lacks the controller's dependencies: one line saying what to install
(src/serve_system/entry.py), for ``serve-system`` and for each of ``chi_scripts/*.py``, run for real in a
process whose virtual environment holds nothing but the standard library. And the checkout a plain
``pip install .`` (the package copied into site-packages) works in."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions, requires
from pathlib import Path

import pytest

from serve_system import entry

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
SCRIPTS = sorted(p.name for p in (REPO / "chi_scripts").glob("*.py") if not p.name.startswith("_"))


def _names(requirements: list[str]) -> set[str]:
    """Distribution names of requirement strings, canonical (PEP 503)."""
    return {re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", r).group(0)).lower()  # type: ignore[union-attr]
            for r in requirements}


def test_every_dependency_has_its_module_and_every_module_its_dependency() -> None:
    base = _names(PYPROJECT["project"]["dependencies"])
    app = _names(PYPROJECT["project"]["optional-dependencies"]["app"])
    assert {d for d, extra in entry.PROVIDERS.values() if not extra} == base
    assert {d for d, extra in entry.PROVIDERS.values() if extra == "app"} == app - base
    # and each module is what that distribution installs, itself or through one of its own requirements
    # (ansible's ``ansible`` module is ansible-core's), as this environment holds them
    installed = packages_distributions()
    for module, (dist, _) in entry.PROVIDERS.items():
        providers = _names(installed.get(module, []))
        assert providers & ({dist} | _names(requires(dist) or [])), (module, dist, providers)


def test_the_console_script_is_the_guarded_entry() -> None:
    assert PYPROJECT["project"]["scripts"] == {"serve-system": "serve_system.entry:main"}


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment with nothing installed (no pip either): the standard library alone."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv / "bin" / "python"


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1 and proc.stdout == "", proc
    assert proc.stderr.count("\n") == 1, proc.stderr
    return proc.stderr.rstrip("\n")


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_chi_script_says_what_to_install(bare_python: Path, script: str, tmp_path: Path) -> None:
    proc = subprocess.run([str(bare_python), str(REPO / "chi_scripts" / script), "--help"], check=False,
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert _one_line(proc) == (
        f"{script}: Python package 'rich' is missing in {bare_python}'s environment: install the controller: "
        f"`{bare_python} -m pip install -e {REPO}` (README: \"Without root\")")


def test_serve_system_says_what_to_install(bare_python: Path, tmp_path: Path) -> None:
    # what the console script pip writes runs: `from serve_system.entry import main; sys.exit(main())`
    code = (f"import sys; sys.path.insert(0, {str(REPO / 'src')!r}); sys.argv[0] = 'serve-system'; "
            "from serve_system.entry import main; sys.exit(main())")
    for argv in (["--help"], ["validate", str(REPO / "experiments" / "specs" / "dynbatch.yml")]):
        proc = subprocess.run([str(bare_python), "-c", code, *argv], check=False, cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
        line = _one_line(proc)
        assert line.startswith("serve-system: Python package 'rich' is missing"), line
        assert f"`{bare_python} -m pip install -e {REPO}`" in line


def _missing(name: str) -> ModuleNotFoundError:
    return ModuleNotFoundError(f"No module named {name!r}", name=name)


def test_a_packages_own_module_and_an_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "prefix", "/opt/x")
    monkeypatch.setattr(sys, "base_prefix", "/opt/x")  # a Python that is not a virtual environment's
    monkeypatch.setattr(sys, "executable", "/usr/bin/python3")
    line = entry.missing_line("serve-system", _missing("google.protobuf"))
    assert line is not None and line.startswith(
        "serve-system: Python package 'protobuf' is missing in /usr/bin/python3's environment: install the "
        "controller: `python3 -m venv ~/serve-venv && ~/serve-venv/bin/pip install -e ")
    line = entry.missing_line("serve-system", _missing("PIL.Image"))
    assert line is not None and "Python package 'pillow' (extra 'app') is missing" in line
    assert line.endswith(f"pip install -e '{REPO}[app]'` (README: \"Without root\")")
    # a dependency's own dependency gone: the environment is broken, install again
    line = entry.missing_line("launch.py", _missing("pandas"))
    assert line is not None and line.startswith("launch.py: Python module 'pandas' is missing")
    assert "install the controller again" in line


def test_a_missing_module_of_the_controller_is_a_bug(capsys: pytest.CaptureFixture[str]) -> None:
    """Its traceback is the useful answer: re-raised, nothing printed."""
    def program() -> int:
        raise _missing("serve_system.nowhere")

    with pytest.raises(ModuleNotFoundError):
        entry.guarded("serve-system", program)
    assert entry.guarded("serve-system", lambda: 7) == 7
    assert capsys.readouterr().err == ""


def test_a_python_too_old(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "version_info", (3, 9, 2, "final", 0))
    monkeypatch.setattr(sys, "executable", "/usr/bin/python3")
    assert entry.guarded("launch.py", lambda: 0) == 1
    assert capsys.readouterr().err == (
        "launch.py: needs Python 3.11 or newer, /usr/bin/python3 is 3.9.2: make the virtual environment "
        "with a newer Python (README: \"Without root\")\n")


def test_a_plain_install_finds_the_checkout_it_runs_in(tmp_path: Path) -> None:
    """The package in a site-packages folder, away from any checkout: the checkout is the nearest folder
    holding ansible.cfg at or above the one a command runs in, else that folder; never site-packages'."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    shutil.copytree(REPO / "src" / "serve_system", site / "serve_system",
                    ignore=shutil.ignore_patterns("__pycache__"))
    checkout = tmp_path / "checkout"
    (checkout / "experiments").mkdir(parents=True)
    (checkout / "ansible.cfg").write_text("[defaults]\n")
    code = ("import serve_system; from serve_system.commands import chiargs; "
            "print(serve_system.__file__, chiargs.REPO_ROOT, chiargs.DEFAULT_INVENTORY)")
    for cwd, root in ((checkout / "experiments", checkout), (checkout, checkout), (tmp_path, tmp_path)):
        proc = subprocess.run([sys.executable, "-c", code], check=True, cwd=cwd, capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": str(site)})
        assert proc.stdout.split() == [str(site / "serve_system" / "__init__.py"), str(root),
                                       str(root / "inventory" / "hosts.yml")], cwd
