"""Experiment specs (YAML data) and the plan they expand to for one host.

A spec names a model and its base config.pbtxt, a list of variants (config overrides, or a sweep
grid that generates them), the load (concurrency levels or request rates), perf_analyzer settings,
repetitions and the objectives that pick the best variant. Every key is checked; every variant is
rendered and checked against Triton's schema and the host's GPU count before anything runs.

Relative paths in a spec resolve against the spec's folder, then against the repository root (the
nearest folder above it holding ``ansible.cfg``). Errors read ``spec: variant: field: message``.

Spec keys (see experiments/specs/*.yml for real ones)::

    name: dynbatch                      # results/<name>/...
    description: text
    model: food_classifier              # model name in Triton
    version: "1"
    base_config: model_repository/food_classifier/config.pbtxt   # or base_config_text: |
    on_missing_gpus: refuse | adapt     # a host with fewer GPUs than a variant uses
    stand_in: text                      # say in every report that the model is a stand-in
    load: {mode: concurrency|request_rate, levels: [1, 8] | "1:8:1" | {start, end, step},
           distribution: constant|poisson}
    perf: {protocol, batch_size, input_data, shapes: {NAME: [dims]}, warmup_request_count,
           request_count, measurement_mode, measurement_interval_ms, measurement_request_count,
           percentile, latency_threshold_ms, stability_percentage, max_trials, max_threads,
           async, verbose_csv, retries}
    repetitions: 1
    warmup: {requests: 20}              # requests sent after each load, before measuring
    objectives: [{name, metric, goal: max|min, at_load, constraints: {METRIC: {max|min: N}}}]
    variants:
      - name: baseline
        config: {}                      # top-level ModelConfig keys replaced; null removes
        # optional per variant: model, version, base_config, base_config_text, load, perf
    sweep: {name: "i{instances}_d{delay}", grid: {instances: [..], delay: [..]}, config: {...}}
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import perf as perfmod
from . import records
from . import tritonconfig as tc
from .errors import ServeSystemError
from .records import LevelPlan, VariantPlan

TOP_KEYS = {"name", "description", "model", "version", "base_config", "base_config_text",
            "on_missing_gpus", "stand_in", "load", "perf", "repetitions", "warmup", "objectives",
            "objective", "variants", "sweep"}
VARIANT_KEYS = {"name", "description", "config", "model", "version", "base_config", "base_config_text",
                "load", "perf"}
LOAD_KEYS = {"mode", "levels", "distribution"}
PERF_KEYS = {"protocol", "batch_size", "input_data", "shapes", "warmup_request_count", "request_count",
             "measurement_mode", "measurement_interval_ms", "measurement_request_count", "percentile",
             "latency_threshold_ms", "stability_percentage", "max_trials", "max_threads", "async",
             "verbose_csv", "retries"}
OBJECTIVE_KEYS = {"name", "metric", "goal", "at_load", "constraints"}
SWEEP_KEYS = {"name", "grid", "config", "load", "perf"}
INT_PERF = {"batch_size", "warmup_request_count", "request_count", "measurement_interval_ms",
            "measurement_request_count", "percentile", "latency_threshold_ms", "stability_percentage",
            "max_trials", "max_threads", "retries"}
OBJECTIVE_METRICS = {"throughput", "latency_avg_us", "p50_us", "p90_us", "p95_us", "p99_us", "queue_us",
                     "compute_infer_us", "avg_batch_size", "gpu_util"}
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class SpecError(ServeSystemError):
    """A spec with problems; ``lines`` holds one ``spec: variant: field: message`` line each."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        super().__init__(lines[0] if len(lines) == 1 else f"{lines[0]} (and {len(lines) - 1} more)")


@dataclass
class Objective:
    name: str
    metric: str
    goal: str = "max"
    at_load: float | None = None
    constraints: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass
class Spec:
    path: Path
    data: dict[str, Any]
    variants: list[dict[str, Any]]
    objectives: list[Objective]

    @property
    def name(self) -> str:
        return str(self.data["name"])

    @property
    def model(self) -> str:
        return str(self.data["model"])


def repo_root(start: Path) -> Path | None:
    for d in [start, *start.parents]:
        if (d / "ansible.cfg").exists():
            return d
    return None


def resolve(spec_path: Path, rel: str) -> Path:
    """A spec's relative path: against the spec's folder, else the repository root."""
    p = Path(rel)
    if p.is_absolute():
        return p
    first = (spec_path.parent / p).resolve()
    if first.exists():
        return first
    root = repo_root(spec_path.parent.resolve())
    if root is not None and (root / p).exists():
        return (root / p).resolve()
    return first


# ------------------------------------------------------------------------------------ loading

def load_spec(path: str | Path) -> Spec:
    """Read and check a spec file (schema only; :func:`plan` checks configs against a host)."""
    p = Path(path)
    where = str(p)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SpecError([f"{where}: -: -: cannot read: {exc.strerror}"]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        loc = f"{mark.line + 1}:{mark.column + 1}" if mark else "1:1"
        raise SpecError([f"{where}:{loc}: not valid YAML: {getattr(exc, 'problem', exc)}"]) from None
    errs: list[str] = []

    def err(variant: str, fld: str, msg: str) -> None:
        errs.append(f"{where}: {variant}: {fld}: {msg}")

    if not isinstance(data, dict):
        raise SpecError([f"{where}: -: -: a spec is a mapping of keys (name, model, variants, ...)"])
    _unknown(data, TOP_KEYS, "-", "", err)
    for req in ("name", "model", "load"):
        if req not in data:
            err("-", req, "missing (required)")
    if "name" in data and not NAME_RE.match(str(data["name"])):
        err("-", "name", f"{data['name']!r} is not a plain name (letters, digits, _ . -)")
    if data.get("on_missing_gpus", "refuse") not in ("refuse", "adapt"):
        err("-", "on_missing_gpus", "must be 'refuse' or 'adapt'")
    if "base_config" not in data and "base_config_text" not in data:
        err("-", "base_config", "missing: give base_config (a config.pbtxt path) or base_config_text")
    reps = data.get("repetitions", 1)
    if not isinstance(reps, int) or reps < 1:
        err("-", "repetitions", f"must be an integer >= 1, got {reps!r}")
    warm = data.get("warmup", {}) or {}
    if not isinstance(warm, dict) or set(warm) - {"requests"}:
        err("-", "warmup", "must be a mapping with only 'requests'")
    if isinstance(data.get("load"), dict):
        _check_load(data["load"], "-", "load", err)
    elif "load" in data:
        err("-", "load", "must be a mapping (mode, levels, distribution)")
    _check_perf(data.get("perf") or {}, "-", "perf", err)

    variants = list(data.get("variants") or [])
    if data.get("sweep") is not None:
        variants += _expand_sweep(data["sweep"], err)
    if not variants:
        err("-", "variants", "no variants: give 'variants' or 'sweep'")
    seen: set[str] = set()
    for i, v in enumerate(variants):
        if not isinstance(v, dict):
            err(f"variants[{i}]", "-", "a variant is a mapping (name, config, ...)")
            continue
        vname = str(v.get("name", f"variants[{i}]"))
        _unknown(v, VARIANT_KEYS, vname, "", err)
        if "name" not in v:
            err(vname, "name", "missing (required)")
        elif not NAME_RE.match(vname):
            err(vname, "name", "not a plain name (letters, digits, _ . -): it names a results folder")
        if vname in seen:
            err(vname, "name", "duplicate variant name")
        seen.add(vname)
        if v.get("config") is not None and not isinstance(v["config"], dict):
            err(vname, "config", "must be a mapping of ModelConfig keys")
        if isinstance(v.get("load"), dict):
            _check_load({**(data.get("load") or {}), **v["load"]}, vname, "load", err)
        _check_perf(v.get("perf") or {}, vname, "perf", err)

    objectives: list[Objective] = []
    raw_obj = data.get("objectives")
    if raw_obj is None and data.get("objective") is not None:
        raw_obj = [data["objective"]]
    for i, o in enumerate(raw_obj or [{"name": "max_throughput", "metric": "throughput", "goal": "max"}]):
        fld = f"objectives[{i}]"
        if not isinstance(o, dict):
            err("-", fld, "must be a mapping (metric, goal, ...)")
            continue
        _unknown(o, OBJECTIVE_KEYS, "-", fld + ".", err)
        metric = o.get("metric", "throughput")
        if metric not in OBJECTIVE_METRICS:
            err("-", f"{fld}.metric", f"unknown metric {metric!r} (one of {', '.join(sorted(OBJECTIVE_METRICS))})")
        goal = o.get("goal", "max")
        if goal not in ("max", "min"):
            err("-", f"{fld}.goal", "must be 'max' or 'min'")
        cons = o.get("constraints") or {}
        for cm, bound in cons.items() if isinstance(cons, dict) else []:
            if cm not in OBJECTIVE_METRICS or not isinstance(bound, dict) or set(bound) - {"max", "min"}:
                err("-", f"{fld}.constraints.{cm}", "a known metric with {max: N} and/or {min: N}")
        objectives.append(Objective(name=str(o.get("name", f"{goal}_{metric}")), metric=metric, goal=goal,
                                    at_load=o.get("at_load"), constraints=cons if isinstance(cons, dict) else {}))
    if errs:
        raise SpecError(errs)
    return Spec(path=p, data=data, variants=variants, objectives=objectives)


def _unknown(d: dict[str, Any], known: set[str], variant: str, prefix: str, err: Any) -> None:
    for k in d:
        if k not in known:
            err(variant, f"{prefix}{k}", f"unknown key (known: {', '.join(sorted(known))})")


def _check_load(load: dict[str, Any], variant: str, fld: str, err: Any) -> None:
    _unknown(load, LOAD_KEYS, variant, fld + ".", err)
    mode = load.get("mode", perfmod.CONCURRENCY)
    if mode not in (perfmod.CONCURRENCY, perfmod.REQUEST_RATE):
        err(variant, f"{fld}.mode", "must be 'concurrency' or 'request_rate'")
    dist = load.get("distribution")
    if dist is not None:
        if mode != perfmod.REQUEST_RATE:
            err(variant, f"{fld}.distribution", "only for mode request_rate")
        elif dist not in ("constant", "poisson"):
            err(variant, f"{fld}.distribution", "must be 'constant' or 'poisson'")
    try:
        levels = expand_levels(load.get("levels"))
    except ValueError as exc:
        err(variant, f"{fld}.levels", str(exc))
        return
    if mode == perfmod.CONCURRENCY and any(not float(x).is_integer() or x < 1 for x in levels):
        err(variant, f"{fld}.levels", "concurrency levels are whole numbers >= 1")


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
            raise ValueError(f"range {levels!r} is not numeric") from None
        levels = {"start": nums[0], "end": nums[1] if len(nums) > 1 else nums[0],
                  "step": nums[2] if len(nums) > 2 else 1}
    if isinstance(levels, dict):
        try:
            start, end, step = float(levels["start"]), float(levels.get("end", levels["start"])), \
                float(levels.get("step", 1))
        except (KeyError, TypeError, ValueError):
            raise ValueError("a range needs numeric start (and end, step)") from None
        if step <= 0 or end < start:
            raise ValueError("a range needs step > 0 and end >= start")
        out, x = [], start
        while x <= end + 1e-9:
            out.append(round(x, 6))
            x += step
        return out
    if isinstance(levels, list) and levels:
        out = []
        for x in levels:
            if isinstance(x, bool) or not isinstance(x, (int, float)) or x <= 0:
                raise ValueError(f"level {x!r} is not a positive number")
            out.append(float(x))
        return out
    raise ValueError("must be a non-empty list, a range 'start:end:step' or {start, end, step}")


def _check_perf(p: Any, variant: str, fld: str, err: Any) -> None:
    if not isinstance(p, dict):
        err(variant, fld, "must be a mapping of perf_analyzer settings")
        return
    _unknown(p, PERF_KEYS, variant, fld + ".", err)
    for k in INT_PERF & set(p):
        if isinstance(p[k], bool) or not isinstance(p[k], int) or p[k] < 0:
            err(variant, f"{fld}.{k}", f"must be a whole number >= 0, got {p[k]!r}")
    if p.get("protocol", "http") not in ("http", "grpc"):
        err(variant, f"{fld}.protocol", "must be 'http' or 'grpc'")
    if p.get("measurement_mode", "time_windows") not in ("time_windows", "count_windows"):
        err(variant, f"{fld}.measurement_mode", "must be 'time_windows' or 'count_windows'")
    shapes = p.get("shapes")
    if shapes is not None:
        if not isinstance(shapes, dict):
            err(variant, f"{fld}.shapes", "must map input names to dims lists")
        else:
            for name, dims in shapes.items():
                if not isinstance(dims, list) or not all(isinstance(d, int) and d > 0 for d in dims):
                    err(variant, f"{fld}.shapes.{name}", f"dims must be a list of positive integers, got {dims!r}")


def _expand_sweep(sweep: Any, err: Any) -> list[dict[str, Any]]:
    if not isinstance(sweep, dict):
        err("-", "sweep", "must be a mapping (name, grid, config)")
        return []
    _unknown(sweep, SWEEP_KEYS, "-", "sweep.", err)
    grid = sweep.get("grid")
    pattern = sweep.get("name")
    if not isinstance(grid, dict) or not grid or not all(isinstance(v, list) and v for v in grid.values()):
        err("-", "sweep.grid", "must map parameter names to non-empty lists")
        return []
    if not isinstance(pattern, str):
        err("-", "sweep.name", "a name pattern using the grid's parameters, e.g. 'i{instances}_d{delay}'")
        return []
    keys = list(grid)
    out = []
    for values in itertools.product(*(grid[k] for k in keys)):
        env = dict(zip(keys, values))
        try:
            name = pattern.format(**env)
        except (KeyError, IndexError) as exc:
            err("-", "sweep.name", f"unknown parameter {exc} in {pattern!r}")
            return []
        v: dict[str, Any] = {"name": name, "config": _subst(sweep.get("config") or {}, env)}
        for k in ("load", "perf"):
            if sweep.get(k) is not None:
                v[k] = _subst(sweep[k], env)
        out.append(v)
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
        return obj.format(**env) if "{" in obj else obj
    return obj


# ------------------------------------------------------------------------------------ planning

def base_config(spec: Spec, variant: dict[str, Any], repository: Path | None = None) -> tc.ModelConfig:
    """The base ModelConfig for a variant (its own base, else the spec's)."""
    text = variant.get("base_config_text", spec.data.get("base_config_text") if "base_config" not in variant else None)
    if text is not None:
        return tc.parse_pbtxt(str(text), f"{spec.path}:base_config_text")
    rel = variant.get("base_config", spec.data.get("base_config"))
    model = variant.get("model", spec.model)
    if repository is not None:
        return tc.load_pbtxt(repository / str(model) / "config.pbtxt")
    return tc.load_pbtxt(resolve(spec.path, str(rel)))


def _merged(spec: Spec, variant: dict[str, Any], key: str) -> dict[str, Any]:
    return {**(spec.data.get(key) or {}), **(variant.get(key) or {})}


def level_id(mode: str, load: float, repetition: int) -> str:
    """Folder name of one measurement: ``c8_r1`` (concurrency 8) or ``rr120_r1`` (120 req/s)."""
    tag = "c" if mode == perfmod.CONCURRENCY else "rr"
    num = str(int(load)) if float(load).is_integer() else str(load).replace(".", "p")
    return f"{tag}{num}_r{repetition}"


def plan(
    spec: Spec,
    host_gpus: int,
    *,
    url: str = "triton_server:8000",
    node_work_dir: str = "/work",
    repository: Path | None = None,
    done: set[tuple[str, str]] | None = None,
) -> list[VariantPlan]:
    """Render and check every variant for a host with ``host_gpus`` GPUs; raise :class:`SpecError`.

    ``node_work_dir`` is where perf_analyzer (in the client container) reads inputs and writes CSV;
    ``done`` holds (variant, level id) pairs already measured (resume), marked ``done``.
    """
    errs: list[str] = []
    where = str(spec.path)
    out: list[VariantPlan] = []
    policy = spec.data.get("on_missing_gpus", "refuse")
    for v in spec.variants:
        vname = str(v["name"])
        try:
            base = base_config(spec, v, repository)
        except tc.ConfigError as exc:
            errs.append(f"{where}: {vname}: base_config: {exc}")
            continue
        try:
            cfg = tc.apply_overrides(base, v.get("config"), f"{where}: {vname}: config")
        except tc.ConfigError as exc:
            errs.append(str(exc))
            continue
        model = str(v.get("model", spec.model))
        if cfg.name and cfg.name != model:
            errs.append(f"{where}: {vname}: config.name: {cfg.name!r} differs from the model name {model!r}")
        notes: list[str] = []
        stand_in = None
        params = cfg.parameters
        if "serve_system_weights" in params and params["serve_system_weights"].string_value.startswith("stand-in"):
            stand_in = params["serve_system_weights"].string_value
        if "serve_system_served_by" in params:
            notes.append(f"served by: {params['serve_system_served_by'].string_value}")
        if tc.gpus_needed(cfg) > host_gpus:
            if policy == "adapt":
                cfg, adapted = tc.adapt_to_host(cfg, host_gpus)
                notes += adapted
            else:
                errs.append(f"{where}: {vname}: instance_group: uses {tc.gpus_needed(cfg)} GPU(s), the host has "
                            f"{host_gpus}: run it on a GPU node, or set on_missing_gpus: adapt")
                continue
        for prob in tc.check(cfg, host_gpus):
            errs.append(f"{where}: {vname}: config.{prob.field}: {prob.message}")
        perf = _merged(spec, v, "perf")
        load = _merged(spec, v, "load")
        for prob in tc.check_shapes(cfg, perf.get("shapes") or {}):
            errs.append(f"{where}: {vname}: perf.{prob.field}: {prob.message}")
        batch = int(perf.get("batch_size", 1))
        if cfg.max_batch_size == 0 and batch > 1:
            errs.append(f"{where}: {vname}: perf.batch_size: {batch} > 1 but the model does not batch "
                        "(max_batch_size 0)")
        elif cfg.max_batch_size and batch > cfg.max_batch_size:
            errs.append(f"{where}: {vname}: perf.batch_size: {batch} > max_batch_size {cfg.max_batch_size}")
        input_data = None
        if perf.get("input_data") and perf["input_data"] not in ("random", "zero"):
            src = resolve(spec.path, str(perf["input_data"]))
            if not src.exists():
                errs.append(f"{where}: {vname}: perf.input_data: {perf['input_data']} not found")
            input_data = str(src)
            perf["input_data"] = f"{node_work_dir}/{src.name}"
        if "distribution" in load:
            perf["distribution"] = load["distribution"]
        mode = load.get("mode", perfmod.CONCURRENCY)
        levels = expand_levels(load.get("levels"))
        version = str(v.get("version", spec.data.get("version", "1")))
        lplans = []
        for rep in range(1, int(spec.data.get("repetitions", 1)) + 1):
            for lv in levels:
                lid = level_id(mode, lv, rep)
                csv_path = f"{node_work_dir}/{vname}/{lid}/perf.csv"
                argv = perfmod.build_argv(model=model, url=url, mode=mode, load=lv, perf=perf, csv_path=csv_path)
                retries, p2 = [], perf
                for _ in range(int(perf.get("retries", 1))):
                    p2 = perfmod.longer_window(p2)
                    retries.append(perfmod.build_argv(model=model, url=url, mode=mode, load=lv, perf=p2,
                                                      csv_path=csv_path))
                lplans.append(LevelPlan(id=lid, mode=mode, load=lv, repetition=rep, argv=argv,
                                        retry_argv=retries, done=(vname, lid) in (done or set())))
        warm_n = int((spec.data.get("warmup") or {}).get("requests", 20))
        warm_perf = {k: v2 for k, v2 in perf.items() if k not in ("request_count", "warmup_request_count",
                                                                   "percentile", "latency_threshold_ms")}
        warm_perf.update(measurement_mode="count_windows", measurement_request_count=max(warm_n, 1),
                         max_trials=2, verbose_csv=False)
        warmup_argv = perfmod.build_argv(model=model, url=url, mode=perfmod.CONCURRENCY, load=1,
                                         perf=warm_perf) if warm_n > 0 else []
        out.append(VariantPlan(name=vname, model=model, version=version, config_pbtxt=tc.render_pbtxt(cfg),
                               load_body=tc.load_api_body(cfg), notes=notes, levels=lplans,
                               input_data=input_data, perf=perf, warmup_argv=warmup_argv,
                               stand_in=stand_in))
    if errs:
        raise SpecError(errs)
    return out


def baseline_body(spec: Spec, repository: Path | None = None) -> dict[str, Any]:
    """Load-API body restoring the spec model's base config as committed."""
    return tc.load_api_body(base_config(spec, {}, repository))


# ------------------------------------------------------------------------------------ FastAPI kind
# A minimal reader of `kind: fastapi` specs (CONTRACTS.md #1) until the typed model (spec.py) lands.

FASTAPI_KEYS = {"kind", "name", "description", "variants", "levels", "repetitions", "warmup", "request_timeout_s"}
FASTAPI_RUNTIMES = ("onnx", "pytorch")


@dataclass
class FastapiSpec:
    path: Path
    data: dict[str, Any]
    variants: list[dict[str, Any]]
    levels: list[dict[str, int]]
    objectives: list[Objective]
    repetitions: int = 1
    warmup_requests: int = 0
    request_timeout_s: float = 60

    @property
    def name(self) -> str:
        return str(self.data["name"])


def spec_kind(path: str | Path) -> str:
    """``triton`` (the default) or ``fastapi``: the spec's ``kind`` key."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return records.TRITON  # load_spec gives the one-line error
    return str(data.get("kind", records.TRITON)) if isinstance(data, dict) else records.TRITON


def load_any(path: str | Path) -> Spec | FastapiSpec:
    """A spec of either kind (``kind: triton`` is the default)."""
    return load_fastapi(path) if spec_kind(path) == records.FASTAPI else load_spec(path)


def load_fastapi(path: str | Path) -> FastapiSpec:
    p = Path(path)
    where = str(p)
    data = yaml.safe_load(p.read_text(encoding="utf-8"))
    errs: list[str] = []
    _unknown(data, FASTAPI_KEYS, "-", "", lambda v, f, m: errs.append(f"{where}: {v}: {f}: {m}"))
    if not NAME_RE.match(str(data.get("name", ""))):
        errs.append(f"{where}: -: name: missing or not a plain name (letters, digits, _ . -)")
    variants = data.get("variants") or []
    if not isinstance(variants, list) or not variants:
        errs.append(f"{where}: -: variants: give a list of {{name, runtime}} (runtime onnx or pytorch)")
        variants = []
    for i, v in enumerate(variants):
        if not isinstance(v, dict) or not NAME_RE.match(str(v.get("name", ""))) \
                or v.get("runtime") not in FASTAPI_RUNTIMES or set(v) - {"name", "runtime"}:
            errs.append(f"{where}: variants[{i}]: -: a variant is {{name: NAME, runtime: onnx|pytorch}}")
    levels = data.get("levels") or []
    if not isinstance(levels, list) or not levels:
        errs.append(f"{where}: -: levels: give a list of {{senders, requests}}")
        levels = []
    for i, lv in enumerate(levels):
        if not isinstance(lv, dict) or set(lv) != {"senders", "requests"} or not all(
                isinstance(lv[k], int) and not isinstance(lv[k], bool) and lv[k] >= 1 for k in lv):
            errs.append(f"{where}: -: levels[{i}]: a level is {{senders: N >= 1, requests: N >= 1}}")
    reps = data.get("repetitions", 1)
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < 1:
        errs.append(f"{where}: -: repetitions: must be a whole number >= 1")
    warm = (data.get("warmup") or {}).get("requests", 0) if isinstance(data.get("warmup") or {}, dict) else -1
    if isinstance(warm, bool) or not isinstance(warm, int) or warm < 0:
        errs.append(f"{where}: -: warmup: must be {{requests: N >= 0}}")
    timeout = data.get("request_timeout_s", 60)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        errs.append(f"{where}: -: request_timeout_s: must be a number of seconds > 0")
    if errs:
        raise SpecError(errs)
    top = max(lv["senders"] for lv in levels)
    objectives = [Objective(name="max_throughput", metric="throughput", goal="max", at_load=top),
                  Objective(name="min_p95", metric="p95_us", goal="min", at_load=top)]
    return FastapiSpec(path=p, data=data, variants=variants, levels=levels, objectives=objectives,
                       repetitions=reps, warmup_requests=warm, request_timeout_s=float(timeout))


def plan_fastapi(spec: FastapiSpec, *, url: str = "http://fastapi_server:8000", node_work_dir: str = "/work",
                 image: str | None = None, done: set[tuple[str, str]] | None = None) -> list[VariantPlan]:
    """The lab's two measurements per runtime: one sender in sequence, then concurrent senders."""
    client = [f"{node_work_dir}/fastapi_bench.py", "--url", f"{url}/predict",
              "--timeout", f"{spec.request_timeout_s:g}"]
    client = ["python3", *client] + (["--image", f"{node_work_dir}/{image}"] if image else [])
    out = []
    for v in spec.variants:
        name = str(v["name"])
        lplans = []
        for rep in range(1, spec.repetitions + 1):
            for lv in spec.levels:
                senders, requests = int(lv["senders"]), int(lv["requests"])
                lid = level_id(perfmod.CONCURRENCY, senders, rep)
                ldir = f"{node_work_dir}/{name}/{lid}"
                phase = (["--sequential", str(requests), "--concurrent", "0"] if senders == 1
                         else ["--sequential", "0", "--concurrent", str(requests)])
                argv = [*client, *phase, "--senders", str(senders), "--out", f"{ldir}/bench.json",
                        "--csv", f"{ldir}/bench.csv"]
                lplans.append(LevelPlan(id=lid, mode=perfmod.CONCURRENCY, load=senders, repetition=rep, argv=argv,
                                        retry_argv=[], done=(name, lid) in (done or set()), requests=requests))
        warm = ([*client, "--sequential", str(spec.warmup_requests), "--concurrent", "0",
                 "--out", f"{node_work_dir}/{name}/warmup.json"] if spec.warmup_requests else [])
        out.append(VariantPlan(name=name, model=f"fastapi:{v['runtime']}", version="1", config_pbtxt="",
                               load_body={}, notes=[], levels=lplans, input_data=None, perf={"batch_size": 1},
                               warmup_argv=warm, runtime=str(v["runtime"])))
    return out


def estimate_seconds(variants: list[VariantPlan]) -> float:
    """Rough duration of the pending levels (lease guard, first ETA): windows x interval + overhead."""
    total = 0.0
    for v in variants:
        todo = [lv for lv in v.levels if not lv.done]
        if not todo:
            continue
        total += 5.0  # load, READY, warm-up
        for lv in todo:
            if v.runtime is not None:  # FastAPI: assume ~20 requests/s per sender
                total += 2.0 + (lv.requests or 100) / (20.0 * max(lv.load, 1))
                continue
            interval = float(v.perf.get("measurement_interval_ms") or 5000) / 1000
            if v.perf.get("measurement_mode") == "count_windows":
                interval = 2.0
            total += 2.0 + interval * 3 * (1 + len(lv.retry_argv) * 0.25)
    return round(total, 1)
