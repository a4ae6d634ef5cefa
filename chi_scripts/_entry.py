"""The one entry point of the chi_scripts: ``chi_scripts/NAME.py ARGS`` is ``serve-system NAME ARGS``
with the script's name in messages (:func:`serve_system.commands.provision.script_main`).

Each script imports this module from its own folder (Python puts a script's folder first on
``sys.path``). A checkout without ``pip install -e .`` (the dependencies installed, the project not)
uses the sources next to this folder.
"""

import sys
from pathlib import Path


def main(command: str) -> int:
    """Run the command family ``command`` (lease, launch, status, teardown); its exit status."""
    try:
        from serve_system.commands.provision import script_main
    except ImportError:  # the project is not installed: use the sources next to this folder
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
        from serve_system.commands.provision import script_main
    return script_main(command)
