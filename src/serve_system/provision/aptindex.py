"""An apt repository's index files: ``Packages`` (and ``.gz``) of a set of .debs, and the ``Release``
file with the size and hashes of the indexes (signed by :mod:`.aptsign`)."""

from __future__ import annotations

import email.utils
import gzip
import hashlib
from pathlib import Path

from ..podman import require_tool, run_tool


def _hashes(data: bytes) -> dict[str, str]:
    return {"MD5sum": hashlib.md5(data).hexdigest(),
            "SHA256": hashlib.sha256(data).hexdigest()}


def packages_index(debs: list[Path], base: Path) -> str:
    """The ``Packages`` index of ``debs``, their ``Filename`` relative to the repository root ``base``."""
    dpkg_deb = require_tool("dpkg-deb", "dpkg")
    stanzas = []
    for deb in sorted(debs):
        fields = run_tool([dpkg_deb, "--field", str(deb)]).stdout.rstrip("\n")
        data = deb.read_bytes()
        rel = deb.relative_to(base).as_posix()
        extra = [f"Filename: {rel if '/' in rel else './' + rel}", f"Size: {len(data)}"]
        extra += [f"{k}: {v}" for k, v in _hashes(data).items()]
        stanzas.append(fields + "\n" + "\n".join(extra) + "\n")
    return "\n".join(stanzas)


def write_index(index_dir: Path, text: str) -> list[Path]:
    """``Packages`` and ``Packages.gz`` (reproducible: no name or time in the gzip header)."""
    index_dir.mkdir(parents=True, exist_ok=True)
    plain = index_dir / "Packages"
    plain.write_text(text, encoding="utf-8")
    gz = index_dir / "Packages.gz"
    gz.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
    return [plain, gz]


def release_text(release_dir: Path, files: list[Path], fields: dict[str, str]) -> str:
    """A ``Release`` file: ``fields``, then the size and hashes of ``files`` relative to ``release_dir``."""
    lines = [f"{k}: {v}" for k, v in fields.items()]
    lines.append("Date: " + email.utils.formatdate(usegmt=True))
    sums: dict[str, list[str]] = {"MD5Sum": [], "SHA256": []}
    for f in sorted(files):
        data = f.read_bytes()
        h = _hashes(data)
        rel = f.relative_to(release_dir).as_posix()
        sums["MD5Sum"].append(f" {h['MD5sum']} {len(data):>16} {rel}")
        sums["SHA256"].append(f" {h['SHA256']} {len(data):>16} {rel}")
    for name, rows in sums.items():
        lines.append(f"{name}:")
        lines.extend(rows)
    return "\n".join(lines) + "\n"
