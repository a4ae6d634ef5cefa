"""Docker's and NVIDIA's apt repositories, stood in for on the rehearsal network (the upstream mode).

A Chameleon node installs Docker from Docker's apt repository and the NVIDIA container toolkit from
NVIDIA's (``docker_source: upstream``). Rehearsal nodes reach neither, so by default they take
Debian's ``docker.io`` (``docker_source: distro``). The upstream mode rehearses the real path instead:
a local apt repository, GPG-signed with a key made for it, in each upstream's layout, serves packages
of the upstream names built over Debian's own, and the roles' repository, refresh and install tasks
run for real against it.

* :func:`build` writes the site into an empty directory:

  - ``linux/debian/``: Docker's layout (``dists/<suite>/{InRelease,Release,Release.gpg}``,
    ``dists/<suite>/stable/binary-<arch>/Packages[.gz]``, the packages under
    ``dists/<suite>/pool/stable/<arch>/``, the key at ``linux/debian/gpg``);
  - ``libnvidia-container/``: NVIDIA's flat layout (suite ``/``: ``stable/deb/<arch>/`` holds the
    Release files, the index and the packages; the key at ``libnvidia-container/gpgkey``).

  The packages are built over Debian's own and claim the versions of a :class:`VersionSet`
  (:data:`TODAY`: what a real node gets from upstream now; :data:`OLDEST`: the oldest the project
  supports). Debian's ``docker.io`` conflicts with ``docker-ce``, its ``docker-cli`` with
  ``docker-ce-cli`` and its ``docker-compose`` installs the file ``docker-compose-plugin`` does, so
  those three are Debian's packages **repacked** under Docker's names (:func:`.debs.repack`: the same files
  and maintainer scripts, the control file renamed, conflicting with the Debian package instead,
  ``docker-ce`` depending on ``containerd.io`` and ``docker-ce-cli`` as Docker's does). In
  ``docker-compose-plugin`` Debian's Compose moves aside and Docker's plugin path holds
  :data:`COMPOSE_WRAPPER`: it answers ``version`` (plain, ``--short``, ``--format json``) and the CLI
  plugin metadata with the claimed version and runs Debian's Compose for everything else. The rest
  are metapackages: ``containerd.io`` over ``containerd``, ``docker-buildx-plugin`` empty (nothing
  here builds through buildx). Debian's .debs come from the node image's apt cache
  (:func:`.debs.debs_from_image`: the versions the distro path installs). ``nvidia-container-toolkit``
  (its four packages, depending on each other as NVIDIA's do) is there at two versions, as NVIDIA's
  repository carries every release: the newest of the set (what an unpinned install takes) and the one
  the node is pinned to (:attr:`VersionSet.toolkit_pinned`, the role's default for ``today``);
  ``nvidia-container-toolkit-base`` ships an ``nvidia-ctk`` whose ``runtime configure --runtime=docker``
  edits ``/etc/docker/daemon.json`` as NVIDIA's does (the ``nvidia`` runtime added, the other keys kept,
  written with four-space indentation and sorted keys), whose ``--version`` answers with the version its
  package claims and whose ``cdi list`` lists the JSON CDI specs' devices (none on these nodes). The
  signing key lives in a temporary GnuPG home removed after signing; only its public half is in the site.
* :func:`serve_system.provision.aptserve.serve` serves a site over HTTP on one address (the podman
  bridge's, so only the rehearsal nodes reach it), recording every path requested.
* :func:`node_vars` are the host variables that point the roles at it.

This module is what the site holds and where; one concern each, the packages are made by :mod:`.debs`
(``dpkg-deb``, from dpkg), indexed by :mod:`.aptindex`, signed by :mod:`.aptsign` (``gpg``, from gnupg)
and served by :mod:`.aptserve`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ServeSystemError
from .aptindex import packages_index, release_text, write_index
from .aptsign import Signer
from .debs import Package, Repack, build_deb, repack

DOCKER_DIR = "linux/debian"
NVIDIA_DIR = "libnvidia-container"

#: what nvidia-ctk writes for ``runtime configure --runtime=docker``
NVIDIA_RUNTIME = {"args": [], "path": "nvidia-container-runtime"}

NVIDIA_CTK = '''#!/usr/bin/python3
"""nvidia-ctk of the serve-system rehearsal repository: `runtime configure --runtime=docker` edits
/etc/docker/daemon.json as NVIDIA's does (the nvidia runtime added, every other key kept, four-space
indentation, sorted keys); `--version` answers as NVIDIA's with the version this package claims; `cdi list`
lists the devices of the CDI specs in /etc/cdi and /var/run/cdi or $NVIDIA_CTK_CDI_SPEC_DIRS (JSON ones;
none on a node without a GPU), their count logged to stderr as NVIDIA's does. Nothing else of NVIDIA's
tool is here."""
import glob
import json
import os
import sys

RUNTIME = @RUNTIME@
VERSION = "@VERSION@"
SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")


def configure(argv):
    path = "/etc/docker/daemon.json"
    for arg in argv:
        if arg.startswith("--config="):
            path = arg.split("=", 1)[1]
    config = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            text = f.read().strip()
        config = json.loads(text) if text else {}
    config.setdefault("runtimes", {})["nvidia"] = RUNTIME
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".nvidia-ctk.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(config, indent=4, sort_keys=True))
    os.replace(tmp, path)
    print("INFO[0000] Wrote updated config to " + path)
    print("INFO[0000] It is recommended that docker daemon be restarted.")
    return 0


def cdi_list():
    devices = []
    dirs = os.environ.get("NVIDIA_CTK_CDI_SPEC_DIRS")  # as NVIDIA's reads it (comma-separated)
    for spec_dir in dirs.split(",") if dirs else SPEC_DIRS:
        for path in sorted(glob.glob(os.path.join(spec_dir, "*.json"))):
            with open(path, encoding="utf-8") as f:
                spec = json.load(f)
            devices += [spec["kind"] + "=" + d["name"] for d in spec.get("devices", [])]
    print("INFO[0000] Found %d CDI devices" % len(devices), file=sys.stderr)
    for device in devices:
        print(device)
    return 0


def main(argv):
    if argv in (["--version"], ["-v"]):
        print("NVIDIA Container Toolkit CLI version " + VERSION)
        print("commit: serve-system-rehearsal")
        return 0
    if argv[:2] == ["cdi", "list"] and len(argv) == 2:
        return cdi_list()
    if argv[:2] == ["runtime", "configure"] and "--runtime=docker" in argv[2:]:
        return configure(argv[2:])
    print("nvidia-ctk (serve-system rehearsal): only `runtime configure --runtime=docker`, `--version` and "
          "`cdi list` are here", file=sys.stderr)
    return 2


sys.exit(main(sys.argv[1:]))
'''.replace("@RUNTIME@", json.dumps(NVIDIA_RUNTIME))


def nvidia_ctk(version: str) -> str:
    """The stand-in ``nvidia-ctk`` of the toolkit package claiming ``version``."""
    return NVIDIA_CTK.replace("@VERSION@", version)


@dataclass(frozen=True)
class VersionSet:
    """The upstream versions the stand-in packages claim (Docker's scheme: ``5:<engine>-1~debian...``)."""

    name: str
    #: docker-ce and docker-ce-cli (Docker ships both at the engine's version)
    docker_ce: str
    containerd_io: str
    docker_buildx_plugin: str
    docker_compose_plugin: str
    #: the newest toolkit in NVIDIA's repository: what an unpinned install (the lab's notebook) takes
    nvidia_container_toolkit: str
    #: whether dockerd keeps its images in containerd's store (Engine 29's fresh installs do)
    containerd_image_store: bool
    #: the toolkit version the node is pinned to (nvidia_container_toolkit_version without NVIDIA's "-1");
    #: empty: the role's default, :data:`ROLE_TOOLKIT_PIN`, left to the role
    nvidia_container_toolkit_pin: str = ""

    @property
    def toolkit_pinned(self) -> str:
        """The toolkit version a node of this set ends up with: its pin, or the role's default."""
        return self.nvidia_container_toolkit_pin or ROLE_TOOLKIT_PIN


#: role nvidia_container_toolkit's default nvidia_container_toolkit_version, without NVIDIA's Debian
#: revision "-1" (tests/unit/test_upstream_repo.py checks they agree): the stand-in NVIDIA repository
#: carries it beside the newest, so the pin is what keeps a node from taking the newest
ROLE_TOOLKIT_PIN = "1.19.0"

#: what a real node gets from Docker's and NVIDIA's repositories today (docs/real-node.md says from
#: which upstream source each number comes); the toolkit pinned to the role's default
TODAY = VersionSet("today", docker_ce="29.8.2", containerd_io="2.1.5", docker_buildx_plugin="0.29.1",
                   docker_compose_plugin="5.5.0", nvidia_container_toolkit="1.20.0",
                   containerd_image_store=True)
#: the oldest the project supports: Debian 13's own engine and Compose (what the stand-in really runs;
#: community.docker's docker_compose_v2 needs Compose >= 2.18.0, the roles check that minimum); the toolkit
#: pinned to 1.14.0 (nvidia_container_toolkit_version set by :func:`node_vars`), its own newest
OLDEST = VersionSet("oldest", docker_ce="26.1.5", containerd_io="1.7.24", docker_buildx_plugin="0.14.1",
                    docker_compose_plugin="2.26.1", nvidia_container_toolkit="1.14.0",
                    containerd_image_store=False, nvidia_container_toolkit_pin="1.14.0")
VERSION_SETS = {v.name: v for v in (TODAY, OLDEST)}

#: where docker-compose-plugin keeps Debian's Compose (Docker's plugin path holds COMPOSE_WRAPPER)
COMPOSE_REAL = "/usr/libexec/serve-system-rehearsal/docker-compose"
COMPOSE_PLUGIN = "usr/libexec/docker/cli-plugins/docker-compose"

COMPOSE_WRAPPER = r"""#!/bin/sh
# docker-compose-plugin of the serve-system rehearsal repository: Compose's version answers (the CLI
# plugin metadata, `version`, `version --short`, `version --format json`, `--version`) give the version
# this package claims; every other command runs Debian's Compose.
claimed="@VERSION@"
real="@REAL@"

answer() {
    short=no
    format=pretty
    while [ $# -gt 0 ]; do
        case "$1" in
            --short) short=yes ;;
            --format=*|-f=*) format="${1#*=}" ;;
            --format|-f) [ $# -ge 2 ] || return 1; format="$2"; shift ;;
            *) return 1 ;;
        esac
        shift
    done
    if [ "$short" = yes ]; then
        printf '%s\n' "$claimed"
    elif [ "$format" = json ]; then
        printf '{"version":"v%s"}\n' "$claimed"
    elif [ "$format" = pretty ] || [ -z "$format" ]; then
        printf 'Docker Compose version v%s\n' "$claimed"
    else
        return 1
    fi
}

if [ $# -eq 1 ] && [ "$1" = docker-cli-plugin-metadata ]; then
    printf '{"SchemaVersion":"0.1.0","Vendor":"Docker Inc.","Version":"v%s",%s}\n' "$claimed" \
        '"ShortDescription":"Docker Compose"'
    exit 0
fi
# run by the docker CLI as its plugin, `compose` comes first
if [ "$1" = compose ]; then skip=1; sub="$2"; else skip=0; sub="$1"; fi
case "$sub" in
    version)
        if (shift $((skip + 1)); answer "$@"); then exit 0; fi ;;
    --version|-v)
        if [ $# -eq $((skip + 1)) ]; then printf 'Docker Compose version v%s\n' "$claimed"; exit 0; fi ;;
esac
exec "$real" "$@"
"""


#: Docker's engine, CLI and Compose plugin: Debian's conflict with Docker's names (or install the
#: same file), so their files are repacked
REPACKS = (
    Repack("docker-ce", "docker.io", "containerd.io, docker-ce-cli", "docker.io",
           "Docker engine (rehearsal stand-in: Debian's docker.io repacked)", "docker_ce"),
    Repack("docker-ce-cli", "docker-cli", "", "docker-cli, podman-docker",
           "Docker CLI (rehearsal stand-in: Debian's docker-cli repacked)", "docker_ce"),
    Repack("docker-compose-plugin", "docker-compose", "", "docker-compose",
           "Docker Compose plugin (rehearsal stand-in: Debian's docker-compose repacked; version "
           "queries answered with the claimed version)", "docker_compose_plugin",
           moves=((COMPOSE_PLUGIN, COMPOSE_REAL.lstrip("/")),), drops=("usr/bin/docker-compose",)),
)
#: the Debian packages :data:`REPACKS` need (from the node image's apt cache)
DEBIAN_SOURCES = tuple(r.source for r in REPACKS)


def _docker_version(suite: str, version: str) -> str:
    return f"{version}-1~debian.13~{suite}"


def compose_wrapper(versions: VersionSet) -> str:
    """The plugin file of ``docker-compose-plugin`` claiming ``versions``' Compose."""
    text = COMPOSE_WRAPPER.replace("@VERSION@", versions.docker_compose_plugin)
    return text.replace("@REAL@", COMPOSE_REAL)


def claimed_version(spec: Repack, suite: str, versions: VersionSet) -> str:
    """The version a repack claims, as Docker versions its packages: ``versions``' field ``spec.claims``."""
    claimed: str = getattr(versions, spec.claims)
    # Docker's engine packages carry epoch 5, its plugins none
    return ("5:" if spec.name.startswith("docker-ce") else "") + _docker_version(suite, claimed)


def repack_files(spec: Repack, versions: VersionSet) -> dict[str, tuple[str, int]]:
    """Files a repack adds to Debian's: the Compose wrapper at Docker's plugin path."""
    if spec.name == "docker-compose-plugin":
        return {COMPOSE_PLUGIN: (compose_wrapper(versions), 0o755)}
    return {}


def docker_metapackages(suite: str, versions: VersionSet = TODAY) -> tuple[Package, ...]:
    """The rest of what the docker role installs from Docker's repository, over Debian's packages."""
    return (
        Package("containerd.io", _docker_version(suite, versions.containerd_io), "containerd",
                "containerd (rehearsal stand-in over Debian's containerd)"),
        Package("docker-buildx-plugin", _docker_version(suite, versions.docker_buildx_plugin), "",
                "Docker buildx plugin (rehearsal stand-in, empty)"),
    )


def toolkit_versions(versions: VersionSet = TODAY) -> tuple[str, ...]:
    """The toolkit versions the stand-in NVIDIA repository carries: the newest and the pinned one (as
    NVIDIA's carries every release), oldest first."""
    return tuple(sorted({versions.nvidia_container_toolkit, versions.toolkit_pinned},
                        key=lambda v: tuple(int(x) for x in v.split("."))))


def toolkit_packages(version: str) -> tuple[Package, ...]:
    """NVIDIA's four toolkit packages at ``version`` (NVIDIA's Debian revision ``-1``), depending on each
    other as NVIDIA's do; ``nvidia-ctk`` is in ``-base``, as in NVIDIA's, the other three are empty."""
    v = f"{version}-1"
    return (
        Package("nvidia-container-toolkit", v,
                f"nvidia-container-toolkit-base (= {v}), libnvidia-container-tools (= {v})",
                "NVIDIA container toolkit (rehearsal stand-in, empty: nvidia-ctk is in -base)"),
        Package("nvidia-container-toolkit-base", v, "python3",
                "NVIDIA container toolkit base (rehearsal stand-in: nvidia-ctk runtime configure, --version "
                "and cdi list only)",
                {"usr/bin/nvidia-ctk": (nvidia_ctk(version), 0o755)}),
        Package("libnvidia-container-tools", v, f"libnvidia-container1 (>= {v})",
                "NVIDIA container library tools (rehearsal stand-in, empty)"),
        Package("libnvidia-container1", v, "", "NVIDIA container library (rehearsal stand-in, empty)"),
    )


def nvidia_packages(versions: VersionSet = TODAY) -> tuple[Package, ...]:
    """The NVIDIA container toolkit of the stand-in repository, at each of :func:`toolkit_versions`."""
    return tuple(p for v in toolkit_versions(versions) for p in toolkit_packages(v))


@dataclass(frozen=True)
class Site:
    """A built stand-in site: its root directory, the suite and architecture it serves."""

    root: Path
    suite: str
    arch: str
    versions: VersionSet = TODAY

    @property
    def docker_index(self) -> str:
        """The path (from the site root) of Docker's package index for the suite."""
        return f"{DOCKER_DIR}/dists/{self.suite}/stable/binary-{self.arch}/Packages"

    @property
    def nvidia_index(self) -> str:
        """The path (from the site root) of NVIDIA's package index."""
        return f"{NVIDIA_DIR}/stable/deb/{self.arch}/Packages"


def build(root: Path, suite: str, debian_debs: dict[str, Path], arch: str = "amd64",
          versions: VersionSet = TODAY) -> Site:
    """Write the signed stand-in site for Debian ``suite`` on ``arch`` into ``root`` (new or empty),
    its packages claiming ``versions``; ``debian_debs``: Debian's .deb of each of
    :data:`DEBIAN_SOURCES` (repacked under Docker's names)."""
    root = Path(root)
    if root.exists() and any(root.iterdir()):
        raise ServeSystemError(f"{root} is not empty: the rehearsal repository is built in a new directory")
    missing = [n for n in DEBIAN_SOURCES if n not in debian_debs]
    if missing:
        raise ServeSystemError(f"the rehearsal repository needs Debian's {', '.join(missing)} .deb to repack")
    root.mkdir(parents=True, exist_ok=True)
    signer = Signer()
    try:
        # Docker: dists/<suite>/{Release,InRelease}, stable/binary-<arch>/Packages, pool under dists/
        docker = root / DOCKER_DIR
        dist = docker / "dists" / suite
        pool = dist / "pool" / "stable" / arch
        debs = [repack(debian_debs[r.source], r, claimed_version(r, suite, versions),
                       repack_files(r, versions), pool) for r in REPACKS]
        debs += [build_deb(p, arch, pool) for p in docker_metapackages(suite, versions)]
        index = write_index(dist / "stable" / f"binary-{arch}", packages_index(debs, docker))
        release = dist / "Release"
        release.write_text(release_text(dist, index, {
            "Origin": "serve-system rehearsal (Docker's layout)", "Label": "Docker CE", "Suite": suite,
            "Codename": suite, "Architectures": arch, "Components": "stable",
            "Description": "Stand-in for Docker's apt repository on rehearsal nodes"}), encoding="utf-8")
        signer.sign_release(release)
        (docker / "gpg").write_text(signer.public, encoding="utf-8")
        # NVIDIA: flat (suite "/"): stable/deb/<arch>/ holds Release, Packages and the packages
        nvidia = root / NVIDIA_DIR
        flat = nvidia / "stable" / "deb" / arch
        debs = [build_deb(p, arch, flat) for p in nvidia_packages(versions)]
        index = write_index(flat, packages_index(debs, flat))
        release = flat / "Release"
        release.write_text(release_text(flat, index, {
            "Origin": "serve-system rehearsal (NVIDIA's layout)", "Label": "libnvidia-container",
            "Architectures": arch,
            "Description": "Stand-in for NVIDIA's container toolkit repository on rehearsal nodes"}),
            encoding="utf-8")
        signer.sign_release(release)
        (nvidia / "gpgkey").write_text(signer.public, encoding="utf-8")
    finally:
        signer.close()
    return Site(root, suite, arch, versions)


def node_vars(base_url: str, arch: str = "amd64", versions: VersionSet = TODAY) -> dict[str, Any]:
    """Host variables that point the docker and nvidia_container_toolkit roles at a served site; where
    ``versions`` is an engine whose fresh installs use containerd's image store, dockerd is told so
    (the stand-in's engine, Debian's, does not by default); where it pins the toolkit to a version other
    than the role's default, the role is told that version."""
    base_url = base_url.rstrip("/")
    # no storage-driver then, as on a fresh install: dockerd would take "overlay2" for the name of a
    # containerd snapshotter (there is none of that name) and fail every build and container
    store = ({"docker_daemon_options": {"features": {"containerd-snapshotter": True}},
              "docker_storage_driver": ""}
             if versions.containerd_image_store else {})
    pin = ({"nvidia_container_toolkit_version": f"{versions.nvidia_container_toolkit_pin}-1"}
           if versions.nvidia_container_toolkit_pin else {})
    return {
        **store,
        **pin,
        "docker_source": "upstream",
        "docker_upstream_repo_url": f"{base_url}/{DOCKER_DIR}",
        "nvidia_container_toolkit_repo_url": f"{base_url}/{NVIDIA_DIR}/stable/deb/{arch}",
        "nvidia_container_toolkit_key_url": f"{base_url}/{NVIDIA_DIR}/gpgkey",
        "nvidia_container_toolkit_install_without_gpu": True,
    }


