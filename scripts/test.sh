#!/usr/bin/env bash
# The whole test suite, from a fresh machine: system packages, .venv, then pytest
# (unit tests, then the integration tests on local rehearsal nodes with real Triton).
# Extra arguments go to pytest, e.g. `scripts/test.sh tests/unit -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/python -m pytest "$@"
