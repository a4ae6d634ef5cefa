from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from serve_system.errors import ServeSystemError
from serve_system.images import build as images
from serve_system.podman import CONTAINERS_CONF, require_tool


def test_tags_are_stable_and_follow_the_recipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert images.TRITON.tag == images.TRITON.tag
    assert len({spec.tag for spec in images.ALL_IMAGES.values()}) == 3
    changed = images.ImageSpec("triton", images.BOOKWORM_SLIM, {"PIP_PACKAGES": "nvidia-pytriton==0.7.1"})
    assert changed.tag != images.TRITON.tag
    other_base = images.ImageSpec("triton", images.TRIXIE_SLIM, images.TRITON.params)
    assert other_base.tag != images.TRITON.tag
    assert images.TRITON.ref == f"localhost/serve-system-triton:{images.TRITON.tag}"


def test_containerfiles_render_completely() -> None:
    for spec in images.ALL_IMAGES.values():
        text = spec.containerfile()
        assert "{{" not in text.replace("{{.Size}}", "")
        first_from = next(i for i, ln in enumerate(text.splitlines()) if ln.startswith("FROM"))
        assert text.splitlines()[first_from] == f"FROM {spec.base.ref}"
    assert "perf-analyzer==2.60.0" in images.CLIENT.containerfile()
    assert "nvidia-pytriton==0.7.0" in images.TRITON.containerfile()


def test_containers_conf_has_the_two_settings_this_host_needs() -> None:
    text = CONTAINERS_CONF.read_text()
    assert 'runtime = "runc"' in text and "default_ulimits = []" in text


def test_cache_dir_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVE_SYSTEM_CACHE", str(tmp_path / "c"))
    assert images.cache_dir() == tmp_path / "c"
    assert images.archive_path(images.TRITON).parent == tmp_path / "c" / "images"


def test_missing_tool_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ServeSystemError, match=r"debootstrap not found: .*apt-get install debootstrap"):
        require_tool("debootstrap", "debootstrap")


START = images.CLIENT.recipe_dir / "start.sh"


def test_the_client_image_starts_as_docker_stacks_images_do() -> None:
    text = images.CLIENT.containerfile()
    assert 'ENTRYPOINT ["tini", "-g", "--", "/usr/local/bin/start.sh"]' in text
    assert "COPY start.sh /usr/local/bin/start.sh" in text and "--uid 1000 --gid 100 jovyan" in text
    assert "--allow-root" not in text  # Jupyter runs as jovyan
    assert "tini" in images.CLIENT.base.include
    assert START.stat().st_mode & 0o111


def test_the_start_script_is_part_of_the_client_recipe(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(images.CLIENT.recipe_dir, tmp_path / "client")
    before = images.CLIENT.tag
    monkeypatch.setattr(images, "RECIPES", tmp_path)
    assert images.CLIENT.tag == before
    (tmp_path / "client" / "start.sh").write_text(START.read_text() + "# changed\n")
    assert images.CLIENT.tag != before


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_start_script_runs_the_command_unchanged_for_another_user() -> None:
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
                          "sh", str(START), "sh", "-c", 'id -u; echo "$1"', "-", "as given"],
                         capture_output=True, text=True, check=True, timeout=30)
    assert out.stdout.split("\n")[:2] == ["65534", "as given"]


@pytest.mark.skipif(os.geteuid() != 0, reason="the refusal comes on the root path")
@pytest.mark.parametrize("env", [{"NB_UID": "jovyan"}, {"NB_GID": "users"}, {"NB_UID": "10:0"},
                                 {"NB_GID": "-1"}])
def test_start_script_refuses_ids_that_are_not_numbers_before_changing_anything(env: dict[str, str]) -> None:
    proc = subprocess.run(["sh", str(START), "true"], env={"PATH": os.environ["PATH"], **env},
                          capture_output=True, text=True, check=False, timeout=30)
    assert proc.returncode == 64
    assert "NB_UID and NB_GID must be numeric ids" in proc.stderr and proc.stderr.count("\n") == 1
