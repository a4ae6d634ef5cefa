"""Filter of role serve_stack: a short digest of an image's recipe, for its tag.

    {{ [build_context_dir, extra_file, ...] | serve_stack_recipe_digest }}

The images built on the node (Triton, Jupyter) are tagged with the digest of everything they are
built from: each path given (a directory: every file under it, by relative path and content; a
file: its name and content), so a changed recipe (a package added to the models' requirements, a new
Dockerfile) is a new tag that the role builds, and an unchanged one is found on the node and reused.
A fixed tag would keep an image built from an older recipe forever. Anything else given counts by
its text: a value the recipe depends on that is not a file (a build argument such as
``TORCH_SOURCE=pypi``, a git URL with its commit), or a path that does not exist (the role's copy of
the build context then says which).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from typing import Any


def serve_stack_recipe_digest(paths: Iterable[str], length: int = 12) -> str:
    h = hashlib.sha256()
    for given in paths:
        text = str(given)
        root = os.path.abspath(os.path.expanduser(text))
        if os.path.isdir(root):
            files = sorted(os.path.relpath(os.path.join(d, f), root)
                           for d, _, names in os.walk(root) for f in names)
            items = [(rel, os.path.join(root, rel)) for rel in files]
        elif os.path.isfile(root):
            items = [(os.path.basename(root), root)]
        else:  # a value, or a missing path (the build's own copy task names it): counted by its text
            h.update(b"value\0" + text.encode() + b"\0")
            continue
        for rel, path in items:
            h.update(rel.replace(os.sep, "/").encode() + b"\0")
            with open(path, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()[:length]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"serve_stack_recipe_digest": serve_stack_recipe_digest}
