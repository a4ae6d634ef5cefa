"""``serve-system models render``: the model repository of one node (used by the serve_stack role)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from ..modelrepo import ONNX_SERVING, format_table, render


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="render the committed model_repository/ for a node")
    msub = p.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    r = msub.add_parser("render", help="write a node's model repository into a staging directory")
    r.add_argument("--source", type=Path, default=Path("model_repository"), help="committed repository")
    r.add_argument("--dest", type=Path, required=True, help="staging directory (mirrored: stale files removed)")
    r.add_argument("--model", action="append", dest="models", required=True, help="model to deploy (repeat)")
    r.add_argument("--gpus", type=int, default=0, help="GPUs of the node (0: KIND_GPU groups become KIND_CPU)")
    r.add_argument("--onnx-serving", choices=ONNX_SERVING, default="onnxruntime")
    r.add_argument("--standin", action="append", default=[], help="model that gets the generated stand-in weights")
    r.add_argument("--json", action="store_true", help="print {changed, models, files} as JSON")
    r.set_defaults(func=_render)


def _render(args: argparse.Namespace) -> int:
    changed, rows = render(
        args.source, args.dest, models=args.models, gpus=args.gpus,
        onnx_serving=args.onnx_serving, standin=args.standin,
    )
    files = sorted(p.relative_to(args.dest).as_posix() for p in args.dest.rglob("*") if p.is_file())
    if args.json:
        print(json.dumps({"changed": changed, "models": [asdict(r) for r in rows], "files": files}))
    else:
        print(("changed" if changed else "unchanged") + f": {args.dest}")
        for line in format_table(rows):
            print("  " + line)
    return 0
