"""The node bundle's layout, defined once: one file, a Python zip application (:data:`NAME`) that holds
the package as it imports here, ``serve_system/node/`` whole (but the FastAPI client, :data:`CLIENT`)
with what it imports of ``serve_system`` (:data:`FOUNDATION`), an entry (:data:`MAIN`) that runs
:mod:`serve_system.node.__main__` as ``python -m serve_system.node`` runs it here, and at its top the
data the runner puts beside it (:func:`unpack`): the host plan, its inputs and the FastAPI client
script. Written on the controller (:func:`serve_system.experiment.roleview.write_bundle`); standard
library only."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

#: the bundle's file name, in the host's folder on the controller and in the run's folder on the node
NAME = ".node.pyz"
#: the FastAPI client: a script the plan's argv names, run by its own python3 in the FastAPI experiment;
#: it travels once, as a data member put beside the bundle (nothing on the node imports it)
CLIENT = "fastapi_bench.py"
#: what the bundle holds of ``serve_system`` besides ``node/``: the package itself, the user-facing
#: error and the one read and write path (every one of them standard library only)
FOUNDATION = ("__init__.py", "errors.py", "safeio.py")
#: the bundle's entry (``python3 .node.pyz ARGS``)
ENTRY = "__main__.py"
MAIN = "from serve_system.node.__main__ import main\n\nraise SystemExit(main())\n"


def running() -> Path | None:
    """The bundle this code runs from (``.node.pyz/serve_system/node/bundle.py``), or None: run from the
    package's tree (the tests, ``python -m serve_system.node``)."""
    bundle = Path(__file__).parents[2]
    return bundle if zipfile.is_zipfile(bundle) else None


def unpack(bundle: Path) -> None:
    """Put the node bundle's data members (plan, inputs, the FastAPI client) beside it, each replaced
    atomically and only when its content changed (a runner still going on reads them)."""
    with zipfile.ZipFile(bundle) as z:
        for name in z.namelist():
            if name == ENTRY or "/" in name or name.startswith("."):  # the code: serve_system/...
                continue
            data, dest = z.read(name), bundle.parent / name
            if dest.is_file() and dest.read_bytes() == data:
                continue
            tmp = dest.with_name(f".{name}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, dest)
