"""Folders the tool fills and keeps in step: :class:`OwnedFolder` and :func:`sync_tree`.

:class:`OwnedFolder` is a folder the tool fills: it keeps a list of the files the tool put there
(:data:`MARKER`), empties only those, and refuses a user's non-empty folder (``force``: writes into it,
replacing only its own files). :func:`sync_tree` makes such a folder hold exactly a given set of files.
Every file is read and written through :mod:`serve_system.safeio` (regular files only, links kept inside,
temporary name + rename); every error is its :class:`~serve_system.safeio.UnsafeFile`. Controller side
only: not in the node's bundle.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from .safeio import PLAIN_NAME, UnsafeFile, make_dirs, open_write, read_json, write_bytes, write_json

#: the list of the files the tool put in a folder it fills (:class:`OwnedFolder`)
MARKER = ".serve-system-files.json"

# ------------------------------------------------------------------------- path arguments, declared

#: what a command does with a path argument (:class:`PathArg`); every path-valued argument of the CLI
#: declares one, and tests/unit/test_cli_paths.py walks the parser to hold every command to it
OWNED = "owned folder"    # a folder the tool fills: through :class:`OwnedFolder` (a user's folder refused)
RUN = "run folder"        # a run folder: written only where the tool planned the run (its manifest or plans)
OUTPUT = "output file"    # one file, written through safeio's write path (a folder there is refused)
INPUT = "input"           # only read (through safeio's read path)
NODE = "node path"        # a path on the node, text passed along; nothing here is read or written
USES = (OWNED, RUN, OUTPUT, INPUT, NODE)

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: the longest path (bytes) and path component an argument may name (the kernel's PATH_MAX, NAME_MAX)
PATH_MAX, NAME_MAX = 4096, 255


class PathArg:
    """An argparse ``type=`` declaring a path argument and what the command does with it (:data:`USES`).

    The value is refused (one usage line naming the option) when it holds control characters (a file only
    read: a NUL) or is longer than the system allows; otherwise it becomes a :class:`~pathlib.Path`
    (``text``: kept as text, for a ``NAME=DIR`` value or ``-`` for stdin)."""

    def __init__(self, use: str, *, text: bool = False) -> None:
        if use not in USES:
            raise ValueError(f"unknown path use {use!r}")
        self.use, self.text = use, text
        self.__name__ = f"path ({use})"  # what argparse calls the type in its messages

    def __call__(self, value: str) -> Any:
        # a file to read may have any name (it is escaped wherever it is shown), but NUL; a path the tool
        # writes, or passes to a node, holds no control character
        if "\x00" in value if self.use == INPUT else _CONTROL.search(value):
            raise argparse.ArgumentTypeError(f"{value[:80]!r} holds a control character (a newline, tab or "
                                             "escape): give the path without it")
        if self.text and not value:
            return value  # text options: empty is "not given"
        raw = os.fsencode(value) if not self.text else value.encode("utf-8", "surrogateescape")
        if not raw or len(raw) > PATH_MAX or any(len(part) > NAME_MAX for part in raw.split(b"/")):
            raise argparse.ArgumentTypeError(f"{value[:80]!r}: empty or longer than a path may be "
                                             f"({PATH_MAX} bytes, {NAME_MAX} a name): give a shorter path")
        if self.text:
            return value
        try:
            Path(value).resolve()  # a loop of links: refused here, not a traceback where it is used
        except (OSError, RuntimeError):
            raise argparse.ArgumentTypeError(f"{value[:80]!r}: a loop of links (or a path that cannot be "
                                             "resolved): give a real file or folder") from None
        return Path(value)

    def __repr__(self) -> str:
        return f"PathArg({self.use!r})"


#: the declarations the commands use
OWNED_DIR, RUN_DIR, OUTPUT_FILE = PathArg(OWNED), PathArg(RUN), PathArg(OUTPUT)
INPUT_PATH, INPUT_TEXT, NODE_PATH = PathArg(INPUT), PathArg(INPUT, text=True), PathArg(NODE, text=True)


def path_use(action: argparse.Action) -> str | None:
    """The use an argument declares (:class:`PathArg`), or None."""
    return action.type.use if isinstance(action.type, PathArg) else None


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
    def open(self, name: str, *, binary: bool = False, newline: str | None = None,
             mode: int | None = None) -> Iterator[IO[Any]]:
        p = self.path(name)
        self.add(name)
        with open_write(p, within=self.dir, binary=binary, newline=newline, mode=mode) as fh:
            yield fh

    def add(self, name: str) -> None:
        """Note ``name`` as the tool's (before it is written: an interrupted write is still cleared)."""
        if name not in self.owned:
            self.owned.add(name)
            self._save()
        self.wrote.add(name)

    def _save(self) -> None:
        write_json(self.dir / MARKER, sorted(self.owned), within=self.dir)


#: what only the tool writes in a run folder (serve-system plan): the manifest, a host's plan, the base
#: configs a host's look carried (written first)
RUN_MARKERS = ("manifest.json", "*/plan.json", "*/.node_base")


def is_run_folder(folder: str | Path) -> bool:
    """``folder`` holds what only ``serve-system plan`` writes there (:data:`RUN_MARKERS`, not links)."""
    root = Path(folder)
    return any(not p.is_symlink() for pattern in RUN_MARKERS for p in root.glob(pattern))


def check_run_folder(folder: str | Path, option: str, *, new_ok: bool = False) -> Path:
    """``folder`` as a run folder the tool may write into: one ``serve-system plan`` made
    (:func:`is_run_folder`), or with ``new_ok`` one that does not exist yet or is empty. A user's folder
    (not empty, not a run's) is refused in one line naming it and the fix (:class:`UnsafeFile`)."""
    root = Path(folder)
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        if new_ok:
            return root
        raise UnsafeFile(f"{option} {root}: no such run folder: give results/<experiment>/<run id>") from None
    except OSError as exc:
        raise UnsafeFile(f"{option} {root}: cannot use the folder: {exc.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeFile(f"{option} {root}: is not a folder: give a run folder "
                         "(results/<experiment>/<run id>)")
    if is_run_folder(root) or (new_ok and holds_no_file(root)):
        return root
    raise UnsafeFile(f"{option} {root}: not a run folder made by serve-system plan (no manifest.json nor "
                     "<host>/plan.json): give the run's folder, or a new run id")


def holds_no_file(root: Path) -> bool:
    """Only folders (or nothing) under ``root``: nothing of anyone's would be lost."""
    for _dirpath, _dirnames, filenames in os.walk(root):
        if filenames:
            return False
    return True


def is_plain_path(name: str) -> bool:
    """``name`` is a relative path of plain names (:data:`PLAIN_NAME`), no ``..``, no leading dot."""
    return _safe_rel(name)


def _safe_rel(name: str) -> bool:
    parts = name.split("/")
    return bool(name) and all(PLAIN_NAME.fullmatch(x) for x in parts)


def sync_tree(dest: Path, wanted: dict[str, bytes], *, adopt: str | None = None, private: bool = False,
              option: str = "--dest", force: bool = False) -> bool:
    """Make ``dest`` hold ``wanted`` (relative path -> bytes) and none of the files the tool put there
    before (:class:`OwnedFolder`: a user's own files and a user's non-empty folder are never touched;
    nothing is written through a link); True when anything changed. ``adopt``: as
    :class:`OwnedFolder`'s. ``private``: a folder of the tool's own cache (an image's build context),
    mirrored: every other file in it goes too. ``force``: as :class:`OwnedFolder`'s (a user's
    non-empty folder written into, only the tool's files replaced)."""
    folder = OwnedFolder(dest, option=option, adopt=adopt, force=private or force)
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
