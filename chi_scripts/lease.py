#!/usr/bin/env python3
"""Create, show or delete the Chameleon lease (python-chi).

`serve-system lease` as a script (chi_scripts/_entry.py, chi_scripts/README.md). Run it with the
project's virtual environment: `.venv/bin/python chi_scripts/lease.py --help`.
"""

import sys

from _entry import main

if __name__ == "__main__":
    sys.exit(main("lease"))
