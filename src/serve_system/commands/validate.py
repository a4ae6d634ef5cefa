"""``serve-system validate PATH...``: check config.pbtxt files and experiment specs before a run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import experiment as exp
from .. import tritonconfig as tc
from ..errors import ServeSystemError
from ..spec import SpecError, TritonSpec, load_spec


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate",
        help="check config.pbtxt files and experiment specs (exit 0: all valid; else one line per problem)",
    )
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                   help="config.pbtxt (any *.pbtxt) or experiment spec (*.yml / *.yaml)")
    p.add_argument("--gpus", type=int, default=None,
                   help="also check specs against a host with this many GPUs (default: only Triton's rules)")
    p.set_defaults(func=_run)


def problems(path: Path, gpus: int | None) -> list[str]:
    """Problems of one file, one line each (empty: valid)."""
    if path.suffix == ".pbtxt":
        try:
            cfg = tc.load_pbtxt(path)
        except tc.ConfigError as exc:
            return [str(exc)]
        return [f"{path}:1:1: {p}" for p in tc.check(cfg, gpus)]
    try:
        spec = load_spec(path)
        if isinstance(spec, TritonSpec):
            # without --gpus a spec is checked as written: the GPUs its variants name are assumed present
            host = gpus if gpus is not None else max(
                [tc.gpus_needed(_cfg) for _cfg in _configs(spec)] or [0])
            exp.plan(spec, host)
    except SpecError as exc:
        return exc.lines
    except ServeSystemError as exc:
        return [str(exc)]
    return []


def _configs(spec: TritonSpec) -> list[tc.ModelConfig]:
    out = []
    for v in spec.all_variants:
        try:
            out.append(tc.apply_overrides(exp.base_config(spec, v), v.config, "-"))
        except ServeSystemError:
            continue
    return out


def _run(args: argparse.Namespace) -> int:
    bad = 0
    for path in args.paths:
        lines = problems(path, args.gpus)
        for line in lines:
            print(line, file=sys.stderr)
        bad += bool(lines)
    if bad == 0:
        print(f"{len(args.paths)} file(s) valid")
    return 1 if bad else 0
