"""The real node's path rehearsed (``docker_source: upstream``): Docker's and NVIDIA's apt repositories.

A FRESH rehearsal node of its own (the shared ``rehearsal_cluster`` nodes have Docker from Debian
already), a local GPG-signed apt repository in Docker's and NVIDIA's layouts served on the podman bridge
(serve_system.provision.upstream_repo), and ``site.yml --tags docker,nvidia_container_toolkit`` run
twice: the roles' repository, refresh and install tasks for real, the second run changing nothing.

The node starts as one set up by hand with the lab's notebook and an older Docker guide would be:
``nvidia-container-toolkit.list`` and ``docker.list`` define the same repositories with other keyrings
(apt refuses everything once the roles add theirs, unless those are moved aside).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from serve_system.images import build as images
from serve_system.images.stack import ensure_images
from serve_system.podman import podman
from serve_system.provision import upstream_repo
from serve_system.provision.base import LaunchRequest, finish, quiet
from serve_system.provision.local import LocalProvider
from serve_system.provision.nodes import Node

from .ansible_run import PlaybookResult, run_playbook

TAGS = "docker,nvidia_container_toolkit"
NOTEBOOK_NVIDIA_KEYRING = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
OLD_DOCKER_KEYRING = "/usr/share/keyrings/docker-archive-keyring.gpg"
UPSTREAM_PACKAGES = ("docker-ce", "docker-ce-cli", "containerd.io", "docker-buildx-plugin",
                     "docker-compose-plugin", "nvidia-container-toolkit", "python3-debian")


@dataclass
class Upstream:
    node: Node
    site: upstream_repo.Site
    server: upstream_repo.Server
    first: PlaybookResult
    second: PlaybookResult
    requests_first: list[str]
    requests_second: list[str]

    def exec(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return podman("exec", self.node.name, *argv, check=check, timeout=300)


def _write_on_node(name: str, path: str, data: bytes, mode: str = "0644") -> None:
    """``data`` (binary too: sent as base64) into ``path`` on the node."""
    podman("exec", "-i", name, "sh", "-c",
           f"mkdir -p \"$(dirname {path})\" && base64 -d > {path} && chmod {mode} {path}",
           input=base64.b64encode(data).decode(), timeout=60)


def _as_set_up_by_hand(node: Node, site: upstream_repo.Site, base_url: str) -> None:
    """What the lab's notebook (NVIDIA's guide) and Docker's older guide leave: the repository in a
    .list file, signed-by a keyring of their own (the same key, dearmored, as they write it)."""
    keyring = subprocess.run(["gpg", "--dearmor"], input=(site.root / "linux/debian/gpg").read_bytes(),
                             capture_output=True, check=True).stdout
    _write_on_node(node.name, NOTEBOOK_NVIDIA_KEYRING, keyring)
    _write_on_node(node.name, OLD_DOCKER_KEYRING, keyring)
    _write_on_node(node.name, "/etc/apt/sources.list.d/nvidia-container-toolkit.list", (
        f"deb [signed-by={NOTEBOOK_NVIDIA_KEYRING}] "
        f"{base_url}/{upstream_repo.NVIDIA_DIR}/stable/deb/$(ARCH) /\n"
    ).encode())
    _write_on_node(node.name, "/etc/apt/sources.list.d/docker.list", (
        f"deb [arch=amd64 signed-by={OLD_DOCKER_KEYRING}] {base_url}/{upstream_repo.DOCKER_DIR} "
        f"{site.suite} stable\n").encode())


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upstream]:
    prefix = f"{os.environ.get('SERVE_SYSTEM_IT_PREFIX') or 'it-' + secrets.token_hex(3)}-upstream"
    workdir = tmp_path_factory.mktemp("upstream")
    inventory = workdir / "hosts.yml"
    provider = LocalProvider(prefix, inventory, images=("node",))
    try:
        ensure_images(("node",))
        debs = upstream_repo.debs_from_image(images.NODE.ref, upstream_repo.DEBIAN_SOURCES,
                                             workdir / "debian")
        site = upstream_repo.build(workdir / "site", "trixie", debs)
        (node,) = provider.launch(LaunchRequest((prefix,)), quiet)
        # the bridge has its address once a container runs on it: the server starts after the node
        with upstream_repo.serve(site.root, upstream_repo.bridge_address()) as server:
            node = dataclasses.replace(node, vars={**node.vars, **upstream_repo.node_vars(server.base_url)})
            finish([node], inventory, workdir / "known_hosts", quiet)
            _as_set_up_by_hand(node, site, server.base_url)
            first = run_playbook("site.yml", inventory, "--tags", TAGS)
            requests_first = list(server.requests)
            second = run_playbook("site.yml", inventory, "--tags", TAGS) if first.rc == 0 else first
            yield Upstream(node, site, server, first, second, requests_first,
                           server.requests[len(requests_first):])
    finally:
        if os.environ.get("SERVE_SYSTEM_IT_KEEP") != "1":
            provider.teardown()


def test_first_run_installs_from_the_upstream_repositories(upstream: Upstream) -> None:
    first = upstream.first
    assert first.rc == 0, first.tail(80)
    assert first.recap[upstream.node.name]["changed"] > 0
    status = upstream.exec("dpkg-query", "-W", "-f", "${Package} ${Version} ${Status}\\n", *UPSTREAM_PACKAGES)
    rows = {line.split()[0]: line for line in status.stdout.splitlines()}
    assert set(rows) == set(UPSTREAM_PACKAGES), status.stdout
    assert all(r.endswith("install ok installed") for r in rows.values()), status.stdout
    assert "~debian.13~trixie" in rows["docker-ce"]  # Docker's package, not Debian's docker.io
    debian_engine = upstream.exec("dpkg-query", "-W", "-f", "${Status}", "docker.io", check=False).stdout
    assert "install ok installed" not in debian_engine
    # the engine runs and Compose v2 answers as the plugin
    assert upstream.exec("systemctl", "is-active", "docker").stdout.strip() == "active"
    assert upstream.exec("docker", "compose", "version", "--short").stdout.strip().startswith("2.")


def test_each_repository_added_signed_by_its_fetched_key_and_its_index_fetched(upstream: Upstream) -> None:
    req = upstream.requests_first
    # the keys fetched where the roles fetch the real ones (Docker: <repo>/gpg, NVIDIA: gpgkey)
    assert f"/{upstream_repo.DOCKER_DIR}/gpg" in req and f"/{upstream_repo.NVIDIA_DIR}/gpgkey" in req
    # the signed Release files and both package indexes were fetched (the refresh after adding
    # each repository: a refresh bound to cache_valid_time never asks for them)
    assert f"/{upstream_repo.DOCKER_DIR}/dists/trixie/InRelease" in req
    assert any(r.startswith("/" + upstream.site.docker_index) for r in req), req
    assert any(r.startswith("/" + upstream.site.nvidia_index) for r in req), req
    sources = upstream.exec("cat", "/etc/apt/sources.list.d/docker.sources",
                            "/etc/apt/sources.list.d/nvidia-container-toolkit.sources").stdout
    assert "Signed-By: /etc/apt/keyrings/docker.asc" in sources
    assert "Signed-By: /etc/apt/keyrings/nvidia-container-toolkit.asc" in sources
    # apt verifies the repositories with those keys: an update now is clean
    update = upstream.exec("apt-get", "update", check=False)
    assert update.returncode == 0, update.stdout + update.stderr
    assert "Conflicting values" not in update.stderr and "NO_PUBKEY" not in update.stderr


def test_definitions_with_another_keyring_were_moved_aside(upstream: Upstream) -> None:
    listing = upstream.exec("ls", "/etc/apt/sources.list.d").stdout.split()
    assert "nvidia-container-toolkit.list" not in listing and "docker.list" not in listing
    assert {"nvidia-container-toolkit.list.disabled", "docker.list.disabled"} <= set(listing), listing
    kept = upstream.exec("cat", "/etc/apt/sources.list.d/nvidia-container-toolkit.list.disabled").stdout
    assert NOTEBOOK_NVIDIA_KEYRING in kept  # moved, not edited
    flat = upstream.first.flat.replace("''", "'")  # the yaml callback doubles quotes in quoted strings
    nvidia = upstream_repo.node_vars(upstream.server.base_url)["nvidia_container_toolkit_repo_url"]
    assert (f"/etc/apt/sources.list.d/nvidia-container-toolkit.list defined {nvidia} already "
            "(another keyring makes apt refuse everything): moved to "
            "/etc/apt/sources.list.d/nvidia-container-toolkit.list.disabled") in flat
    assert (f"/etc/apt/sources.list.d/docker.list defined {upstream.server.base_url}/{upstream_repo.DOCKER_DIR} "
            "already") in flat


def test_nvidia_branch_runs_its_install_without_a_gpu_and_says_what_it_skips(upstream: Upstream) -> None:
    assert (f"{upstream.node.name}: no NVIDIA GPU found (PCI vendor 10de, class 03xx): installing the NVIDIA "
            "container toolkit anyway (nvidia_container_toolkit_install_without_gpu); the driver check "
            "(nvidia-smi) and the GPU container check are skipped") in upstream.first.flat
    daemon = json.loads(upstream.exec("cat", "/etc/docker/daemon.json").stdout)
    assert daemon["runtimes"]["nvidia"] == upstream_repo.NVIDIA_RUNTIME  # nvidia-ctk's edit
    assert daemon["exec-opts"] == ["native.cgroupdriver=cgroupfs"] and daemon["storage-driver"] == "overlay2"
    info = upstream.exec("docker", "info", "--format", "{{json .Runtimes}}")
    assert "nvidia" in json.loads(info.stdout)  # dockerd was restarted with it


def test_second_run_changes_nothing(upstream: Upstream) -> None:
    second = upstream.second
    assert second.rc == 0, second.tail(80)
    assert second.recap[upstream.node.name]["changed"] == 0, second.tail(120)
    # no refresh: the repositories are unchanged and every package is there (only the keys are
    # fetched again, to compare them with the installed ones)
    assert upstream.requests_second, "the second run fetched nothing: did it reach the repository?"
    assert not [r for r in upstream.requests_second if "Release" in r or "/Packages" in r], \
        upstream.requests_second
