#!/usr/bin/env python3
"""Bring up the lab's server(s), make them SSH-reachable, write inventory/hosts.yml.

`serve-system launch` as a script (chi_scripts/_entry.py, chi_scripts/README.md). Run it with the
project's virtual environment: `.venv/bin/python chi_scripts/launch.py --help`.
"""

import sys

from _entry import main

if __name__ == "__main__":
    sys.exit(main("launch"))
