#!/usr/bin/env python3
"""Show lease, servers, floating IPs, SSH and Triton readiness.

Thin wrapper: the work is done by serve_system (see src/serve_system/commands/provision.py). Run it with the
project's virtual environment: `.venv/bin/python chi_scripts/status.py --help`.
"""

import sys
from pathlib import Path

try:
    from serve_system.commands.provision import script_main
except ImportError:  # a checkout without `pip install -e .`: use the sources next to this script
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from serve_system.commands.provision import script_main

if __name__ == "__main__":
    sys.exit(script_main("status"))
