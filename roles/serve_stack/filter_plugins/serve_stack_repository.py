"""Filters of role serve_stack: what the node's model repository needs to match the rendered one, and
what the node does with the lab's repository.

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

    {{ serve_stack_weights | serve_stack_lab_plan(gpus, deployed, loaded, root) }}

What the node does with the lab's weights (``serve_system.labrepo.node_plan``, the one list of the
lab's files): which files its check reads and copies, which models get a stand-in, the FastAPI
endpoint's model files.

    {{ git_result | serve_stack_lab_fetch_error(apt_result, repository, commit, checkout) }}

The one line that stops the play when git cannot be installed or the lab's repository cannot be
fetched on the node (unreachable, or no such commit): the results of the role's apt and git tasks
(run with ``failed_when: false``, so that their own output does not stand for the reason).

    {{ __serve_stack_lab_plan | serve_stack_render_options(checked_files, repository, commit) }}

``serve-system models render``'s options for the weights (stand-ins, the lab's checked files).

    {{ serve_stack_weights | serve_stack_weights_record(repository, commit, checked_files, rendered_sha256) }}

``{{ serve_stack_root }}/weights.json``: the weights the node serves and their sha256, read into every
level's provenance (``serve_system.labrepo.weights_record``).
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


def serve_stack_lab_plan(choice: str, gpus: Any, deployed: Iterable[str], loaded: Iterable[str],
                         root: str) -> dict[str, Any]:
    from serve_system.labrepo import node_plan  # the controller's serve-system, which renders the repository

    return node_plan(choice, int(gpus), deployed, loaded, root)


#: what git says when the commit is not in the repository (the fetch worked)
_NO_COMMIT = ("reference is not a tree", "unadvertised object", "not our ref", "did not match any",
              "unknown revision", "bad object")


def serve_stack_lab_fetch_error(git: Mapping[str, Any], apt: Mapping[str, Any], repository: str, commit: str,
                                checkout: str) -> str:
    def said(result: Mapping[str, Any]) -> str:
        text = "\n".join(str(result.get(k) or "") for k in ("msg", "stderr")).strip()
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        line = next((x for x in reversed(lines) if x.lower().startswith(("fatal:", "error:"))),
                    lines[0] if lines else "no reason given")
        return " ".join(line.split())[:300]

    text = "\n".join(str(git.get(k) or "") for k in ("msg", "stderr"))
    if apt and not apt.get("skipped") and "executable" in text and "git" in text:
        return (f"cannot install git, which fetches the lab's repository ({said(apt)}): install git on the "
                "node (apt-get install git), then run the play again")
    if any(s in text for s in _NO_COMMIT):
        return (f"the lab's repository {repository} has no commit {commit} ({said(git)}): set "
                "serve_stack_lab_commit to a full commit of it (git ls-remote shows its branches' commits)")
    return (f"cannot fetch the lab's repository {repository} at {commit} into {checkout} ({said(git)}): "
            f"check that the node reaches it (git ls-remote {repository}), or set serve_stack_lab_repo to a "
            "copy it reaches (and serve_stack_lab_commit to a commit of that copy)")


def serve_stack_render_options(plan: Mapping[str, Any], checked: Mapping[str, Any] | None, repository: str,
                               commit: str) -> list[str]:
    from serve_system.labrepo import render_options

    return render_options(dict(plan), dict(checked) if checked else None, repository, commit)


def serve_stack_weights_record(choice: str, repository: str, commit: str, checked: Mapping[str, Any] | None,
                               rendered: Mapping[str, str]) -> dict[str, Any]:
    from serve_system.labrepo import weights_record

    return weights_record(choice, repository, commit, dict(checked) if checked else None, dict(rendered))


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"serve_stack_repository_plan": serve_stack_repository_plan,
                "serve_stack_lab_plan": serve_stack_lab_plan,
                "serve_stack_lab_fetch_error": serve_stack_lab_fetch_error,
                "serve_stack_render_options": serve_stack_render_options,
                "serve_stack_weights_record": serve_stack_weights_record}
