#!/usr/bin/env bash
# Set up everything serve-system needs on a fresh Debian/Ubuntu machine, idempotently:
#   - system packages (apt) that are missing: podman, runc, debootstrap, openssh-client, rsync, ...
#   - the virtual environment .venv/ in the repository root, with the project installed in it
#     (.venv/bin/serve-system, .venv/bin/ansible-playbook, .venv/bin/ansible-lint).
# Re-running it is cheap: packages already present and an up-to-date .venv are left alone.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\033[1m[bootstrap]\033[0m %s\n' "$*" >&2; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "bootstrap: not root and no sudo: run as root" >&2; exit 1; }
  SUDO="sudo"
fi

# --- system packages -------------------------------------------------------------------------
# gnupg (gpg, gpg-agent, gpgv): signs and checks the rehearsal's stand-in apt repository (upstream mode)
APT_PKGS=(podman runc debootstrap openssh-client rsync git ca-certificates iproute2 gnupg)
PY=""
for cand in python3.13 python3.12 python3.11 python3; do
  if command -v "$cand" >/dev/null && "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    PY="$(command -v "$cand")"; break
  fi
done
if [ -z "$PY" ]; then APT_PKGS+=(python3 python3-venv python3-dev); fi
if [ -n "$PY" ] && ! "$PY" -c 'import venv, ensurepip' 2>/dev/null; then
  APT_PKGS+=("python3-venv")
fi
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing system packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ -z "$PY" ]; then PY="$(command -v python3)"; fi

# --- virtual environment ---------------------------------------------------------------------
stamp_src="$(cat pyproject.toml; "$PY" -c 'import sys; print(sys.version)')"
stamp="$(printf '%s' "$stamp_src" | sha256sum | cut -c1-16)"
if [ ! -x .venv/bin/python ] || [ "$(cat .venv/.serve-system-stamp 2>/dev/null)" != "$stamp" ]; then
  log "creating .venv with $("$PY" --version) and installing the project (a few minutes the first time)"
  [ -x .venv/bin/python ] || "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  # pip prints a warning per package for this machine's extra (local) indexes: keep only real output
  .venv/bin/python -m pip install -q -e '.[test]' 2> >(grep -vE "is ignored: it is neither|^[[:space:]]*$" >&2)
  echo "$stamp" > .venv/.serve-system-stamp
else
  log ".venv is up to date"
fi
# the bytecode of the project's own modules and the roles' plugins, every time (only what changed is
# compiled): an editable install leaves it to their first import, which never writes it where
# PYTHONDONTWRITEBYTECODE is set, so every command (plan, decide, report, ...) would compile them again
.venv/bin/python -m compileall -q src roles/*/action_plugins roles/*/filter_plugins >/dev/null
