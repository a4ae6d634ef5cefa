"""The plan an experiment spec expands to for one host.

The spec itself (its schema, limits and checks) is :mod:`serve_system.spec`. Here every variant is
rendered against its base config.pbtxt, checked against Triton's schema and the host's GPU count,
and turned into perf_analyzer command lines, before anything runs. Errors read
``FILE: variant: field: message``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import perf as perfmod
from . import tritonconfig as tc
from .records import LevelPlan, VariantPlan
from .spec import (
    DEFAULT_OBJECTIVES,
    FastapiSpec,
    Objective,
    SpecError,
    TritonSpec,
    Variant,
    expand_levels,
    load_spec,
    repo_root,
    resolve,
)

__all__ = ["DEFAULT_OBJECTIVES", "FastapiSpec", "LevelPlan", "Objective", "Spec", "SpecError", "TritonSpec",
           "VariantPlan", "base_config", "baseline_body", "estimate_seconds", "expand_levels", "level_id",
           "load_spec", "plan", "plan_fastapi", "repo_root", "resolve"]

#: the Triton kind of spec (what :func:`plan` expands)
Spec = TritonSpec


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
    grpc_url: str = "triton_server:8001",
    node_work_dir: str = "/work",
    repository: Path | None = None,
    done: set[tuple[str, str]] | None = None,
) -> list[VariantPlan]:
    """Render and check every variant for a host with ``host_gpus`` GPUs; raise :class:`SpecError`.

    ``url`` is Triton's HTTP endpoint and ``grpc_url`` its gRPC one, as perf_analyzer reaches them
    (each variant's ``perf.protocol`` picks one); ``node_work_dir`` is where perf_analyzer (in the client container) reads inputs and writes CSV;
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
        if "serve_system_instances" in params and "instance_group" not in (v.config or {}):
            # the node's base config was moved off GPUs when it was deployed; this variant runs it as is
            notes += params["serve_system_instances"].string_value.split("; ")
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
        purl = grpc_url if perf.get("protocol") == "grpc" else url
        levels = expand_levels(load.get("levels"))
        version = v.version or spec.version
        lplans = []
        for rep in range(1, spec.repetitions + 1):
            for lv in levels:
                lid = level_id(mode, lv, rep)
                csv_path = f"{node_work_dir}/{vname}/{lid}/perf.csv"
                argv = perfmod.build_argv(model=model, url=purl, mode=mode, load=lv, perf=perf, csv_path=csv_path)
                retries, p2 = [], perf
                for _ in range(int(perf.get("retries", 1))):
                    p2 = perfmod.longer_window(p2)
                    retries.append(perfmod.build_argv(model=model, url=purl, mode=mode, load=lv, perf=p2,
                                                      csv_path=csv_path))
                lplans.append(LevelPlan(id=lid, mode=mode, load=lv, repetition=rep, argv=argv,
                                        retry_argv=retries, done=(vname, lid) in (done or set())))
        warm_n = spec.warmup.requests
        warm_perf = {k: v2 for k, v2 in perf.items() if k not in ("request_count", "warmup_request_count",
                                                                   "percentile", "latency_threshold_ms")}
        # exactly warm_n requests (a count bound, not windows until stable: no stability to reach here)
        warm_perf.update(measurement_mode="count_windows", measurement_request_count=max(warm_n, 1),
                         request_count=max(warm_n, 1), verbose_csv=False)
        warmup_argv = perfmod.build_argv(model=model, url=purl, mode=perfmod.CONCURRENCY, load=1,
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


# ------------------------------------------------------------------------------------ FastAPI kind

def plan_fastapi(spec: FastapiSpec, *, url: str = "http://fastapi_server:8000", node_work_dir: str = "/work",
                 image: str | None = None, done: set[tuple[str, str]] | None = None) -> list[VariantPlan]:
    """The lab's two measurements per runtime: one sender in sequence, then concurrent senders."""
    client = [f"{node_work_dir}/fastapi_bench.py", "--url", f"{url}/predict",
              "--timeout", f"{spec.request_timeout_s:g}"]
    warm_n = spec.warmup.requests
    client = ["python3", *client] + (["--image", f"{node_work_dir}/{image}"] if image else [])
    out = []
    for v in spec.variants:
        name = v.name
        lplans = []
        for rep in range(1, spec.repetitions + 1):
            for lv in spec.levels:
                senders, requests = lv.senders, lv.requests
                lid = level_id(perfmod.CONCURRENCY, senders, rep)
                ldir = f"{node_work_dir}/{name}/{lid}"
                phase = (["--sequential", str(requests), "--concurrent", "0"] if senders == 1
                         else ["--sequential", "0", "--concurrent", str(requests)])
                argv = [*client, *phase, "--senders", str(senders), "--out", f"{ldir}/bench.json",
                        "--csv", f"{ldir}/bench.csv"]
                lplans.append(LevelPlan(id=lid, mode=perfmod.CONCURRENCY, load=senders, repetition=rep, argv=argv,
                                        retry_argv=[], done=(name, lid) in (done or set()), requests=requests))
        warm = ([*client, "--sequential", str(warm_n), "--concurrent", "0",
                 "--out", f"{node_work_dir}/{name}/warmup.json"] if warm_n else [])
        out.append(VariantPlan(name=name, model=f"fastapi:{v.runtime}", version="1", config_pbtxt="",
                               load_body={}, notes=[], levels=lplans, input_data=None, perf={"batch_size": 1},
                               warmup_argv=warm, runtime=v.runtime))
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
