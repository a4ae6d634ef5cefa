"""``serve-system plan SPEC``: validate and render an experiment for hosts, write the run folder.

Run by the ``experiment`` role on the controller, once per play, before any node is touched:
every variant of the spec (kind triton or fastapi) is rendered for each host's GPU count and
checked; on any problem nothing is written and the command exits 1 with one line per problem.
Otherwise it writes, under ``RUN_DIR``: ``spec.yml``, ``manifest.json``, and per host ``plan.json``
(a :class:`serve_system.records.HostPlan`: what to load, the command of each load level, which
levels are already measured), each variant's ``config.pbtxt`` and ``load_body.json``, and
``.node.pyz`` (the node bundle: the runner, the plan and its inputs in one file the role copies). With
``--fresh`` the hosts' earlier results are removed first; with ``--lease-end`` a plan that cannot end
before the lease does is refused.

Arguments are checked as strictly as the spec, before anything is written or deleted: ``RUN_DIR`` is
``<results>/<experiment name>/<run id>`` (a plain run id, no ``..``, not a link), each host a plain
name (its folder is ``RUN_DIR/<host>``, the only thing ``--fresh`` removes), ``--base-dir`` names a
``--host``, and an existing ``manifest.json`` must belong to the same experiment.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from datetime import UTC, datetime
from pathlib import Path

from .. import experiment as exp
from .. import records
from ..spec import FastapiSpec, SpecError, TritonSpec, check_name, load_spec


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="validate + render an experiment spec for hosts (used by the playbooks)")
    p.add_argument("spec", type=Path, metavar="SPEC")
    p.add_argument("--run-dir", type=Path, required=True, help="results/<experiment>/<run-id>")
    p.add_argument("--host", action="append", default=[], metavar="NAME=GPUS",
                   help="a host and its GPU count (repeat per host)")
    p.add_argument("--url", default="triton_server:8000", help="Triton's HTTP endpoint as the client container sees it")
    p.add_argument("--grpc-url", default="triton_server:8001",
                   help="Triton's gRPC endpoint as the client container sees it (specs with perf.protocol: grpc)")
    p.add_argument("--node-work-dir", default="/work",
                   help="this run's folder as the client container sees it (inputs, CSV exports)")
    p.add_argument("--base-dir", action="append", default=[], metavar="NAME=DIR",
                   help="a host's own base configs (DIR/<model>/config.pbtxt, as its Triton serves them); "
                        "default: the spec's base_config")
    p.add_argument("--no-manifest", action="store_true", help="leave RUN_DIR/manifest.json and spec.yml alone")
    p.add_argument("--fresh", action="store_true", help="forget earlier results of these hosts in RUN_DIR")
    p.add_argument("--quiet", action="store_true", help="do not print the plan")
    p.add_argument("--fastapi-url", default="http://fastapi_server:8000",
                   help="the FastAPI endpoint as the client container sees it (kind: fastapi)")
    p.add_argument("--fastapi-image", type=Path, default=None,
                   help="image file sent in every FastAPI request (default: the client's synthetic JPEG)")
    p.add_argument("--lease-end", default="", help="the node's lease end (ISO 8601 UTC): refuse a plan "
                   "that cannot finish before it")
    p.add_argument("--ignore-lease-end", action="store_true", help="start even if the plan outlasts the lease")
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
        hosts = _hosts(args.host) or [("localhost", 0)]
        bases = _bases(args.base_dir, hosts)
        plans = {h: _plan(spec, args, g, bases.get(h), set()) for h, g in hosts}
        run = _run_dir(args.run_dir, spec.name)
        hdirs = {h: _host_dir(run, h) for h, _ in hosts}
    except SpecError as exc:
        for line in exc.lines:
            print(line, file=sys.stderr)
        return 1
    if args.lease_end and not args.ignore_lease_end:
        problem = lease_problem(args.lease_end, max(exp.estimate_seconds(p) for p in plans.values()), time.time())
        if problem:
            print(f"{args.spec}: lease: {problem}", file=sys.stderr)
            return 1
    kind = spec.kind if isinstance(spec, FastapiSpec) else records.TRITON
    run.mkdir(parents=True, exist_ok=True)
    if not args.no_manifest:
        shutil.copyfile(args.spec, run / "spec.yml")
        manifest_path = run / "manifest.json"
        manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
        manifest.setdefault("start", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        manifest.update(
            experiment=spec.name, run_id=run.name, kind=kind, description=spec.description,
            spec_file=str(args.spec), spec=spec.data,
            stand_in=spec.stand_in if isinstance(spec, TritonSpec) else None,
            hosts=sorted(set(manifest.get("hosts", [])) | {h for h, _ in hosts}),
            objectives=[o.as_record() for o in _objectives(spec)],
        )
        manifest_path.write_text(json.dumps(manifest, indent=1, default=str) + "\n")
    out = {}
    prov = provenance(args.spec)
    for (host, gpus) in hosts:
        hdir = hdirs[host]
        if args.fresh and hdir.exists():
            shutil.rmtree(hdir)
        variants = _plan(spec, args, gpus, bases.get(host), records.done_levels(hdir))
        for v in variants:
            vdir = hdir / v.name
            vdir.mkdir(parents=True, exist_ok=True)
            if v.config_pbtxt:
                (vdir / "config.pbtxt").write_text(v.config_pbtxt)
                (vdir / "load_body.json").write_text(json.dumps(v.load_body, indent=1) + "\n")
        models = sorted({v.model for v in variants}) if kind == records.TRITON else []
        hplan = records.HostPlan(
            host=host, gpus=gpus, experiment=spec.name, run_id=run.name, variants=variants, kind=kind,
            models=models, provenance=prov,
            warmup_requests=spec.warmup.requests,
            estimate_s=exp.estimate_seconds(variants))
        records.write(hdir / "plan.json", hplan)
        _stage(hdir / ".node.pyz", hplan, variants, args.fastapi_image)
        out[host] = records.to_json(hplan)
    if not args.quiet:
        print(json.dumps(out))
    return 0


def _objectives(spec: TritonSpec | FastapiSpec) -> list[exp.Objective]:
    if isinstance(spec, TritonSpec):
        return spec.goals()
    top = max(lv.senders for lv in spec.levels)  # the lab compares the runtimes at its highest load
    return [exp.Objective(name="max_throughput", metric="throughput", goal="max", at_load=top),
            exp.Objective(name="min_p95", metric="p95_us", goal="min", at_load=top)]


def _plan(spec: TritonSpec | FastapiSpec, args: argparse.Namespace, gpus: int, base: Path | None,
          done: set[tuple[str, str]]) -> list[records.VariantPlan]:
    if isinstance(spec, FastapiSpec):
        image = f"image{args.fastapi_image.suffix}" if args.fastapi_image else None
        return exp.plan_fastapi(spec, url=args.fastapi_url, node_work_dir=args.node_work_dir, image=image,
                                done=done)
    return exp.plan(spec, gpus, url=args.url, grpc_url=args.grpc_url, node_work_dir=args.node_work_dir, repository=base, done=done)


def _stage(dest: Path, hplan: records.HostPlan, variants: list[records.VariantPlan], image: Path | None) -> None:
    """What the role puts on the node in one task: the node bundle, a Python zip application of the
    runner with the plan and its inputs (``python3 .node.pyz`` puts them beside itself, then runs)."""
    from .. import runner

    pkg = Path(records.__file__).parent
    files: dict[str, Path] = {name: pkg / name for name in ("runner.py", "records.py", "fastapi_bench.py")}
    for data in sorted({v.input_data for v in variants if v.input_data}):
        files[Path(data).name] = Path(data)
    if image is not None and hplan.kind == records.FASTAPI:
        files[f"image{image.suffix}"] = image
    tmp = dest.with_name(f".{dest.name}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        z.writestr("__main__.py", runner.BUNDLE_MAIN)
        for name, src in sorted(files.items()):
            z.write(src, name)
        z.writestr("plan.json", json.dumps(records.to_json(hplan), indent=1) + "\n")
    os.replace(tmp, dest)


def provenance(spec_path: Path) -> dict[str, object]:
    """What every level record carries about the controller side: commit and the spec as loaded."""
    root = exp.repo_root(Path(spec_path).resolve().parent) or Path.cwd()
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip() or "unknown"
        dirty = bool(subprocess.run(["git", "-C", str(root), "status", "--porcelain"], check=False, capture_output=True,
                                    text=True, timeout=10).stdout.strip())
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
