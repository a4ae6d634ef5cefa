"""Filters of role experiment: the runner's JSON lines, read by the one reader in Python.

    {{ run.stdout | experiment_events(explained.stdout | default('')) }}
    {{ follow.stdout | experiment_event }}

``experiment_events``: one runner call's output (and that of its ``--triton-log`` call) as
``{"levels", "variants", "refused", "host_record", "end", "other"}``
(:func:`serve_system.experiment.records.summarize_events`). ``experiment_event``: the last event of
an output (``--follow`` prints one) as a dict (``kind``, ``text``, ...). No text is matched in YAML.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

from serve_system.experiment import records


def experiment_events(stdout: str | None, explained: str | None = "") -> dict[str, Any]:
    try:
        return records.summarize_events(stdout or "", explained or "")
    except records.RecordError as exc:
        raise AnsibleFilterError(str(exc)) from None


def experiment_event(stdout: str | None) -> dict[str, Any]:
    try:
        events, _ = records.read_events(stdout or "")
    except records.RecordError as exc:
        raise AnsibleFilterError(str(exc)) from None
    return records.to_json(events[-1]) if events else {}


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"experiment_events": experiment_events, "experiment_event": experiment_event}
