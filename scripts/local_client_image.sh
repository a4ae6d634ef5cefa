#!/usr/bin/env bash
# Build (once) a minimal Debian 13 image with the real perf_analyzer 2.60.0, for the local
# integration tests against a local Triton (perf_analyzer needs glibc >= 2.38, Debian 12 has 2.36).
# Tagged by the hash of this recipe, so a second run reuses the image. Prints the image name.
# No registry is used: debootstrap from Debian's mirror, then `podman import`.
# Usage: scripts/local_client_image.sh   (root; needs debootstrap and podman)
set -euo pipefail
cd "$(dirname "$0")/.."
export CONTAINERS_CONF="${CONTAINERS_CONF:-$PWD/scripts/local_containers.conf}"
PA_VERSION="2.60.0"
hash="$(cat "$0" | sha256sum | cut -c1-12)"
image="localhost/local-perf-client:${hash}"
if podman image exists "$image"; then echo "$image"; exit 0; fi
work="$(mktemp -d /var/tmp/local-perf-client.XXXXXX)"
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"
echo "[local-client-image] debootstrap trixie (about a minute)" >&2
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates,curl \
  trixie "$rootfs" http://deb.debian.org/debian >/dev/null
# PyPI is reached through the build machine's extra CAs: trust them inside the image
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
fi
chroot "$rootfs" update-ca-certificates >/dev/null 2>&1
echo "[local-client-image] pip install perf-analyzer==$PA_VERSION" >&2
chroot "$rootfs" python3 -m venv /opt/pa
chroot "$rootfs" env PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
  /opt/pa/bin/pip install -q --no-cache-dir "perf-analyzer==$PA_VERSION" >&2
chroot "$rootfs" /opt/pa/bin/perf_analyzer --version >/dev/null 2>&1 || \
  chroot "$rootfs" test -x /opt/pa/bin/perf_analyzer
tar -C "$rootfs" -c . | podman import --change 'ENV PATH=/opt/pa/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["/bin/bash"]' - "$image" >/dev/null
echo "$image"
