"""A folder tree as a comparable snapshot: every path under it, never following a link.

Tests that must show nothing was changed, removed or added (a user's folder, a hostile tree) compare a
snapshot taken before with one taken after.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def snapshot(root: Path) -> dict[str, str]:
    """``{relative path: what it is}``: a link's target, ``fifo``, ``dir``, or a file's SHA-256 and mode."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_fifo():
                out[rel] = "fifo"
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest() + oct(os.lstat(p).st_mode)
    return out
