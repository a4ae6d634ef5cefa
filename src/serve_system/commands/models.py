"""``serve-system models``: ``render`` the model repository of one node (used by the serve_stack role);
``standins`` measures the generated stand-in models (parameters, MACs, CPU time) on this machine."""

from __future__ import annotations

import argparse
import hashlib
from dataclasses import asdict
from pathlib import Path

from .. import ownedtree
from ..argtypes import Whole
from ..labrepo import LabWeights
from ..modelrepo import ONNX_SERVING, format_table, render
from ..textsafe import dumps, echo


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="render the committed model_repository/ for a node")
    msub = p.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    r = msub.add_parser("render", help="write a node's model repository into a staging directory")
    r.add_argument("--source", type=ownedtree.INPUT_PATH, default=Path("model_repository"),
                   help="committed repository")
    r.add_argument("--dest", type=ownedtree.OWNED_DIR, required=True,
                   help="staging directory (new, empty or written by this command before: its own stale "
                        "files removed)")
    r.add_argument("--force", action="store_true",
                   help="write into a non-empty folder of yours (only the tool's files are replaced)")
    r.add_argument("--model", action="append", dest="models", required=True, help="model to deploy (repeat)")
    r.add_argument("--gpus", type=Whole(0, 64, "the node's GPU count"), default=0,
                   help="GPUs of the node (0: KIND_GPU groups become KIND_CPU)")
    r.add_argument("--onnx-serving", choices=ONNX_SERVING, default="onnxruntime")
    r.add_argument("--standin", action="append", default=[],
                   help="model that gets the generated stand-in weights")
    r.add_argument("--standin-unless-given", action="append", default=[], metavar="MODEL",
                   help="model that gets its stand-in unless its source directory holds weights")
    r.add_argument("--standin-chosen", action="store_true",
                   help="the stand-ins were chosen (serve_stack_weights: standin): their configs say so, and "
                        "a plan on a GPU node measures them")
    r.add_argument("--lab-weights", default=None, metavar="JSON",
                   help="the lab's weights as the node's check found them: {repository, commit, files: "
                        "{path: {sha256, size, standin}}} (the serve_stack role passes it)")
    r.add_argument("--json", action="store_true", help="print {changed, models, files, sha256} as JSON")
    r.set_defaults(func=_render)
    m = msub.add_parser("standins", help="parameters, compute and CPU time of the generated stand-in models")
    m.add_argument("--model", action="append", dest="models", help="only this model (repeat); default: all")
    m.add_argument("--repeats", type=Whole(1, 10000), default=30,
                   help="timed runs per model (median reported)")
    m.add_argument("--json", action="store_true", help="print the measurements as JSON")
    m.set_defaults(func=_standins)


def _render(args: argparse.Namespace) -> int:
    lab = LabWeights.from_json(args.lab_weights) if args.lab_weights is not None else None
    changed, rows = render(
        args.source, args.dest, models=args.models, gpus=args.gpus,
        onnx_serving=args.onnx_serving, standin=args.standin,
        standin_unless_given=args.standin_unless_given, force=args.force, lab=lab,
        standin_chosen=args.standin_chosen,
    )
    # the tool's files (not its own list of them, not a link): what the role copies to the node
    files = sorted(rel for p in args.dest.rglob("*")
                   if p.is_file() and not p.is_symlink() and not (rel := p.relative_to(args.dest).as_posix())
                   .startswith(".") and "/." not in rel)
    if args.json:
        # sha256 per file: the serve_stack role copies only what the node lacks or holds differently
        sha256 = {f: hashlib.sha256((args.dest / f).read_bytes()).hexdigest() for f in files}
        print(dumps({"changed": changed, "models": [asdict(r) for r in rows], "files": files,
                     "sha256": sha256}))
    else:
        echo(("changed" if changed else "unchanged") + f": {args.dest}")
        for line in format_table(rows):
            echo("  " + line)
    return 0


def _standins(args: argparse.Namespace) -> int:
    import os

    from ..modelcost import measure
    from ..standin import STANDINS, standin_for

    models = args.models or [m for m in STANDINS if m != "food_classifier"]  # the two food models share one
    for name in models:
        standin_for(name)  # unknown name: one line, before any work
    rows = [measure(name, repeats=max(args.repeats, 3)) for name in models]
    load = os.getloadavg()[0]
    if args.json:
        print(dumps({"load_avg_1m": load, "models": [asdict(r) for r in rows]}, indent=2))
        return 0
    echo(f"{'model':<22}{'parameters':>12}{'MMACs':>9}{'GFLOPs':>8}{'wall ms b1':>11}{'ms/item b8':>12}"
         f"{'CPU ms b1':>11}{'MB':>7}")
    for r in rows:
        echo(f"{r.model:<22}{r.parameters:>12,}{r.macs / 1e6:>9.1f}{2 * r.macs / 1e9:>8.2f}"
             f"{r.cpu_ms_p50:>11.2f}{r.cpu_ms_per_item_b8:>12.2f}{r.cpu_time_ms:>11.2f}"
             f"{r.size_bytes / 1e6:>7.1f}")
    echo(f"(onnxruntime CPU, {rows[0].threads if rows else 0} cores; wall: median of {args.repeats} runs; "
         "CPU: processor time of all threads per request; "
         f"load average {load:.2f} while measuring; FLOPs = 2 x MACs)")
    return 0
