#!/usr/bin/env bash
# Build (once) a virtual environment with the real Triton server from the nvidia-pytriton wheel,
# for the local integration tests (CPU only, Python backend). Keyed by the hash of this recipe.
# Prints the venv path; its Triton is <venv>/lib/python3.11/site-packages/pytriton/tritonserver.
set -euo pipefail
cd "$(dirname "$0")/.."
hash="$(cat "$0" | sha256sum | cut -c1-12)"
venv="$PWD/.cache/local-triton-$hash"
if [ -x "$venv/.ready" ] || [ -f "$venv/.ready" ]; then echo "$venv"; exit 0; fi
py="$(command -v python3.11 || command -v python3)"
rm -rf "$venv"; mkdir -p "$PWD/.cache"
"$py" -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip >/dev/null 2>&1 || true
"$venv/bin/pip" install -q "nvidia-pytriton==0.7.0" "numpy<2" 2> >(grep -vE "is ignored: it is neither|^[[:space:]]*$" >&2)
tri="$("$venv/bin/python" -c 'import pytriton, os; print(os.path.dirname(pytriton.__file__))')/tritonserver"
pyver="$("$venv/bin/python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
stub="$(find "$tri" -path "*python_backend_stubs/$pyver/triton_python_backend_stub" | head -1)"
[ -n "$stub" ] || { echo "no python backend stub for $pyver under $tri" >&2; exit 1; }
cp "$stub" "$tri/backends/python/triton_python_backend_stub"
touch "$venv/.ready"
echo "$venv"
