"""Action of role apt_guard: wait for cloud-init and apt's locks on the node, reporting while it waits.

    - apt_guard_wait:
        timeout: 900      # the bound, seconds (apt_guard_lock_timeout); past it the task fails, one line
        locks: [/var/lib/dpkg/lock-frontend, ...]

Runs the module of the same name (``library/apt_guard_wait.py``) on the node: once to look, then in
slices of at most 30 s while anything is in the way, each followed by a line naming what holds which
lock (a module alone answers only at its end). The loop, the lines and the bound are
:func:`serve_system.aptwait.wait`.
"""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from serve_system.aptwait import wait

display = Display()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("timeout", "locks"))

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        locks = args.get("locks")
        try:
            bound = float(args.get("timeout"))
        except (TypeError, ValueError):
            bound = -1.0
        if bound < 0:
            return {**result, "failed": True,
                    "msg": f"apt_guard_wait: timeout: give seconds (>= 0), not {args.get('timeout')!r}"}
        if not isinstance(locks, list) or not all(isinstance(p, str) and p.startswith("/") for p in locks):
            return {**result, "failed": True, "msg": "apt_guard_wait: locks: give a list of absolute paths"}
        host = str(task_vars.get("inventory_hostname", "?"))

        def look(seconds: float) -> dict[str, Any]:
            answer: dict[str, Any] = self._execute_module(
                module_name="apt_guard_wait", module_args={"locks": locks, "seconds": seconds},
                task_vars=task_vars)
            return answer

        return {**result, **wait(look, host, bound, display.display)}
