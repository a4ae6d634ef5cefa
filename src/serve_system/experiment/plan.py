"""The plan an experiment spec expands to for each host, and the run folder it is written to.

The spec itself (its schema, limits and checks) is :mod:`serve_system.experiment.spec`. Here every
variant is rendered against its base config.pbtxt, checked against Triton's schema and the host's GPU
count, and turned into perf_analyzer command lines, before anything runs. Errors read
``FILE: variant: field: message``. :func:`write_run` then writes, under the run folder, ``spec.yml``,
``manifest.json`` and per host ``plan.json`` (a :class:`~.records.HostPlan`), each variant's
``config.pbtxt`` and ``load_body.json`` and ``.node.pyz`` (the node bundle: the runner, the plan and
its inputs in one file the role puts on the node: :mod:`.roleview`, with the role's view). Nothing is
written before every host's plan is checked.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .. import safeio
from ..triton.host import adapt_to_host, gpus_needed, needs_adapting
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
from . import records as rec
from . import roleview, search
from . import shard as shardmod
from .records import LevelPlan, VariantPlan
from .spec.messages import SpecError
from .spec.models import (
    AUTO_START,
    AnySpec,
    Budget,
    FastapiSpec,
    Objective,
    TritonSpec,
    Variant,
    check_name,
    expand_levels,
)
from .spec.reader import repo_root, resolve, shard_problems

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
        perf = spec.merged_perf(v)
        load = spec.merged_load(v)
        batch = int(perf.get("batch_size", 1))
        errs += _perf_problems(spec, v, cfg, perf, batch)
        try:
            input_data = _input_data(spec, v, perf, node_work_dir, errs)
        except ValueError:
            continue
        if input_data is None:  # generated inputs: large ones get a request count (perf_analyzer's memory)
            perf, bound = perfmod.bound_requests(perf, request_bytes(cfg, perf.get("shapes") or {}, batch))
            notes += [bound] if bound else []
        if "distribution" in load:
            perf["distribution"] = load["distribution"]
        purl = grpc_url if perf.get("protocol") == "grpc" else url
        lplans = _level_plans(spec, v.name, model, purl, load, perf, node_work_dir, done or set())
        out.append(VariantPlan(name=v.name, model=model, version=v.version or spec.version,
                               config_pbtxt=render_pbtxt(cfg), load_body=load_api_body(cfg), notes=notes,
                               levels=lplans, input_data=input_data, perf=perf,
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
    if "serve_system_served_by" in params:
        notes.append(f"served by: {params['serve_system_served_by'].string_value}")
    if "serve_system_instances" in params and "instance_group" not in (v.config or {}):
        # the node's base config was moved off GPUs when it was deployed; this variant runs it as is
        notes += params["serve_system_instances"].string_value.split("; ")
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


def _perf_problems(spec: TritonSpec, v: Variant, cfg: ModelConfig, perf: dict[str, Any],
                   batch: int) -> list[str]:
    """What in a variant's perf settings its model cannot take (input shapes, the client batch)."""
    where = str(spec.path)
    errs = [f"{where}: {_perf_field(v, 'shapes')}{prob.field.removeprefix('shapes')}: {prob.message}"
            for prob in check_shapes(cfg, perf.get("shapes") or {})]
    if cfg.max_batch_size == 0 and batch > 1:
        errs.append(f"{where}: {_perf_field(v, 'batch_size')}: {batch} > 1 but the model does not batch "
                    "(max_batch_size 0): use batch_size 1")
    elif cfg.max_batch_size and batch > cfg.max_batch_size:
        errs.append(f"{where}: {_perf_field(v, 'batch_size')}: {batch} > max_batch_size "
                    f"{cfg.max_batch_size}: use a smaller batch_size")
    return errs


def _input_data(spec: TritonSpec, v: Variant, perf: dict[str, Any], node_work_dir: str,
                errs: list[str]) -> str | None:
    """The input data file a variant ships to the node (None: generated inputs), ``perf`` pointed at
    its node path; a path outside the spec's folder raises ValueError, its problem added to ``errs``."""
    if not perf.get("input_data") or perf["input_data"] in ("random", "zero"):
        return None
    where = str(spec.path)
    try:
        src = resolve(spec.path, str(perf["input_data"]))
    except ValueError as exc:
        errs.append(f"{where}: {_perf_field(v, 'input_data')}: {exc}")
        raise
    if not src.exists():
        errs.append(f"{where}: {_perf_field(v, 'input_data')}: {perf['input_data']} not found: give "
                    "an existing JSON file (relative to the spec's folder), 'random' or 'zero'")
    perf["input_data"] = f"{node_work_dir}/{src.name}"
    return str(src)


def _level_plans(spec: TritonSpec, vname: str, model: str, purl: str, load: dict[str, Any],
                 perf: dict[str, Any], node_work_dir: str, done: set[tuple[str, str]]) -> list[LevelPlan]:
    """A variant's levels in the plan's repetitions, each with perf_analyzer's command line and its
    retries with longer windows (``done``: already measured, marked so)."""
    mode = load.get("mode", perfmod.CONCURRENCY)
    lplans = []
    for rep, rep_levels, rep_perf in search.schedule(spec, expand_levels(load.get("levels")), perf):
        for lv in rep_levels:  # a grid: every level
            lid = level_id(mode, lv, rep)
            csv_path = f"{node_work_dir}/{vname}/{lid}/perf.csv"
            argv = perfmod.build_argv(model=model, url=purl, mode=mode, load=lv, perf=rep_perf,
                                      csv_path=csv_path)
            retries, p2 = [], rep_perf
            for _ in range(int(perf.get("retries", 1))):
                p2 = perfmod.longer_window(p2)
                retries.append(perfmod.build_argv(model=model, url=purl, mode=mode, load=lv, perf=p2,
                                                  csv_path=csv_path))
            lplans.append(LevelPlan(id=lid, mode=mode, load=lv, repetition=rep, argv=argv,
                                    retry_argv=retries, done=(vname, lid) in done))
    return lplans


def _warmup_argv(warm_n: int, model: str, purl: str, perf: dict[str, Any]) -> list[str]:
    """perf_analyzer's warm-up: exactly ``warm_n`` requests (a count bound, not windows until stable:
    no stability to reach here); none when ``warm_n`` is 0."""
    if warm_n <= 0:
        return []
    warm_perf = {k: v2 for k, v2 in perf.items() if k not in ("request_count", "warmup_request_count",
                                                               "percentile", "latency_threshold_ms")}
    warm_perf.update(measurement_mode="count_windows", measurement_request_count=warm_n,
                     request_count=warm_n, verbose_csv=False)
    return perfmod.build_argv(model=model, url=purl, mode=perfmod.CONCURRENCY, load=1, perf=warm_perf)


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
                lplans.append(LevelPlan(id=lid, mode=perfmod.CONCURRENCY, load=senders, repetition=rep,
                                        argv=argv, retry_argv=[], done=(name, lid) in (done or set()),
                                        requests=requests))
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
        total += 5.0 * len({lv.repetition for lv in todo})  # each repetition: load, READY, warm-up
        for lv in todo:
            if v.runtime is not None:  # FastAPI: assume ~20 requests/s per sender
                total += 2.0 + (lv.requests or 100) / (20.0 * max(lv.load, 1))
                continue
            interval = float(v.perf.get("measurement_interval_ms") or 5000) / 1000
            if v.perf.get("measurement_mode") == "count_windows":
                interval = 2.0
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


# ------------------------------------------------------------------------------------ the run folder

@dataclass(frozen=True)
class Targets:
    """Where the node's client reaches the services (as the client container sees them)."""

    url: str = TRITON_HTTP
    grpc_url: str = TRITON_GRPC
    fastapi_url: str = FASTAPI_URL
    node_work_dir: str = NODE_WORK_DIR
    #: the image file sent in every FastAPI request (None: the client's synthetic JPEG)
    fastapi_image: Path | None = None
    metrics_url: str = f"http://{TRITON_METRICS}/metrics"

    def endpoints(self) -> dict[str, str]:
        """The runner's services (a :class:`~.records.HostPlan`'s ``endpoints``)."""
        return {"triton": f"http://{self.url}", "metrics": self.metrics_url, "fastapi": self.fastapi_url}


def host_variants(spec: AnySpec, targets: Targets, gpus: int, base: Path | None, done: set[tuple[str, str]],
                  compute_capability: float | None = None) -> list[rec.VariantPlan]:
    """One host's variants, rendered for its GPU count (of ``compute_capability``, the lowest; None:
    unknown) and its own base configs (``base``)."""
    if isinstance(spec, FastapiSpec):
        image = f"image{targets.fastapi_image.suffix}" if targets.fastapi_image else None
        return plan_fastapi(spec, url=targets.fastapi_url, node_work_dir=targets.node_work_dir, image=image,
                            done=done)
    return plan(spec, gpus, compute_capability=compute_capability, url=targets.url, grpc_url=targets.grpc_url,
                node_work_dir=targets.node_work_dir, repository=base, done=done)


def write_run(spec_path: Path, spec: AnySpec, run: Path, hosts: list[tuple[str, int]], bases: dict[str, Path],
              targets: Targets, *, fresh: bool = False, manifest: bool = True,
              shard: shardmod.Shard | None = None, only: Sequence[str] = (),
              compute_capability: dict[str, float] | None = None,
              runner: rec.RunnerSettings | None = None,
              facts: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Write the run folder (``check_run_dir``'s ``run``): ``spec.yml`` and ``manifest.json`` (unless
    ``manifest`` is false), then per host its ``plan.json``, each variant's config and load body and the
    node bundle. ``fresh`` removes the hosts' earlier results first. ``shard``: each host plans only
    its share of the variants (:func:`sharding`). ``only`` (``-e variants``, checked by
    :func:`.roleview.role_view`): a search searches only these candidates, ``repetitions: auto`` adds
    repetitions only of these. ``compute_capability``: the lowest of each host's GPUs, where known.
    ``runner``: the runner's settings and place (its client folder is always ``targets.node_work_dir``);
    ``facts``: per host, what the runner records of it (OS, images, GPUs' compute capabilities).
    Returns each host's plan as JSON."""
    ccs = compute_capability or {}
    kind = spec.kind if isinstance(spec, FastapiSpec) else rec.TRITON
    hdirs = {h: check_host_dir(run, h) for h, _ in hosts}
    safeio.make_dirs(run, run)
    if manifest:
        # the spec as run, and the manifest: written through the one write path (never through a link)
        safeio.write_bytes(run / rec.SPEC_FILE, safeio.read_bytes(spec_path, kind="spec"), within=run)
        manifest_path = run / rec.MANIFEST_FILE
        earlier = (rec.read(manifest_path, rec.Manifest, fix="move it away or use another run id")
                   if os.path.lexists(manifest_path) else rec.Manifest())
        doc = rec.Manifest(
            experiment=spec.name, run_id=run.name, kind=kind,
            start=earlier.start or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            description=spec.description, spec_file=str(spec_path), spec=spec.data,
            stand_in=spec.stand_in if isinstance(spec, TritonSpec) else None,
            hosts=sorted(set(earlier.hosts) | {h for h, _ in hosts}),
            objectives=[o.as_record() for o in objectives_of(spec)],
            shard=shard.record() if shard else None,
        )
        safeio.write_json(manifest_path, rec.to_json(doc), within=run, default=str)
    out = {}
    prov = provenance(spec_path)
    for (host, gpus) in hosts:
        hdir = hdirs[host]
        if fresh and hdir.exists():
            shutil.rmtree(hdir)
        variants = host_variants(spec, targets, gpus, bases.get(host), rec.done_levels(hdir), ccs.get(host))
        if shard is not None:
            variants = [v for v in variants if v.name in shard.variants_of(host)]
        for v in variants:
            vdir = hdir / safeio.plain_name(v.name, str(spec_path), "variant name")
            safeio.make_dirs(vdir, run)
            if v.config_pbtxt:
                safeio.write_text(vdir / rec.CONFIG_FILE, v.config_pbtxt, within=run)
                safeio.write_json(vdir / rec.LOAD_BODY_FILE, v.load_body, within=run)
        models = sorted({v.model for v in variants}) if kind == rec.TRITON else []
        hplan = rec.HostPlan(
            host=host, gpus=gpus, compute_capability=ccs.get(host), experiment=spec.name, run_id=run.name,
            variants=variants, kind=kind, models=models, provenance=prov,
            warmup_requests=spec.warmup.requests,
            estimate_s=estimate_seconds(variants), endpoints=targets.endpoints(),
            runner=dataclasses.replace(runner or rec.RunnerSettings(), client_dir=targets.node_work_dir),
            facts=(facts or {}).get(host, {}))
        hplan.shard = shard.record() | {"candidates": shard.assignment[host]} if shard else None
        hplan.seed = run_seed(spec.name, run.name, host)
        hplan.rounds = interleave(variants, hplan.seed)
        if isinstance(spec, TritonSpec) and spec.searching is not None:  # decide picks every batch
            hplan.search = search.plan_record(spec, variants[0].perf if variants else {},
                                              spec.smallest_effect, only, shard.record() if shard else None,
                                              len(variants))
            hplan.estimate_s = search.estimate_seconds(hplan.search) if hplan.search else hplan.estimate_s
        elif isinstance(spec, TritonSpec) and spec.repetitions == "auto":
            budget = spec.budget or Budget()
            hplan.adaptive = {"start": min(AUTO_START, budget.repetitions), "max": budget.repetitions,
                              "minutes": budget.minutes}
            if only:  # -e variants: the further repetitions only of these
                hplan.adaptive["only"] = list(only)
        rec.write(hdir / rec.PLAN_FILE, hplan, within=run)
        roleview.write_bundle(hdir, hplan, variants, targets.fastapi_image, within=run)
        out[host] = rec.to_json(hplan)
    return out


def sharding(spec: AnySpec, plans: dict[str, list[rec.VariantPlan]], *, force: bool = False,
             over: list[str] | None = None, run: Path | None = None) -> shardmod.Shard | None:
    """The run's shard (None: not sharded): the spec's ``shard`` setting, or ``force`` (``-e shard``,
    the first variant the reference). ``plans``: the hosts of this call and their variants (the costs
    come from the first host's); ``over``: every host of the play (default: ``plans``' hosts), each host
    of ``plans`` among them. An earlier plan of ``run`` over other hosts is refused. Raises SpecError."""
    setting = spec.shard if isinstance(spec, TritonSpec) else None
    if setting is None and not force:
        return None
    if not isinstance(spec, TritonSpec):
        raise SpecError([(f"{spec.path}: -e shard: only for kind: triton specs (a fastapi spec runs each "
                         "runtime on every host): remove it")])
    names = [v.name for v in spec.all_variants]
    if setting is None:
        problems = shard_problems(spec, names, str(spec.path), "-e shard")
        if problems:
            raise SpecError(problems)
    hosts = list(over or plans)
    stray = [h for h in plans if h not in hosts]
    if stray:
        raise SpecError([(f"--host {stray[0]!r}: not one of --shard-hosts ({', '.join(hosts)}): give every "
                         "host of the play to --shard-hosts")])
    first = plans[next(iter(plans))]
    costs = {v.name: estimate_seconds([v]) for v in first}
    shard = shardmod.assign(names, hosts, shardmod.reference_of(setting.reference if setting else "first",
                                                                names), costs, seed=spec.name)
    manifest = (run / rec.MANIFEST_FILE) if run is not None else None
    if manifest is not None and os.path.lexists(manifest):
        try:
            earlier = rec.read(manifest, rec.Manifest).shard
        except rec.RecordError:
            earlier = None  # check_run_dir has said what is wrong with it
        shardmod.check_same_hosts(earlier, shard, str(spec.path))
    return shard


def check_run_dir(run: Path, experiment: str) -> Path:
    """The run folder, resolved; refused (nothing written) when it could land somewhere else."""
    shown = f"--run-dir {str(run)!r}"
    if ".." in run.parts:
        raise SpecError(
            [f"{shown}: '..' in the path: give the run folder itself (results/<experiment>/<run id>)"])
    try:
        check_name(run.name, "run id")
    except ValueError as exc:
        raise SpecError([f"{shown}: {exc}"]) from None
    if run.is_symlink() or (run.exists() and not run.is_dir()):
        raise SpecError(
            [f"{shown}: exists and is not a folder: give a run folder (results/<experiment>/<run id>)"])
    resolved = run.resolve()
    if resolved.parent.name != experiment:
        raise SpecError([(f"{shown}: its folder is {resolved.parent.name!r}, not the experiment's name "
                         f"{experiment!r}: give results/{experiment}/<run id>")])
    manifest = resolved / rec.MANIFEST_FILE
    if os.path.lexists(manifest):
        try:
            doc = rec.read(manifest, rec.Manifest)
        except rec.RecordError as exc:
            why = str(exc).removeprefix(str(manifest)).lstrip(":0123456789 ")
            raise SpecError([(f"{manifest}: (file): not readable JSON ({why}): move it away or use another "
                              "run id")]) from None
        if doc.experiment not in (None, experiment):
            raise SpecError([(f"{shown}: holds a run of experiment {doc.experiment!r}, not "
                             f"{experiment!r}: give this experiment's run folder")])
    return resolved


def check_host_dir(run: Path, host: str) -> Path:
    try:
        safeio.plain_name(host, "--host", "host")  # it becomes the host's folder of the run
    except safeio.UnsafeFile as exc:
        raise SpecError([str(exc)]) from None
    hdir = run / host
    if hdir.is_symlink() or (hdir.exists() and not hdir.is_dir()) or hdir.resolve().parent != run:
        raise SpecError([f"--host {host!r}: {hdir} is not a folder of the run: move it away"])
    return hdir


def objectives_of(spec: TritonSpec | FastapiSpec) -> list[Objective]:
    """What picks a run's best variant: the spec's objectives; a FastAPI run compares its runtimes at its
    highest load."""
    if isinstance(spec, TritonSpec):
        return spec.goals()
    top = max(lv.senders for lv in spec.levels)  # the lab compares the runtimes at its highest load
    return [Objective(name="max_throughput", metric="throughput", goal="max", at_load=top),
            Objective(name="min_p95", metric="p95_us", goal="min", at_load=top)]


def provenance(spec_path: Path) -> dict[str, object]:
    """What every level record carries about the controller side: commit and the spec as loaded."""
    root = repo_root(Path(spec_path).resolve().parent) or Path.cwd()
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip() or "unknown"
        dirty = bool(subprocess.run(["git", "-C", str(root), "status", "--porcelain"], check=False,
                                    capture_output=True, text=True, timeout=10).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        commit, dirty = "unknown", False
    return {"git_commit": commit, "git_dirty": dirty,
            "spec_sha256": hashlib.sha256(Path(spec_path).read_bytes()).hexdigest(),
            "spec_file": str(spec_path)}


def lease_problem(lease_end: str, estimate_s: float, now: float) -> str | None:
    """Why a plan of ``estimate_s`` seconds cannot start at ``now`` (None when it fits the lease)."""
    try:
        end = datetime.fromisoformat(lease_end)
    except ValueError:
        return f"serve_lease_end {lease_end!r} is not an ISO 8601 time (e.g. 2026-11-22T18:50:00Z)"
    if end.tzinfo is None:
        end = end.replace(tzinfo=UTC)
    finish = now + estimate_s
    if finish <= end.timestamp():
        return None
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    return (f"the plan needs about {estimate_s / 60:.0f} min and would end at "
            f"{time.strftime(fmt, time.gmtime(finish))}, after the lease ends at "
            f"{end.astimezone(UTC).strftime(fmt)}: extend the lease, measure fewer variants "
            "(-e variants=...), or pass -e ignore_lease_end=true")
