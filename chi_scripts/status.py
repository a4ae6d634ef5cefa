#!/usr/bin/env python3
"""Show lease, servers, floating IPs, SSH and Triton readiness.

`serve-system status` as a script (chi_scripts/_entry.py, chi_scripts/README.md). Run it with the
project's virtual environment: `.venv/bin/python chi_scripts/status.py --help`.
"""

import sys

from _entry import main

if __name__ == "__main__":
    sys.exit(main("status"))
