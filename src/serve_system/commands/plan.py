"""``serve-system plan SPEC``: validate and render an experiment for hosts, write the run folder.

Run by the ``triton_experiment`` role on the controller, once per play, before any node is touched:
every variant of the spec is rendered for each host's GPU count and checked; on any problem nothing
is written and the command exits 1 with one line per problem. Otherwise it writes, under
``RUN_DIR``: ``spec.yml``, ``manifest.json``, and per host ``plan.json`` (what to load, the
perf_analyzer command of each load level, which levels are already measured) plus each variant's
``config.pbtxt`` and ``load_body.json``. With ``--fresh`` the hosts' earlier results are removed first.
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
    out = []
    for v in values:
        name, _, gpus = v.partition("=")
        if not name or not gpus.isdigit():
            raise exp.SpecError([f"--host {v!r}: give NAME=GPUS, e.g. node-1=2"])
        out.append((name, int(gpus)))
    return out


def _run(args: argparse.Namespace) -> int:
    try:
        spec = exp.load_spec(args.spec)
        hosts = _hosts(args.host) or [("localhost", 0)]
        bases = {name: Path(d) for name, _, d in (b.partition("=") for b in args.base_dir)}
        for h, g in hosts:
            exp.plan(spec, g, url=args.url, node_work_dir=args.node_work_dir, repository=bases.get(h))
    except exp.SpecError as exc:
        for line in exc.lines:
            print(line, file=sys.stderr)
        return 1
    run = args.run_dir
    run.mkdir(parents=True, exist_ok=True)
    if not args.no_manifest:
        shutil.copyfile(args.spec, run / "spec.yml")
        manifest_path = run / "manifest.json"
        manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
        manifest.setdefault("start", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        manifest.update(
            experiment=spec.name, run_id=run.name, description=spec.data.get("description"),
            spec_file=str(args.spec), spec=spec.data, stand_in=spec.data.get("stand_in"),
            hosts=sorted(set(manifest.get("hosts", [])) | {h for h, _ in hosts}),
            objectives=[asdict(o) for o in spec.objectives],
        )
        manifest_path.write_text(json.dumps(manifest, indent=1, default=str) + "\n")
    out = {}
    for (host, gpus) in hosts:
        hdir = run / host
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
            "warmup_requests": int((spec.data.get("warmup") or {}).get("requests", 20)),
            "variants": [{**asdict(v), "todo": sum(not lv.done for lv in v.levels)} for v in variants],
        }
        (hdir / "plan.json").write_text(json.dumps(doc, indent=1) + "\n")
        out[host] = doc
    if not args.quiet:
        print(json.dumps(out))
    return 0
