"""The run folder an experiment's plans are written to: its checks, its shard, and what goes in it.

:func:`check_run_dir` and :func:`check_host_dir` refuse a folder that could land somewhere else (nothing
written); :func:`sharding` spreads the variants over the hosts. :func:`write_run` then writes, under the
run folder, ``spec.yml``, ``manifest.json`` and per host ``plan.json`` (a :class:`~.plans.HostPlan`,
its variants from :mod:`.plan`), each variant's ``config.pbtxt`` and ``load_body.json`` and
``.node.pyz`` (the node bundle: the runner, the plan and its inputs in one file the role puts on the
node: :mod:`.roleview`, with the role's view). Nothing is written before every host's plan is checked.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import ownedtree, safeio
from ..node import plans, resume
from ..node import records as rec
from . import perfargv, roleview, search
from . import shard as shardmod
from .manifest import Manifest
from .plan import (
    FASTAPI_URL,
    NODE_WORK_DIR,
    TRITON_GRPC,
    TRITON_HTTP,
    TRITON_METRICS,
    estimate_seconds,
    interleave,
    plan,
    plan_fastapi,
    run_seed,
)
from .spec.messages import SpecError
from .spec.models import AUTO_START, AnySpec, Budget, FastapiSpec, Objective, TritonSpec, check_name
from .spec.reader import repo_root, shard_problems


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
        """The runner's services (a :class:`~.plans.HostPlan`'s ``endpoints``)."""
        return {"triton": f"http://{self.url}", "metrics": self.metrics_url, "fastapi": self.fastapi_url}


def host_variants(spec: AnySpec, targets: Targets, gpus: int, base: Path | None, done: set[tuple[str, str]],
                  compute_capability: float | None = None) -> list[plans.VariantPlan]:
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
              runner: plans.RunnerSettings | None = None,
              facts: dict[str, dict[str, Any]] | None = None,
              host_files: bool = True) -> dict[str, plans.HostPlan]:
    """Write the run folder (``check_run_dir``'s ``run``): ``spec.yml`` and ``manifest.json`` (unless
    ``manifest`` is false), then per host its ``plan.json``, each variant's config and load body and the
    node bundle. ``fresh`` removes the hosts' earlier results first. ``shard``: each host plans only
    its share of the variants (:func:`sharding`). ``only`` (``-e variants``, checked by
    :func:`.roleview.role_view`): a search searches only these candidates, ``repetitions: auto`` adds
    repetitions only of these. ``compute_capability``: the lowest of each host's GPUs, where known.
    ``runner``: the runner's settings and place (its client folder is always ``targets.node_work_dir``);
    ``facts``: per host, what the runner records of it (OS, images, GPUs' compute capabilities).
    Resuming: a level is planned done only when the host's folder holds it measured under this plan's
    configuration, load and perf settings (:func:`~serve_system.node.records.level_resume`); one
    measured under others is set aside (:func:`~serve_system.node.resume.settle`, never deleted) and
    measured again, each named in its plan's ``measured_again``. ``host_files`` false (the play's first
    planning of every host together, each host planned again on its own look): the hosts' plans are
    made but nothing is written in their folders (``fresh`` still empties them).
    Returns each host's plan (as written)."""
    ccs = compute_capability or {}
    kind = spec.kind if isinstance(spec, FastapiSpec) else rec.TRITON
    hdirs = {h: check_host_dir(run, h) for h, _ in hosts}
    safeio.make_dirs(run, run)
    if manifest:
        # the spec as run, and the manifest: written through the one write path (never through a link)
        safeio.write_bytes(run / rec.SPEC_FILE, safeio.read_bytes(spec_path, kind="spec"), within=run)
        manifest_path = run / rec.MANIFEST_FILE
        earlier = (rec.read(manifest_path, Manifest, fix="move it away or use another run id")
                   if os.path.lexists(manifest_path) else Manifest())
        doc = Manifest(
            experiment=spec.name, run_id=run.name, kind=kind,
            start=earlier.start or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            description=spec.description, spec_file=str(spec_path), spec=spec.data,
            stand_in=spec.stand_in if isinstance(spec, TritonSpec) else None,
            hosts=sorted(set(earlier.hosts) | {h for h, _ in hosts}),
            objectives=[o.record() for o in objectives_of(spec)],
            shard=shard.record() if shard else None,
        )
        safeio.write_json(manifest_path, doc.to_json(), within=run, default=str)
    out: dict[str, plans.HostPlan] = {}
    prov = provenance(spec_path)
    for (host, gpus) in hosts:
        hdir = hdirs[host]
        if fresh and hdir.exists():
            shutil.rmtree(hdir)
        variants = host_variants(spec, targets, gpus, bases.get(host), set(), ccs.get(host))
        if shard is not None:
            variants = [v for v in variants if v.name in shard.variants_of(host)]
        again = resume.settle(hdir, variants, within=run) if host_files else []
        for v in variants:
            for lv in v.levels:
                lv.done = rec.level_done(hdir / v.name / lv.id, resume.level_setting(v, lv))
        for v in variants if host_files else []:
            vdir = hdir / safeio.plain_name(v.name, str(spec_path), "variant name")
            safeio.make_dirs(vdir, run)
            if v.config_pbtxt:
                safeio.write_text(vdir / rec.CONFIG_FILE, v.config_pbtxt, within=run)
                safeio.write_json(vdir / rec.LOAD_BODY_FILE, v.load_body, within=run)
        models = sorted({v.model for v in variants}) if kind == rec.TRITON else []
        hplan = plans.HostPlan(
            host=host, gpus=gpus, compute_capability=ccs.get(host), experiment=spec.name, run_id=run.name,
            variants=variants, kind=kind, models=models, provenance=prov,
            warmup_requests=spec.warmup.requests,
            estimate_s=estimate_seconds(variants), endpoints=targets.endpoints(),
            runner=dataclasses.replace(runner or plans.RunnerSettings(), client_dir=targets.node_work_dir),
            facts=(facts or {}).get(host, {}), measured_again=[str(a) for a in again])
        hplan.shard = shard.host_record(host) if shard else None
        hplan.seed = run_seed(spec.name, run.name, host)
        hplan.rounds = interleave(variants, hplan.seed)
        if isinstance(spec, TritonSpec) and spec.searching is not None:  # decide picks every batch
            perf = perfargv.PerfSettings.of(variants[0].perf if variants else {})
            hplan.search = search.plan_record(spec, perf, spec.smallest_effect, only, shard, len(variants))
            hplan.estimate_s = search.estimate_seconds(hplan.search) if hplan.search else hplan.estimate_s
        elif isinstance(spec, TritonSpec) and spec.repetitions == "auto":
            budget = spec.budget or Budget()
            hplan.adaptive = plans.AdaptivePlan(  # -e variants: the further repetitions only of these
                start=min(AUTO_START, budget.repetitions), max=budget.repetitions, minutes=budget.minutes,
                only=list(only) if only else None)
        if host_files:
            rec.write(hdir / rec.PLAN_FILE, hplan, within=run)
            roleview.write_bundle(hdir, hplan, variants, targets.fastapi_image, within=run)
        out[host] = hplan
    return out


def sharding(spec: AnySpec, variants: dict[str, list[plans.VariantPlan]], *, force: bool = False,
             over: list[str] | None = None, run: Path | None = None) -> shardmod.Shard | None:
    """The run's shard (None: not sharded): the spec's ``shard`` setting, or ``force`` (``-e shard``,
    the first variant the reference). ``variants``: the hosts of this call and their variants (the costs
    come from the first host's); ``over``: every host of the play (default: ``variants``' hosts), each host
    of ``variants`` among them. An earlier plan of ``run`` over other hosts is refused. Raises SpecError."""
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
    hosts = list(over or variants)
    stray = [h for h in variants if h not in hosts]
    if stray:
        raise SpecError([(f"--host {stray[0]!r}: not one of --shard-hosts ({', '.join(hosts)}): give every "
                         "host of the play to --shard-hosts")])
    first = variants[next(iter(variants))]
    costs = {v.name: estimate_seconds([v]) for v in first}
    shard = shardmod.assign(names, hosts, shardmod.reference_of(setting.reference if setting else "first",
                                                                names), costs, seed=spec.name)
    manifest = (run / rec.MANIFEST_FILE) if run is not None else None
    if manifest is not None and os.path.lexists(manifest):
        try:
            earlier = rec.read(manifest, Manifest).shard
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
    try:
        ownedtree.check_run_folder(run, "--run-dir", new_ok=True)
    except ownedtree.UnsafeFile as exc:
        raise SpecError([str(exc)]) from None
    resolved = run.resolve()
    if resolved.parent.name != experiment:
        raise SpecError([(f"{shown}: its folder is {resolved.parent.name!r}, not the experiment's name "
                         f"{experiment!r}: give results/{experiment}/<run id>")])
    manifest = resolved / rec.MANIFEST_FILE
    if os.path.lexists(manifest):
        try:
            doc = rec.read(manifest, Manifest)
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
    made = any(os.path.lexists(hdir / n) and not os.path.islink(hdir / n)
               for n in (rec.PLAN_FILE, ".node_base"))  # what only plan writes there
    if hdir.is_dir() and not made and not ownedtree.holds_no_file(hdir):
        raise SpecError([(f"--host {host!r}: {hdir} is not empty and holds no plan.json: not a host folder "
                          "serve-system made; move it away or use another run id")])
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
