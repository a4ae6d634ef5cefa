#!/usr/bin/env bash
# The whole test suite, from a fresh machine: system packages, .venv, then pytest
# (lint gates: ruff and mypy; then unit tests, the bad-input corpus and the integration tests on local
# rehearsal nodes with real Triton).
# Extra arguments go to pytest, e.g. `scripts/test.sh tests/unit -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
# lint gates first (seconds): ruff on the code and the tests, mypy on the package (pyproject.toml)
printf '\033[1m[test]\033[0m ruff check src tests bench chi_scripts roles/*/filter_plugins\n' >&2
.venv/bin/ruff check --quiet src tests bench chi_scripts roles/*/filter_plugins
printf '\033[1m[test]\033[0m mypy (src)\n' >&2
.venv/bin/mypy --no-error-summary
exec .venv/bin/python -m pytest "$@"
