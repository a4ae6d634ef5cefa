"""The plan an experiment spec expands to for each host: its variants, their levels and load order.

The spec itself (its schema, limits and checks) is :mod:`serve_system.experiment.spec`. Here every
variant is rendered against its base config.pbtxt, checked against Triton's schema and the host's GPU
count, and turned into perf_analyzer command lines (:mod:`.perfargv`), before anything runs. Errors read
``FILE: variant: field: message``. The run folder the plans are written to is :mod:`.runfolder`.
"""

from __future__ import annotations

import hashlib
import random
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..node import bundle, defaults
from ..node.plans import STANDIN_CHOSEN_PARAM, LevelPlan, VariantPlan
from ..triton.host import (
    TENSORRT_MIN_COMPUTE_CAPABILITY,
    adapt_to_host,
    gpus_needed,
    needs_adapting,
    tensorrt_accelerators,
)
from ..triton.inputs import check_shapes, request_bytes
from ..triton.pbtxt import (
    ConfigError,
    ModelConfig,
    apply_overrides,
    load_api_body,
    load_pbtxt,
    parse_pbtxt,
    render_pbtxt,
)
from ..triton.problems import check, jinja_in
from . import perf as perfmod
from . import perfargv, search
from .spec.messages import SpecError
from .spec.models import (
    FastapiSpec,
    TritonSpec,
    Variant,
    expand_levels,
)
from .spec.reader import resolve

#: Triton's endpoints and the run's folder as the node's client container sees them (the serve_stack
#: role names the containers; the experiment role mounts the run folder at NODE_WORK_DIR)
TRITON_HTTP = "triton_server:8000"
TRITON_GRPC = "triton_server:8001"
TRITON_METRICS = "triton_server:8002"
FASTAPI_URL = "http://fastapi_server:8000"
NODE_WORK_DIR = "/work"


# ------------------------------------------------------------------------------------ planning

def base_config(spec: TritonSpec, variant: Variant | None = None,
                repository: Path | None = None) -> ModelConfig:
    """The base ModelConfig for a variant (its own base, else the spec's; no variant: the spec's)."""
    if variant is None:
        variant = Variant(name="baseline")
    text = variant.base_config_text
    if text is None and variant.base_config is None:
        text = spec.base_config_text
    if text is not None:
        return parse_pbtxt(text, f"{spec.path}:base_config_text")
    rel = variant.base_config or spec.base_config
    model = variant.model or spec.model
    if repository is not None:
        return load_pbtxt(repository / model / "config.pbtxt")
    try:
        return load_pbtxt(resolve(spec.path, str(rel)))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def level_id(mode: str, load: float, repetition: int) -> str:
    """Folder name of one measurement: ``c8_r1`` (concurrency 8) or ``rr120_r1`` (120 req/s)."""
    tag = "c" if mode == perfmod.CONCURRENCY else "rr"
    num = str(int(load)) if float(load).is_integer() else str(load).replace(".", "p")
    return f"{tag}{num}_r{repetition}"


def plan(
    spec: TritonSpec,
    host_gpus: int,
    *,
    compute_capability: float | None = None,
    url: str = TRITON_HTTP,
    grpc_url: str = TRITON_GRPC,
    node_work_dir: str = NODE_WORK_DIR,
    repository: Path | None = None,
    done: set[tuple[str, str]] | None = None,
) -> list[VariantPlan]:
    """Render and check every variant for a host with ``host_gpus`` GPUs; raise :class:`SpecError`.

    ``compute_capability`` is the lowest of the host's GPUs (None: unknown): below TensorRT's, a
    TensorRT accelerator is dropped (``on_missing_gpus: adapt``) or refused.

    ``url`` is Triton's HTTP endpoint and ``grpc_url`` its gRPC one, as perf_analyzer reaches them
    (each variant's ``perf.protocol`` picks one); ``node_work_dir`` is where perf_analyzer (in the client
    container) reads inputs and writes CSV;
    ``done`` holds (variant, level id) pairs already measured (resume), marked ``done``.
    """
    errs: list[str] = []
    out: list[VariantPlan] = []
    for v in spec.all_variants:
        made = _config(spec, v, host_gpus, compute_capability, repository, errs)
        if made is None:
            continue
        cfg, notes, stand_in = made
        model = v.model or spec.model
        perf = perfargv.PerfSettings.of(spec.merged_perf(v))
        load = spec.merged_load(v)
        errs += _perf_problems(spec, v, cfg, perf)
        try:
            input_data, perf = _input_data(spec, v, perf, node_work_dir, errs)
        except ValueError:
            continue
        if input_data is None:  # generated inputs: large ones get a request count (perf_analyzer's memory)
            perf, bound = perfargv.bound_requests(perf, request_bytes(cfg, perf.shapes or {}, perf.batch))
            notes += [bound] if bound else []
        if "distribution" in load:
            perf = replace(perf, distribution=load["distribution"])
        purl = grpc_url if perf.protocol == "grpc" else url
        lplans = _level_plans(spec, v.name, model, purl, load, perf, node_work_dir, done or set())
        out.append(VariantPlan(name=v.name, model=model, version=v.version or spec.version,
                               config_pbtxt=render_pbtxt(cfg), load_body=load_api_body(cfg), notes=notes,
                               levels=lplans, input_data=input_data, perf=perf.record(),
                               warmup_argv=_warmup_argv(spec.warmup.requests, model, purl, perf),
                               stand_in=stand_in))
    if errs:
        raise SpecError(list(dict.fromkeys(errs)))  # a spec-wide setting's problem reads once
    return out


def _config(spec: TritonSpec, v: Variant, host_gpus: int, compute_capability: float | None,
            repository: Path | None, errs: list[str]) -> tuple[ModelConfig, list[str], str | None] | None:
    """A variant's configuration for the host (its base with its overrides, adapted where the spec
    allows), its notes and its stand-in weights' mark; its problems added to ``errs``; None when it
    cannot be made at all."""
    where, vname = str(spec.path), v.name
    try:
        base = base_config(spec, v, repository)
    except ConfigError as exc:
        errs.append(f"{where}: {vname}: base_config: {exc}")
        return None
    # a base shared by variants says its own problems once, under its own field
    in_base = {str(p) for p in jinja_in(base)}
    errs += [f"{where}: {_base_field(spec, v)}: {p}" for p in sorted(in_base)]
    try:
        cfg = apply_overrides(base, v.config, f"{where}: {vname}: config")
    except ConfigError as exc:
        errs.append(str(exc))
        return None
    model = v.model or spec.model
    if cfg.name and cfg.name != model:
        errs.append(f"{where}: {vname}: config.name: {cfg.name!r} differs from the model name {model!r}")
    notes: list[str] = []
    stand_in = None
    params = cfg.parameters
    if "serve_system_weights" in params and (
            params["serve_system_weights"].string_value.startswith("stand-in")):
        stand_in = params["serve_system_weights"].string_value
        if host_gpus > 0 and STANDIN_CHOSEN_PARAM not in params:
            # one line per model, however many variants run it (the errors are deduplicated)
            errs.append(f"{where}: model {model}: the GPU node serves generated stand-in weights, which "
                        "nobody chose: deploy the lab's weights (serve_stack_weights: lab; the model's own "
                        f"in model_repository/{model}/1/ for a model the lab has none of), or choose "
                        "stand-ins with -e serve_stack_weights=standin, then run playbooks/deploy.yml")
            return None
    if "serve_system_served_by" in params:
        notes.append(f"served by: {params['serve_system_served_by'].string_value}")
    if "serve_system_instances" in params and "instance_group" not in (v.config or {}):
        # the node's base config was moved off GPUs when it was deployed; this variant runs it as is
        notes += params["serve_system_instances"].string_value.split("; ")
    if host_gpus > 0 and compute_capability is None and tensorrt_accelerators(cfg):
        notes.append("compute capability unknown (the node's nvidia-smi answered neither compute_cap nor "
                     "a GPU name in NVIDIA's table): TensorRT kept as written; it needs "
                     f"{TENSORRT_MIN_COMPUTE_CAPABILITY:.1f} or newer and fails to load on older GPUs "
                     "(a P100 is 6.0)")
    if needs_adapting(cfg, host_gpus, compute_capability):
        if spec.on_missing_gpus == "adapt":
            cfg, adapted = adapt_to_host(cfg, host_gpus, compute_capability)
            notes += adapted
        elif gpus_needed(cfg) > host_gpus:
            errs.append(f"{where}: {vname}: instance_group: uses {gpus_needed(cfg)} GPU(s), the host "
                        f"has {host_gpus}: run it on a GPU node, or set on_missing_gpus: adapt")
            return None
    errs += [f"{where}: {vname}: config.{prob.field}: {prob.message}"
             for prob in check(cfg, host_gpus, compute_capability=compute_capability)
             if str(prob) not in in_base]
    return cfg, notes, stand_in


def _perf_problems(spec: TritonSpec, v: Variant, cfg: ModelConfig, perf: perfargv.PerfSettings) -> list[str]:
    """What in a variant's perf settings its model cannot take (input shapes, the client batch)."""
    where, batch = str(spec.path), perf.batch
    errs = [f"{where}: {_perf_field(v, 'shapes')}{prob.field.removeprefix('shapes')}: {prob.message}"
            for prob in check_shapes(cfg, perf.shapes or {})]
    if cfg.max_batch_size == 0 and batch > 1:
        errs.append(f"{where}: {_perf_field(v, 'batch_size')}: {batch} > 1 but the model does not batch "
                    "(max_batch_size 0): use batch_size 1")
    elif cfg.max_batch_size and batch > cfg.max_batch_size:
        errs.append(f"{where}: {_perf_field(v, 'batch_size')}: {batch} > max_batch_size "
                    f"{cfg.max_batch_size}: use a smaller batch_size")
    return errs


def _input_data(spec: TritonSpec, v: Variant, perf: perfargv.PerfSettings, node_work_dir: str,
                errs: list[str]) -> tuple[str | None, perfargv.PerfSettings]:
    """The input data file a variant ships to the node (None: generated inputs), and ``perf`` pointed at
    its node path; a path outside the spec's folder raises ValueError, its problem added to ``errs``."""
    if not perf.input_data or perf.input_data in ("random", "zero"):
        return None, perf
    where = str(spec.path)
    try:
        src = resolve(spec.path, str(perf.input_data))
    except ValueError as exc:
        errs.append(f"{where}: {_perf_field(v, 'input_data')}: {exc}")
        raise
    if not src.exists():
        errs.append(f"{where}: {_perf_field(v, 'input_data')}: {perf.input_data} not found: give "
                    "an existing JSON file (relative to the spec's folder), 'random' or 'zero'")
    return str(src), replace(perf, input_data=f"{node_work_dir}/{src.name}")


def _level_plans(spec: TritonSpec, vname: str, model: str, purl: str, load: dict[str, Any],
                 perf: perfargv.PerfSettings, node_work_dir: str, done: set[tuple[str, str]]
                 ) -> list[LevelPlan]:
    """A variant's levels in the plan's repetitions, each with perf_analyzer's command line and its
    retries with longer windows (``done``: already measured, marked so)."""
    mode = load.get("mode", perfmod.CONCURRENCY)
    lplans = []
    for rep, rep_levels, rep_perf in search.schedule(spec, expand_levels(load.get("levels")), perf):
        for lv in rep_levels:  # a grid: every level
            lid = level_id(mode, lv, rep)
            csv_path = f"{node_work_dir}/{vname}/{lid}/perf.csv"
            argv = perfargv.build_argv(model=model, url=purl, mode=mode, load=lv, perf=rep_perf,
                                      csv_path=csv_path)
            retries, p2 = [], rep_perf
            for _ in range(defaults.RETRIES if perf.retries is None else perf.retries):
                p2 = perfargv.longer_window(p2)
                retries.append(perfargv.build_argv(model=model, url=purl, mode=mode, load=lv, perf=p2,
                                                  csv_path=csv_path))
            lplans.append(LevelPlan(id=lid, mode=mode, load=lv, repetition=rep, argv=argv,
                                    retry_argv=retries, done=(vname, lid) in done))
    return lplans


def _warmup_argv(warm_n: int, model: str, purl: str, perf: perfargv.PerfSettings) -> list[str]:
    """perf_analyzer's warm-up: exactly ``warm_n`` requests (a count bound, not windows until stable:
    no stability to reach here); none when ``warm_n`` is 0."""
    if warm_n <= 0:
        return []
    warm_perf = replace(perf, warmup_request_count=None, percentile=None, latency_threshold_ms=None,
                         measurement_mode="count_windows", measurement_request_count=warm_n,
                         request_count=warm_n, verbose_csv=False)
    return perfargv.build_argv(model=model, url=purl, mode=perfmod.CONCURRENCY, load=1, perf=warm_perf)


def _base_field(spec: TritonSpec, v: Variant) -> str:
    """Where a variant's base config comes from: its own, or the spec's."""
    if v.base_config_text is not None or v.base_config is not None:
        return f"{v.name}: base_config_text" if v.base_config_text is not None else f"{v.name}: base_config"
    return "base_config_text" if spec.base_config_text is not None else "base_config"


def _perf_field(v: Variant, key: str) -> str:
    """Where a perf setting comes from: the variant's own ``perf`` or the spec's."""
    own = v.perf is not None and key in v.perf.model_fields_set
    return f"{v.name}: perf.{key}" if own else f"perf.{key}"


# ------------------------------------------------------------------------------------ FastAPI kind

def plan_fastapi(spec: FastapiSpec, *, url: str = FASTAPI_URL, node_work_dir: str = NODE_WORK_DIR,
                 image: str | None = None, done: set[tuple[str, str]] | None = None) -> list[VariantPlan]:
    """The lab's two measurements per runtime: one sender in sequence, then concurrent senders."""
    client = [f"{node_work_dir}/{bundle.CLIENT}", "--url", f"{url}/predict",
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
                lplans.append(LevelPlan(id=lid, mode=perfmod.CONCURRENCY, load=senders, repetition=rep,
                                        argv=argv, retry_argv=[], done=(name, lid) in (done or set()),
                                        requests=requests))
        warm = ([*client, "--sequential", str(warm_n), "--concurrent", "0",
                 "--out", f"{node_work_dir}/{name}/warmup.json"] if warm_n else [])
        out.append(VariantPlan(name=name, model=f"fastapi:{v.runtime}", version="1", config_pbtxt="",
                               load_body={}, notes=[], levels=lplans, input_data=None,
                               perf=perfargv.PerfSettings(batch_size=defaults.BATCH_SIZE).record(),
                               warmup_argv=warm, runtime=v.runtime))
    return out


def estimate_seconds(variants: list[VariantPlan]) -> float:
    """Rough duration of the pending levels (lease guard, first ETA): windows x interval + overhead."""
    total = 0.0
    for v in variants:
        todo = [lv for lv in v.levels if not lv.done]
        if not todo:
            continue
        total += 5.0 * len({lv.repetition for lv in todo})  # each repetition: load, READY, warm-up
        for lv in todo:
            if v.runtime is not None:  # FastAPI: assume ~20 requests/s per sender
                total += 2.0 + (lv.requests or 100) / (20.0 * max(lv.load, 1))
                continue
            perf = perfargv.PerfSettings.of(v.perf)
            interval = perf.window_ms / 1000 if perf.timed else 2.0
            total += 2.0 + interval * 3 * (1 + len(lv.retry_argv) * 0.25)
    return round(total, 1)


# ------------------------------------------------------------------------------------ the order

def run_seed(experiment: str, run_id: str, host: str) -> int:
    """The seed of a host's load order: fixed by the run (a re-run of the same run id resumes in the
    same order), different between hosts (so their orders do not line up)."""
    return int(hashlib.sha256(f"{experiment}/{run_id}/{host}".encode()).hexdigest()[:8], 16)


def interleave(variants: list[VariantPlan], seed: int) -> list[list[str]]:
    """The rounds of a plan: repetition 1 of every variant, then repetition 2, ..., each round in its
    own order, counterbalanced: every block of k rounds (k variants) is a cyclic Latin square over an
    order shuffled from ``seed``, so each variant is measured at each position of a round once per
    block (with two variants: AB, BA, ...) and drift and order effects fall on every variant alike.
    Where a round starts with the variant the previous one ended with (or any variant follows one with
    the same config), the runner unloads the model first, so every repetition is a fresh load. With one
    repetition the plan's order stays (the lab's: the baseline first)."""
    names = [v.name for v in variants]
    reps = max((lv.repetition for v in variants for lv in v.levels), default=1)
    if reps <= 1:
        return [names]
    rng = random.Random(seed)
    rounds: list[list[str]] = []
    base = list(names)
    for r in range(reps):
        shift = r % len(names)
        if shift == 0:
            rng.shuffle(base)
        rounds.append(base[shift:] + base[:shift])
    return rounds


# ------------------------------------------------------------------------------------ the lease

def lease_end_time(lease_end: str) -> datetime:
    """``lease_end`` (ISO 8601, UTC when it names no zone) as an aware UTC time; ValueError (its message
    names the value and the fix) when it is no such time or lies outside the years 1970 to 9998."""
    try:
        end = datetime.fromisoformat(lease_end)
        end = (end if end.tzinfo is not None else end.replace(tzinfo=UTC)).astimezone(UTC)
        end.timestamp()
    except (ValueError, OverflowError, OSError):
        end = None
    if end is None or not 1970 <= end.year <= 9998:
        raise ValueError(f"{lease_end[:80]!r} is not an ISO 8601 time between 1970 and 9998 "
                         "(e.g. 2026-11-22T18:50:00Z)")
    return end


@dataclass(frozen=True)
class LeaseProblem:
    """Why a plan cannot start before the lease ends, as data: the lease end is no time (``bad_end``:
    why), or the plan of ``estimate_s`` seconds would end at ``finish`` after the lease's ``end``. The
    fixes offered follow the lease policy: a search (``search``) can also get a smaller budget."""

    estimate_s: float
    finish: float = 0.0
    end: datetime | None = None
    bad_end: str = ""
    search: bool = False

    def fixes(self) -> list[str]:
        """What the user can do, in the order offered."""
        return ["extend the lease", "measure fewer variants (-e variants=...)",
                *(["pass -e fit_lease=true (a smaller search budget)", "-e ignore_lease_end=true"]
                  if self.search else ["pass -e ignore_lease_end=true"])]

    def __str__(self) -> str:
        if self.bad_end or self.end is None:
            return f"serve_lease_end {self.bad_end}"
        fmt = "%Y-%m-%dT%H:%M:%SZ"
        *first, last = self.fixes()
        return (f"the plan needs about {self.estimate_s / 60:.0f} min and would end at "
                f"{time.strftime(fmt, time.gmtime(self.finish))}, after the lease ends at "
                f"{self.end.astimezone(UTC).strftime(fmt)}: {', '.join(first)}, or {last}")


def lease_problem(lease_end: str, estimate_s: float, now: float, *,
                  search: bool = False) -> LeaseProblem | None:
    """Why a plan of ``estimate_s`` seconds cannot start at ``now`` (None when it fits the lease);
    ``search``: the plan is a search, whose budget may be cut to fit."""
    try:
        end = lease_end_time(lease_end)
    except ValueError as exc:
        return LeaseProblem(estimate_s, bad_end=str(exc), search=search)
    finish = now + estimate_s
    if finish <= end.timestamp():
        return None
    return LeaseProblem(estimate_s, finish=finish, end=end, search=search)
