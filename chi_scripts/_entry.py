"""The one entry point of the chi_scripts: ``chi_scripts/NAME.py ARGS`` is ``serve-system NAME ARGS``
with the script's name in messages (:func:`serve_system.commands.provision.script_main`).

Each script imports this module from its own folder (Python puts a script's folder first on
``sys.path``). A checkout without ``pip install -e .`` (the dependencies installed, the project not)
uses the sources next to this folder. A Python without the controller's dependencies gets one line
saying what to install (:func:`serve_system.entry.guarded`), not a traceback.
"""

import sys
from pathlib import Path


def main(command: str) -> int:
    """Run the command family ``command`` (lease, launch, status, teardown); its exit status."""
    try:
        import serve_system  # noqa: F401  (standard library only: importable by any Python)
    except ModuleNotFoundError as exc:  # the project is not installed: use the sources next to this folder
        if exc.name != "serve_system":
            raise
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from serve_system.entry import guarded

    def run() -> int:
        from serve_system.commands.provision import script_main

        return script_main(command)

    return guarded(f"{command}.py", run)
