"""Filter of role serve_stack: what a build context setting names, and whether it is pinned.

    {{ serve_stack_flask_build_context | serve_stack_build_context }}

Returns ``{"kind": "none" | "dir" | "git", "url": str, "commit": str, "error": str}``:

* ``""``: ``none`` (no build);
* a git URL (``https://``, ``http://``, ``git://``, ``ssh://`` or ``git@host:``) with ``#`` and a full
  40-hex commit: ``git``, the URL and the commit, fetched on the node at exactly that commit;
* a git URL whose ``#`` part is a branch, a tag or missing: ``git`` with ``error`` saying why that
  floats (a branch head moves, a tag can be moved) and how to find the commit to pin;
* anything else: ``dir``, a directory on the controller (its content is the pin: the image tag is
  its digest).
"""

from __future__ import annotations

import re
from typing import Any

_GIT = re.compile(r"^(?:(?:https?|git|ssh)://|git@[^:]+:)")
_COMMIT = re.compile(r"^[0-9a-fA-F]{40}$")


def serve_stack_build_context(context: str) -> dict[str, Any]:
    text = str(context or "").strip()
    if not text:
        return {"kind": "none", "url": "", "commit": "", "error": ""}
    if not _GIT.match(text):
        return {"kind": "dir", "url": "", "commit": "", "error": ""}
    url, _, ref = text.partition("#")
    if _COMMIT.match(ref):
        return {"kind": "git", "url": url, "commit": ref.lower(), "error": ""}
    what = f"#{ref}" if ref else "no #commit"
    return {"kind": "git", "url": url, "commit": "",
            "error": (f"{text}: {what} is not a full 40-hex commit, and a branch or tag moves; pin the "
                      f"commit (git ls-remote {url} {ref or 'HEAD'}) as {url}#<commit>")}


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"serve_stack_build_context": serve_stack_build_context}
