"""The runner's messages to the controller, defined once: JSON lines, one :class:`Event` per line.

The runner prints them (and keeps them in its ``--log`` file; ``--follow`` replays them):
:func:`event_line` writes one, :func:`read_events` reads them back, :func:`summarize_events` is what
the ``experiment`` role's filter (``experiment_events``) takes of a call; no text is matched. Like
:mod:`.records`, this module uses the standard library only: it is shipped to the node in the runner's
bundle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .. import safeio
from .records import REFUSED, RecordError, from_json, to_json

#: Event.kind values: a level ended; a variant ended (measured, refused or unavailable); the call
#: ended; the runner waits for an earlier one
LEVEL, VARIANT, END, WAITING = "level", "variant", "end", "waiting"


@dataclass
class Event:
    """One message of the runner to the controller: a line of its output (and of its ``--log`` file).

    ``text`` is what the role prints for it; the other fields are what the role decides on.
    """

    kind: str
    host: str
    text: str
    variant: str | None = None
    level: str | None = None
    #: level events: the level's number in this call (1..total) and the call's count of levels
    seq: int | None = None
    total: int | None = None
    #: level: ok | failed; variant: measured | refused | unavailable; end: ok | failed
    status: str | None = None
    error: str | None = None
    #: variant and end events: the levels measured
    measured: int | None = None
    #: end events: the host record (host.json) was written and the baseline restored or not
    host_record: bool = False
    restored: bool | None = None


def event_line(event: Event) -> str:
    """The one-line JSON form of an event (what the runner prints)."""
    return json.dumps(to_json(event), separators=(",", ":"))


def read_events(text: str, where: str = "the runner's output") -> tuple[list[Event], list[str]]:
    """The events in a runner's output, and its other lines (kept: nothing is lost, nothing guessed).

    A line that starts like a JSON object but is not an :class:`Event` is refused (:class:`RecordError`).
    """
    events: list[Event] = []
    other: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.startswith("{"):
            if line.strip():
                other.append(line)
            continue
        try:
            data = safeio.loads_json(line, "")  # finite, bounded numbers
        except safeio.UnsafeFile as exc:
            why = str(exc).lstrip(":0123456789 ")
            raise RecordError(f"{where}: line {n}: not a JSON event ({why})") from None
        events.append(from_json(data, Event, f"{where}: line {n}"))
    return events, other


def summarize_events(text: str, explained: str = "") -> dict[str, Any]:
    """What the ``experiment`` role needs of one runner call's output (``explained``: the output of
    the ``--triton-log`` call, whose variant events replace those of the same variant).

    Returns ``{"levels": [texts], "variants": [texts], "refused": bool, "host_record": bool,
    "end": text or "", "report": the variants' texts then the end's (what the role prints of the call),
    "other": [lines that are not events]}``.
    """
    events, other = read_events(text)
    later, more = read_events(explained, "the --triton-log call's output") if explained else ([], [])
    by_variant = {e.variant: e for e in events if e.kind == VARIANT}
    by_variant.update({e.variant: e for e in later if e.kind == VARIANT})
    ends = [e for e in events if e.kind == END]
    return {
        "levels": [e.text for e in events if e.kind == LEVEL],
        "variants": [e.text for e in by_variant.values()],
        "refused": any(e.status == REFUSED for e in events if e.kind == VARIANT),
        "host_record": any(e.host_record for e in ends),
        "end": ends[-1].text if ends else "",
        "report": [e.text for e in by_variant.values()] + [e.text for e in ends[-1:]],
        "other": other + more,
    }
