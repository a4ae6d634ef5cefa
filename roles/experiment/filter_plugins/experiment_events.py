"""Filter of role experiment: the runner's JSON lines, read by the one reader in Python.

    {{ said | experiment_events(explained.stdout | default('')) }}

One runner call's events (what ``--follow`` printed; and the output of its ``--triton-log`` call) as
``{"levels", "variants", "refused", "host_record", "end", "report", "other"}``
(:func:`serve_system.node.events.summarize_events`). No text is matched in YAML.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

from serve_system.node import events, records


def experiment_events(stdout: str | None, explained: str | None = "") -> dict[str, Any]:
    try:
        return events.summarize_events(stdout or "", explained or "")
    except records.RecordError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"experiment_events": experiment_events}
