"""``serve-system validate PATH...``: check config.pbtxt files and experiment specs before a run.

A folder stands for the config.pbtxt files of the model repository it holds (``FOLDER/*/config.pbtxt``,
or ``FOLDER/config.pbtxt`` for a model folder). ``--with-triton`` also loads every configuration into a
real local tritonserver and prints where Triton's verdict and ours differ.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import ownedtree
from ..errors import ServeSystemError, UsageError
from ..experiment import plan as exp
from ..experiment.spec.messages import SpecError
from ..experiment.spec.models import TritonSpec
from ..experiment.spec.reader import load_spec
from ..textsafe import echo
from ..triton.host import gpus_needed
from ..triton.pbtxt import ModelConfig, apply_overrides
from ..triton.problems import advice_file, check_file

#: exit statuses of ``--with-triton``: no tritonserver can run here; Triton and we differ
NO_TRITON_EXIT = 3
DIFFERS_EXIT = 4


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate",
        help="check config.pbtxt files and experiment specs (exit 0: all valid; else one line per problem)",
    )
    p.add_argument("paths", nargs="+", type=ownedtree.INPUT_PATH, metavar="PATH",
                   help="config.pbtxt (any *.pbtxt), a model repository folder, or an experiment spec "
                        "(*.yml)")
    p.add_argument("--gpus", type=_gpus, default=None,
                   help="also check against a host with this many GPUs (default: only Triton's rules)")
    p.add_argument("--with-triton", action="store_true",
                   help="also load each config.pbtxt into a local tritonserver (scratch repository) and "
                        "print where Triton's verdict differs from ours (exit 4 if any differs, 3 where no "
                        "tritonserver can run)")
    p.add_argument("--tritonserver", type=ownedtree.INPUT_PATH, default=None, metavar="BIN",
                   help="the tritonserver binary for --with-triton (default: $SERVE_SYSTEM_TRITONSERVER, "
                        "PATH, the nvidia-pytriton package, or the project's local Triton venv)")
    p.set_defaults(func=_run)


def _gpus(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--gpus: {text!r} is not a whole number: give the host's GPU "
                                         "count, e.g. --gpus 1") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"--gpus: {n} is negative: give the host's GPU count (0 or more)")
    return n


def expand(paths: list[Path]) -> list[Path]:
    """The files to check: folders become the config.pbtxt files they hold."""
    out: list[Path] = []
    for path in paths:
        if path.suffix in (".pbtxt", ".yml", ".yaml"):
            out.append(path)  # their readers say what is wrong with a missing file or a folder
        elif path.is_dir():
            found = sorted(path.glob("config.pbtxt")) + sorted(path.glob("*/config.pbtxt"))
            if not found:
                raise UsageError(f"{path}: no config.pbtxt in this folder nor in its model folders: give a "
                                 "model repository, a model folder or a file")
            out += found
        elif not path.exists():
            raise UsageError(f"{path}: no such file or folder: give a config.pbtxt, a model repository "
                             "folder or a spec (*.yml)")
        else:
            raise UsageError(f"{path}: unknown kind of file ({path.suffix or 'no suffix'}): give a "
                             "config.pbtxt (*.pbtxt) or an experiment spec (*.yml / *.yaml)")
    return out


def problems(path: Path, gpus: int | None) -> list[str]:
    """Problems of one file, one line each (empty: valid)."""
    if path.suffix == ".pbtxt":
        return check_file(path, gpus)
    try:
        spec = load_spec(path)
        if isinstance(spec, TritonSpec):
            # without --gpus a spec is checked as written: the GPUs its variants name are assumed present
            host = gpus if gpus is not None else max(
                [gpus_needed(_cfg) for _cfg in _configs(spec)] or [0])
            exp.plan(spec, host)
    except SpecError as exc:
        return exc.lines
    except ServeSystemError as exc:
        return [str(exc)]
    return []


def _configs(spec: TritonSpec) -> list[ModelConfig]:
    out = []
    for v in spec.all_variants:
        try:
            out.append(apply_overrides(exp.base_config(spec, v), v.config, "-"))
        except ServeSystemError:
            continue
    return out


def _run(args: argparse.Namespace) -> int:
    files = expand(args.paths)
    bad = 0
    for path in files:
        lines = problems(path, args.gpus)
        for line in lines:
            echo(line, file=sys.stderr)
        bad += bool(lines)
        if not lines and path.suffix == ".pbtxt":
            for note in advice_file(path):
                echo(f"note: {note}")
    if bad == 0:
        echo(f"{len(files)} file(s) valid")
    if args.with_triton:
        from ..experiment import tritonlocal

        configs = [p for p in files if p.suffix == ".pbtxt"]
        try:
            differ = tritonlocal.compare(configs, args.tritonserver)
        except tritonlocal.NoTriton as exc:
            echo(f"serve-system validate: --with-triton skipped: {exc}", file=sys.stderr)
            return NO_TRITON_EXIT
        if differ:
            return DIFFERS_EXIT
    return 1 if bad else 0
