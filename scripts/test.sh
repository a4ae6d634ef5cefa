#!/usr/bin/env bash
# The whole test suite, from a fresh machine: system packages, .venv, then pytest
# (lint gates: ruff and mypy; then unit tests, the bad-input corpus and the integration tests on local
# rehearsal nodes with real Triton).
# Extra arguments go to pytest, e.g. `scripts/test.sh tests/unit -x`.
#
# What runs at once (the suite's time budget, issue 39): mypy checks the package while pytest runs the
# unit tests, and pytest sets up the integration tests' nodes in the background meanwhile
# (tests/integration/prestart.py); the integration tests, which measure, run after both, alone.
set -euo pipefail
cd "$(dirname "$0")/.."
suite_start=$SECONDS
bash scripts/bootstrap.sh
bootstrap_s=$((SECONDS - suite_start))
# lint gate first (a second): ruff on the code and the tests
printf '\033[1m[test]\033[0m ruff check src tests bench chi_scripts scripts inventory_plugins roles/*/filter_plugins roles/*/action_plugins roles/*/library\n' >&2
.venv/bin/ruff check --quiet src tests bench chi_scripts scripts inventory_plugins roles/*/filter_plugins roles/*/action_plugins roles/*/library
# mypy on the package (pyproject.toml), beside the unit tests; its verdict is awaited below
mypy_log=$(mktemp)
printf '\033[1m[test]\033[0m mypy (src), beside pytest\n' >&2
.venv/bin/mypy --no-error-summary >"$mypy_log" 2>&1 &
mypy_pid=$!
# an interrupted suite leaves no mypy behind
setup_report=$(mktemp)
trap 'kill "$mypy_pid" 2>/dev/null || true; rm -f "$mypy_log" "$setup_report"' EXIT
rc=0
pytest_start=$SECONDS
SERVE_SYSTEM_SETUP_REPORT="$setup_report" .venv/bin/python -m pytest "$@" || rc=$?
pytest_s=$((SECONDS - pytest_start))
mypy_rc=0
wait "$mypy_pid" || mypy_rc=$?
if [ "$mypy_rc" -ne 0 ]; then
  printf '\033[1m[test]\033[0m mypy failed (exit %s):\n' "$mypy_rc" >&2
  cat "$mypy_log" >&2
  # pytest's own failure (or its "no tests" 5) wins; otherwise mypy's failure fails the suite
  [ "$rc" -ne 0 ] || rc=1
else
  printf '\033[1m[test]\033[0m mypy (src): clean\n' >&2
fi
# the set-up's share of the time (issue 53): the bootstrap before pytest, and the integration tests'
# node images, nodes and site.yml runs, built in the background while the other tests ran
printf '\033[1m[test]\033[0m set-up: bootstrap %s s before pytest; pytest %s s; whole command %s s\n' \
  "$bootstrap_s" "$pytest_s" "$((SECONDS - suite_start))" >&2
[ -s "$setup_report" ] && sed 's/^\[prestart\]/\x1b[1m[test]\x1b[0m/' "$setup_report" >&2
exit "$rc"
