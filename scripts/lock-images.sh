#!/usr/bin/env bash
# Writes the constraints files of the images a real node builds: every Python package each image
# installs, at one exact version (tests/unit/test_pins.py checks the files; each image's build checks
# that it installed nothing else, src/serve_system/images/pincheck.py). Run it after changing what an
# image installs, then commit the files it wrote.
#
#   roles/serve_stack/files/triton_gpu/constraints.txt   Triton 24.10's CPython 3.10 (Ubuntu 22.04,
#       manylinux_2_35): model_repository/requirements.txt + torch 2.5.1 / torchvision 0.20.1's
#       dependencies (the nvidia-* CUDA 12.4 wheels included), as PyPI stood on LAB_DATE
#   roles/serve_stack/files/gourmetgram/constraints.txt  the lab's Flask app (both branches'
#       requirements.txt) on CPython 3.11, as PyPI stood on LAB_DATE
#   src/serve_system/fastapi_app/image/constraints.txt   the FastAPI image: CPython 3.12 with
#       onnxruntime-gpu and torch 2.7.1 (the node) and CPython 3.13 with onnxruntime (the rehearsal
#       image), today's PyPI (its own requirements are today's exact pins)
#
# LAB_DATE: the lab's era. gourmetgram's pinned commits are of 2025-03-12, onnxruntime 1.20.1 (the
# newest package the Triton image pins) of 2024-11: the versions those releases were used with, not
# ones published years after the torch they run beside.
#
# torch and torchvision themselves are not in the constraints: each image installs them from a file
# of hash-pinned wheel URLs (roles/serve_stack/files/triton_gpu/torch-*.txt,
# src/serve_system/fastapi_app/image/torch.txt).
#
# Needs uv (pip install uv) and PyPI; resolves for the target Pythons and platforms without them.
set -euo pipefail
cd "$(dirname "$0")/.."
LAB_DATE=2025-03-31
UV=${UV:-uv}
command -v "$UV" >/dev/null || { echo "lock-images: uv not found: pip install uv (or UV=/path/to/uv)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

compile() {  # compile OUT PYTHON PLATFORM EXCLUDE_NEWER INPUT...
  local out=$1 py=$2 platform=$3 newer=$4
  shift 4
  local args=(pip compile "$@" --python-version "$py" --python-platform "$platform"
              --index-url https://pypi.org/simple --only-binary :all: --no-header
              --no-annotate --no-strip-markers --quiet -o "$out")
  [ -n "$newer" ] && args+=(--exclude-newer "$newer")
  "$UV" "${args[@]}"
}

header() {  # header WHAT [MORE]
  printf '# %s\n' "$1"
  printf '# Written by scripts/lock-images.sh (uv pip compile, PyPI, binary wheels only); do not edit by hand.\n'
  printf '# Every package the image installs, at one exact version (the build checks: pincheck.py).\n'
  [ -z "${2:-}" ] || printf '# %s\n' "$2"
}

without_torch() { grep -vE '^(torch|torchvision)==' "$1"; }

# --- the Triton GPU image ---------------------------------------------------------------------
printf -- '-r %s\ntorch==2.5.1\ntorchvision==0.20.1\n' "$PWD/model_repository/requirements.txt" > "$work/triton.in"
compile "$work/triton.txt" 3.10 x86_64-manylinux_2_35 "$LAB_DATE" "$work/triton.in"
{ header "Triton GPU image (nvcr.io/nvidia/tritonserver:24.10-py3, CPython 3.10), PyPI as of $LAB_DATE" \
    "torch and torchvision: hash-pinned wheel URLs in torch-pytorch-index.txt / torch-pypi.txt"
  without_torch "$work/triton.txt" | sed 's/^\(onnxruntime==\(.*\)\)$/\1\n# the GPU build of the same onnxruntime, swapped in by the Dockerfile (its dependencies are onnxruntime'"'"'s)\nonnxruntime-gpu==\2/'; } \
  > roles/serve_stack/files/triton_gpu/constraints.txt

# --- gourmetgram (the lab's Flask app, both branches) -----------------------------------------
cat > "$work/gourmetgram.in" <<'EOF'
Flask
numpy
tritonclient[http]
requests
EOF
compile "$work/gourmetgram.txt" 3.11 x86_64-manylinux_2_36 "$LAB_DATE" "$work/gourmetgram.in"
{ header "gourmetgram (the lab's Flask app, triton and fastapi branches; CPython 3.11), PyPI as of $LAB_DATE"
  cat "$work/gourmetgram.txt"; } > roles/serve_stack/files/gourmetgram/constraints.txt

# --- the FastAPI image: the node's (GPU) and the rehearsal's (CPU) sets, merged -------------------
req=src/serve_system/fastapi_app/image/requirements.txt
printf -- '-r %s\nonnxruntime-gpu==1.31.1\ntorch==2.7.1\ntorchvision==0.22.1\n' "$PWD/$req" > "$work/fastapi-gpu.in"
printf -- '-r %s\nonnxruntime==1.31.1\n' "$PWD/$req" > "$work/fastapi-cpu.in"
compile "$work/fastapi-gpu.txt" 3.12 x86_64-manylinux_2_36 "" "$work/fastapi-gpu.in"
compile "$work/fastapi-cpu.txt" 3.13 x86_64-manylinux_2_36 "" "$work/fastapi-cpu.in"
{ header "FastAPI image: CPython 3.12 + onnxruntime-gpu + torch (node), CPython 3.13 + onnxruntime (rehearsal)" \
    "PyPI of $(date -u +%F); torch and torchvision: hash-pinned wheel URLs in torch.txt"
  python3 - "$work/fastapi-gpu.txt" "$work/fastapi-cpu.txt" <<'EOF'
import sys
pins: dict[str, str] = {}
for path in sys.argv[1:]:
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name = line.split("==", 1)[0].split(";", 1)[0].strip().lower()
        if name in pins and pins[name] != line:
            sys.exit(f"lock-images: the FastAPI image's two sets disagree on {name}: {pins[name]} / {line}")
        pins[name] = line
for name in sorted(pins):
    if name not in ("torch", "torchvision"):
        print(pins[name])
EOF
} > src/serve_system/fastapi_app/image/constraints.txt
echo "lock-images: wrote the three constraints files" >&2
