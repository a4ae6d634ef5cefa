"""Folders the tool fills and keeps in step: :class:`OwnedFolder` and :func:`sync_tree`.

:class:`OwnedFolder` is a folder the tool fills: it keeps a list of the files the tool put there
(:data:`MARKER`), empties only those, and refuses a user's non-empty folder (``force``: writes into it,
replacing only its own files). :func:`sync_tree` makes such a folder hold exactly a given set of files.
Every file is read and written through :mod:`serve_system.safeio` (regular files only, links kept inside,
temporary name + rename); every error is its :class:`~serve_system.safeio.UnsafeFile`. Controller side
only: not in the node's bundle.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from .safeio import PLAIN_NAME, UnsafeFile, make_dirs, open_write, read_json, write_bytes, write_json

#: the list of the files the tool put in a folder it fills (:class:`OwnedFolder`)
MARKER = ".serve-system-files.json"


class OwnedFolder:
    """A folder the tool fills (``access --out``, ``compare --class --out``, a report's ``plots/``).

    The tool's files are listed in :data:`MARKER`; :meth:`clear` removes those alone (a user's own files
    stay). A folder that exists, is not empty and has no list is a user's: refused, unless ``force``
    (then the tool writes into it, replacing only the files it writes).
    """

    def __init__(self, folder: str | Path, *, force: bool = False, option: str = "--out",
                 within: str | Path | None = None, adopt: str | None = None) -> None:
        """``adopt``: a file only the tool writes there; a folder holding it but no list (made before
        the list existed) is the tool's, every regular file in it too."""
        self.dir = Path(folder)
        root = Path(within) if within is not None else self.dir
        try:
            st = os.lstat(self.dir)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise UnsafeFile(f"{self.dir}: cannot use the folder: {exc.strerror}") from None
        if st is not None and stat.S_ISLNK(st.st_mode) and within is not None:
            raise UnsafeFile(f"{self.dir}: is a link: the tool writes only into a folder of its own; "
                             "remove it")
        if st is not None and not stat.S_ISLNK(st.st_mode) and not stat.S_ISDIR(st.st_mode):
            raise UnsafeFile(f"{self.dir}: is not a folder: give {option} a folder")
        make_dirs(self.dir, root)
        self.owned: set[str] = set()
        marker = self.dir / MARKER
        if os.path.lexists(marker):
            data = read_json(marker, kind="record", within=self.dir)
            if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
                raise UnsafeFile(f"{marker}: not a list of file names: remove it and the tool's files")
            self.owned = {x for x in data if _safe_rel(x)}
        elif adopt is not None and os.path.isfile(self.dir / adopt) and not os.path.islink(self.dir / adopt):
            self.owned = {p.relative_to(self.dir).as_posix() for p in self.dir.rglob("*")
                          if not p.is_symlink() and p.is_file()
                          and _safe_rel(p.relative_to(self.dir).as_posix())}
        elif any(True for _ in self.dir.iterdir()) and not force:
            raise UnsafeFile(f"{self.dir}: not empty and not made by serve-system: give {option} a new or "
                             "empty folder (or --force to write into it, replacing only the files it writes)")
        self.wrote: set[str] = set()

    def path(self, name: str) -> Path:
        """Where the tool's file ``name`` (relative, plain components) goes."""
        if not _safe_rel(name):
            raise UnsafeFile(f"{self.dir}: {name!r} cannot be a file name inside it")
        return self.dir / name

    def clear(self, keep: Callable[[str], bool] = lambda _: False) -> list[str]:
        """Remove the files the tool put here earlier, but those ``keep`` names (never a user's file, never
        through a link: a link in their place is removed, not followed); folders they leave empty go
        too. Returns the names removed."""
        removed = []
        for name in sorted(self.owned):
            if keep(name):
                continue
            p = self.dir / name
            try:
                self._check_parents(name)
                if not stat.S_ISDIR(os.lstat(p).st_mode):
                    os.unlink(p)
                    removed.append(name)
            except (FileNotFoundError, UnsafeFile):
                continue
            for parent in p.relative_to(self.dir).parents:
                if parent == Path("."):
                    break
                with contextlib.suppress(OSError):
                    os.rmdir(self.dir / parent)  # only when empty
        self.owned = {n for n in self.owned if keep(n)}
        self._save()
        return removed

    def _check_parents(self, name: str) -> None:
        cur = self.dir
        for part in name.split("/")[:-1]:
            cur = cur / part
            if os.path.islink(cur):
                raise UnsafeFile(f"{cur}: is a link: the tool never writes or removes through a link")

    def write_bytes(self, name: str, data: bytes) -> Path:
        p = self.path(name)
        self.add(name)
        return write_bytes(p, data, within=self.dir)

    def write_text(self, name: str, text: str) -> Path:
        return self.write_bytes(name, text.encode("utf-8"))

    @contextlib.contextmanager
    def open(self, name: str, *, binary: bool = False, newline: str | None = None) -> Iterator[IO[Any]]:
        p = self.path(name)
        self.add(name)
        with open_write(p, within=self.dir, binary=binary, newline=newline) as fh:
            yield fh

    def add(self, name: str) -> None:
        """Note ``name`` as the tool's (before it is written: an interrupted write is still cleared)."""
        if name not in self.owned:
            self.owned.add(name)
            self._save()
        self.wrote.add(name)

    def _save(self) -> None:
        write_json(self.dir / MARKER, sorted(self.owned), within=self.dir)


def is_plain_path(name: str) -> bool:
    """``name`` is a relative path of plain names (:data:`PLAIN_NAME`), no ``..``, no leading dot."""
    return _safe_rel(name)


def _safe_rel(name: str) -> bool:
    parts = name.split("/")
    return bool(name) and all(PLAIN_NAME.fullmatch(x) for x in parts)


def sync_tree(dest: Path, wanted: dict[str, bytes], *, adopt: str | None = None, private: bool = False,
              option: str = "--dest") -> bool:
    """Make ``dest`` hold ``wanted`` (relative path -> bytes) and none of the files the tool put there
    before (:class:`OwnedFolder`: a user's own files and a user's non-empty folder are never touched;
    nothing is written through a link); True when anything changed. ``adopt``: as
    :class:`OwnedFolder`'s. ``private``: a folder of the tool's own cache (an image's build context),
    mirrored: every other file in it goes too."""
    folder = OwnedFolder(dest, option=option, adopt=adopt, force=private)
    if private:
        folder.owned |= {rel for p in dest.rglob("*") if not p.is_symlink() and p.is_file()
                         and is_plain_path(rel := p.relative_to(dest).as_posix())}
    changed = bool(folder.clear(keep=lambda name: name in wanted))
    for rel, data in wanted.items():
        path = folder.path(rel)
        if not path.is_symlink() and path.is_file() and path.read_bytes() == data:
            folder.add(rel)
            continue
        folder.write_bytes(rel, data)
        changed = True
    return changed
