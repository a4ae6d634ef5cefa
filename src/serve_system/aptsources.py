"""apt source definitions on a node: which files already define a repository the play adds.

The ``docker`` and ``nvidia_container_toolkit`` roles add Docker's and NVIDIA's apt repositories as
deb822 files (``/etc/apt/sources.list.d/<name>.sources``) signed by a keyring of their own. A node
first set up by hand (Docker's install guide, the lab's notebook) has the same repository defined
already, in a one-line ``.list`` file with another ``signed-by`` keyring; apt then refuses every
operation ("Conflicting values set for option Signed-By regarding source ..."), whichever apt task
comes next. The ``apt_guard`` role (called by every role of the play before its first apt task) reads
the candidate files and calls :func:`guard` (through its filter plugin) to find them: the repositories
the calling role is about to add, and those of the play's own files already on the node (a notebook
list added after a first run conflicts with them too).

Both formats of sources.list(5) are read: one-line (``deb [opts] URI SUITE [COMPONENT...]``) in
``*.list`` and ``/etc/apt/sources.list``, deb822 paragraphs (``Types:``, ``URIs:``, ...) in
``*.sources``. URIs are compared as apt compares them: ``$(ARCH)`` expanded (NVIDIA's own list file
has ``.../stable/deb/$(ARCH)``), a trailing ``/`` ignored, the scheme and host case-insensitive.
Disabled entries (``Enabled: no``, comment lines) do not count.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

_ONE_LINE = re.compile(r"^(?P<type>deb|deb-src)\s+(?:\[(?P<opts>[^\]]*)\]\s+)?(?P<uri>\S+)")


def normalize_uri(uri: str, arch: str) -> str:
    """``uri`` as apt compares it: ``$(ARCH)`` expanded, no trailing slash, scheme and host lower-case."""
    uri = uri.replace("$(ARCH)", arch).rstrip("/")
    parts = urlsplit(uri)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path, parts.query, parts.fragment))


def _one_line_uris(text: str) -> list[tuple[int, str]]:
    """(line number, URI) of every active entry of a one-line format file."""
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        m = _ONE_LINE.match(line)
        if m:
            out.append((number, m["uri"]))
    return out


def _deb822_uris(text: str) -> list[tuple[int, str]]:
    """(line number of the paragraph's URIs field, URI) of every enabled deb822 paragraph."""
    out: list[tuple[int, str]] = []
    fields: dict[str, tuple[int, str]] = {}
    current: str | None = None

    def flush() -> None:
        enabled = fields.get("enabled", (0, "yes"))[1].strip().lower()
        if "uris" in fields and "types" in fields and enabled not in ("no", "false", "0"):
            number, value = fields["uris"]
            out.extend((number, uri) for uri in value.split())
        fields.clear()

    for number, raw in enumerate(text.splitlines(), start=1):
        if raw.startswith("#"):
            continue
        if not raw.strip():
            flush()
            current = None
            continue
        if raw[0] in " \t":  # continuation line (a multi-line field, e.g. an inline Signed-By key)
            if current is not None:
                line_no, value = fields[current]
                fields[current] = (line_no, f"{value} {raw.strip()}")
            continue
        name, sep, value = raw.partition(":")
        if not sep:
            continue
        current = name.strip().lower()
        fields[current] = (number, value.strip())
    flush()
    return out


def entries(path: str, text: str) -> list[tuple[int, str]]:
    """(line number, URI) of every active entry of the sources file ``path`` holding ``text``."""
    return _deb822_uris(text) if path.endswith(".sources") else _one_line_uris(text)


def slurped(results: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """``{"path", "text"}`` of each ``ansible.builtin.slurp`` result of a loop (``source``, base64
    ``content``); results without content (a file gone since ``find``) are left out. Bytes that are
    not UTF-8 are replaced: such a line is no apt entry of ours either way."""
    out = []
    for r in results:
        content = r.get("content")
        if not isinstance(content, str) or "source" not in r:
            continue
        try:
            raw = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            continue
        out.append({"path": str(r["source"]), "text": raw.decode("utf-8", "replace")})
    return out


def _upstream(uri: str) -> tuple[str, str, str]:
    """The upstream a normalized URI belongs to: scheme, host and first path segment
    (``https://nvidia.github.io/libnvidia-container/...`` for NVIDIA's stable and experimental
    channels alike; ``https://download.docker.com/linux/...`` for Docker's)."""
    parts = urlsplit(uri)
    return parts.scheme, parts.netloc, parts.path.strip("/").split("/", 1)[0]


def owned_uris(files: Iterable[Mapping[str, Any]], arch: str) -> list[str]:
    """The repositories (normalized URIs) the play's own source files define."""
    return sorted({normalize_uri(u, arch) for f in files for _, u in entries(str(f["path"]), str(f["text"]))})


def guard(files: Iterable[Mapping[str, Any]], repositories: Iterable[str], owned: Iterable[str],
          arch: str) -> dict[str, list[Any]]:
    """Which of ``files`` (``{"path", "text"}`` each) define one of the guarded repositories again.

    The guarded repositories are ``repositories`` (the URIs a role is about to add) and every
    repository defined by the play's own files ``owned`` that are among ``files`` (they are on the
    node already). The play's own files are never reported.

    Returns ``{"wanted": [uris], "whole": [{"path", "uris", "also"}], "mixed": [{"path", "lines"}]}``:

    - ``whole``: files every active entry of which is a guarded repository or another channel of the
      same upstream (NVIDIA's ``experimental`` next to ``stable``, as the lab's notebook has it when
      that line is enabled); the role moves them aside and names ``also``, the other channels that
      go with them;
    - ``mixed``: files that define a guarded repository next to other upstreams' (a distribution's
      sources.list with Docker's line in it): the role stops and names the lines, since it never
      edits a file it did not write.
    """
    files = list(files)
    own = set(owned)
    wanted = {normalize_uri(u, arch) for u in repositories}
    wanted |= set(owned_uris([f for f in files if str(f["path"]) in own], arch))
    whole: list[dict[str, Any]] = []
    mixed: list[dict[str, Any]] = []
    for f in files:
        path = str(f["path"])
        if path in own:
            continue
        found = [(n, normalize_uri(u, arch)) for n, u in entries(path, str(f["text"]))]
        hits = sorted({n for n, u in found if u in wanted})
        if not hits:
            continue
        upstreams = {_upstream(u) for _, u in found if u in wanted}
        others = sorted({u for _, u in found if u not in wanted})
        if all(_upstream(u) in upstreams for u in others):
            whole.append({"path": path, "uris": sorted({u for _, u in found if u in wanted}), "also": others})
        else:
            mixed.append({"path": path, "lines": hits})
    return {"wanted": sorted(wanted), "whole": sorted(whole, key=lambda w: str(w["path"])),
            "mixed": sorted(mixed, key=lambda m: str(m["path"]))}



def hosts(uris: Iterable[str]) -> list[str]:
    """The host names of ``uris`` (what a source file that defines one of them names somewhere)."""
    return sorted({urlsplit(u).hostname or "" for u in uris} - {""})
