"""``serve-system plan SPEC``: validate and render an experiment for hosts, write the run folder.

Run by the ``experiment`` role on the controller, once per play, before any node is touched:
every variant of the spec (kind triton or fastapi) is rendered for each host's GPU count and
checked; on any problem nothing is written and the command exits 1 with one line per problem.
Otherwise it writes, under ``RUN_DIR``: ``spec.yml``, ``manifest.json``, and per host ``plan.json``
(a :class:`serve_system.node.records.HostPlan`: what to load, the command of each load level, which
levels are already measured), each variant's ``config.pbtxt`` and ``load_body.json``, and
``.node.pyz`` (the node bundle: the runner, the plan and its inputs in one file the role copies). With
``--fresh`` the hosts' earlier results are removed first; with ``--lease-end`` a plan that cannot end
before the lease does is refused. A sharded run (the spec's ``shard``, or ``--shard``) plans each host
only its share of the variants and the reference (:mod:`serve_system.experiment.shard`).

Arguments are checked as strictly as the spec, before anything is written or deleted: ``RUN_DIR`` is
``<results>/<experiment name>/<run id>`` (a plain run id, no ``..``, not a link), each host a plain
name (its folder is ``RUN_DIR/<host>``, the only thing ``--fresh`` removes), ``--base-dir`` names a
``--host``, and an existing ``manifest.json`` must belong to the same experiment.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any, NoReturn

from .. import ownedtree
from ..experiment import nodelook, roleview, runfolder, search
from ..experiment import plan as exp
from ..experiment.spec.messages import SpecError
from ..experiment.spec.models import JINJA_RE, AnySpec, SearchBudget, TritonSpec, check_name
from ..experiment.spec.reader import load_spec, repo_root
from ..node.records import RunnerSettings
from ..secretfiles import secret_reason
from ..textsafe import dumps, echo
from . import play


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="validate + render an experiment spec for hosts (used by the playbooks)")
    p.add_argument("spec", type=ownedtree.INPUT_PATH, metavar="SPEC")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--run-dir", type=ownedtree.RUN_DIR, help="results/<experiment>/<run-id>")
    where.add_argument("--results-dir", type=ownedtree.RUN_DIR,
                       help="the results folder: the run folder is RESULTS_DIR/<experiment>/<--run-id>")
    p.add_argument("--run-id", default="", help="with --results-dir: the run id")
    p.add_argument("--play", type=ownedtree.INPUT_TEXT, metavar="FILE", default=None,
                   help="the experiment role's one plan call: its settings and every host's look, as JSON in "
                        "FILE (-: stdin); every host is planned and the role's view printed (see "
                        "serve_system.commands.play)")
    p.add_argument("--host", action="append", default=[], metavar="NAME=GPUS",
                   help="a host and its GPU count (repeat per host)")
    p.add_argument("--compute-capability", action="append", default=[], metavar="NAME=CAP[,CAP...]",
                   help="a --host's GPUs' compute capabilities as nvidia-smi --query-gpu=compute_cap prints "
                        "them (the lowest counts; below 7.0 TensorRT accelerators are dropped or refused)")
    p.add_argument("--node-facts", action="append", default=[], metavar="NAME=TEXT",
                   help="a --host's facts as the node printed them, one a line: os=PRETTY_NAME, "
                        "image=/CONTAINER=IMAGE_ID (docker inspect), cap=X.Y (nvidia-smi's compute_cap), "
                        "gpu=NAME (nvidia-smi's GPU name: its capability from NVIDIA's table where "
                        "compute_cap is refused), "
                        "config=MODEL BASE64 (the model's config.pbtxt as its Triton serves it: the host is "
                        "planned on it, and it is kept in RUN_DIR/<host>/.node_base); kept in its plan for "
                        "the provenance, its caps as --compute-capability. NAME=-: the text on stdin")
    p.add_argument("--url", default=exp.TRITON_HTTP,
                   help="Triton's HTTP endpoint as the client container sees it")
    p.add_argument("--grpc-url", default=exp.TRITON_GRPC,
                   help="Triton's gRPC endpoint as the client container sees it (specs with perf.protocol: "
                        "grpc)")
    p.add_argument("--node-work-dir", type=ownedtree.NODE_PATH, default=exp.NODE_WORK_DIR,
                   help="this run's folder as the client container sees it (inputs, CSV exports)")
    p.add_argument("--node-work-root", type=ownedtree.NODE_PATH, default="",
                   help="instead of --node-work-dir: the client container's work folder; the run's folder is "
                        "NODE_WORK_ROOT/<experiment>/<run id>")
    p.add_argument("--base-dir", type=ownedtree.INPUT_TEXT, action="append", default=[], metavar="NAME=DIR",
                   help="a host's own base configs (DIR/<model>/config.pbtxt, as its Triton serves them); "
                        "default: the spec's base_config")
    p.add_argument("--no-manifest", action="store_true",
                   help="leave RUN_DIR/manifest.json and spec.yml alone")
    p.add_argument("--fresh", action="store_true", help="forget earlier results of these hosts in RUN_DIR")
    p.add_argument("--quiet", action="store_true", help="do not print the plan")
    p.add_argument("--role", action="store_true",
                   help="print what the experiment role needs (names, models, runner calls) instead of the "
                        "plan")
    p.add_argument("--only", action="append", default=[], metavar="VARIANT",
                   help="with --role: the runner calls measure only these variants, a search searches only "
                        "these candidates, repetitions: auto repeats only these (repeat, or a comma list)")
    d = RunnerSettings()
    runner = p.add_argument_group("the runner's settings, kept in each host plan (empty: the default)")
    runner.add_argument("--perf-timeout", type=_setting, default=None,
                        help=f"time cap of one perf_analyzer run (s; {d.perf_timeout:g})")
    runner.add_argument("--ready-timeout", type=_setting, default=None,
                        help=f"the wait for a loaded variant to be READY (s; {d.ready_timeout:g})")
    runner.add_argument("--perf-memory-mb", type=_setting, default=None,
                        help=f"memory cap of perf_analyzer (resident MB; {d.perf_memory_mb:g})")
    runner.add_argument("--metrics-interval", type=_setting, default=None,
                        help=f"seconds between two metrics samples ({d.metrics_interval:g})")
    runner.add_argument("--progress", type=ownedtree.NODE_PATH, default="",
                        help=f"the runner's progress file ({d.progress})")
    runner.add_argument("--client-container", default="", help=f"the container it runs in ({d.container})")
    runner.add_argument("--node-dir-root", type=ownedtree.NODE_PATH, default="",
                        help="the node's folder that the client container sees as --node-work-root (the "
                             "run's node folder is NODE_DIR_ROOT/<experiment>/<run id>: the runner's log is "
                             "followed there)")
    p.add_argument("--fastapi-url", default=exp.FASTAPI_URL,
                   help="the FastAPI endpoint as the client container sees it (kind: fastapi)")
    p.add_argument("--fastapi-image", type=ownedtree.INPUT_PATH, default=None,
                   help="image file sent in every FastAPI request (default: the client's synthetic JPEG)")
    p.add_argument("--lease-end", default="", help="the node's lease end (ISO 8601 UTC): refuse a plan "
                   "that cannot finish before it")
    p.add_argument("--ignore-lease-end", action="store_true",
                   help="start even if the plan outlasts the lease")
    p.add_argument("--shard", action="store_true",
                   help="spread the variants over the hosts (each candidate on one host, the first variant "
                        "on every host as the reference), as the spec's shard setting does")
    p.add_argument("--shard-hosts", default="", metavar="NAME,...",
                   help="a sharded run's hosts, all of them (default: the --host names): a plan for one host "
                        "deals the variants over these")
    p.add_argument("--fit-lease", action="store_true",
                   help="a search (halving, optuna) that outlasts the lease gets a budget of as many "
                        "perf_analyzer runs as fit before it ends")
    p.set_defaults(func=_run)


_CONTAINER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def _setting(text: str) -> float | None:
    """A runner setting: a positive number, or empty (the default)."""
    if not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number: give seconds or MB, e.g. 900") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give a positive number")
    return value


def _settings(args: argparse.Namespace, spec_name: str, run_id: str) -> RunnerSettings:
    """The runner's settings the options give, the others :class:`RunnerSettings`' defaults; a bad one is
    refused (:class:`SpecError`)."""
    numbers = ("perf_timeout", "ready_timeout", "perf_memory_mb", "metrics_interval")
    given: dict[str, object] = {k: getattr(args, k) for k in numbers if getattr(args, k) is not None}
    for opt, key in (("progress", "progress"), ("node_dir_root", "node_dir")):
        value = getattr(args, opt)
        if value and (not value.startswith("/") or "\0" in value or ".." in value.split("/")):
            raise SpecError([f"--{opt.replace('_', '-')} {value!r}: give an absolute path (no '..')"])
        if value:
            given[key] = value
    if args.node_dir_root:
        given["node_dir"] = f"{args.node_dir_root.rstrip('/')}/{spec_name}/{run_id}"
    if args.client_container:
        if not _CONTAINER.fullmatch(args.client_container):
            raise SpecError([(f"--client-container {args.client_container!r}: not a container name: give "
                              "letters, digits, '_', '.' or '-', starting with a letter or digit")])
        given["container"] = args.client_container
    return RunnerSettings(**given)  # type: ignore[arg-type]


def _hosts(values: list[str]) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for v in values:
        name, _, gpus = v.partition("=")
        if not name or not gpus.isdigit() or len(gpus) > 3:
            raise SpecError([f"--host {v!r}: give NAME=GPUS, e.g. --host node-1=2"])
        try:
            check_name(name, "host name")
        except ValueError as exc:
            raise SpecError([f"--host {v!r}: {exc}"]) from None
        if name in {h for h, _ in out}:
            raise SpecError([f"--host {v!r}: host {name!r} given twice: give each host once"])
        out.append((name, int(gpus)))
    return out


_CAP = re.compile(r"[0-9]{1,2}\.[0-9]{1,2}")


def _for_host(option: str, value: str, names: Collection[str]) -> tuple[str, str]:
    """An option's ``NAME=VALUE`` -> (NAME, VALUE); refused when NAME is none of the ``--host`` names."""
    name, _, rest = value.partition("=")
    if name not in names:
        raise SpecError([(f"{option} {value[:80]!r}: {name[:80]!r} is not one of the --host names "
                          f"({', '.join(sorted(names))}): name a host given with --host")])
    return name, rest


def _node_facts(values: list[str], hosts: list[tuple[str, int]]) -> dict[str, nodelook.Look]:
    """``--node-facts NAME=TEXT`` (``NAME=-``: TEXT on stdin) -> {NAME: its look}."""
    gpus = dict(hosts)
    out: dict[str, nodelook.Look] = {}
    for v in values:
        name, text = _for_host("--node-facts", v, gpus)
        out[name] = nodelook.read_look(name, gpus[name], sys.stdin.read() if text == "-" else text)
    return out


def _compute_caps(values: list[str], hosts: list[tuple[str, int]]) -> dict[str, float]:
    """``--compute-capability NAME=6.0,6.0`` -> {NAME: 6.0} (the lowest); nothing listed: unknown."""
    names = {h for h, _ in hosts}
    out: dict[str, float] = {}
    for v in values:
        name, caps = _for_host("--compute-capability", v, names)
        items = [c.strip() for c in caps.replace("\n", ",").split(",") if c.strip()]
        bad = [c for c in items if not _CAP.fullmatch(c)]
        if bad:
            raise SpecError([(f"--compute-capability {v!r}: {bad[0]!r} is not a compute capability: "
                              "give what nvidia-smi --query-gpu=compute_cap --format=csv,noheader prints, "
                              "e.g. 6.0")])
        if items:
            out[name] = min(float(c) for c in items)
    return out


def _check_options(args: argparse.Namespace) -> None:
    """The options whose text lands in the plan (endpoints, folders, names) hold no Jinja; the image
    sent to the node is no key, credential or inventory (:func:`secret_reason`)."""
    for opt in ("url", "grpc_url", "fastapi_url", "node_work_dir", "node_work_root", "lease_end", "run_id",
                "shard_hosts", "only", "base_dir", "host", "progress", "client_container", "node_dir_root"):
        values = getattr(args, opt)
        for value in values if isinstance(values, list) else [values]:
            if JINJA_RE.search(str(value)):
                raise SpecError([(f"--{opt.replace('_', '-')} {str(value)!r}: holds a Jinja expression "
                                  "({{, {% or {#) Ansible would evaluate: remove it")])
    if args.lease_end:
        try:
            exp.lease_end_time(args.lease_end)
        except ValueError as exc:
            raise SpecError([f"{args.spec}: lease: serve_lease_end {exc}"]) from None
    if args.fastapi_image is not None:
        image = Path(args.fastapi_image)
        reason = secret_reason(image, repo_root(image.resolve().parent))
        if reason is not None:
            raise SpecError([(f"--fastapi-image {str(image)!r}: may not be sent to a node: {reason}: "
                              "give an image file")])


def _bases(values: list[str], hosts: list[tuple[str, int]]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    names = {h for h, _ in hosts}
    for b in values:
        if not b.partition("=")[0] or not b.partition("=")[2]:
            raise SpecError(
                [f"--base-dir {b!r}: give NAME=DIR, e.g. --base-dir node-1=results/x/r1/node-1/.node_base"])
        name, d = _for_host("--base-dir", b, names)
        if not Path(d).is_dir():
            raise SpecError(
                [f"--base-dir {b!r}: {d!r} is not a folder: give the folder holding <model>/config.pbtxt"])
        out[name] = Path(d).resolve()
    return out


def _run(args: argparse.Namespace) -> int:
    if args.play is not None:
        return play.run(args, _plan, _strict_parser)
    try:
        answer = _plan(args)
    except SpecError as exc:
        for line in exc.lines:
            echo(line, file=sys.stderr)
        return 1
    if answer is not None:
        print(dumps(answer))
    return 0


class _Strict(argparse.ArgumentParser):
    """A parser whose errors are :class:`SpecError` (``--play`` turns the role's inputs into options)."""

    def error(self, message: str) -> NoReturn:
        raise SpecError([f"plan --play: {message}"])


def _strict_parser() -> argparse.ArgumentParser:
    parser = _Strict(prog="serve-system")
    register(parser.add_subparsers(parser_class=_Strict))
    return parser


def _plan(args: argparse.Namespace) -> dict[str, Any] | None:
    """Check, then write the run folder as the options say; what to print (the plan, the role's view
    with ``--role``, nothing with ``--quiet``). Any problem is a :class:`SpecError`, raised before
    anything is written."""
    if args.run_dir is None and args.results_dir is None:
        raise SpecError(["plan: give the run folder: --run-dir DIR, or --results-dir DIR --run-id NAME"])
    spec = load_spec(args.spec)
    if args.results_dir is not None and not args.run_id:
        raise SpecError(["--results-dir: give the run id too (--run-id NAME)"])
    run_dir = (args.run_dir if args.run_dir is not None
               else args.results_dir.resolve() / spec.name / args.run_id)
    work = (f"{args.node_work_root.rstrip('/')}/{spec.name}/{run_dir.name}" if args.node_work_root
            else args.node_work_dir)
    _check_options(args)
    targets = runfolder.Targets(url=args.url, grpc_url=args.grpc_url, fastapi_url=args.fastapi_url,
                          node_work_dir=work, fastapi_image=args.fastapi_image)
    hosts = _hosts(args.host) or [("localhost", 0)]
    bases = _bases(args.base_dir, hosts)
    looks = _node_facts(args.node_facts, hosts)
    facts = {h: look.facts for h, look in looks.items()}
    caps = _compute_caps(args.compute_capability + [f"{h}={','.join(f['gpu_compute_capability'])}"
                                                    for h, f in facts.items()], hosts)
    if looks and isinstance(spec, TritonSpec):  # the role's host plan: its run folder is written
        bases |= nodelook.write_node_bases(runfolder.check_run_dir(run_dir, spec.name), looks,
                                           {v.model or spec.model for v in spec.all_variants})
    plans = {h: runfolder.host_variants(spec, targets, g, bases.get(h), set(), caps.get(h)) for h, g in hosts}
    run = runfolder.check_run_dir(run_dir, spec.name)
    for h, _ in hosts:
        runfolder.check_host_dir(run, h)
    over = [h for h in args.shard_hosts.split(",") if h]
    for h in over:
        try:
            check_name(h, "host name")
        except ValueError as exc:
            raise SpecError([f"--shard-hosts {args.shard_hosts!r}: {exc}"]) from None
    settings = _settings(args, spec.name, run.name)
    shard = runfolder.sharding(spec, plans, force=args.shard, over=over, run=run)
    if shard is not None:
        plans = {h: [v for v in p if v.name in shard.variants_of(h)] for h, p in plans.items()}
    if args.role:  # the variants picked are checked before anything is written
        roleview.role_view(spec, run, {}, args.only)
    if args.lease_end and not args.ignore_lease_end:
        _check_lease(args, spec, plans)
    out = runfolder.write_run(args.spec, spec, run, hosts, bases, targets, fresh=args.fresh,
                        manifest=not args.no_manifest, shard=shard, only=roleview.picked_names(args.only),
                        compute_capability=caps, runner=settings, facts=facts)
    if args.role:
        return roleview.role_view(spec, run, out, args.only)
    return None if args.quiet else out


def _check_lease(args: argparse.Namespace, spec: AnySpec, plans: dict[str, list[Any]]) -> None:
    """Refuse (:class:`SpecError`) a plan that cannot end before ``--lease-end``; a search with
    ``--fit-lease`` gets the budget that fits instead."""
    estimate = max(exp.estimate_seconds(p) for p in plans.values())
    found = _search_record(spec, plans, roleview.picked_names(args.only))
    if found is not None:  # a search is bounded by its budget, not by its plan's every level
        estimate = search.estimate_seconds(found)
    now = time.time()
    problem = exp.lease_problem(args.lease_end, estimate, now)
    if problem and found is not None:
        problem = problem.replace("or pass -e ignore_lease_end=true",
                                  "pass -e fit_lease=true (a smaller search budget), or -e "
                                  "ignore_lease_end=true")
        if args.fit_lease:
            problem = _fit(args, spec, found, now)
    if problem:
        raise SpecError([f"{args.spec}: lease: {problem}"])


def _search_record(spec: AnySpec, plans: dict[str, list[Any]], only: list[str]) -> dict[str, Any] | None:
    """The search a host plan would keep (:func:`search.plan_record`), or None for a grid."""
    if not isinstance(spec, TritonSpec) or spec.searching is None:
        return None
    first = next((vs[0] for vs in plans.values() if vs), None)
    return search.plan_record(spec, first.perf if first is not None else {}, spec.smallest_effect, only)


def _fit(args: argparse.Namespace, spec: AnySpec, found: dict[str, Any], now: float) -> str | None:
    """Shrink the search's budget to the runs that end before the lease (``--fit-lease``); why not."""
    assert isinstance(spec, TritonSpec) and spec.search is not None
    end = exp.lease_end_time(args.lease_end)
    runs = search.fit_runs(found, end.timestamp() - now)
    need = search.first_batch_runs(found)
    if runs < need:
        return (f"the lease ends at {args.lease_end}: {runs} perf_analyzer run(s) fit before it, the "
                f"search's first batch needs {need}: extend the lease or search fewer candidates")
    old = spec.search.budget or SearchBudget()
    spec.search.budget = SearchBudget(runs=min(runs, old.runs or runs), minutes=old.minutes)
    echo(f"{args.spec}: lease: the search's budget is cut to {spec.search.budget.runs} perf_analyzer runs "
         f"to end before the lease ends at {args.lease_end} (-e fit_lease=true)", file=sys.stderr)
    return None
