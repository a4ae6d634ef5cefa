"""Reading a user's file safely: one rule for every command that takes a text file it did not write.

A folder, an unreadable file, a binary file or bytes that are not UTF-8 each give one line naming the
file (and for bad bytes the line, byte and offset) and the fix; each caller says what the file should
have been and which error class its command reports.
"""

from __future__ import annotations

from pathlib import Path

from . import safeio
from .errors import ServeSystemError


def read_bytes(path: Path, folder_fix: str, error: type[ServeSystemError] = ServeSystemError,
               at: str = "") -> bytes:
    """The file's bytes, through the one read path (:func:`safeio.read_bytes`: a regular file, bounded;
    a named pipe or a device is refused, never opened); a folder is ``{path}: is a folder:
    {folder_fix}``, an unreadable file ``{path}{at}: cannot read: {reason}`` (``at``: a position such
    as ``:1:1`` for editors)."""
    try:
        return safeio.read_bytes(path, kind="text")
    except safeio.MissingFile:
        raise error(f"{path}{at}: cannot read: No such file or directory") from None
    except safeio.UnsafeFile as exc:
        if path.is_dir():
            raise error(f"{path}: is a folder: {folder_fix}") from None
        raise error(f"{path}{at}{str(exc).removeprefix(str(path))}") from None


def decode_utf8(raw: bytes, path: Path, fix: str, error: type[ServeSystemError] = ServeSystemError) -> str:
    """UTF-8 text without its BOM; other bytes are ``{path}:{line}: not UTF-8 text (byte .. at offset
    ..): {fix}``."""
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise error(f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}): "
                    f"{fix}") from None
