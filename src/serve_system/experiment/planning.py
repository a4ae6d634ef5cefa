"""Planning a run, one use-case: a typed :class:`PlanRequest` in, the run folder written and what to
print out (the plan, or the ``experiment`` role's view).

``serve-system plan`` builds the request from its options (:mod:`serve_system.commands.plan`), and
``plan --play`` from the role's JSON document (:mod:`serve_system.commands.play`); neither plans
anything itself, and no value of the request becomes a command line to be parsed again. Everything is
checked as strictly as the spec, before anything is written or deleted: any problem is a
:class:`SpecError` (one line each) naming the option or setting and its fix.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..node import plans
from ..secretfiles import secret_reason
from ..textsafe import echo
from . import nodelook, perfargv, roleview, runfolder, search
from . import plan as exp
from .spec.messages import SpecError
from .spec.models import JINJA_RE, AnySpec, SearchBudget, TritonSpec, check_name
from .spec.reader import load_spec, repo_root


@dataclass(frozen=True)
class HostRequest:
    """One host of the run: its name, its GPU count and what is known of it."""

    name: str
    gpus: int
    #: what the role's one look at it printed (:mod:`.nodelook`); None: not looked at
    look: str | None = None
    #: its lease's end (ISO 8601 UTC); empty: unknown, not checked
    lease_end: str = ""
    #: the lowest compute capability of its GPUs as given (``--compute-capability``); its look's win
    compute_capability: float | None = None
    #: its own base configs (``DIR/<model>/config.pbtxt``); None: the spec's
    base_dir: Path | None = None


@dataclass(frozen=True)
class LeasePolicy:
    """What a plan that outlasts a host's lease does: refused, unless ``ignore_end``; a search gets the
    budget that fits with ``fit``."""

    ignore_end: bool = False
    fit: bool = False


@dataclass(frozen=True)
class RunnerRequest:
    """The runner's settings given for the run (:class:`.plans.RunnerSettings`; what is not given,
    its default): ``numbers`` by field name (:data:`.plans.NUMBERS`), the progress file, the client
    container, and the node's folder the client container sees as the work root."""

    numbers: dict[str, float] = field(default_factory=dict)
    progress: str = ""
    client_container: str = ""
    node_dir_root: str = ""


@dataclass(frozen=True)
class TargetRequest:
    """Where the node's client reaches the services and works (as the client container sees them)."""

    url: str = exp.TRITON_HTTP
    grpc_url: str = exp.TRITON_GRPC
    fastapi_url: str = exp.FASTAPI_URL
    node_work_dir: str = exp.NODE_WORK_DIR
    #: instead of ``node_work_dir``: the client's work folder (the run's is ROOT/<experiment>/<run id>)
    node_work_root: str = ""
    fastapi_image: Path | None = None


@dataclass(frozen=True)
class PlanRequest:
    """Everything one planning of a run takes. The run folder is ``run_dir``, or
    ``results_dir/<experiment>/<run_id>``."""

    spec: Path
    hosts: tuple[HostRequest, ...] = ()
    run_dir: Path | None = None
    results_dir: Path | None = None
    run_id: str = ""
    targets: TargetRequest = TargetRequest()
    runner: RunnerRequest = RunnerRequest()
    #: ``-e variants``: the variants measured (names, or comma lists of names)
    only: tuple[str, ...] = ()
    #: spread the variants over the hosts (as the spec's ``shard``); ``shard_hosts``: all of the run's
    shard: bool = False
    shard_hosts: tuple[str, ...] = ()
    #: forget these hosts' earlier results
    fresh: bool = False
    #: the role's put empties each host's folder of the run on the node first (``-e fresh=true``: the
    #: node's copy forgotten too); kept when ``fresh`` is not asked again, as in the role's per-host plans
    empty_node_dirs: bool = False
    #: write the run's ``manifest.json`` and ``spec.yml``
    manifest: bool = True
    #: write the hosts' folders (plans, configs, bundles; what the plan measures again set aside): not in
    #: the play's first planning of every host together, whose hosts are each planned again on their look
    host_files: bool = True
    lease: LeasePolicy = LeasePolicy()
    #: what :func:`plan_run` answers: the plan, the role's view, or nothing
    answer: Literal["plan", "role", "none"] = "plan"


#: the client container's name, as ``docker exec`` takes it
_CONTAINER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
#: a compute capability as nvidia-smi prints it (``6.0``, ``12.1``)
_CAP = re.compile(r"[0-9]{1,2}\.[0-9]{1,2}")


def plan_run(req: PlanRequest) -> roleview.RoleView | dict[str, plans.HostPlan] | None:
    """Check, then write the run folder as ``req`` says; what to print (each host's plan, the role's
    view, or None). Any problem is a :class:`SpecError`, raised before anything is written."""
    if req.run_dir is None and req.results_dir is None:
        raise SpecError(["plan: give the run folder: --run-dir DIR, or --results-dir DIR --run-id NAME"])
    spec = load_spec(req.spec)
    if req.results_dir is not None and not req.run_id:
        raise SpecError(["--results-dir: give the run id too (--run-id NAME)"])
    run_dir = (req.run_dir if req.run_dir is not None
               else req.results_dir.resolve() / spec.name / req.run_id)  # type: ignore[union-attr]
    t = req.targets
    work = (f"{t.node_work_root.rstrip('/')}/{spec.name}/{run_dir.name}" if t.node_work_root
            else t.node_work_dir)
    _check_request(req)
    targets = runfolder.Targets(url=t.url, grpc_url=t.grpc_url, fastapi_url=t.fastapi_url,
                                node_work_dir=work, fastapi_image=t.fastapi_image)
    hosts = [(h.name, h.gpus) for h in req.hosts] or [("localhost", 0)]
    bases = {h.name: h.base_dir for h in req.hosts if h.base_dir is not None}
    looks = {h.name: nodelook.read_look(h.name, h.gpus, h.look) for h in req.hosts if h.look is not None}
    facts = {h: look.facts for h, look in looks.items()}
    if not isinstance(spec, TritonSpec):  # a Triton plan is refused per model, from its node's config
        refused = [why for look in looks.values() if (why := nodelook.unchosen_standins(look))]
        if refused:
            raise SpecError(refused)
    caps = {h.name: h.compute_capability for h in req.hosts if h.compute_capability is not None}
    caps |= {h: lowest_cap(h, f["gpu_compute_capability"]) for h, f in facts.items()
             if f["gpu_compute_capability"]}
    if looks and isinstance(spec, TritonSpec):  # the role's host plan: its run folder is written
        bases |= nodelook.write_node_bases(runfolder.check_run_dir(run_dir, spec.name), looks,
                                           {v.model or spec.model for v in spec.all_variants})
    variants = {h: runfolder.host_variants(spec, targets, g, bases.get(h), set(), caps.get(h))
                for h, g in hosts}
    run = runfolder.check_run_dir(run_dir, spec.name)
    for h, _ in hosts:
        runfolder.check_host_dir(run, h)
    settings = runner_settings(req.runner, spec.name, run.name)
    shard = runfolder.sharding(spec, variants, force=req.shard, over=list(req.shard_hosts), run=run)
    if shard is not None:
        variants = {h: [v for v in p if v.name in shard.variants_of(h)] for h, p in variants.items()}
    if req.answer == "role":  # the variants picked are checked before anything is written
        roleview.role_view(spec, run, {}, list(req.only))
    if not req.lease.ignore_end:
        _check_lease(req, spec, variants)
    out = runfolder.write_run(req.spec, spec, run, hosts, bases, targets, fresh=req.fresh,
                              manifest=req.manifest, shard=shard, only=roleview.picked_names(req.only),
                              compute_capability=caps, runner=settings, facts=facts,
                              host_files=req.host_files)
    for host, hplan in out.items():  # what an earlier plan of the run id measured under other settings
        for line in hplan.measured_again:
            echo(f"{req.spec}: {host}: {line} (the old measurement is kept in {host}/<variant>/.superseded/)",
                 file=sys.stderr)
    if req.answer == "role":
        return roleview.role_view(spec, run, out, list(req.only), req.empty_node_dirs)
    return None if req.answer == "none" else out


def lowest_cap(host: str, caps: list[str]) -> float:
    """The lowest of a host's GPUs' compute capabilities (``caps``: as nvidia-smi's ``compute_cap``
    prints them, at least one); one that is none is refused, naming it (:class:`SpecError`)."""
    bad = [c for c in caps if not _CAP.fullmatch(c)]
    if bad:
        given = f"{host}={','.join(caps)}"
        raise SpecError([(f"--compute-capability {given!r}: {bad[0]!r} is not a compute capability: give "
                          "what nvidia-smi --query-gpu=compute_cap --format=csv,noheader prints, e.g. 6.0")])
    return min(float(c) for c in caps)


def number_setting(text: str) -> float | None:
    """A runner's number setting as given (text): a positive number, or None where empty (the
    default); ValueError (its message the fix) otherwise."""
    if not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number: give seconds or MB, e.g. 900") from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{text!r}: give a positive number")
    return value


def runner_settings(given: RunnerRequest, spec_name: str, run_id: str) -> plans.RunnerSettings:
    """The runner's settings ``given``, the others :class:`~.plans.RunnerSettings`' defaults; a bad
    one is refused (:class:`SpecError`)."""
    out: dict[str, Any] = dict(given.numbers)  # RunnerSettings' keyword arguments (fields of mixed types)
    for opt, key, value in (("progress", "progress", given.progress),
                            ("node-dir-root", "node_dir", given.node_dir_root)):
        if value and (not value.startswith("/") or "\0" in value or ".." in value.split("/")):
            raise SpecError([f"--{opt} {value!r}: give an absolute path (no '..')"])
        if value:
            out[key] = value
    if given.node_dir_root:
        out["node_dir"] = f"{given.node_dir_root.rstrip('/')}/{spec_name}/{run_id}"
    if given.client_container:
        if not _CONTAINER.fullmatch(given.client_container):
            raise SpecError([(f"--client-container {given.client_container!r}: not a container name: give "
                              "letters, digits, '_', '.' or '-', starting with a letter or digit")])
        out["container"] = given.client_container
    return plans.RunnerSettings(**out)


def _check_request(req: PlanRequest) -> None:
    """The values whose text lands in the plan (endpoints, folders, names) hold no Jinja; the hosts'
    names are plain; a lease end is a time; the image sent to the node is no key, credential or
    inventory (:func:`secret_reason`)."""
    t, r = req.targets, req.runner
    texts = (("url", [t.url]), ("grpc-url", [t.grpc_url]), ("fastapi-url", [t.fastapi_url]),
             ("node-work-dir", [t.node_work_dir]), ("node-work-root", [t.node_work_root]),
             ("lease-end", [h.lease_end for h in req.hosts]), ("run-id", [req.run_id]),
             ("shard-hosts", [",".join(req.shard_hosts)]), ("only", list(req.only)),
             ("base-dir", [f"{h.name}={h.base_dir}" for h in req.hosts if h.base_dir is not None]),
             ("host", [f"{h.name}={h.gpus}" for h in req.hosts]), ("progress", [r.progress]),
             ("client-container", [r.client_container]), ("node-dir-root", [r.node_dir_root]))
    for opt, values in texts:
        for value in values:
            if JINJA_RE.search(value):
                raise SpecError([(f"--{opt} {value!r}: holds a Jinja expression ({{{{, {{% or {{#) Ansible "
                                  "would evaluate: remove it")])
    for h in req.hosts:
        if h.lease_end:
            try:
                exp.lease_end_time(h.lease_end)
            except ValueError as exc:
                raise SpecError([f"{req.spec}: lease: serve_lease_end {exc}"]) from None
    for name in req.shard_hosts:
        try:
            check_name(name, "host name")
        except ValueError as exc:
            raise SpecError([f"--shard-hosts {','.join(req.shard_hosts)!r}: {exc}"]) from None
    if t.fastapi_image is not None:
        image = Path(t.fastapi_image)
        reason = secret_reason(image, repo_root(image.resolve().parent))
        if reason is not None:
            raise SpecError([(f"--fastapi-image {str(image)!r}: may not be sent to a node: {reason}: "
                              "give an image file")])


def _check_lease(req: PlanRequest, spec: AnySpec, variants: dict[str, list[plans.VariantPlan]]) -> None:
    """Refuse (:class:`SpecError`) a plan that cannot end before its hosts' lease ends; a search with
    the policy's ``fit`` gets the budget that fits instead."""
    ends: dict[str, list[str]] = {}
    for h in req.hosts:
        if h.lease_end and h.name in variants:
            ends.setdefault(h.lease_end, []).append(h.name)
    for lease_end, names in ends.items():
        estimate = max(exp.estimate_seconds(variants[h]) for h in names)
        found = _search_record(spec, variants, roleview.picked_names(req.only))
        if found is not None:  # a search is bounded by its budget, not by its plan's every level
            estimate = search.estimate_seconds(found)
        now = time.time()
        problem = exp.lease_problem(lease_end, estimate, now, search=found is not None)
        if problem is None:
            continue
        why = _fit(req.spec, lease_end, spec, found, now) if found is not None and req.lease.fit else problem
        if why is not None:
            raise SpecError([f"{req.spec}: lease: {why}"])


def _search_record(spec: AnySpec, variants: dict[str, list[plans.VariantPlan]], only: list[str]
                   ) -> plans.SearchPlan | None:
    """The search a host plan would keep (:func:`search.plan_record`), or None for a grid."""
    if not isinstance(spec, TritonSpec) or spec.searching is None:
        return None
    first = next((vs[0] for vs in variants.values() if vs), None)
    perf = perfargv.PerfSettings.of(first.perf if first is not None else {})
    return search.plan_record(spec, perf, spec.smallest_effect, only)


def _fit(spec_path: Path, lease_end: str, spec: AnySpec, found: plans.SearchPlan, now: float) -> str | None:
    """Shrink the search's budget to the runs that end before the lease (the policy's ``fit``); why not."""
    assert isinstance(spec, TritonSpec) and spec.search is not None
    end = exp.lease_end_time(lease_end)
    runs = search.fit_runs(found, end.timestamp() - now)
    need = search.first_batch_runs(found)
    if runs < need:
        return (f"the lease ends at {lease_end}: {runs} perf_analyzer run(s) fit before it, the "
                f"search's first batch needs {need}: extend the lease or search fewer candidates")
    old = spec.search.budget or SearchBudget()
    spec.search.budget = SearchBudget(runs=min(runs, old.runs or runs), minutes=old.minutes)
    echo(f"{spec_path}: lease: the search's budget is cut to {spec.search.budget.runs} perf_analyzer runs "
         f"to end before the lease ends at {lease_end} (-e fit_lease=true)", file=sys.stderr)
    return None
