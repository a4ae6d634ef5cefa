"""``serve-system schema``: print the JSON Schema of experiment spec files (both kinds).

Editors use it to complete and check spec files: save it (``serve-system schema -o spec.schema.json``)
and point the YAML language server at it with a first line
``# yaml-language-server: $schema=spec.schema.json`` in the spec.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import ownedtree, safeio
from ..errors import UsageError
from ..experiment.spec.models import json_schema
from ..textsafe import echo


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schema", help="print the JSON Schema of experiment spec files (for editors)")
    p.add_argument("-o", "--output", type=ownedtree.OUTPUT_FILE, metavar="FILE",
                   help="write it to FILE (a .json file) instead of printing it")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    text = json.dumps(json_schema(), indent=2) + "\n"
    if args.output is None:
        sys.stdout.write(text)
        return 0
    out: Path = args.output
    if out.suffix != ".json":
        raise UsageError(f"--output {str(out)!r}: not a .json file name: give e.g. spec.schema.json")
    if out.is_dir() or not out.parent.is_dir():
        raise UsageError(f"--output {str(out)!r}: not a file in an existing folder: "
                         "give e.g. spec.schema.json")
    safeio.write_text(out, text)  # a temporary name, renamed: never through a link
    echo(f"wrote {out}")
    return 0
