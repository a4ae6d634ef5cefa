"""Action of role experiment: a command on the node, run over the connection itself, no module.

    - experiment_node:
        argv: [python3, /opt/serve-system/work/.../.node.pyz, --follow, ...]
        stdin: "..."              # optional: text on the command's stdin
        stdin_file: /path/on/the/controller   # optional: that file's bytes on its stdin instead
        dest: /path/on/the/controller         # optional: its output, base64, decoded into this file
        too_large_rc: 3           # optional, with dest: the exit status that says the file is too large

Every command the role runs on the node is a command line Python built (the role's view): a module
process on the node costs about a quarter of a second a task (``command``, ``fetch``), the connection
itself a few hundredths (what ``raw`` does). This action quotes ``argv`` for the node's shell word for
word, runs it with the play's become, without a terminal (stdout and stderr apart, lines as printed), and
answers as ``command`` does (``rc``, ``stdout`` without its last newline, ``stderr``, ``changed``); a
non-zero exit fails the task with the command's own lines. With ``dest`` the output is the bytes of a
file (base64: the records archive, :func:`serve_system.experiment.runnercall.fetch_argv`), written home
atomically and never through a link (:mod:`serve_system.safeio`); the answer then holds no output, and
``too_large`` (not a failure) where the command exited ``too_large_rc``: the file is too large for
that, the role fetches it instead.
"""

from __future__ import annotations

import base64
import binascii
import shlex
from pathlib import Path
from typing import Any

from ansible.plugins.action import ActionBase

from serve_system import safeio


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("argv", "stdin", "stdin_file", "dest", "too_large_rc"))

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        args = self._task.args
        argv, stdin, stdin_file, dest = (args.get(k) for k in ("argv", "stdin", "stdin_file", "dest"))
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str | int | float) for a in argv):
            return {**result, "failed": True, "msg": "experiment_node: argv: give a list of words"}
        if stdin is not None and not isinstance(stdin, str):
            return {**result, "failed": True, "msg": "experiment_node: stdin: give text"}
        if stdin is not None and stdin_file is not None:
            return {**result, "failed": True, "msg": "experiment_node: give stdin or stdin_file, not both"}
        cmd = [str(a) for a in argv]
        if self._task.check_mode:
            return {**result, "skipped": True, "msg": "experiment_node: not run in check mode"}
        try:
            data = (stdin.encode("utf-8") if stdin is not None else
                    safeio.read_bytes(stdin_file, kind="bundle") if stdin_file is not None else None)
        except (OSError, safeio.UnsafeFile) as exc:
            return {**result, "failed": True, "msg": f"experiment_node: stdin_file: {exc}"}
        # no terminal: without one the node's stdout and stderr stay apart and lines keep their ends (ssh
        # gives a command without stdin a terminal when become is on; other connections have no such
        # option)
        if self._connection.has_option("use_tty"):
            self._connection.set_option("use_tty", False)
        done = self._low_level_execute_command(shlex.join(cmd), in_data=data or None)
        rc, out, err = done["rc"], done["stdout"], done["stderr"]
        result.update(cmd=cmd, rc=rc, stdout=out.removesuffix("\n"), stderr=err.removesuffix("\n"),
                      changed=True)
        too_large = args.get("too_large_rc")
        if dest is not None and too_large is not None and str(rc) == str(too_large):  # the role fetches it
            return {**result, "stdout": "", "too_large": True, "failed": False}
        if rc:
            return {**result, "failed": True, "msg": err.strip() or f"{cmd[0]} exited {rc}"}
        if dest is not None:
            try:
                body = base64.b64decode("".join(out.split()), validate=True)
                path = Path(str(dest))
                safeio.write_bytes(path, body, within=path.parent.parent)  # its folder: no link
            except binascii.Error:
                return {**result, "stdout": "", "failed": True,
                        "msg": f"experiment_node: {cmd[0]} printed no base64 for {dest}"}
            except (OSError, safeio.UnsafeFile) as exc:
                return {**result, "stdout": "", "failed": True, "msg": f"experiment_node: dest: {exc}"}
            result.update(stdout="", dest=str(path), size=len(body))
        return result
