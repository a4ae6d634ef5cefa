"""A results row's status: one Enum, made from the records' statuses (``level.json``'s ``ok`` |
``failed``, ``variant.json``'s ``refused`` | ``unavailable``), perf_analyzer's ``unmeasured`` level
(:class:`serve_system.experiment.perf.Level`) and the report's own ``contended``.

A :class:`~enum.StrEnum`: a row's status is written to summary.csv/json and shown in report.md as its
value, exactly as the plain strings were; a row read back from a summary file compares equal to it.
"""

from __future__ import annotations

from enum import StrEnum

from ..node import records


class Status(StrEnum):
    #: the level was measured and its numbers read
    OK = records.OK
    #: the level failed (killed, Triton restarted, a raw file not as the runner writes it, ...)
    FAILED = records.FAILED
    #: perf_analyzer printed the level without numbers
    UNMEASURED = "unmeasured"
    #: the variant was not measured: Triton refused its configuration
    REFUSED = records.REFUSED
    #: the variant was not measured: its runtime is missing on the node
    UNAVAILABLE = records.UNAVAILABLE
    #: measured beside other work on the node: kept, not counted (:func:`.reasons.set_aside`)
    CONTENDED = "contended"

    @classmethod
    def of(cls, value: object) -> Status:
        """``value`` as a status; :attr:`FAILED` where it is none of them (a record from a node may hold
        anything)."""
        return next((s for s in cls if s == value), cls.FAILED)


#: the statuses of a variant that measured nothing (Triton refused its config, or its runtime is missing)
NOT_MEASURED: frozenset[Status] = frozenset({Status.REFUSED, Status.UNAVAILABLE})
