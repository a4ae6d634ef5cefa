"""Folders the tool fills (serve_system.ownedtree): only the tool's own files are removed, a user's
non-empty folder is refused unless forced, nothing is removed through a link."""

from __future__ import annotations

from pathlib import Path

import pytest

from serve_system import ownedtree, safeio


def test_an_owned_folder_removes_only_its_own_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = ownedtree.OwnedFolder(out)
    first.write_text("a.md", "a")
    first.write_bytes("plots/p.png", b"p")
    (out / "notes.txt").write_text("the user's")
    (out / "mine").mkdir()
    (out / "mine" / "x").write_text("the user's too")
    again = ownedtree.OwnedFolder(out)  # the tool's own folder: its list is there
    assert again.clear(keep=lambda n: n == "a.md") == ["plots/p.png"]
    assert (out / "notes.txt").read_text() == "the user's" and (out / "mine" / "x").exists()
    assert not (out / "plots").exists() and (out / "a.md").exists()


def test_a_users_non_empty_folder_is_refused_unless_forced(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    with pytest.raises(safeio.UnsafeFile, match="not empty and not made by serve-system.*--force"):
        ownedtree.OwnedFolder(out)
    forced = ownedtree.OwnedFolder(out, force=True)
    forced.write_text("class.md", "report")
    forced.clear()
    assert (out / "thesis.tex").read_text() == "years of work" and not (out / "class.md").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(safeio.UnsafeFile, match="is not a folder"):
        ownedtree.OwnedFolder(tmp_path / "file")


def test_an_owned_folder_never_removes_through_a_link(tmp_path: Path) -> None:
    out = tmp_path / "out"
    folder = ownedtree.OwnedFolder(out)
    folder.write_bytes("plots/p.png", b"p")
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "p.png").write_text("victim's")
    (out / "plots" / "p.png").unlink()
    (out / "plots").rmdir()
    (out / "plots").symlink_to(tmp_path / "victim")
    ownedtree.OwnedFolder(out).clear()
    assert (tmp_path / "victim" / "p.png").read_text() == "victim's"
