"""The plan an experiment spec expands to for one host.

The spec itself (its schema, limits and checks) is :mod:`serve_system.spec`. Here every variant is
rendered against its base config.pbtxt, checked against Triton's schema and the host's GPU count,
and turned into perf_analyzer command lines, before anything runs. Errors read
``FILE: variant: field: message``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import perf as perfmod
from . import tritonconfig as tc
from .spec import (
    DEFAULT_OBJECTIVES,
    Objective,
    SpecError,
    TritonSpec,
    Variant,
    expand_levels,
    load_spec,
    repo_root,
    resolve,
)

__all__ = ["DEFAULT_OBJECTIVES", "LevelPlan", "Objective", "Spec", "SpecError", "TritonSpec", "VariantPlan",
           "base_config", "baseline_body", "expand_levels", "level_id", "load_spec", "plan", "repo_root",
           "resolve"]

#: the Triton kind of spec (what :func:`plan` expands)
Spec = TritonSpec


@dataclass
class LevelPlan:
    """One perf_analyzer run: a load level and repetition of one variant."""

    id: str
    mode: str
    load: float
    repetition: int
    argv: list[str]
    retry_argv: list[list[str]]
    done: bool = False


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


# ------------------------------------------------------------------------------------ planning

def base_config(spec: TritonSpec, variant: Variant | None = None, repository: Path | None = None) -> tc.ModelConfig:
    """The base ModelConfig for a variant (its own base, else the spec's; no variant: the spec's)."""
    if variant is None:
        variant = Variant(name="baseline")
    text = variant.base_config_text
    if text is None and variant.base_config is None:
        text = spec.base_config_text
    if text is not None:
        return tc.parse_pbtxt(text, f"{spec.path}:base_config_text")
    rel = variant.base_config or spec.base_config
    model = variant.model or spec.model
    if repository is not None:
        return tc.load_pbtxt(repository / model / "config.pbtxt")
    try:
        return tc.load_pbtxt(resolve(spec.path, str(rel)))
    except ValueError as exc:
        raise tc.ConfigError(str(exc)) from None


def level_id(mode: str, load: float, repetition: int) -> str:
    """Folder name of one measurement: ``c8_r1`` (concurrency 8) or ``rr120_r1`` (120 req/s)."""
    tag = "c" if mode == perfmod.CONCURRENCY else "rr"
    num = str(int(load)) if float(load).is_integer() else str(load).replace(".", "p")
    return f"{tag}{num}_r{repetition}"


def plan(
    spec: TritonSpec,
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
    policy = spec.on_missing_gpus
    for v in spec.all_variants:
        vname = v.name
        try:
            base = base_config(spec, v, repository)
        except tc.ConfigError as exc:
            errs.append(f"{where}: {vname}: base_config: {exc}")
            continue
        try:
            cfg = tc.apply_overrides(base, v.config, f"{where}: {vname}: config")
        except tc.ConfigError as exc:
            errs.append(str(exc))
            continue
        model = v.model or spec.model
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
        perf = spec.merged_perf(v)
        load = spec.merged_load(v)
        for prob in tc.check_shapes(cfg, perf.get("shapes") or {}):
            errs.append(f"{where}: {_perf_field(v, 'shapes')}{prob.field.removeprefix('shapes')}: {prob.message}")
        batch = int(perf.get("batch_size", 1))
        if cfg.max_batch_size == 0 and batch > 1:
            errs.append(f"{where}: {_perf_field(v, 'batch_size')}: {batch} > 1 but the model does not batch "
                        "(max_batch_size 0): use batch_size 1")
        elif cfg.max_batch_size and batch > cfg.max_batch_size:
            errs.append(f"{where}: {_perf_field(v, 'batch_size')}: {batch} > max_batch_size {cfg.max_batch_size}: "
                        "use a smaller batch_size")
        input_data = None
        if perf.get("input_data") and perf["input_data"] not in ("random", "zero"):
            try:
                src = resolve(spec.path, str(perf["input_data"]))
            except ValueError as exc:
                errs.append(f"{where}: {_perf_field(v, 'input_data')}: {exc}")
                continue
            if not src.exists():
                errs.append(f"{where}: {_perf_field(v, 'input_data')}: {perf['input_data']} not found: give an "
                            "existing JSON file (relative to the spec's folder), 'random' or 'zero'")
            input_data = str(src)
            perf["input_data"] = f"{node_work_dir}/{src.name}"
        if "distribution" in load:
            perf["distribution"] = load["distribution"]
        mode = load.get("mode", perfmod.CONCURRENCY)
        levels = expand_levels(load.get("levels"))
        version = v.version or spec.version
        lplans = []
        for rep in range(1, spec.repetitions + 1):
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
        warm_n = spec.warmup.requests
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
        raise SpecError(list(dict.fromkeys(errs)))  # a spec-wide setting's problem reads once
    return out


def _perf_field(v: Variant, key: str) -> str:
    """Where a perf setting comes from: the variant's own ``perf`` or the spec's."""
    own = v.perf is not None and key in v.perf.model_fields_set
    return f"{v.name}: perf.{key}" if own else f"perf.{key}"


def baseline_body(spec: TritonSpec, repository: Path | None = None) -> dict[str, Any]:
    """Load-API body restoring the spec model's base config as committed."""
    return tc.load_api_body(base_config(spec, None, repository))
