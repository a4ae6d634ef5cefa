"""``serve-system fastapi``: the FastAPI endpoint's image (build context, tag) for the serve stack."""

from __future__ import annotations

import argparse

from .. import ownedtree
from ..images import fastapi as fi
from ..textsafe import dumps


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fastapi", help="the FastAPI endpoint's container image (build context and tag)")
    fsub = p.add_subparsers(dest="fastapi_command", metavar="SUBCOMMAND", required=True)
    c = fsub.add_parser("context", help="write the image's build context into DIR and print its tag as JSON")
    c.add_argument("dest", type=ownedtree.OWNED_DIR, metavar="DIR",
                   help="the build context's folder: new, empty, or one this command wrote before")
    c.add_argument("--force", action="store_true",
                   help="write into a non-empty folder of yours (only the context's files are replaced)")
    c.add_argument("--rehearsal", action="store_true",
                   help="CPU onnxruntime and no torch (rehearsal nodes) instead of the GPU defaults")
    c.add_argument("--base", default="",
                   help="BASE_IMAGE build argument "
                        "(default: the Containerfile's python:3.12.12-slim-bookworm, by digest)")
    c.add_argument("--host-cas", action="store_true",
                   help="copy this machine's extra CA certificates into ca/")
    c.set_defaults(func=_context)


def _context(args: argparse.Namespace) -> int:
    build_args = dict(fi.REHEARSAL_ARGS if args.rehearsal else fi.CHAMELEON_ARGS)
    if args.base:
        build_args["BASE_IMAGE"] = args.base
    changed = fi.write_context(args.dest, host_cas=args.host_cas, force=args.force)
    print(dumps({"changed": changed, "dir": str(args.dest.resolve()), "image": fi.image_ref(build_args),
                 "build_args": build_args}))
    return 0
