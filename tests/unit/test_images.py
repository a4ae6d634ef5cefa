from __future__ import annotations

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
