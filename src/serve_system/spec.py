"""Experiment specs: the typed model, declared once, and the one way to read a spec file.

A spec file is YAML data describing one experiment. Two kinds exist:

* ``kind: triton`` (the default when ``kind`` is absent): a Triton model, its base config, variants
  (config overrides, or a sweep grid that generates them), the load, perf_analyzer settings,
  repetitions and the objectives that pick the best variant (:class:`TritonSpec`);
* ``kind: fastapi``: the lab's FastAPI endpoint, one variant per runtime, load levels of concurrent
  senders and request counts (:class:`FastapiSpec`).

The pydantic models below are the schema: ``serve-system validate`` and ``plan`` check specs with
them, ``serve-system schema`` prints their JSON Schema, and the report reads objectives through
:class:`Objective`. :func:`load_spec` reads a file with limits (size, aliases, nesting), refuses
what Ansible or the file system could misread (Jinja expressions, names that are not plain names,
paths that leave the spec's folder), and raises :class:`SpecError`, whose lines each read
``FILE: field.path: message (fix)``.
"""

from __future__ import annotations

import difflib
import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    WithJsonSchema,
)

from .errors import ServeSystemError
from .perf import CONCURRENCY, REQUEST_RATE

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
_JINJA_RE = re.compile(r"\{\{|\{%|\{#")



class SpecError(ServeSystemError):
    """A spec or argument with problems; ``lines`` holds one ``FILE: field.path: message`` line each."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        super().__init__(lines[0] if len(lines) == 1 else f"{lines[0]} (and {len(lines) - 1} more)")


# ------------------------------------------------------------------------------------ field types

def check_name(value: str, what: str = "name") -> str:
    """A plain name (it names folders, containers' models, Ansible hosts): letters, digits, _ . -."""
    if _JINJA_RE.search(value):
        raise ValueError(f"{value!r} is a Jinja expression, not a {what} (Ansible would evaluate it): "
                         "use letters, digits, _ . -")
    if not _NAME_RE.match(value):
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


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def expand_levels(levels: Any) -> list[float]:
    """``[1, 8]``, ``"1:8:1"`` (perf_analyzer's start:end:step) or ``{start, end, step}`` -> list."""
    if levels is None:
        raise ValueError("missing: a list ([1, 8, 16]), a range '1:8:1' or {start, end, step}")
    if isinstance(levels, (int, float)) and not isinstance(levels, bool):
        levels = [levels]
    if isinstance(levels, str):
        parts = levels.split(":")
        if not 1 <= len(parts) <= 3:
            raise ValueError(f"range {levels!r} is not start:end[:step]")
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
        try:
            start, end, step = (float(rng["start"]), float(rng.get("end", rng["start"])), float(rng.get("step", 1)))
        except (KeyError, TypeError, ValueError):
            raise ValueError("a range needs numeric start (and end, step)") from None
        if step <= 0 or end < start or start <= 0:
            raise ValueError("a range needs start > 0, step > 0 and end >= start")
        if (end - start) / step > 10_000:
            raise ValueError("a range of more than 10000 levels: use a larger step")
        out, x = [], start
        while x <= end + 1e-9:
            out.append(round(x, 6))
            x += step
        return out
    if isinstance(levels, list) and levels:
        out = []
        for x in levels:
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not x > 0 or x == float("inf"):
                raise ValueError(f"level {x!r} is not a positive number")
            out.append(float(x))
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
        {"type": "array", "items": {"type": "number", "exclusiveMinimum": 0}, "minItems": 1},
        {"type": "string", "pattern": r"^[0-9.]+(:[0-9.]+){0,2}$"},
        {"type": "object", "additionalProperties": False, "required": ["start"],
         "properties": {"start": {"type": "number"}, "end": {"type": "number"}, "step": {"type": "number"}}},
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
    input_data: RelPath | None = Field(default=None, description="'random', 'zero' or a JSON file (spec-relative)")
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
    retries: NonNegInt | None = None


class Warmup(_Model):
    requests: NonNegInt = Field(default=20, description="requests sent after each load, before measuring")


class Bound(_Model):
    max: float | None = None
    min: float | None = None


Metric = Literal["throughput", "latency_avg_us", "p50_us", "p90_us", "p95_us", "p99_us", "queue_us",
                 "compute_infer_us", "avg_batch_size", "gpu_util"]
#: the metrics an objective can rank or constrain (columns of the run's summary)
OBJECTIVE_METRICS: tuple[str, ...] = get_args(Metric)


class Objective(_Model):
    """What picks the best variant: a metric to maximise or minimise, optionally at one load level."""

    name: Name | None = None
    metric: Metric = "throughput"
    goal: Literal["max", "min"] = "max"
    at_load: Annotated[float, Field(gt=0)] | None = None
    constraints: dict[Metric, Bound] = Field(default_factory=dict)

    @property
    def title(self) -> str:
        return self.name or f"{self.goal}_{self.metric}"

    def as_record(self) -> dict[str, Any]:
        """The objective as the manifest stores it (read back by the report)."""
        return {"name": self.title, "metric": self.metric, "goal": self.goal, "at_load": self.at_load,
                "constraints": {m: b.model_dump(exclude_none=True) for m, b in self.constraints.items()}}


DEFAULT_OBJECTIVES = [Objective(name="max_throughput", metric="throughput", goal="max")]


def read_objectives(records: Any, where: Path | str) -> list[Objective]:
    """Objectives as a run's manifest keeps them (:meth:`Objective.as_record`); none: the default."""
    if not records:
        return list(DEFAULT_OBJECTIVES)
    if not isinstance(records, list):
        raise SpecError([f"{where}: objectives: is not a list: re-plan the run (serve-system plan)"])
    out = []
    for i, rec in enumerate(records):
        try:
            out.append(Objective.model_validate(rec))
        except ValidationError as exc:
            lines = _errors(exc, Objective, str(where))
            raise SpecError([ln.replace(f"{where}: ", f"{where}: objectives[{i}].", 1) for ln in lines]) from None
    return out


class LoadOverride(_Model):
    mode: Literal["concurrency", "request_rate"] | None = None
    levels: Levels = None
    distribution: Literal["constant", "poisson"] | None = None


class Variant(_Model):
    """One configuration measured: overrides of the base config, and per-variant settings."""

    name: Name
    description: str | None = None
    config: dict[str, Any] | None = Field(default=None, description="top-level ModelConfig keys replaced (null removes one)")
    model: Name | None = None
    version: Version | None = None
    base_config: RelPath | None = None
    base_config_text: str | None = None
    load: LoadOverride | None = None
    perf: Perf | None = None


class Sweep(_Model):
    """Variants generated from a grid: every combination of the grid's values."""

    name: str = Field(description="name pattern using the grid's parameters, e.g. 'i{instances}_d{delay}'")
    grid: dict[Name, Annotated[list[Any], Field(min_length=1)]] = Field(min_length=1)
    config: dict[str, Any] | None = None
    load: dict[str, Any] | None = None
    perf: dict[str, Any] | None = None


class TritonSpec(_Model):
    """An experiment on Triton (``kind: triton``, the default)."""

    kind: Literal["triton"] = "triton"
    name: Name = Field(description="the experiment's name: results/<name>/<run id>/")
    description: str | None = None
    model: Name = Field(description="the model's name in Triton")
    version: Version = "1"
    base_config: RelPath | None = Field(default=None, description="config.pbtxt the variants override (spec-relative)")
    base_config_text: str | None = None
    on_missing_gpus: Literal["refuse", "adapt"] = "refuse"
    stand_in: str | None = None
    load: Load
    perf: Perf = Perf()
    repetitions: PosInt = 1
    warmup: Warmup = Warmup()
    objectives: list[Objective] | None = None
    objective: Objective | None = Field(default=None, description="one objective (older form of objectives)")
    variants: Annotated[list[Variant], BeforeValidator(lambda v: [] if v is None else v)] = Field(
        default_factory=list)
    sweep: Sweep | None = None

    _path: Path = PrivateAttr(default=Path("spec.yml"))
    _raw: dict[str, Any] = PrivateAttr(default_factory=dict)
    _expanded: list[Variant] = PrivateAttr(default_factory=list)

    # the spec as the engine reads it ---------------------------------------------------------
    @property
    def path(self) -> Path:
        return self._path

    @property
    def data(self) -> dict[str, Any]:
        """The spec as written (for the run's manifest)."""
        return self._raw

    @property
    def all_variants(self) -> list[Variant]:
        """The variants listed, then those the sweep generates."""
        return self._expanded

    def goals(self) -> list[Objective]:
        if self.objectives:
            return list(self.objectives)
        if self.objective is not None:
            return [self.objective]
        return list(DEFAULT_OBJECTIVES)

    def merged_load(self, v: Variant) -> dict[str, Any]:
        over = v.load.model_dump(exclude_unset=True) if v.load else {}
        return {**self.load.model_dump(exclude_unset=True), **over}

    def merged_perf(self, v: Variant) -> dict[str, Any]:
        over = v.perf.model_dump(exclude_unset=True, by_alias=True) if v.perf else {}
        return {**self.perf.model_dump(exclude_unset=True, by_alias=True), **over}

    def levels_of(self, v: Variant) -> list[float]:
        return expand_levels(self.merged_load(v).get("levels"))


# ------------------------------------------------------------------------------------ FastAPI kind

class FastapiVariant(_Model):
    name: Name
    runtime: Literal["onnx", "pytorch"]


class FastapiLevel(_Model):
    senders: PosInt = Field(description="concurrent closed-loop senders (1: the lab's sequential loop)")
    requests: PosInt = Field(description="requests sent in all at this level")


class FastapiWarmup(_Model):
    requests: NonNegInt = Field(default=0, description="requests sent after each start of the endpoint, not measured")


class FastapiSpec(_Model):
    """The lab's FastAPI endpoint benchmark (``kind: fastapi``)."""

    kind: Literal["fastapi"]
    name: Name
    description: str | None = None
    variants: Annotated[list[FastapiVariant], Field(min_length=1)]
    levels: Annotated[list[FastapiLevel], Field(min_length=1)]
    repetitions: PosInt = 1
    warmup: FastapiWarmup = FastapiWarmup()
    request_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60

    _path: Path = PrivateAttr(default=Path("spec.yml"))
    _raw: dict[str, Any] = PrivateAttr(default_factory=dict)

    @property
    def path(self) -> Path:
        return self._path

    @property
    def data(self) -> dict[str, Any]:
        return self._raw


Spec = TritonSpec | FastapiSpec
KINDS: dict[str, type[TritonSpec | FastapiSpec]] = {"triton": TritonSpec, "fastapi": FastapiSpec}


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a spec file (either kind), for editors and ``serve-system schema``."""
    triton = TritonSpec.model_json_schema(by_alias=True)
    fastapi = FastapiSpec.model_json_schema(by_alias=True)
    defs = {**triton.pop("$defs", {}), **fastapi.pop("$defs", {}), "TritonSpec": triton, "FastapiSpec": fastapi}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "serve-system experiment spec",
        "description": "kind: triton (default) or kind: fastapi; see experiments/specs/",
        "oneOf": [{"$ref": "#/$defs/TritonSpec"}, {"$ref": "#/$defs/FastapiSpec"}],
        "$defs": defs,
    }


# ------------------------------------------------------------------------------------ reading

def repo_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding ``ansible.cfg``."""
    for d in [start, *start.parents]:
        if (d / "ansible.cfg").exists():
            return d
    return None


def allowed_roots(spec_path: Path) -> list[Path]:
    """Folders a spec's paths may point into: its own folder and the repository root above it."""
    folder = spec_path.resolve().parent
    root = repo_root(folder)
    return [folder] + ([root] if root is not None else [])


def resolve(spec_path: Path, rel: str) -> Path:
    """A spec's path: against the spec's folder, else the repository root; :class:`ValueError` if it
    points outside both."""
    roots = allowed_roots(spec_path)
    p = Path(rel)
    candidates = [p.resolve()] if p.is_absolute() else [(r / p).resolve() for r in roots]
    inside = [c for c in candidates if any(c == r or c.is_relative_to(r) for r in roots)]
    if not inside:
        raise ValueError(f"{rel!r} points outside the spec's folder and its repository "
                         f"({', '.join(map(str, roots))}): keep the file inside them")
    return next((c for c in inside if c.exists()), inside[0])


def load_spec(path: str | Path) -> TritonSpec | FastapiSpec:
    """Read and check a spec file; raise :class:`SpecError` (nothing is written either way)."""
    p = Path(path)
    raw = read_yaml(p)
    return spec_from_data(raw, p)


def read_yaml(p: Path, max_bytes: int = MAX_BYTES) -> Any:
    """Safe YAML of a file with size, alias, nesting and duplicate-key limits; :class:`SpecError`."""
    where = str(p)
    try:
        if p.is_dir():
            raise SpecError([f"{where}: (file): is a folder: give a spec file (.yml)"])
        with p.open("rb") as fh:
            blob = fh.read(max_bytes + 1)
    except OSError as exc:
        raise SpecError([f"{where}: (file): cannot read: {exc.strerror} (check the path)"]) from None
    if len(blob) > max_bytes:
        raise SpecError([(f"{where}: (file): larger than {max_bytes // 1024} KiB: a spec is a small "
                         "YAML file (put data in files it names)")])
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = blob[:exc.start].count(b"\n") + 1
        raise SpecError([(f"{where}:{line}: (file): not UTF-8 text (byte 0x{blob[exc.start]:02x} at offset "
                         f"{exc.start}): save the file as UTF-8")]) from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise SpecError([f"{where}: (file): empty: a spec is a mapping (name, model, load, variants, ...)"])
        _check_nodes(node, where)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        loc = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        problem = str(getattr(exc, "problem", None) or exc).replace("\n", " ")
        raise SpecError([f"{where}{loc}: (file): not valid YAML: {problem} (fix the syntax there)"]) from None
    finally:
        loader.dispose()


def _check_nodes(root: yaml.Node, where: str) -> None:
    """Refuse alias bombs (counted before anything is expanded), deep nesting, recursion and
    duplicate keys."""
    sizes: dict[int, int] = {}

    def at(node: yaml.Node) -> str:
        m = node.start_mark
        return f"{where}:{m.line + 1}:{m.column + 1}"

    def size(node: yaml.Node, depth: int, stack: set[int]) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in stack:
            raise SpecError([f"{at(node)}: (file): an alias refers to itself: remove the recursive alias"])
        if depth > MAX_DEPTH:
            raise SpecError([f"{at(node)}: (file): nested deeper than {MAX_DEPTH} levels: flatten the spec"])
        total = 1
        if isinstance(node, (yaml.SequenceNode, yaml.MappingNode)):
            stack.add(key)
            if isinstance(node, yaml.MappingNode):
                seen: set[str] = set()
                for k, _v in node.value:
                    if isinstance(k, yaml.ScalarNode) and k.value != "<<":
                        if k.value in seen:
                            raise SpecError([f"{at(k)}: {k.value}: key given twice: keep one"])
                        seen.add(k.value)
                children = [c for pair in node.value for c in pair]
            else:
                children = list(node.value)
            for c in children:
                total += size(c, depth + 1, stack)
                if total > MAX_NODES:
                    raise SpecError([(f"{at(node)}: (file): expands to more than {MAX_NODES} values (aliases "
                                     "included): a spec is a small file; remove the repeated aliases")])
            stack.discard(key)
        sizes[key] = total
        return total

    size(root, 0, set())


def _fmt_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(spec)"


def _walk_strings(obj: Any, loc: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str]]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(k, str):
                yield loc + (k,), k
            yield from _walk_strings(v, loc + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk_strings(v, loc + (i,))
    elif isinstance(obj, str):
        yield loc, obj


def _model_fields_at(cls: Any, loc: tuple[Any, ...]) -> list[str] | None:
    """The keys a model accepts at ``loc`` (for did-you-mean), or None when not a model there."""
    ann: Any = cls
    for part in loc:
        ann = _unwrap(ann, part)
        if ann is None:
            return None
    ann = _unwrap_model(ann)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return sorted((f.alias or n) for n, f in ann.model_fields.items())
    return None


def _unwrap_model(ann: Any) -> Any:
    while True:
        origin = get_origin(ann)
        if origin is Annotated:
            ann = get_args(ann)[0]
        elif origin is Union or str(origin) == "types.UnionType" or type(ann).__name__ == "UnionType":
            models = [a for a in get_args(ann) if isinstance(a, type) and issubclass(a, BaseModel)]
            others = [a for a in get_args(ann) if a is not type(None) and a not in models]
            if models:
                ann = models[0]
            elif others:
                ann = others[0]
            else:
                return None
        else:
            return ann


def _unwrap(ann: Any, part: Any) -> Any:
    ann = _unwrap_model(ann)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        if not isinstance(part, str):
            return None
        for n, f in ann.model_fields.items():
            if part in (n, f.alias):
                return f.annotation if not f.metadata else Annotated[(f.annotation, *f.metadata)]
        return None
    origin = get_origin(ann)
    if origin is list and isinstance(part, int):
        return get_args(ann)[0]
    if origin is dict:
        return get_args(ann)[1]
    return None


def _message(err: dict[str, Any], cls: Any) -> str:
    typ, loc, given = err["type"], tuple(err["loc"]), err.get("input")
    shown = repr(given)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    if typ == "extra_forbidden":
        known = _model_fields_at(cls, loc[:-1]) or []
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"unknown key ({hint}known: {', '.join(known)})"
    if typ == "missing":
        return "missing (required): add it"
    if typ == "value_error":
        return str(err["msg"]).removeprefix("Value error, ")
    if typ in ("literal_error", "enum"):
        expected = err.get("ctx", {}).get("expected", "")
        return f"is {shown}: use {expected}"
    if typ in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        ctx = err.get("ctx", {})
        sign = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[typ]
        bound = next(iter(ctx.values()), "")
        return f"is {shown}: use a number {sign} {bound}"
    if typ in ("int_type", "int_parsing", "int_from_float"):
        return f"is {shown}: use a whole number"
    if typ in ("float_type", "float_parsing", "finite_number"):
        return f"is {shown}: use a number"
    if typ in ("string_type",):
        return f"is {shown}: use text (quote it)"
    if typ in ("bool_type", "bool_parsing"):
        return f"is {shown}: use true or false"
    if typ in ("list_type",):
        return f"is {shown}: use a list ([...])"
    if typ in ("dict_type", "model_type", "model_attributes_type"):
        return f"is {shown}: use a mapping (key: value)"
    if typ in ("too_short",):
        return "is empty: give at least one entry"
    if typ == "too_long":
        return f"has too many entries: {err['msg']}"
    return f"{err['msg']} (got {shown})"


def _errors(exc: ValidationError, cls: Any, where: str) -> list[str]:
    lines = []
    seen: set[str] = set()
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and ("[" in p or p.startswith("function-"))))
        line = f"{where}: {_fmt_loc(loc)}: {_message({**err, 'loc': loc}, cls)}"
        if line not in seen:
            seen.add(line)
            lines.append(line)
    return lines


def spec_from_data(raw: Any, p: Path) -> TritonSpec | FastapiSpec:
    """Check parsed spec data (see :func:`load_spec`)."""
    where = str(p)
    if not isinstance(raw, dict):
        raise SpecError([(f"{where}: (spec): is {type(raw).__name__}: a spec is a mapping (name, model, load, "
                         "variants, ...)")])
    jinja = [f"{where}: {_fmt_loc(loc)}: {s!r} holds a Jinja expression ({{{{ or {{%), which Ansible would "
             "evaluate: remove it" for loc, s in _walk_strings(raw) if _JINJA_RE.search(s)]
    if jinja:
        raise SpecError(jinja)
    kind = raw.get("kind", "triton")
    if kind not in KINDS:
        close = difflib.get_close_matches(str(kind), list(KINDS), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise SpecError([f"{where}: kind: {kind!r} is not a kind of spec ({hint}use triton or fastapi)"])
    cls = KINDS[kind]
    try:
        spec = cls.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(_errors(exc, cls, where)) from None
    spec._path = p
    spec._raw = raw
    errs: list[str] = []
    if isinstance(spec, TritonSpec):
        _check_triton(spec, raw, where, errs)
    else:
        _check_fastapi(spec, where, errs)
    if errs:
        raise SpecError(errs)
    return spec


def _check_fastapi(spec: FastapiSpec, where: str, errs: list[str]) -> None:
    _duplicates([v.name for v in spec.variants], "variants", where, errs)
    for i, lv in enumerate(spec.levels):
        if lv.requests < lv.senders:
            errs.append(f"{where}: levels[{i}].requests: {lv.requests} requests for {lv.senders} senders: "
                        "send at least one request per sender")
    pairs = [(lv.senders, lv.requests) for lv in spec.levels]
    for i, pair in enumerate(pairs):
        if pair in pairs[:i]:
            errs.append(f"{where}: levels[{i}]: the same level as an earlier one: list each level once")


def _duplicates(names: list[str], field: str, where: str, errs: list[str]) -> None:
    seen: set[str] = set()
    for i, n in enumerate(names):
        if n in seen:
            errs.append(f"{where}: {field}[{i}].name: {n!r} is a duplicate variant name: give each variant "
                        "its own name (it names a results folder)")
        seen.add(n)


def _check_triton(spec: TritonSpec, raw: dict[str, Any], where: str, errs: list[str]) -> None:
    if spec.base_config is None and spec.base_config_text is None:
        errs.append(f"{where}: base_config: missing: give base_config (a config.pbtxt path) or "
                    "base_config_text")
    if spec.objectives is not None and spec.objective is not None:
        errs.append(f"{where}: objective: given with objectives: move it into objectives")
    variants = list(spec.variants)
    if spec.sweep is not None:
        variants += _expand_sweep(spec.sweep, where, errs)
    if not variants and not errs:
        errs.append(f"{where}: variants: no variants: give 'variants' (a list) or 'sweep'")
    if len(variants) > MAX_VARIANTS:
        errs.append(f"{where}: sweep.grid: {len(variants)} variants: keep a spec under {MAX_VARIANTS}")
        variants = []
    names = [v.name for v in spec.variants]
    _duplicates(names, "variants", where, errs)
    swept = [v.name for v in variants[len(spec.variants):]]
    for n in swept:
        if n in names:
            errs.append(f"{where}: sweep.name: generates {n!r}, already a variant's name: make the names differ")
        names.append(n)
    # paths stay inside the spec's folder and its repository
    paths = [("base_config", spec.base_config), ("perf.input_data", spec.perf.input_data)]
    for i, v in enumerate(spec.variants):
        paths += [(f"variants[{i}].base_config", v.base_config),
                  (f"variants[{i}].perf.input_data", v.perf.input_data if v.perf else None)]
    for fld, rel in paths:
        if rel is None or (fld.endswith("input_data") and rel in ("random", "zero")):
            continue
        try:
            resolve(spec.path, rel)
        except ValueError as exc:
            errs.append(f"{where}: {fld}: {exc}")
    # every variant's own load, merged with the spec's
    levels: set[float] = set()
    for i, v in enumerate(variants):
        fld = f"variants[{i}].load" if i < len(spec.variants) else "sweep.load"
        load = spec.merged_load(v)
        try:
            merged = Load.model_validate(load)
            lv = expand_levels(merged.levels)
        except (ValidationError, ValueError) as exc:
            msg = exc.errors()[0]["msg"].removeprefix("Value error, ") if isinstance(exc, ValidationError) \
                else str(exc)
            errs.append(f"{where}: {fld}.levels: {msg}")
            continue
        if merged.distribution is not None and merged.mode != REQUEST_RATE:
            errs.append(f"{where}: {fld if v.load and v.load.distribution else 'load'}.distribution: only for "
                        "mode request_rate: remove it or set mode: request_rate")
        if merged.mode == CONCURRENCY and any(not x.is_integer() for x in lv):
            errs.append(f"{where}: {fld if v.load and v.load.levels is not None else 'load'}.levels: "
                        "concurrency levels are whole numbers >= 1")
        levels.update(lv)
    for i, o in enumerate(spec.goals() if (spec.objectives or spec.objective) else []):
        fld = f"objectives[{i}]" if spec.objectives else "objective"
        if o.at_load is not None and levels and o.at_load not in levels:
            shown = ", ".join(f"{x:g}" for x in sorted(levels))
            errs.append(f"{where}: {fld}.at_load: {o.at_load:g} is not a load level of any variant: use one of "
                        f"{shown}")
    # dedupe (a shared error repeated per variant reads once)
    uniq = list(dict.fromkeys(errs))
    errs[:] = uniq
    spec._expanded = variants


def _expand_sweep(sweep: Sweep, where: str, errs: list[str]) -> list[Variant]:
    keys = list(sweep.grid)
    total = 1
    for k in keys:
        total *= len(sweep.grid[k])
    if total > MAX_VARIANTS:
        errs.append(f"{where}: sweep.grid: {total} combinations: keep a sweep under {MAX_VARIANTS}")
        return []
    out: list[Variant] = []
    for values in itertools.product(*(sweep.grid[k] for k in keys)):
        env = dict(zip(keys, values))
        try:
            name = sweep.name.format(**env)
        except (KeyError, IndexError, ValueError) as exc:
            errs.append(f"{where}: sweep.name: {sweep.name!r}: unknown parameter {exc}: use the grid's "
                        f"({', '.join(keys)}), e.g. '{{{keys[0]}}}'")
            return []
        data: dict[str, Any] = {"name": name, "config": _subst(sweep.config or {}, env)}
        for k in ("load", "perf"):
            val = getattr(sweep, k)
            if val is not None:
                data[k] = _subst(val, env)
        try:
            out.append(Variant.model_validate(data))
        except ValidationError as exc:
            for line in _errors(exc, Variant, where):
                fld = line[len(where) + 2:]
                fld = fld.replace("name: ", "name: generated ", 1) if fld.startswith("name:") else fld
                errs.append(f"{where}: sweep.{fld}")
            return []
    return out


def _subst(obj: Any, env: dict[str, Any]) -> Any:
    """Replace ``"{param}"`` strings (whole string: typed value) and ``{param}`` inside strings."""
    if isinstance(obj, dict):
        return {k: _subst(v, env) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_subst(v, env) for v in obj]
    if isinstance(obj, str):
        m = re.fullmatch(r"\{(\w+)\}", obj)
        if m and m.group(1) in env:
            return env[m.group(1)]
        try:
            return obj.format(**env) if "{" in obj else obj
        except (KeyError, IndexError, ValueError):
            return obj
    return obj
