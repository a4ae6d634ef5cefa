"""``serve-system plan SPEC``: validate and render an experiment for hosts, write the run folder.

Run by the ``triton_experiment`` role on the controller, once per play, before any node is touched:
every variant of the spec is rendered for each host's GPU count and checked; on any problem nothing
is written and the command exits 1 with one line per problem. Otherwise it writes, under
``RUN_DIR``: ``spec.yml``, ``manifest.json``, and per host ``plan.json`` (what to load, the
perf_analyzer command of each load level, which levels are already measured) plus each variant's
``config.pbtxt`` and ``load_body.json``. With ``--fresh`` the hosts' earlier results are removed first.

Arguments are checked as strictly as the spec, before anything is written or deleted: ``RUN_DIR`` is
``<results>/<experiment name>/<run id>`` (a plain run id, no ``..``, not a link), each host a plain
name (its folder is ``RUN_DIR/<host>``, the only thing ``--fresh`` removes), ``--base-dir`` names a
``--host``, and an existing ``manifest.json`` must belong to the same experiment.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path

from .. import experiment as exp
from .. import results as res
from ..spec import SpecError, TritonSpec, check_name, load_spec


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="validate + render an experiment spec for hosts (used by the playbooks)")
    p.add_argument("spec", type=Path, metavar="SPEC")
    p.add_argument("--run-dir", type=Path, required=True, help="results/<experiment>/<run-id>")
    p.add_argument("--host", action="append", default=[], metavar="NAME=GPUS",
                   help="a host and its GPU count (repeat per host)")
    p.add_argument("--url", default="triton_server:8000", help="Triton as the client container sees it")
    p.add_argument("--node-work-dir", default="/work",
                   help="this run's folder as the client container sees it (inputs, CSV exports)")
    p.add_argument("--base-dir", action="append", default=[], metavar="NAME=DIR",
                   help="a host's own base configs (DIR/<model>/config.pbtxt, as its Triton serves them); "
                        "default: the spec's base_config")
    p.add_argument("--no-manifest", action="store_true", help="leave RUN_DIR/manifest.json and spec.yml alone")
    p.add_argument("--fresh", action="store_true", help="forget earlier results of these hosts in RUN_DIR")
    p.add_argument("--quiet", action="store_true", help="do not print the plan")
    p.set_defaults(func=_run)


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


def _bases(values: list[str], hosts: list[tuple[str, int]]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    names = {h for h, _ in hosts}
    for b in values:
        name, _, d = b.partition("=")
        if not name or not d:
            raise SpecError([f"--base-dir {b!r}: give NAME=DIR, e.g. --base-dir node-1=results/x/r1/node-1/.node_base"])
        if name not in names:
            raise SpecError([(f"--base-dir {b!r}: {name!r} is not one of the --host names "
                             f"({', '.join(sorted(names))}): name a host given with --host")])
        if not Path(d).is_dir():
            raise SpecError([f"--base-dir {b!r}: {d!r} is not a folder: give the folder holding <model>/config.pbtxt"])
        out[name] = Path(d).resolve()
    return out


def _run_dir(run: Path, experiment: str) -> Path:
    """The run folder, resolved; refused (nothing written) when it could land somewhere else."""
    shown = f"--run-dir {str(run)!r}"
    if ".." in run.parts:
        raise SpecError([f"{shown}: '..' in the path: give the run folder itself (results/<experiment>/<run id>)"])
    try:
        check_name(run.name, "run id")
    except ValueError as exc:
        raise SpecError([f"{shown}: {exc}"]) from None
    if run.is_symlink() or (run.exists() and not run.is_dir()):
        raise SpecError([f"{shown}: exists and is not a folder: give a run folder (results/<experiment>/<run id>)"])
    resolved = run.resolve()
    if resolved.parent.name != experiment:
        raise SpecError([(f"{shown}: its folder is {resolved.parent.name!r}, not the experiment's name "
                         f"{experiment!r}: give results/{experiment}/<run id>")])
    manifest = resolved / "manifest.json"
    if manifest.exists():
        try:
            doc = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SpecError([(f"{manifest}: (file): not readable JSON ({exc.__class__.__name__}): move it away "
                             "or use another run id")]) from None
        if not isinstance(doc, dict):
            raise SpecError([f"{manifest}: (file): not a JSON object: move it away or use another run id"])
        if doc.get("experiment") not in (None, experiment):
            raise SpecError([(f"{shown}: holds a run of experiment {doc.get('experiment')!r}, not {experiment!r}: "
                             "give this experiment's run folder")])
    return resolved


def _host_dir(run: Path, host: str) -> Path:
    hdir = run / host
    if hdir.is_symlink() or (hdir.exists() and not hdir.is_dir()) or hdir.resolve().parent != run:
        raise SpecError([f"--host {host!r}: {hdir} is not a folder of the run: move it away"])
    return hdir


def _run(args: argparse.Namespace) -> int:
    try:
        spec = load_spec(args.spec)
        if not isinstance(spec, TritonSpec):
            raise SpecError([(f"{args.spec}: kind: {spec.kind!r} specs are not planned by 'serve-system plan' "
                             "(it plans kind: triton): run experiments/fastapi.yml")])
        hosts = _hosts(args.host) or [("localhost", 0)]
        bases = _bases(args.base_dir, hosts)
        for h, g in hosts:
            exp.plan(spec, g, url=args.url, node_work_dir=args.node_work_dir, repository=bases.get(h))
        run = _run_dir(args.run_dir, spec.name)
        hdirs = {h: _host_dir(run, h) for h, _ in hosts}
    except SpecError as exc:
        for line in exc.lines:
            print(line, file=sys.stderr)
        return 1
    run.mkdir(parents=True, exist_ok=True)
    if not args.no_manifest:
        shutil.copyfile(args.spec, run / "spec.yml")
        manifest_path = run / "manifest.json"
        manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
        manifest.setdefault("start", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        manifest.update(
            experiment=spec.name, run_id=run.name, description=spec.description,
            spec_file=str(args.spec), spec=spec.data, stand_in=spec.stand_in,
            hosts=sorted(set(manifest.get("hosts", [])) | {h for h, _ in hosts}),
            objectives=[o.as_record() for o in spec.goals()],
        )
        manifest_path.write_text(json.dumps(manifest, indent=1, default=str) + "\n")
    out = {}
    for (host, gpus) in hosts:
        hdir = hdirs[host]
        if args.fresh and hdir.exists():
            shutil.rmtree(hdir)
        done = res.done_pairs(hdir)
        variants = exp.plan(spec, gpus, url=args.url, node_work_dir=args.node_work_dir, done=done,
                            repository=bases.get(host))
        for v in variants:
            vdir = hdir / v.name
            vdir.mkdir(parents=True, exist_ok=True)
            (vdir / "config.pbtxt").write_text(v.config_pbtxt)
            (vdir / "load_body.json").write_text(json.dumps(v.load_body, indent=1) + "\n")
        doc = {
            "host": host, "gpus": gpus, "experiment": spec.name, "run_id": run.name,
            "models": sorted({v.model for v in variants}),
            "warmup_requests": spec.warmup.requests,
            "variants": [{**asdict(v), "todo": sum(not lv.done for lv in v.levels)} for v in variants],
        }
        (hdir / "plan.json").write_text(json.dumps(doc, indent=1) + "\n")
        out[host] = doc
    if not args.quiet:
        print(json.dumps(out))
    return 0
