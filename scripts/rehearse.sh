#!/usr/bin/env bash
# The main job on a local rehearsal node (no Chameleon account needed).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/serve-system --help
