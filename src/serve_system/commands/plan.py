"""``serve-system plan SPEC``: validate and render an experiment for hosts, write the run folder.

Run by the ``experiment`` role on the controller, once per play, before any node is touched:
every variant of the spec (kind triton or fastapi) is rendered for each host's GPU count and
checked; on any problem nothing is written and the command exits 1 with one line per problem.
Otherwise it writes, under ``RUN_DIR``: ``spec.yml``, ``manifest.json``, and per host ``plan.json``
(a :class:`serve_system.node.plans.HostPlan`: what to load, the command of each load level, which
levels are already measured), each variant's ``config.pbtxt`` and ``load_body.json``, and
``.node.pyz`` (the node bundle: the runner, the plan and its inputs in one file the role copies). With
``--fresh`` the hosts' earlier results are removed first; with ``--lease-end`` a plan that cannot end
before the lease does is refused. A sharded run (the spec's ``shard``, or ``--shard``) plans each host
only its share of the variants and the reference (:mod:`serve_system.experiment.shard`).

Arguments are checked as strictly as the spec, before anything is written or deleted: ``RUN_DIR`` is
``<results>/<experiment name>/<run id>`` (a plain run id, no ``..``, not a link), each host a plain
name (its folder is ``RUN_DIR/<host>``, the only thing ``--fresh`` removes), ``--base-dir`` names a
``--host``, and an existing ``manifest.json`` must belong to the same experiment.

This module only turns the options into one typed request; the planning is
:func:`serve_system.experiment.planning.plan_run`'s (``--play``: :mod:`.play` builds the request from
the role's document instead).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Collection
from pathlib import Path

from .. import ownedtree
from ..experiment import plan as exp
from ..experiment import planning
from ..experiment.roleview import RoleView
from ..experiment.spec.messages import SpecError
from ..experiment.spec.models import check_name
from ..node.plans import NUMBERS, RunnerSettings
from ..node.records import to_json
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
    for f in NUMBERS:  # the number settings, each named and explained once (plans.RunnerSettings)
        unit = f"{f.metadata['unit']}; " if "unit" in f.metadata else ""
        runner.add_argument(f"--{f.name.replace('_', '-')}", type=_setting, default=None,
                            help=f"{f.metadata['help']} ({unit}{getattr(d, f.name):g})")
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


def _setting(text: str) -> float | None:
    """A runner setting: a positive number, or empty (the default)."""
    try:
        return planning.number_setting(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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


def _for_host(option: str, value: str, names: Collection[str]) -> tuple[str, str]:
    """An option's ``NAME=VALUE`` -> (NAME, VALUE); refused when NAME is none of the ``--host`` names."""
    name, _, rest = value.partition("=")
    if name not in names:
        raise SpecError([(f"{option} {value[:80]!r}: {name[:80]!r} is not one of the --host names "
                          f"({', '.join(sorted(names))}): name a host given with --host")])
    return name, rest


def _node_facts(values: list[str], names: Collection[str]) -> dict[str, str]:
    """``--node-facts NAME=TEXT`` (``NAME=-``: TEXT on stdin) -> {NAME: TEXT}."""
    out: dict[str, str] = {}
    for v in values:
        name, text = _for_host("--node-facts", v, names)
        out[name] = sys.stdin.read() if text == "-" else text
    return out


def _compute_caps(values: list[str], names: Collection[str]) -> dict[str, float]:
    """``--compute-capability NAME=6.0,6.0`` -> {NAME: 6.0} (the lowest); nothing listed: unknown."""
    out: dict[str, float] = {}
    for v in values:
        name, caps = _for_host("--compute-capability", v, names)
        items = [c.strip() for c in caps.replace("\n", ",").split(",") if c.strip()]
        if items:
            out[name] = planning.lowest_cap(name, items)
    return out


def _bases(values: list[str], names: Collection[str]) -> dict[str, Path]:
    out: dict[str, Path] = {}
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


def request(args: argparse.Namespace) -> planning.PlanRequest:
    """The options as a :class:`~serve_system.experiment.planning.PlanRequest` (their own forms checked:
    ``NAME=...`` values name a ``--host``)."""
    hosts = _hosts(args.host)
    names = [h for h, _ in hosts]
    bases, looks = _bases(args.base_dir, names), _node_facts(args.node_facts, names)
    caps = _compute_caps(args.compute_capability, names)
    return planning.PlanRequest(
        spec=args.spec, run_dir=args.run_dir, results_dir=args.results_dir, run_id=args.run_id,
        hosts=tuple(planning.HostRequest(name=h, gpus=g, look=looks.get(h), lease_end=args.lease_end,
                                         compute_capability=caps.get(h), base_dir=bases.get(h))
                    for h, g in hosts),
        targets=planning.TargetRequest(url=args.url, grpc_url=args.grpc_url, fastapi_url=args.fastapi_url,
                                       node_work_dir=args.node_work_dir, node_work_root=args.node_work_root,
                                       fastapi_image=args.fastapi_image),
        runner=planning.RunnerRequest(
            numbers={f.name: getattr(args, f.name) for f in NUMBERS if getattr(args, f.name) is not None},
            progress=args.progress, client_container=args.client_container, node_dir_root=args.node_dir_root),
        only=tuple(args.only), shard=args.shard,
        shard_hosts=tuple(h for h in args.shard_hosts.split(",") if h),
        fresh=args.fresh, empty_node_dirs=args.fresh, manifest=not args.no_manifest,
        lease=planning.LeasePolicy(ignore_end=args.ignore_lease_end, fit=args.fit_lease),
        answer="role" if args.role else "none" if args.quiet else "plan")


def _run(args: argparse.Namespace) -> int:
    if args.play is not None:
        return play.run(args.spec, args.play)
    try:
        answer = planning.plan_run(request(args))
    except SpecError as exc:
        for line in exc.lines:
            echo(line, file=sys.stderr)
        return 1
    if answer is not None:
        print(dumps(answer.as_json() if isinstance(answer, RoleView)
                    else {h: to_json(p) for h, p in answer.items()}))
    return 0
