#!/usr/bin/python
"""Module of role serve_stack: the lab's weights in its checkout on the node, checked, checksummed and
copied where the stack serves them.

    serve_stack_lab_files:
      checkout: /opt/serve-system/lab
      repository: https://github.com/teaching-on-testbeds/serve-system-chi.git
      commit: 012a8b946b432f62e120d315ae974c54c303e9da
      files:
        - {path: models_staging/food_classifier/1/food11.pth, dest: /opt/serve-system/model_repository/...}
        - {path: fastapi_pt/food11.pth, dest: ""}

Each file is read on the node once: it must be a regular file inside the checkout (no link), not empty
and not a git-LFS pointer (a text starting ``version https://git-lfs.github.com/spec/v1``: what a clone
holds for a file its repository keeps in LFS, where git-lfs did not fetch it). The first that is not
fails the task with one line naming it and the fix. Each is hashed (sha256) and, where ``dest`` is
given, copied there (``mode``, the module's user; through a temporary file renamed into place) unless
``dest`` already holds the same bytes and mode: a node that has them changes nothing.

A rehearsal's stand-in repository (``serve_system.labrepo``) lists its generated files in
``.serve-system-standin.json`` (path -> sha256): a file listed with its own sha256 is answered
``standin: true``.

Returns ``files`` ({path: {sha256, size, standin}}), ``copied`` (the dests written) and ``changed``.
The logic is in plain functions (:func:`check`, :func:`copy_if_different`, :func:`standins`) that
tests/unit/test_serve_stack_lab.py runs without Ansible.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile

LFS_POINTERS = (b"version https://git-lfs.github.com/spec/v1", b"version https://hawser.github.com/spec/v1")
STANDIN_MANIFEST = ".serve-system-standin.json"
CHUNK = 1 << 20


class LabFileError(Exception):
    """A lab file that cannot be served; the message is one line naming it and the fix."""


def _inside(path: str, root: str) -> bool:
    return os.path.commonpath([path, root]) == root


def _sha256(path: str) -> tuple[str, int, bytes]:
    h = hashlib.sha256()
    size = 0
    head = b""
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            if not size:
                head = chunk[:64]
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size, head


def check(checkout: str, rel: str, where: str) -> tuple[str, int]:
    """(sha256, size) of ``rel`` in ``checkout``; :class:`LabFileError` when it cannot be served.
    ``where``: the repository and commit, as the message names them."""
    root = os.path.realpath(checkout)
    path = os.path.join(root, rel)
    if os.path.isabs(rel) or ".." in rel.split("/") or not _inside(os.path.normpath(path), root):
        raise LabFileError(f"{rel}: not a path inside the lab's checkout {checkout}")
    shown = os.path.join(checkout, rel)
    fix = ("set serve_stack_lab_commit to a commit of the lab's repository that holds it, or choose "
           "generated stand-ins with -e serve_stack_weights=standin")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise LabFileError(f"{shown} is missing: {where} has no such file: {fix}") from None
    except OSError as exc:
        raise LabFileError(f"{shown} cannot be read ({exc.strerror}): {fix}") from None
    if not stat.S_ISREG(st.st_mode) or os.path.realpath(path) != os.path.normpath(path):
        raise LabFileError(f"{shown} is not a regular file (a link, a folder or a device) in {where}: {fix}")
    sha, size, head = _sha256(path)
    if size == 0:
        raise LabFileError(f"{shown} is empty in {where}: {fix}")
    if head.startswith(LFS_POINTERS):
        raise LabFileError(
            f"{shown} is a git-LFS pointer ({size} bytes), not the weights: {where} keeps this file in git "
            "LFS; point serve_stack_lab_repo at a copy that holds the files themselves (a mirror after "
            "`git lfs pull`), or choose generated stand-ins with -e serve_stack_weights=standin")
    return sha, size


def standins(checkout: str) -> dict[str, str]:
    """The generated files a stand-in repository lists (path -> sha256); {} for the lab's own."""
    path = os.path.join(checkout, STANDIN_MANIFEST)
    if not os.path.isfile(path) or os.path.islink(path) or os.path.getsize(path) > 1 << 20:
        return {}
    try:
        with open(path, "rb") as fh:
            doc = json.loads(fh.read().decode("utf-8"))
    except (OSError, ValueError):
        return {}
    files = doc.get("files") if isinstance(doc, dict) else None
    return {str(k): v for k, v in files.items() if isinstance(v, str)} if isinstance(files, dict) else {}


def copy_if_different(src: str, dest: str, sha: str, mode: int) -> bool:
    """``dest`` made to hold ``src``'s bytes (sha256 ``sha``) with ``mode``; True when written or its mode
    set. Parent folders are made (0755); the copy goes to a temporary name and is renamed into place."""
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_size == os.path.getsize(src) \
            and _sha256(dest)[0] == sha:
        if stat.S_IMODE(st.st_mode) == mode:
            return False
        os.chmod(dest, mode)
        return True
    folder = os.path.dirname(dest)
    os.makedirs(folder, mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".lab-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out, open(src, "rb") as fh:
            while chunk := fh.read(CHUNK):
                out.write(chunk)
        os.chmod(tmp, mode)
        os.replace(tmp, dest)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True


def run(checkout: str, repository: str, commit: str, files: list[dict[str, str]], mode: int,
        check_mode: bool = False) -> dict[str, object]:
    """Every file checked, then copied where it goes; the module's result. The first problem raises
    :class:`LabFileError` (one line), with the number of further files that have one."""
    where = f"{repository} at {commit}"
    found: dict[str, dict[str, object]] = {}
    problems: list[str] = []
    generated = standins(checkout)
    for item in files:
        rel = item["path"]
        if rel in found:
            continue
        try:
            sha, size = check(checkout, rel, where)
        except LabFileError as exc:
            problems.append(str(exc))
            continue
        found[rel] = {"sha256": sha, "size": size, "standin": generated.get(rel) == sha}
    if problems:
        more = f" (and {len(problems) - 1} more file(s) of the lab's)" if len(problems) > 1 else ""
        raise LabFileError(problems[0] + more)
    copied = []
    for item in files:
        if item.get("dest"):
            src = os.path.join(checkout, item["path"])
            sha = str(found[item["path"]]["sha256"])
            if check_mode:
                continue
            if copy_if_different(src, item["dest"], sha, mode):
                copied.append(item["dest"])
    return {"files": found, "copied": copied, "changed": bool(copied)}


def main() -> None:
    from ansible.module_utils.basic import AnsibleModule

    module = AnsibleModule(
        argument_spec={
            "checkout": {"type": "path", "required": True},
            "repository": {"type": "str", "required": True},
            "commit": {"type": "str", "required": True},
            "files": {"type": "list", "elements": "dict", "required": True},
            "mode": {"type": "str", "default": "0644"},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        mode = int(p["mode"], 8)
        result = run(p["checkout"], p["repository"], p["commit"], p["files"], mode, module.check_mode)
    except LabFileError as exc:
        module.fail_json(msg=str(exc))
    except (OSError, ValueError) as exc:
        module.fail_json(msg=f"the lab's weights in {p['checkout']}: {exc}")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
