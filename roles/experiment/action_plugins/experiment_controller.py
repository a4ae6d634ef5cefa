"""Action of role experiment: a ``serve-system`` command run on the controller, in Ansible's own worker.

    - experiment_controller:
        argv: ["{{ experiment_cli }}", decide, RUN_DIR, --host, NAME]
        stdin: "..."            # optional

The commands the role runs on the controller (the plan, ``decide``, the report) need no module: a
``command`` task delegated to localhost starts a module process first (about 0.2 s a task, and the
role asks ``decide`` of every host every round). This action runs ``argv`` itself, as given (no
shell), with ``stdin`` on its standard input, and answers as ``command`` does (``rc``, ``stdout``
without its last newline, ``stderr``, ``changed``); a non-zero exit fails the task with the command's
own lines as its message.
"""

from __future__ import annotations

import subprocess
from typing import Any

from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("argv", "stdin"))

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        argv = self._task.args.get("argv")
        stdin = self._task.args.get("stdin")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str | int | float) for a in argv):
            return {**result, "failed": True, "msg": "experiment_controller: argv: give a list of words"}
        if stdin is not None and not isinstance(stdin, str):
            return {**result, "failed": True, "msg": "experiment_controller: stdin: give text"}
        cmd = [str(a) for a in argv]
        try:
            proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=False)
        except OSError as exc:
            return {**result, "failed": True, "rc": 127, "cmd": cmd, "msg": f"{cmd[0]}: {exc.strerror}"}
        result.update(cmd=cmd, rc=proc.returncode, stdout=proc.stdout.removesuffix("\n"),
                      stderr=proc.stderr.removesuffix("\n"), changed=True)
        if proc.returncode:
            result.update(failed=True, msg=proc.stderr.strip() or f"{cmd[0]} exited {proc.returncode}")
        return result
