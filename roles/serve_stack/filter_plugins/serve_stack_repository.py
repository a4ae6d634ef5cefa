"""Filter of role serve_stack: what the node's model repository needs to match the rendered one.

    {{ find_result.files | serve_stack_repository_plan(root, wanted_sha256, keep) }}

``find_result.files``: ``ansible.builtin.find`` of the node's repository with ``get_checksum: true``
and ``checksum_algorithm: sha256`` (path, checksum, mode, uid, gid per file); ``wanted_sha256``: the
rendered repository as {relative path: sha256} (``serve-system models render --json``); ``keep``:
more absolute paths that stay (weights fetched on the node).

Returns ``{"copy_files": [relative paths], "make_dirs": [absolute dirs],
"remove_files": [absolute paths]}``: files missing on the node or different in content, owner
(root) or mode (0644); the directories those files go into; files the rendered repository does not
have. One ``find`` replaces one remote stat per file, so a node that already matches costs one
round trip.

    {{ {model: url, ...} | serve_stack_weights(deployed_models) }}

Which weights the node fetches and which models get a stand-in instead: the weights file of each
model is ``serve_system.modelrepo.WEIGHTS`` (the one list of those names); ``url`` is the role's
variable for that model (empty: the generated stand-in). Returns ``{"models": [models whose weights
are fetched], "standin": [deployed ones without a URL], "keep": [relative paths of weights given by
URL], "fetch": [{"model", "url", "path"} of deployed ones with a URL]}``.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from typing import Any

FILE_MODE = "0644"


def serve_stack_repository_plan(
    found: Iterable[Mapping[str, Any]], root: str, wanted: Mapping[str, str], keep: Iterable[str] = ()
) -> dict[str, list[str]]:
    root = root.rstrip("/")
    on_node = {str(f["path"]): f for f in found}
    copy = []
    for rel, sha in sorted(wanted.items()):
        f = on_node.get(f"{root}/{rel}")
        if (f is None or f.get("checksum") != sha or str(f.get("mode")) != FILE_MODE
                or f.get("uid") != 0 or f.get("gid") != 0):
            copy.append(rel)
    dirs = sorted({posixpath.dirname(f"{root}/{rel}") for rel in copy})
    keep_paths = {f"{root}/{rel}" for rel in wanted} | set(keep)
    remove = sorted(p for p in on_node if p not in keep_paths)
    return {"copy_files": copy, "make_dirs": dirs, "remove_files": remove}


def serve_stack_weights(urls: Mapping[str, str], deployed: Iterable[str]) -> dict[str, Any]:
    from serve_system.modelrepo import WEIGHTS  # the controller's serve-system, which renders the repository

    unknown = sorted(set(urls) - set(WEIGHTS))
    if unknown:
        raise ValueError(f"serve_stack_weights: no weights file is known for {', '.join(unknown)} "
                         "(serve_system.modelrepo.WEIGHTS)")
    chosen = set(deployed)
    path = {model: f"{model}/1/{name}" for model, name in WEIGHTS.items()}
    given = [model for model in WEIGHTS if urls.get(model)]
    return {
        "models": list(WEIGHTS),
        "standin": [model for model in WEIGHTS if model in chosen and not urls.get(model)],
        "keep": [path[model] for model in given],
        "fetch": [{"model": model, "url": urls[model], "path": path[model]}
                  for model in given if model in chosen],
    }


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"serve_stack_repository_plan": serve_stack_repository_plan,
                "serve_stack_weights": serve_stack_weights}
