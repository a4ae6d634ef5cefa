"""What the runner is told, defined once: a host's plan (``<host>/plan.json``: its variants, their
levels and commands, the runner's settings) and the records a plan carries (a search's, the adaptive
repetitions', a shard's, an objective).

Written by the controller's ``serve-system plan`` (:mod:`serve_system.experiment.runfolder`), read on
the node by :mod:`.runner` and by ``serve-system decide``, through :func:`.records.read` (one line
naming the file and the field where a plan is malformed). Standard library only: it is shipped to the
node. What the runner records of what it measured is :mod:`.records`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from . import defaults
from .records import TRITON


@dataclass
class LevelPlan:
    """One measurement: a load level and repetition of one variant, and the commands to run it."""

    id: str
    mode: str
    load: float
    repetition: int
    argv: list[str]
    retry_argv: list[list[str]]
    done: bool = False
    #: requests sent (FastAPI levels: the client's request count)
    requests: int | None = None


#: the config parameter the render writes where the user chose generated stand-ins
#: (``serve_stack_weights: standin``): a plan measures stand-ins on a GPU node only where it is set
STANDIN_CHOSEN_PARAM = "serve_system_standin_chosen"


@dataclass
class VariantPlan:
    name: str
    model: str
    version: str
    config_pbtxt: str
    load_body: dict[str, Any]
    notes: list[str]
    levels: list[LevelPlan]
    input_data: str | None
    perf: dict[str, Any]
    warmup_argv: list[str] = field(default_factory=list)
    #: the base config says its weights are a generated stand-in (serve_system_weights parameter)
    stand_in: str | None = None
    #: FastAPI variants: the runtime the endpoint is brought up with (onnx, pytorch)
    runtime: str | None = None

    @property
    def todo(self) -> int:
        return sum(not lv.done for lv in self.levels)


@dataclass
class RunnerSettings:
    """How the runner measures and where it runs, its defaults :mod:`.defaults`' (``serve-system plan``
    writes them into the host plan, from its options; the runner's own options only override them).
    The numbers are :data:`NUMBERS`: each is an option of ``serve-system plan`` and of the runner, named
    after its field, its help the field's ``help`` and ``unit``."""

    metrics_interval: float = field(default=defaults.METRICS_INTERVAL_S,
                                    metadata={"help": "seconds between two metrics samples"})
    ready_timeout: float = field(default=defaults.READY_TIMEOUT_S,
                                 metadata={"help": "the wait for a loaded variant to be READY", "unit": "s"})
    perf_timeout: float = field(default=defaults.PERF_TIMEOUT_S,
                                metadata={"help": "time cap of one perf_analyzer run", "unit": "s"})
    perf_memory_mb: float = field(default=defaults.PERF_MEMORY_MB,
                                  metadata={"help": "memory cap of perf_analyzer", "unit": "resident MB"})
    #: the progress file the runner keeps current (as the client container sees it)
    progress: str = defaults.PROGRESS
    #: the client container the runner runs in (``docker exec``)
    container: str = defaults.CONTAINER
    #: this run's node folder as the client container sees it (the bundle and the plan are there)
    client_dir: str = defaults.CLIENT_DIR
    #: the same folder on the node itself (the host-side ``--follow`` reads the runner's log there)
    node_dir: str = ""

    def level_wait_s(self) -> int:
        """The most one level may take: perf_analyzer and its retries, a reload after a fault."""
        return int(self.perf_timeout * 3 + self.ready_timeout * 2)


#: the runner's number settings (each a field of :class:`RunnerSettings` with its ``help``): the options
#: ``--NAME`` of ``serve-system plan`` and of the runner are made from these fields, not written again
NUMBERS: tuple[dataclasses.Field[Any], ...] = tuple(f for f in dataclasses.fields(RunnerSettings)
                                                    if "help" in f.metadata)


@dataclass
class BoundRecord:
    """A constraint on a metric: its value at most ``max`` and at least ``min`` (either may be absent)."""

    max: float | None = None
    min: float | None = None

    def to_json(self) -> dict[str, float]:
        """As a manifest keeps it: the bounds given, none null."""
        return {k: v for k, v in (("max", self.max), ("min", self.min)) if v is not None}


@dataclass
class ObjectiveRecord:
    """An objective as a run keeps it (the manifest's objectives, a search's): what picks the best
    variant, a metric to maximise or minimise, optionally at one load level. Written from the spec's
    :class:`~serve_system.experiment.spec.models.Objective` (``record()``), read by the report and by
    ``serve-system decide``."""

    name: str
    #: a metric of :mod:`serve_system.metrics`' table
    metric: str
    #: ``max`` or ``min``
    goal: str
    at_load: float | None = None
    constraints: dict[str, BoundRecord] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        """As a manifest keeps it (its bounds without the null ones)."""
        return {"name": self.name, "metric": self.metric, "goal": self.goal, "at_load": self.at_load,
                "constraints": {m: b.to_json() for m, b in self.constraints.items()}}


#: a grid value of a search candidate as optuna's categorical choice (a value that is none of these is
#: kept as its JSON text); int before float, so that a whole number reads back as one
ParamValue = str | int | float | bool | None


@dataclass
class SearchCandidate:
    """One candidate of a search: a listed variant (no parameters) or a sweep variant with its grid
    values."""

    name: str
    params: dict[str, ParamValue] = field(default_factory=dict)


@dataclass
class SearchRung:
    """One rung of a search (optuna: its one): the repetitions measured in it and their window."""

    repetitions: list[int]
    window_ms: int


@dataclass
class SearchBudgetRecord:
    """What a search may spend on one host (None: no bound): perf_analyzer runs, measured minutes."""

    runs: int | None = None
    minutes: float | None = None


@dataclass
class SearchShard:
    """A sharded search (``SearchPlan.shard``): the reference every host measures, the hosts, every host's
    candidates (``assignment``, the reference not included). Every shard record starts with these."""

    reference: str
    hosts: list[str]
    assignment: dict[str, list[str]]


@dataclass
class ShardRecord(SearchShard):
    """A sharded run as its manifest keeps it (:mod:`serve_system.experiment.shard`'s ``Shard.record()``):
    the assignment and the rule that dealt it, in words."""

    rule: str = ""


@dataclass
class HostShard(ShardRecord):
    """A sharded run as a host plan keeps it: the run's shard and this host's candidates."""

    candidates: list[str] = field(default_factory=list)


@dataclass
class AdaptivePlan:
    """``repetitions: auto`` as a host plan keeps it (``HostPlan.adaptive``), read by ``serve-system
    decide`` (:mod:`serve_system.results.adaptive`) and the report."""

    #: the repetitions every variant gets first, and the most (the rounds planned)
    start: int
    max: int
    #: the measured minutes after which no repetition is added (None: no bound)
    minutes: float | None = None
    #: ``-e variants``: the variants further repetitions are only of (None: every variant)
    only: list[str] | None = None


@dataclass(kw_only=True)
class SearchPlan:
    """A search as a host plan keeps it (:mod:`serve_system.experiment.search`'s ``plan_record``), read by
    ``serve-system decide`` (:mod:`serve_system.results.searchdecide`) and the report. Keyword-only: its
    fields in the order plan.json has always had them."""

    #: ``halving`` or ``optuna``
    strategy: str
    objective: ObjectiveRecord
    #: the smallest effect of interest, a share (None: the readers' defaults)
    smallest_effect: float | None = None
    candidates: list[SearchCandidate]
    rungs: list[SearchRung]
    budget: SearchBudgetRecord = field(default_factory=SearchBudgetRecord)
    #: optuna: the TPE sampler's seed, its random trials first, the trials per runner call
    seed: int = 0
    startup: int = 4
    batch: int = 4
    #: the runner calls the role may ask ``serve-system decide`` for
    calls: int
    #: whether perf_analyzer measures by time windows (else by request count: the windows are not used)
    timed: bool = True
    #: a sharded search: the shard, and how many variants this host measures (its candidates, the
    #: reference; its estimate's); None: not sharded
    shard: SearchShard | None = None
    share: int | None = None


@dataclass
class HostPlan:
    """Everything the runner needs for one host: written by ``serve-system plan``, read on the node."""

    #: how :func:`.records.read` names a file of it that it refuses
    FILE_KIND: ClassVar[str] = "plan"

    host: str
    gpus: int
    experiment: str
    run_id: str
    variants: list[VariantPlan]
    kind: str = TRITON
    models: list[str] = field(default_factory=list)
    warmup_requests: int = defaults.WARMUP_REQUESTS
    #: provenance shared by every level: git commit, spec hash, ...
    provenance: dict[str, Any] = field(default_factory=dict)
    #: the lowest compute capability of the host's GPUs (nvidia-smi's compute_cap), None where unknown
    compute_capability: float | None = None
    #: rough seconds the pending levels take (for the lease guard and the ETA before the first level)
    estimate_s: float = 0.0
    #: the order of the loads: one list of variant names per repetition (repetition r of every variant,
    #: in that order, then r + 1), shuffled per repetition from ``seed``; empty: each variant once in order
    rounds: list[list[str]] = field(default_factory=list)
    seed: int | None = None
    #: ``repetitions: auto``: the repetitions every variant gets first, the most, the minutes' bound;
    #: None: every planned repetition is measured
    adaptive: AdaptivePlan | None = None
    #: a search (halving, optuna; :mod:`serve_system.experiment.search`): its objective, candidates,
    #: rungs and budget; ``serve-system decide`` picks each batch from it; None: a grid
    search: SearchPlan | None = None
    #: where the runner reaches the services, as the client container sees them: ``triton`` (HTTP API),
    #: ``metrics`` (Prometheus text), ``fastapi`` (the endpoint)
    endpoints: dict[str, str] = field(default_factory=dict)
    #: a sharded run (serve_system.experiment.shard): the reference every host measures, the hosts,
    #: every host's candidates (``assignment``), the rule and this host's (``candidates``); None: every
    #: variant on every host
    shard: HostShard | None = None
    #: the runner's settings (timeouts, memory cap, metrics interval) and where it runs
    runner: RunnerSettings = field(default_factory=RunnerSettings)
    #: what the runner records of the host beside what it reads itself: its OS, the images the stack
    #: runs, its GPUs' compute capabilities (the role's facts task, read by ``serve-system plan``)
    facts: dict[str, Any] = field(default_factory=dict)
    #: the levels this plan measures again that an earlier plan of the run id measured under another
    #: configuration, load or perf settings (theirs set aside in ``<variant>/.superseded/``), one line
    #: each: variant, level, what changed (:mod:`.resume`)
    measured_again: list[str] = field(default_factory=list)
