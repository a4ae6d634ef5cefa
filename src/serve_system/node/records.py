"""The experiment's records, defined once: variant, level, host and progress (a host's plan, what the
runner is told, is :mod:`.plans`), and how every record and plan is written and read.

Only Python writes and reads them (the controller's ``serve-system plan``, the node-side runner,
:mod:`serve_system.results`); Ansible only carries them from one side to the other. This module
uses the standard library only: it is shipped to the node next to :mod:`.runner`.

Files of a run (``results/<experiment>/<run-id>/``)::

    <host>/plan.json                        plans.HostPlan (what the runner does on that host)
    <host>/<variant>/variant.json           VariantRecord (measured | refused | unavailable)
    <host>/<variant>/<level>/level.json     LevelRecord (ok | failed, attempts, provenance)
    <host>/host.json                        HostRecord (end of the run, baseline restored)
    node: /opt/serve-system/work/progress.json   Progress (read by ``serve-system status``)

A record that does not parse is refused with one line naming the file and the field
(:class:`RecordError`); :func:`level_resume` is the one resume rule (:func:`level_done` its yes or no):
a level is reused only when its record's :class:`Setting` (its configuration, load and perf settings,
as hashes) is the plan's; what a changed plan measures again is set aside, never deleted
(:mod:`.resume`). The runner's JSON-lines messages to the controller are :mod:`.events`.
A host's records travel from the node to the controller in one archive: :mod:`.archive`.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from .. import safeio

#: VariantRecord.status values
MEASURED, REFUSED, UNAVAILABLE = "measured", "refused", "unavailable"
#: the statuses of a variant that measured nothing (Triton refused its config, or its runtime is missing)
NOT_MEASURED = (REFUSED, UNAVAILABLE)
#: LevelRecord.status values
OK, FAILED = "ok", "failed"
#: experiment kinds: the spec's ``kind`` (a Triton model measured with perf_analyzer, or the FastAPI endpoint)
TRITON, FASTAPI = "triton", "fastapi"


class RecordError(safeio.UnsafeFile):
    """A record file that cannot be used; the message is one line naming the file and the field.

    A :class:`ValueError` too: callers that validate records treat it as bad data."""


@dataclass
class Attempt:
    """One run of a measuring command (perf_analyzer or the FastAPI client)."""

    argv: list[str]
    rc: int | None
    start: float
    end: float
    #: why this attempt was made (retries) or how it ended badly (killed, unstable)
    reason: str | None = None
    #: resident memory sampled every 0.2 s (the runner's memory cap watches it), MB
    max_rss_mb: float | None = None
    #: the command's peak resident memory as the kernel counted it (wait4's ru_maxrss), bytes;
    #: exact even when it was killed
    peak_rss_bytes: int | None = None
    #: the CPU seconds (user + system) the command and its reaped children used (wait4's rusage): a
    #: client that has exited is gone from /proc by the level's second reading
    cpu_s: float | None = None


#: a level counts as measured under contention when, over its span, processes other than Triton and
#: the measuring client (with the busy time no process the node shows accounts for: work outside the
#: node's view) took at least this share of the node's CPU time, or (the CPU saturated: busy
#: at least :data:`SATURATED_BUSY`) at least this share of the CPU time the node's processes got; or
#: when the hypervisor stole at least :data:`CONTENDED_STEAL`. CPU pressure (/proc/pressure/cpu) is
#: recorded and said with the cause, but is no cause alone: Triton's and perf_analyzer's own threads
#: wait for CPUs on a small node too.
CONTENDED_OTHERS = 0.25
CONTENDED_STEAL = 0.10
SATURATED_BUSY = 0.90
#: processes that are the measurement itself (their ``comm``, truncated by the kernel to 15 bytes)
MEASURING = ("tritonserver", "triton_python_b", "perf_analyzer", "fastapi_bench")


@dataclass
class Contention:
    """What else used the node's CPU while a level ran: the runner's two readings of /proc (the
    node's own /proc where the client container sees it at ``/host/proc``), at the level's start and
    end. Shares are of the node's CPU time over the span (``cpus`` x ``seconds``)."""

    seconds: float
    cpus: int
    #: the share of the node's CPU time spent busy (every process), and stolen by the hypervisor
    busy: float | None = None
    steal: float | None = None
    #: the share of the span some task waited for a CPU (/proc/pressure/cpu ``some``; None: no PSI)
    pressure: float | None = None
    #: the share taken by processes other than Triton and the measuring client (None: the node's
    #: processes are not visible from the client container), and by Triton and the client
    others: float | None = None
    measuring: float | None = None
    #: the busy share that no process the node shows accounts for (busy - others - measuring): work
    #: outside the node's view (another tenant of the host, a rehearsal machine's other work), and
    #: interrupts (None: the node's processes or /proc/stat not visible)
    unseen: float | None = None
    #: the other processes that took the most CPU, ``"comm (pid) 12.3 CPU-s"``, most first
    top: list[str] = field(default_factory=list)
    #: why the level counts as contended (None: it does not)
    cause: str | None = None

    @property
    def contended(self) -> bool:
        return self.cause is not None


def _plain(text: str) -> str:
    """A process's words as a report may print them: letters, digits and ``._-:()/@+=`` and spaces
    kept, anything else (markup, control characters) as ``?``, at most 60 characters (a process
    names itself: the node's words are not trusted)."""
    return "".join(ch if ch.isascii() and (ch.isalnum() or ch in " ._-:()/@+=") else "?"
                   for ch in str(text)[:60])


def contention_cause(c: Contention) -> str | None:
    """Why a level's readings count as contention (the thresholds above), or None."""
    why = []
    who = f": {', '.join(_plain(t) for t in c.top[:3])}" if c.top else ""
    unseen = c.unseen or 0.0
    others = None if c.others is None else c.others + unseen
    used = (others or 0.0) + (c.measuring or 0.0)
    hidden = (f" ({unseen * 100:.0f} % by work the node's processes do not account for: another tenant "
              "of the host, or the host's other work)") if unseen >= CONTENDED_OTHERS / 2 else ""
    if others is not None and others >= CONTENDED_OTHERS:
        why.append(f"other processes took {others * 100:.0f} % of the node's CPU{hidden}{who}")
    elif others is not None and c.measuring is not None and c.busy is not None \
            and c.busy >= SATURATED_BUSY and used > 0 and others / used >= CONTENDED_OTHERS:
        why.append(f"the CPU was saturated (busy {c.busy * 100:.0f} %) and other processes took "
                   f"{others / used * 100:.0f} % of the CPU time the node's processes got{hidden}{who}")
    if c.steal is not None and c.steal >= CONTENDED_STEAL:
        why.append(f"the hypervisor stole {c.steal * 100:.0f} % of the CPU time")
    if why and c.pressure is not None:
        why.append(f"some task waited for a CPU {c.pressure * 100:.0f} % of the time")
    return "; ".join(why) or None


@dataclass
class Setting:
    """What a level is measured under, as hashes (:func:`.resume.level_setting` makes them from the plan,
    the same way on the controller and on the node): the variant's configuration (its config.pbtxt; a
    FastAPI variant's runtime), the level's load (mode, load, repetition, requests, arrival
    distribution) and its perf settings (the measuring command, its retries and the warm-up before it).
    None: not recorded (a level recorded before the hashes has its configuration's only)."""

    config_sha256: str | None = None
    load_sha256: str | None = None
    perf_sha256: str | None = None

    #: each hash's part, in words (what the plan says changed)
    PARTS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("config_sha256", "configuration"), ("load_sha256", "load"), ("perf_sha256", "perf settings"))

    def changed(self, planned: Setting) -> list[str]:
        """The parts (in words) whose hash differs from ``planned``'s, where both are recorded."""
        return [words for name, words in self.PARTS
                if getattr(self, name) is not None and getattr(planned, name) is not None
                and getattr(self, name) != getattr(planned, name)]


@dataclass
class LevelRecord:
    variant: str
    level: str
    mode: str
    load: float
    repetition: int
    status: str
    start: float
    end: float
    attempts: list[Attempt]
    batch_size: int = 1
    error: str | None = None
    tool: str = "perf_analyzer"
    requests: int | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    #: the measuring client's (perf_analyzer's or the FastAPI client's) peak resident memory over the
    #: level's attempts, bytes (:func:`client_peak_rss`); None when no attempt ran
    client_peak_rss_bytes: int | None = None
    #: what else used the node's CPU during the level (None: not sampled, e.g. an older runner)
    contention: Contention | None = None
    #: what it was measured under (None: recorded before the hashes; its provenance's config_sha256)
    setting: Setting | None = None

    def recorded_setting(self) -> Setting:
        """Its setting; a level recorded before the hashes: its configuration's hash (its provenance's
        ``config_sha256``: a Triton level's; a FastAPI level's was of no config.pbtxt, and says nothing)."""
        if self.setting is not None:
            return self.setting
        config = self.provenance.get("config_sha256") if self.tool == "perf_analyzer" else None
        return Setting(config_sha256=config if isinstance(config, str) else None)


def client_peak_rss(attempts: list[Attempt]) -> int | None:
    """The largest peak resident memory of these attempts (bytes), None when none was counted."""
    peaks = [a.peak_rss_bytes for a in attempts if a.peak_rss_bytes is not None]
    return max(peaks) if peaks else None


@dataclass
class VariantRecord:
    name: str
    model: str
    version: str
    status: str
    error: str | None = None
    #: seconds Triton's load call took (its own model load)
    load_seconds: float | None = None
    #: seconds from the load call until the variant was READY (the whole switch)
    switch_seconds: float | None = None
    #: when the load call was made (UNIX seconds): Triton's log lines of a refusal are matched by time
    load_started: float | None = None
    #: seconds the warm-up requests took (before the first level; not part of any level)
    warmup_seconds: float | None = None
    #: every switch to this variant in the run, the last one included: its switch and warm-up seconds
    #: (an interleaved run loads a variant once per repetition; the two fields above are the last load's)
    switches: list[float] = field(default_factory=list)
    warmups: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stand_in: str | None = None
    runtime: str | None = None
    health: dict[str, Any] | None = None
    #: the configuration it was loaded with (:func:`.resume.config_sha256`; None: recorded before it)
    config_sha256: str | None = None


@dataclass
class HostRecord:
    host: str
    end: str
    baseline_restored: bool
    restore_status: list[int] = field(default_factory=list)
    failed_levels: list[str] = field(default_factory=list)
    #: seconds Triton took to unload and load the models' committed configs again
    restore_seconds: float | None = None


@dataclass
class Progress:
    """The runner's progress, kept current in ``/work/progress.json`` on the node while it measures (the
    status board reads it): which variant and level run now, how many levels are done of how many."""

    experiment: str
    run_id: str
    variant: str
    level: str
    levels_done: int
    levels_total: int
    state: str
    updated: float


#: the files of a run folder, named once (see the module's docstring for the layout)
MANIFEST_FILE, SPEC_FILE, PLAN_FILE, HOST_FILE = "manifest.json", "spec.yml", "plan.json", "host.json"
VARIANT_FILE, CONFIG_FILE, LOAD_BODY_FILE = "variant.json", "config.pbtxt", "load_body.json"
LEVEL_FILE, PERF_STDOUT_FILE, PERF_CSV_FILE = "level.json", "perf.stdout", "perf.csv"
STATS_BEFORE_FILE, STATS_AFTER_FILE, METRICS_FILE = "stats_before.json", "stats_after.json", "metrics.jsonl"
#: beside the plan on the node: the lock every runner holds from its start to its end
RUNNER_LOCK = ".runner.lock"


R = TypeVar("R")


# ------------------------------------------------------------------------------- (de)serialising

def to_json(rec: Any) -> dict[str, Any]:
    return dataclasses.asdict(rec)


def write(path: str | Path, rec: Any, within: str | Path | None = None) -> None:
    """Write a record atomically (a reader never sees half a file; a link there is replaced, not
    followed; ``within``: the folder it must stay inside, default its own)."""
    safeio.write_json(path, to_json(rec), within=within)


def read(path: str | Path, cls: type[R], within: str | Path | None = None, fix: str = "") -> R:
    """Read a record of type ``cls`` through :mod:`safeio` (a regular file, bounded, inside ``within``:
    default the record's own folder); :class:`RecordError` (one line: file and field, then ``fix``) if
    malformed."""
    p = Path(path)
    kind = getattr(cls, "FILE_KIND", "record")
    try:
        data = safeio.read_json(p, kind=kind, within=p.parent if within is None else within)
        return from_json(data, cls, str(p))
    except safeio.UnsafeFile as exc:
        raise RecordError(f"{exc}; {fix}" if fix else str(exc)) from None


#: each record class's resolved type hints and fields (:func:`_fields`)
_FIELDS: dict[type, tuple[dict[str, Any], list[dataclasses.Field[Any]]]] = {}


def _fields(cls: type) -> tuple[dict[str, Any], list[dataclasses.Field[Any]]]:
    """A record class's resolved type hints and its fields: the same for every record read, so worked
    out once (``typing.get_type_hints`` evaluates every annotation's text again each time it is asked:
    most of what reading a report's thousands of records cost)."""
    if cls not in _FIELDS:
        _FIELDS[cls] = typing.get_type_hints(cls), list(dataclasses.fields(cls))
    return _FIELDS[cls]


def from_json(data: Any, cls: type[R], where: str, prefix: str = "") -> R:
    if not isinstance(data, dict):
        raise RecordError(f"{where}: {prefix or '-'}: expected an object for {cls.__name__}")
    hints, fields = _fields(cls)
    kwargs: dict[str, Any] = {}
    for f in fields:
        name = f.name
        fld = f"{prefix}{name}"
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise RecordError(f"{where}: {fld}: missing")
            continue
        read = f.metadata.get("read")  # a field read by rules of its own (a manifest's objectives)
        kwargs[name] = read(data[name], where) if read else _convert(data[name], hints[name], where, fld)
    return cls(**kwargs)


def _bounded(value: float, where: str, fld: str) -> float:
    """Every number of a record within :data:`safeio.MAX_MAGNITUDE` (one line naming file and field),
    however the record was read (a record built from data in memory too)."""
    try:
        return safeio.check_number(value, where, fld)
    except safeio.UnsafeFile as exc:
        raise RecordError(str(exc)) from None


def _convert(value: Any, tp: Any, where: str, fld: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _convert(value, a, where, fld)
            except RecordError as exc:
                errors.append(str(exc))
        raise RecordError(errors[0] if errors else f"{where}: {fld}: must not be null")
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        return from_json(value, tp, where, fld + ".")  # type: ignore[arg-type]
    if origin is list:
        if not isinstance(value, list):
            raise RecordError(f"{where}: {fld}: expected a list, got {type(value).__name__}")
        return [_convert(v, args[0] if args else Any, where, f"{fld}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise RecordError(f"{where}: {fld}: expected an object, got {type(value).__name__}")
        return {str(k): _convert(v, args[1] if args else Any, where, f"{fld}.{k}") for k, v in value.items()}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RecordError(f"{where}: {fld}: expected a number, got {value!r}")
        return float(_bounded(value, where, fld))
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise RecordError(f"{where}: {fld}: expected a whole number, got {value!r}")
        return _bounded(value, where, fld)
    if tp in (str, bool):
        if not isinstance(value, tp):
            raise RecordError(f"{where}: {fld}: expected {tp.__name__}, got {value!r}")
        return value
    return value


# ------------------------------------------------------------------------------------- resume

def level_resume(level_dir: str | Path, planned: Setting | None = None
                 ) -> tuple[LevelRecord | None, list[str]]:
    """The resume rule: a level's record (None: it has no complete, readable one) and what of its
    setting differs from the plan's (``planned``: the plan's :class:`Setting` for it; None: not compared).

    A level is reused (done) when it has a record and nothing differs. A record is written last,
    atomically, once every raw file of the level is on disk, so its presence means nothing of the level
    is missing; failed levels count as done too (their reason is recorded; ``fresh`` measures them
    again). A level folder without a record is an interrupted attempt and is measured again from
    scratch. A level whose configuration, load or perf settings differ from the plan's was measured
    under another plan: it is set aside (:func:`.resume.settle`, never deleted) and measured again, so
    a run's results never mix two configurations.
    """
    path = Path(level_dir) / LEVEL_FILE
    if not path.exists():
        return None, []
    try:
        level = read(path, LevelRecord)
    except RecordError:
        return None, []
    return level, [] if planned is None else level.recorded_setting().changed(planned)


def level_done(level_dir: str | Path, planned: Setting | None = None) -> bool:
    """The resume rule's yes or no (:func:`level_resume`): the level is done and its setting the plan's."""
    level, changed = level_resume(level_dir, planned)
    return level is not None and not changed


def done_levels(host_dir: str | Path) -> set[tuple[str, str]]:
    """(variant, level id) pairs already done under a host folder (controller or node)."""
    h = Path(host_dir)
    if not h.is_dir():
        return set()
    return {(p.parent.parent.name, p.parent.name) for p in h.glob("*/*/level.json") if level_done(p.parent)}


def measured_minutes(host_dir: str | Path) -> float:
    """The minutes a host's levels took: each level record's end - start, every level with a readable
    record (failed and contended ones too), links and hidden folders left out. What ``repetitions:
    auto``'s ``budget.minutes`` counts, on the controller (``serve-system decide``) and on the node (the
    runner's ``--restore-past``) alike."""
    h = Path(host_dir)
    total = 0.0
    for vdir in plain_dirs(h):
        for ldir in plain_dirs(vdir):
            path = ldir / LEVEL_FILE
            if not os.path.lexists(path):
                continue
            try:
                level = read(path, LevelRecord)
            except RecordError:
                continue
            total += level.end - level.start
    return total / 60


def plain_dirs(folder: Path) -> list[Path]:
    """The folders in ``folder`` (not hidden, not links); none when it is no folder."""
    try:
        return sorted(p for p in folder.iterdir() if not p.name.startswith(".") and not p.is_symlink()
                      and p.is_dir())
    except OSError:
        return []
