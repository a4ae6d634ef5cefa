"""Experiment specs, the typed model: declared once.

A spec file is YAML data describing one experiment. Two kinds exist:

* ``kind: triton`` (the default when ``kind`` is absent): a Triton model, its base config, variants
  (config overrides, or a sweep grid that generates them), the load, perf_analyzer settings,
  repetitions and the objectives that pick the best variant (:class:`TritonSpec`);
* ``kind: fastapi``: the lab's FastAPI endpoint, one variant per runtime, load levels of concurrent
  senders and request counts (:class:`FastapiSpec`).

The pydantic models below are the schema: ``serve-system validate`` and ``plan`` check specs with
them, ``serve-system schema`` prints their JSON Schema, and the report reads objectives through
:class:`Objective`. Reading a file is :mod:`.reader`'s work; messages are :mod:`.messages`'.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    WithJsonSchema,
)

from ... import metrics
from ...node import defaults, plans
from ...textsafe import JINJA_RE, clean

#: the largest spec file read, in bytes
MAX_BYTES = 1 << 20
#: the most YAML nodes a spec may expand to (aliases counted as often as they are used)
MAX_NODES = 100_000
#: the deepest nesting of mappings and lists
MAX_DEPTH = 64
#: the most variants a spec (its variants plus its sweep) may expand to
MAX_VARIANTS = 1000

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_NAME_RE = re.compile(NAME_PATTERN)
#: the largest whole number a spec may hold (protobuf's uint64; anything longer is no setting)
MAX_INT = 2**64 - 1


def _loc(loc: tuple[Any, ...]) -> str:
    """A field's path as the messages show it (a key's control characters escaped: one line)."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + clean(part)
    return out or "(spec)"


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 60 else repr(text[:57] + "...")


def _walk(obj: Any, loc: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any, bool]]:
    """Every key and leaf value of parsed data: (where, the key or value, whether it is a key)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            at = loc + (k if isinstance(k, str) else repr(k),)
            yield at, k, True
            yield from _walk(v, at)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk(v, loc + (i,))
    else:
        yield loc, obj, False


def data_problems(obj: Any, where: str) -> list[str]:
    """Why parsed spec data is not plain data Ansible may see, one ``FILE: field: message`` line each.

    Plain data is text, finite numbers (whole numbers up to :data:`MAX_INT` in size), booleans, null,
    lists and mappings with text keys. Every string, and every binary value (``!!binary``) decoded, is
    searched for a Jinja delimiter; a binary value is refused either way, as is any other YAML type
    (dates, sets, ...), a non-finite number or a key that is not text."""
    errs = []
    for loc, value, is_key in _walk(obj):
        at = f"{where}: {_loc(loc)}"
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        if isinstance(text, str) and JINJA_RE.search(text):
            what = "a binary value decoding to " if isinstance(value, bytes) else "key " if is_key else ""
            errs.append(f"{at}: {what}{_shown(text)} holds a Jinja expression "
                        "({{, {% or {#), which Ansible would evaluate: remove it")
        elif is_key and not isinstance(value, str):
            errs.append(f"{at}: key {_shown(str(value))} is not text: quote it")
        elif isinstance(value, bytes):
            errs.append(f"{at}: a binary value (!!binary): a spec holds text, numbers, lists and mappings: "
                        "write it as text")
        elif isinstance(value, float) and not math.isfinite(value):
            errs.append(f"{at}: {value!r} is not a finite number: use a number")
        elif isinstance(value, int) and not isinstance(value, bool) and not -MAX_INT <= value <= MAX_INT:
            errs.append(f"{at}: a whole number of {len(str(abs(value)))} digits: use a number of at most "
                        f"{len(str(MAX_INT))} digits")
        elif not isinstance(value, (str, int, float, bool, type(None))):
            errs.append(f"{at}: a YAML {type(value).__name__} value ({_shown(str(value))}): a spec holds "
                        "text, numbers, lists and mappings: quote it")
    return errs


# ------------------------------------------------------------------------------------ field types

def check_name(value: str, what: str = "name") -> str:
    """A plain name (it names folders, containers' models, Ansible hosts): letters, digits, _ . -."""
    if JINJA_RE.search(value):
        raise ValueError(f"{value!r} is a Jinja expression, not a {what} (Ansible would evaluate it): "
                         "use letters, digits, _ . -")
    if not _NAME_RE.fullmatch(value):
        raise ValueError(f"{value!r} is not a plain {what}: use letters, digits, _ . - (starting with a "
                         "letter or digit, at most 64 characters)")
    return value


def _name(value: str) -> str:
    return check_name(value)


def _version(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if isinstance(value, str) and not re.fullmatch(r"[1-9][0-9]{0,8}", value):
        raise ValueError(f"{value!r} is not a model version: use a whole number >= 1, e.g. \"1\"")
    return value


def _rel_path(value: str) -> str:
    if not value.strip():
        raise ValueError("an empty path: give a file path relative to the spec's folder")
    if "\0" in value:
        raise ValueError("a path with a NUL byte: give a plain file path")
    return value


Name = Annotated[str, AfterValidator(_name), WithJsonSchema({"type": "string", "pattern": NAME_PATTERN})]
Version = Annotated[str, BeforeValidator(_version),
                    WithJsonSchema({"type": ["string", "integer"], "pattern": r"^[1-9][0-9]*$"})]
#: a file path in a spec: relative to the spec's folder (or the repository root above it); it must
#: stay inside one of them (checked by :func:`load_spec`)
RelPath = Annotated[str, AfterValidator(_rel_path)]
PosInt = Annotated[int, Field(ge=1, strict=True)]
NonNegInt = Annotated[int, Field(ge=0, strict=True)]
Repetitions = Annotated[int, Field(ge=1, le=100, strict=True)]
#: ``repetitions: auto`` starts with this many repetitions of every variant, then adds one at a time
#: to the variants whose comparisons are still inconclusive, within the spec's ``budget``
AUTO_START = 3


def _repetitions_or_auto(value: Any) -> int | str:
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 100):
        return value
    raise ValueError(f"is {value!r}: use a whole number from 1 to 100, or auto")


RepetitionsOrAuto = Annotated[int | str, BeforeValidator(_repetitions_or_auto), WithJsonSchema({
    "anyOf": [{"type": "integer", "minimum": 1, "maximum": 100}, {"const": "auto"}]})]
#: the smallest relative effect a claim must show to hold (the report's verdicts; 0.05 = 5 %)
DEFAULT_SMALLEST_EFFECT = 0.05


def _smallest_effect(value: float) -> float:
    if not 0 < value < 1:
        raise ValueError(f"is {value!r}: use a share between 0 and 1, e.g. 0.05 for 5 %")
    return value


SmallestEffect = Annotated[float, Field(strict=True), AfterValidator(_smallest_effect), WithJsonSchema({
    "type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1,
    "description": "the smallest relative effect of interest: a finding holds when its one-sided 95 % "
                   "bound lies beyond it (0.05 = 5 %)"})]

#: the most perf_analyzer runs one spec may plan per host (variants x levels x repetitions)
MAX_RUNS = 10_000


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


#: load levels lie in [MIN_LOAD, MAX_LOAD]: concurrent clients or requests per second (a level rounds to
#: 6 decimals, so a smaller one would read as 0; a larger one is no lab's load)
MIN_LOAD = 0.001
MAX_LOAD = 100_000
#: the most levels a range may expand to
MAX_LEVELS = 10_000


def _load_number(x: Any, what: str) -> float:
    """One number of a load: a finite number in [MIN_LOAD, MAX_LOAD] (huge integers, NaN, infinities and
    booleans refused without converting them), else :class:`ValueError` naming ``what``."""
    if not _is_number(x):
        raise ValueError(f"{what} {_short(x)} is not a positive number: use a load from {MIN_LOAD:g} to "
                         f"{MAX_LOAD}")
    if not MIN_LOAD <= x <= MAX_LOAD:  # exact for huge integers, false for NaN
        kind = "a load" if x > 0 and not (isinstance(x, float) and math.isnan(x)) else "a positive number"
        raise ValueError(f"{what} {_short(x)} is not {kind}: use a load from {MIN_LOAD:g} to {MAX_LOAD}")
    return float(x)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 24 else f"{text[:12]}...({len(text)} characters)"


def expand_levels(levels: Any) -> list[float]:
    """``[1, 8]``, ``"1:8:1"`` (perf_analyzer's start:end:step) or ``{start, end, step}`` -> list.

    Every level is a finite number in [MIN_LOAD, MAX_LOAD], listed once; a range expands to at least
    one level and at most MAX_LEVELS; anything else is a :class:`ValueError` saying which number."""
    if levels is None:
        raise ValueError("missing: a list ([1, 8, 16]), a range '1:8:1' or {start, end, step}")
    if isinstance(levels, (int, float)) and not isinstance(levels, bool):
        levels = [levels]
    if isinstance(levels, str):
        parts = levels.split(":")
        if not 1 <= len(parts) <= 3 or len(levels) > 100:
            raise ValueError(f"range {_short(levels)} is not start:end[:step]")
        try:
            nums = [float(x) for x in parts]
        except ValueError:
            raise ValueError(f"range {levels!r} is not numeric: use start:end[:step], e.g. '1:8:1'") from None
        levels = {"start": nums[0], "end": nums[1] if len(nums) > 1 else nums[0],
                  "step": nums[2] if len(nums) > 2 else 1}
    if isinstance(levels, dict):
        if set(levels) - {"start", "end", "step"}:
            raise ValueError(f"a range has only start, end, step (got {', '.join(map(str, levels))})")
        rng: dict[str, Any] = levels
        if "start" not in rng:
            raise ValueError("a range needs numeric start (and end, step)")
        if _is_number(rng["start"]) and not rng["start"] > 0:
            raise ValueError("a range needs start > 0, step > 0 and end >= start")
        start = _load_number(rng["start"], "range start")
        end = _load_number(rng.get("end", rng["start"]), "range end")
        step_raw = rng.get("step", 1)
        if not _is_number(step_raw) or not 0 < step_raw < math.inf:
            raise ValueError("a range needs start > 0, step > 0 and end >= start (its step is "
                             f"{_short(step_raw)})")
        if end < start:
            raise ValueError(f"a range needs start > 0, step > 0 and end >= start (its end {end:g} is below "
                             f"its start {start:g})")
        step = float(min(step_raw, MAX_LOAD))
        if (end - start) / step > MAX_LEVELS:
            raise ValueError(f"a range of more than {MAX_LEVELS} levels: use a larger step")
        out, i = [], 0
        while (x := start + i * step) <= end + 1e-9:
            out.append(round(x, 6))
            i += 1
        if len(set(out)) != len(out):
            raise ValueError(f"range step {step:g} is finer than the levels' 6 decimals: use a larger step")
        return out
    if isinstance(levels, list) and levels:
        out = [_load_number(x, "level") for x in levels]
        if len(set(out)) != len(out):
            raise ValueError("a level is listed twice: list each load level once")
        return out
    raise ValueError("must be a non-empty list, a range 'start:end:step' or {start, end, step}")


def _levels(value: Any) -> Any:
    expand_levels(value)
    return value


Levels = Annotated[Any, AfterValidator(_levels), WithJsonSchema({
    "description": "load levels: a list ([1, 8, 16]), a range 'start:end[:step]' or {start, end, step}",
    "oneOf": [
        {"type": "array", "items": {"type": "number", "minimum": MIN_LOAD, "maximum": MAX_LOAD},
         "minItems": 1},
        {"type": "string", "pattern": r"^[0-9.]+(:[0-9.]+){0,2}$"},
        {"type": "object", "additionalProperties": False, "required": ["start"],
         "properties": {"start": {"type": "number", "minimum": MIN_LOAD, "maximum": MAX_LOAD},
                        "end": {"type": "number", "minimum": MIN_LOAD, "maximum": MAX_LOAD},
                        "step": {"type": "number", "exclusiveMinimum": 0}}},
    ]})]


# ------------------------------------------------------------------------------------ Triton kind

class Load(_Model):
    """How the load is applied: concurrent clients or a request rate, at these levels."""

    mode: Literal["concurrency", "request_rate"] = "concurrency"
    levels: Levels = None
    distribution: Literal["constant", "poisson"] | None = None


class Perf(_Model):
    """perf_analyzer settings (each maps to its option of the same name)."""

    protocol: Literal["http", "grpc"] | None = None
    batch_size: PosInt | None = None
    input_data: RelPath | None = Field(default=None,
                                       description="'random', 'zero' or a JSON file (spec-relative)")
    shapes: dict[str, list[PosInt]] | None = None
    warmup_request_count: NonNegInt | None = None
    request_count: NonNegInt | None = None
    measurement_mode: Literal["time_windows", "count_windows"] | None = None
    measurement_interval_ms: PosInt | None = None
    measurement_request_count: PosInt | None = None
    percentile: Annotated[int, Field(ge=1, le=99, strict=True)] | None = None
    latency_threshold_ms: PosInt | None = None
    stability_percentage: PosInt | None = None
    max_trials: PosInt | None = None
    max_threads: PosInt | None = None
    async_: bool | None = Field(default=None, alias="async")
    verbose_csv: bool | None = None
    retries: Annotated[int, Field(ge=0, le=10, strict=True)] | None = None


class Warmup(_Model):
    requests: Annotated[int, Field(ge=0, le=1_000_000, strict=True)] = Field(
        default=defaults.WARMUP_REQUESTS, description="requests sent after each load, before measuring")


class Bound(_Model):
    max: float | None = None
    min: float | None = None


if TYPE_CHECKING:
    Metric = str
else:  # the metric table's objective metrics (an enum in the JSON schema)
    Metric = Literal[metrics.OBJECTIVE]


class Objective(_Model):
    """What picks the best variant: a metric to maximise or minimise, optionally at one load level."""

    name: Name | None = None
    metric: Metric = metrics.DEFAULT_METRIC
    goal: Literal["max", "min"] = metrics.DEFAULT_GOAL
    at_load: Annotated[float, Field(gt=0)] | None = None
    constraints: dict[Metric, Bound] = Field(default_factory=dict)

    @property
    def title(self) -> str:
        return self.name or f"{self.goal}_{self.metric}"

    def record(self) -> plans.ObjectiveRecord:
        """The objective as a run keeps it (the manifest, a search plan)."""
        return plans.ObjectiveRecord(
            name=self.title, metric=self.metric, goal=self.goal, at_load=self.at_load,
            constraints={m: plans.BoundRecord(max=b.max, min=b.min) for m, b in self.constraints.items()})


DEFAULT_OBJECTIVES = [Objective(name="max_throughput", metric="throughput", goal="max")]


class LoadOverride(_Model):
    mode: Literal["concurrency", "request_rate"] | None = None
    levels: Levels = None
    distribution: Literal["constant", "poisson"] | None = None


class Variant(_Model):
    """One configuration measured: overrides of the base config, and per-variant settings."""

    name: Name
    description: str | None = None
    config: dict[str, Any] | None = Field(
        default=None, description="top-level ModelConfig keys replaced (null removes one)")
    model: Name | None = None
    version: Version | None = None
    base_config: RelPath | None = None
    base_config_text: str | None = None
    load: LoadOverride | None = None
    perf: Perf | None = None


class Budget(_Model):
    """What ``repetitions: auto`` may spend on one host: at most ``repetitions`` of any variant, and no
    new repetition once the levels measured so far took ``minutes``."""

    repetitions: Annotated[int, Field(ge=AUTO_START, le=100, strict=True)] = Field(
        default=6, description=f"the most repetitions of a variant (from {AUTO_START}, the first ones)")
    minutes: Annotated[float, Field(gt=0, le=10_000)] | None = Field(
        default=None, description="no new repetition once the measured levels took this long")


class Sweep(_Model):
    """Variants generated from a grid: every combination of the grid's values."""

    name: str = Field(description="name pattern using the grid's parameters, e.g. 'i{instances}_d{delay}'")
    grid: dict[Name, Annotated[list[Any], Field(min_length=1)]] = Field(min_length=1)
    config: dict[str, Any] | None = None
    load: dict[str, Any] | None = None
    perf: dict[str, Any] | None = None


class ShardSetting(_Model):
    """Spread the variants over the play's hosts: each candidate on one host, the reference on every
    host (:mod:`serve_system.experiment.shard`)."""

    reference: Name = Field(
        default="first", description="the variant every host measures (its name, or first: the first "
                                     "variant), so the report can tell node differences from "
                                     "configuration differences")


class SearchBudget(_Model):
    """What a search may spend on one host: perf_analyzer runs, measured minutes, or both (the first
    reached stops it)."""

    runs: Annotated[int, Field(ge=1, le=MAX_RUNS, strict=True)] | None = Field(
        default=None, description="the most perf_analyzer runs the search makes")
    minutes: Annotated[float, Field(gt=0, le=10_000)] | None = Field(
        default=None, description="no new batch once the measured levels took this long, or would")


class Search(_Model):
    """How a sweep's candidates are measured: every one at every level (``grid``), or by successive
    halving or optuna's TPE sampler at the objective's load level, within a budget."""

    strategy: Literal["grid", "halving", "optuna"] = Field(
        default="grid", description="grid: every variant at every level; halving: short measurements of "
        "every candidate, the decidedly worse of the worse half dropped, longer ones for the rest; optuna: "
        "candidates drawn by its TPE sampler")
    objective: Name | None = Field(
        default=None, description="the name of the spec's objective the search ranks by (default: the "
        "first); it needs at_load, and its constraints bound the candidates")
    budget: SearchBudget | None = Field(default=None, description="required for halving and optuna")
    repetitions: Annotated[int, Field(ge=2, le=20, strict=True)] = Field(
        default=3, description="measurements of a candidate per rung (halving) or per trial (optuna), each "
        "a fresh load; two at least, for a spread (halving pools it over the candidates, so two decide)")
    rungs: Annotated[int, Field(ge=1, le=8, strict=True)] = Field(
        default=3, description="halving: rungs; each doubles the measurement window")
    window_ms: Annotated[int, Field(ge=100, le=600_000, strict=True)] | None = Field(
        default=None, description="halving: the first rung's measurement window (perf_analyzer "
        "measurement_interval_ms; default: the spec's window halved once per later rung, >= 500 ms)")
    seed: Annotated[int, Field(ge=0, le=2**31 - 1, strict=True)] = Field(
        default=0, description="optuna: the TPE sampler's seed")
    startup: Annotated[int, Field(ge=1, le=100, strict=True)] = Field(
        default=4, description="optuna: trials drawn at random before TPE models the surface")
    batch: Annotated[int, Field(ge=1, le=100, strict=True)] = Field(
        default=4, description="optuna: trials measured per runner call")


class _SpecFile(_Model):
    """What both kinds of spec keep of their file: where it was read and the data as written."""

    _path: Path = PrivateAttr(default=Path("spec.yml"))
    _raw: dict[str, Any] = PrivateAttr(default_factory=dict)

    @property
    def path(self) -> Path:
        return self._path

    @property
    def data(self) -> dict[str, Any]:
        """The spec as written (for the run's manifest)."""
        return self._raw


class TritonSpec(_SpecFile):
    """An experiment on Triton (``kind: triton``, the default)."""

    kind: Literal["triton"] = "triton"
    name: Name = Field(description="the experiment's name: results/<name>/<run id>/")
    description: str | None = None
    model: Name = Field(description="the model's name in Triton")
    version: Version = "1"
    base_config: RelPath | None = Field(
        default=None, description="config.pbtxt the variants override (spec-relative)")
    base_config_text: str | None = None
    on_missing_gpus: Literal["refuse", "adapt"] = "refuse"
    stand_in: str | None = None
    load: Load
    perf: Perf = Perf()
    repetitions: RepetitionsOrAuto = Field(
        default=1, description="repetitions of every level (interleaved across variants), or auto: "
                               f"{AUTO_START}, then more of the variants whose comparisons are undecided, "
                               "within budget")
    budget: Budget | None = Field(default=None, description="with repetitions: auto: what it may spend")
    smallest_effect: SmallestEffect = DEFAULT_SMALLEST_EFFECT
    warmup: Warmup = Warmup()
    objectives: list[Objective] | None = None
    objective: Objective | None = Field(default=None, description="one objective (older form of objectives)")
    variants: Annotated[list[Variant], BeforeValidator(lambda v: [] if v is None else v)] = Field(
        default_factory=list)
    sweep: Sweep | None = None
    shard: ShardSetting | None = Field(
        default=None, description="spread the variants over the play's hosts instead of repeating them on "
                                  "each (also: -e shard=true)")
    search: Search | None = Field(default=None, description="how the variants are searched (default: grid)")

    _expanded: list[Variant] = PrivateAttr(default_factory=list)

    # the spec as the planner reads it ---------------------------------------------------------
    @property
    def all_variants(self) -> list[Variant]:
        """The variants listed, then those the sweep generates."""
        return self._expanded

    @property
    def max_repetitions(self) -> int:
        """The repetitions planned (``auto``: the budget's most; the runs beyond the first come only
        for undecided comparisons)."""
        if (search := self.searching) is not None:  # its rungs' repetitions (optuna: one rung)
            return search.repetitions * (search.rungs if search.strategy == "halving" else 1)
        if isinstance(self.repetitions, int):
            return self.repetitions
        return (self.budget or Budget()).repetitions

    @property
    def searching(self) -> Search | None:
        """The spec's search when it is not a plain grid (halving, optuna), else None."""
        return self.search if self.search is not None and self.search.strategy != "grid" else None

    def search_objective(self) -> Objective | None:
        """The objective a search ranks by: the one its ``objective`` names, else the first."""
        goals = self.goals()
        if self.search is None or self.search.objective is None:
            return goals[0]
        return next((o for o in goals if o.title == self.search.objective), None)

    def goals(self) -> list[Objective]:
        if self.objectives:
            return list(self.objectives)
        if self.objective is not None:
            return [self.objective]
        return list(DEFAULT_OBJECTIVES)

    def merged_load(self, v: Variant) -> dict[str, Any]:
        """The variant's load: the spec's, with the variant's own keys over it (null: the default)."""
        over = v.load.model_dump(exclude_unset=True) if v.load else {}
        merged = {**self.load.model_dump(exclude_unset=True), **over}
        return {k: x for k, x in merged.items() if x is not None}

    def merged_perf(self, v: Variant) -> dict[str, Any]:
        """The variant's perf_analyzer settings: the spec's, with the variant's over them (null: the
        default, e.g. ``input_data: null`` drops the spec's input file)."""
        over = v.perf.model_dump(exclude_unset=True, by_alias=True) if v.perf else {}
        merged = {**self.perf.model_dump(exclude_unset=True, by_alias=True), **over}
        return {k: x for k, x in merged.items() if x is not None}


# ------------------------------------------------------------------------------------ FastAPI kind

class FastapiVariant(_Model):
    name: Name
    runtime: Literal["onnx", "pytorch"]


class FastapiLevel(_Model):
    senders: Annotated[int, Field(ge=1, le=1024, strict=True)] = Field(
        description="concurrent closed-loop senders (1: the lab's sequential loop)")
    requests: Annotated[int, Field(ge=1, le=10_000_000, strict=True)] = Field(
        description="requests sent in all at this level")


class FastapiWarmup(_Model):
    requests: Annotated[int, Field(ge=0, le=1_000_000, strict=True)] = Field(
        default=0, description="requests sent after each start of the endpoint, not measured")


class FastapiSpec(_SpecFile):
    """The lab's FastAPI endpoint benchmark (``kind: fastapi``)."""

    kind: Literal["fastapi"]
    name: Name
    description: str | None = None
    variants: Annotated[list[FastapiVariant], Field(min_length=1)]
    levels: Annotated[list[FastapiLevel], Field(min_length=1)]
    repetitions: Repetitions = 1
    smallest_effect: SmallestEffect = DEFAULT_SMALLEST_EFFECT
    warmup: FastapiWarmup = FastapiWarmup()
    request_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60


#: a spec of either kind, as :func:`load_spec` returns it
AnySpec = TritonSpec | FastapiSpec
KINDS: dict[str, type[AnySpec]] = {"triton": TritonSpec, "fastapi": FastapiSpec}


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a spec file (either kind), for editors and ``serve-system schema``."""
    triton = TritonSpec.model_json_schema(by_alias=True)
    fastapi = FastapiSpec.model_json_schema(by_alias=True)
    defs = {**triton.pop("$defs", {}), **fastapi.pop("$defs", {}), "TritonSpec": triton,
            "FastapiSpec": fastapi}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "serve-system experiment spec",
        "description": "kind: triton (default) or kind: fastapi; see experiments/specs/",
        "oneOf": [{"$ref": "#/$defs/TritonSpec"}, {"$ref": "#/$defs/FastapiSpec"}],
        "$defs": defs,
    }

