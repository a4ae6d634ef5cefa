#!/usr/bin/env python3
"""Delete the lab's servers and floating IPs (and optionally the lease).

`serve-system teardown` as a script (chi_scripts/_entry.py, chi_scripts/README.md). Run it with the
project's virtual environment: `.venv/bin/python chi_scripts/teardown.py --help`.
"""

import sys

from _entry import main

if __name__ == "__main__":
    sys.exit(main("teardown"))
