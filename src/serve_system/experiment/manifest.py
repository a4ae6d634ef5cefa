"""The run's ``manifest.json``: what was run, where, and how it is judged. Written by ``serve-system
plan`` (:mod:`.runfolder`), read by the report and ``decide`` on the controller; never on the node, so
it is no node record (:mod:`serve_system.node.records`) and its objectives are read by the spec's own
rules."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..node import plans
from ..node import records as rec


def _read_objectives(data: Any, where: str) -> list[plans.ObjectiveRecord]:
    """A manifest's objectives, checked by the spec's own rules (names, metrics, goals, loads,
    constraints): a :class:`~serve_system.experiment.spec.messages.SpecError` of one line naming the
    field; none (an empty list, null): the default objectives."""
    from .spec.reader import read_objectives  # pydantic's models: imported by the readers that need them

    return [o.record() for o in read_objectives(data, where)]


@dataclass
class Manifest:
    """The run's ``manifest.json`` (:data:`~serve_system.node.records.MANIFEST_FILE`). Every field may be
    absent in runs planned before it existed; read with :func:`serve_system.node.records.read`."""

    experiment: str | None = None
    run_id: str | None = None
    kind: str = rec.TRITON
    #: when the run was first planned (ISO 8601, UTC)
    start: str | None = None
    description: str | None = None
    spec_file: str | None = None
    #: the spec as written
    spec: dict[str, Any] = field(default_factory=dict)
    stand_in: str | None = None
    hosts: list[str] = field(default_factory=list)
    #: what picks the best variant, read through the spec's own rules (:func:`_read_objectives`); empty in
    #: a manifest without the field (the report then judges by the default objectives)
    objectives: list[plans.ObjectiveRecord] = field(default_factory=list, metadata={"read": _read_objectives})
    #: the shard record of a sharded run (:mod:`serve_system.experiment.shard`)
    shard: plans.ShardRecord | None = None
    smallest_effect: Any = None

    def to_json(self) -> dict[str, object]:
        """manifest.json's text: the record, its objectives as :meth:`ObjectiveRecord.to_json` keeps them."""
        return {**rec.to_json(self), "objectives": [o.to_json() for o in self.objectives]}
