"""The real node's path rehearsed (``docker_source: upstream``) at two upstream version sets.

Two FRESH rehearsal nodes of their own (the shared ``rehearsal_cluster`` nodes have Docker from Debian
already), one per :class:`serve_system.provision.upstream_repo.VersionSet`: ``oldest`` (the oldest the
project supports) and ``today`` (Compose 5.5.0, Engine 29, containerd's image store). Each is pointed
at its own local GPG-signed apt repository in Docker's and NVIDIA's layouts, served on the podman
bridge and claiming that set's versions; ``site.yml --tags docker,nvidia_container_toolkit`` runs on
both at once, twice: the roles' repository, refresh and install tasks for real, the second run
changing nothing.

Then, on the ``today`` node, as a real node does next: an image built through serve_stack's build task
file (``tests/integration/build_on_node/build.yml``) from a base loaded on the node, with containerd's
image store on; twice, the second building nothing. Last, the lab notebook's NVIDIA list added after
those runs (the reverse order) and the roles run again.

Each node starts as one set up by hand with the lab's notebook and an older Docker guide would be:
``nvidia-container-toolkit.list`` and ``docker.list`` define the same repositories with other keyrings
(apt refuses everything once the roles add theirs, unless those are moved aside).
"""

from __future__ import annotations

import base64
import dataclasses
import importlib.util
import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from serve_system import gpuroute
from serve_system.images import build as images
from serve_system.images.stack import ensure_images
from serve_system.podman import podman, podman_env
from serve_system.provision import aptserve, debs, upstream_repo
from serve_system.provision.base import LaunchRequest, finish, quiet
from serve_system.provision.local import LocalProvider
from serve_system.provision.nodes import Node

from .ansible_run import REPO, PlaybookResult, run_playbook
from .prestart import prestartable

pytestmark = pytest.mark.windows("none")

TAGS = "docker,nvidia_container_toolkit"
NOTEBOOK_NVIDIA_KEYRING = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
OLD_DOCKER_KEYRING = "/usr/share/keyrings/docker-archive-keyring.gpg"
UPSTREAM_PACKAGES = ("docker-ce", "docker-ce-cli", "containerd.io", "docker-buildx-plugin",
                     "docker-compose-plugin", *gpuroute.TOOLKIT_PACKAGES, "python3-debian")
SETS = ("oldest", "today")
BUILD_PLAYBOOK = Path(__file__).resolve().parent / "build_on_node" / "build.yml"
#: the tag the recipe's Dockerfile builds FROM: the project's Debian 13 base, loaded on the node
BUILD_BASE = "localhost/serve-system-rehearsal-base:trixie"
BUILD_REPOSITORY = "serve-system-rehearsal-build"


@dataclass
class UpstreamNode:
    node: Node
    versions: upstream_repo.VersionSet
    site: upstream_repo.Site
    server: aptserve.Server
    requests_first: list[str]
    requests_second: list[str]

    def exec(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return podman("exec", self.node.name, *argv, check=check, timeout=300)


@dataclass
class Upstream:
    nodes: dict[str, UpstreamNode]
    inventory: Path
    first: PlaybookResult
    second: PlaybookResult
    build_first: PlaybookResult
    build_second: PlaybookResult


def _write_on_node(name: str, path: str, data: bytes, mode: str = "0644") -> None:
    """``data`` (binary too: sent as base64) into ``path`` on the node."""
    podman("exec", "-i", name, "sh", "-c",
           f"mkdir -p \"$(dirname {path})\" && base64 -d > {path} && chmod {mode} {path}",
           input=base64.b64encode(data).decode(), timeout=60)


def _notebook_nvidia_list(base_url: str, experimental: bool = False) -> bytes:
    """The lab notebook's (NVIDIA's guide's) list: its own keyring, the stable line, the experimental
    line commented out as NVIDIA ships it, or enabled."""
    repo = f"{base_url}/{upstream_repo.NVIDIA_DIR}"
    line = f"deb [signed-by={NOTEBOOK_NVIDIA_KEYRING}] {repo}/%s/deb/$(ARCH) /\n"
    return (line % "stable" + ("" if experimental else "#") + line % "experimental").encode()


def _newest_toolkit_debs(site: upstream_repo.Site) -> list[Path]:
    """The four packages of the set's newest toolkit, from the stand-in's flat repository."""
    flat = site.root / upstream_repo.NVIDIA_DIR / "stable" / "deb" / site.arch
    newest = site.versions.nvidia_container_toolkit
    return [flat / f"{p}_{newest}-1_{site.arch}.deb" for p in gpuroute.TOOLKIT_PACKAGES]


def _as_set_up_by_hand(node: Node, site: upstream_repo.Site, base_url: str) -> None:
    """What the lab's notebook (NVIDIA's guide) and Docker's older guide leave: the repository in a
    .list file, signed-by a keyring of their own (the same key, dearmored, as they write it), and the
    newest toolkit installed (the notebook's unpinned `apt install`)."""
    keyring = subprocess.run(["gpg", "--dearmor"], input=(site.root / "linux/debian/gpg").read_bytes(),
                             capture_output=True, check=True).stdout
    _write_on_node(node.name, NOTEBOOK_NVIDIA_KEYRING, keyring)
    _write_on_node(node.name, OLD_DOCKER_KEYRING, keyring)
    _write_on_node(node.name, "/etc/apt/sources.list.d/nvidia-container-toolkit.list",
                   _notebook_nvidia_list(base_url))
    _write_on_node(node.name, "/etc/apt/sources.list.d/docker.list", (
        f"deb [arch=amd64 signed-by={OLD_DOCKER_KEYRING}] {base_url}/{upstream_repo.DOCKER_DIR} "
        f"{site.suite} stable\n").encode())
    debs = _newest_toolkit_debs(site)
    for deb in debs:
        _write_on_node(node.name, f"/tmp/newest-toolkit/{deb.name}", deb.read_bytes())
    podman("exec", node.name, "dpkg", "-i", *(f"/tmp/newest-toolkit/{deb.name}" for deb in debs), timeout=120)


def _load_build_base(node: Node) -> None:
    """The project's Debian 13 base image (what the node image is made from) into the node's Docker,
    tagged as the recipe's FROM: nothing can be pulled on a rehearsal node."""
    ref = images.ensure_base(images.TRIXIE_NODE)
    save = subprocess.Popen(["podman", "save", "--format", "docker-archive", ref], stdout=subprocess.PIPE,
                            env=podman_env())
    try:
        load = subprocess.run(["podman", "exec", "-i", node.name, "docker", "load"], stdin=save.stdout,
                              capture_output=True, text=True, timeout=600, check=False, env=podman_env())
    finally:
        assert save.stdout is not None
        save.stdout.close()
        save.wait(timeout=600)
    assert save.returncode == 0 and load.returncode == 0, load.stdout + load.stderr
    podman("exec", node.name, "docker", "tag", ref, BUILD_BASE, timeout=60)


@prestartable(scope="module")
def upstream(workdir: Path) -> Iterator[Upstream]:
    """Both version sets' nodes, set up by hand, then site.yml twice and the image built on the node
    (set up in the background while other tests run: prestart.py)."""
    prefix = f"{os.environ.get('SERVE_SYSTEM_IT_PREFIX') or 'it-' + secrets.token_hex(3)}-upstream"
    inventory = workdir / "hosts.yml"
    provider = LocalProvider(prefix, inventory, images=("node",))
    names = {which: f"{prefix}-{which}" for which in SETS}
    try:
        ensure_images(("node",))
        debian = debs.debs_from_image(images.NODE.ref, upstream_repo.DEBIAN_SOURCES, workdir / "debian")
        # the two sites are built while the nodes boot
        with ThreadPoolExecutor(max_workers=len(SETS)) as pool:
            building = {which: pool.submit(upstream_repo.build, workdir / f"site-{which}", "trixie", debian,
                                           versions=upstream_repo.VERSION_SETS[which]) for which in SETS}
            launched = {n.name: n for n in provider.launch(LaunchRequest(tuple(names.values())), quiet)}
            sites = {which: future.result() for which, future in building.items()}
        # the bridge has its address once a container runs on it: the servers start after the nodes
        with ExitStack() as serving:
            bridge = aptserve.bridge_address()
            servers = {which: serving.enter_context(aptserve.serve(sites[which].root, bridge))
                       for which in SETS}
            nodes = {}
            for which in SETS:
                node = launched[names[which]]
                pointed = upstream_repo.node_vars(servers[which].base_url,
                                                  versions=upstream_repo.VERSION_SETS[which])
                nodes[which] = dataclasses.replace(node, vars={**node.vars, **pointed})
            finish(list(nodes.values()), inventory, workdir / "known_hosts", quiet)
            for which in SETS:
                _as_set_up_by_hand(nodes[which], sites[which], servers[which].base_url)
            # both nodes in one run: Ansible works on them in parallel
            first = run_playbook("site.yml", inventory, "--tags", TAGS)
            requests_first = {which: list(servers[which].requests) for which in SETS}
            second = run_playbook("site.yml", inventory, "--tags", TAGS) if first.rc == 0 else first
            # the image built on the node, after the upstream install as on a real node
            today = nodes["today"]
            if second.rc == 0:
                _load_build_base(today)
                build_first = run_playbook(str(BUILD_PLAYBOOK), inventory, limit=today.name)
                build_second = (run_playbook(str(BUILD_PLAYBOOK), inventory, limit=today.name)
                                if build_first.rc == 0 else build_first)
            else:
                build_first = build_second = second
            yield Upstream(
                {which: UpstreamNode(nodes[which], upstream_repo.VERSION_SETS[which], sites[which],
                                     servers[which], requests_first[which],
                                     servers[which].requests[len(requests_first[which]):])
                 for which in SETS},
                inventory, first, second, build_first, build_second)
    finally:
        if os.environ.get("SERVE_SYSTEM_IT_KEEP") != "1":
            provider.teardown()


def _recipe_digest(paths: list[str]) -> str:
    """The role's own ``serve_stack_recipe_digest`` filter, loaded from its file."""
    path = REPO / "roles" / "serve_stack" / "filter_plugins" / "serve_stack_images.py"
    spec = importlib.util.spec_from_file_location("serve_stack_images", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    digest: str = module.serve_stack_recipe_digest(paths)
    return digest


def _claimed(n: UpstreamNode) -> dict[str, str]:
    """The version each package of the node's set claims, as Docker and NVIDIA version them."""
    v, suite = n.versions, n.site.suite
    docker = f"-1~debian.13~{suite}"
    return {"docker-ce": f"5:{v.docker_ce}{docker}", "docker-ce-cli": f"5:{v.docker_ce}{docker}",
            "containerd.io": v.containerd_io + docker,
            "docker-buildx-plugin": v.docker_buildx_plugin + docker,
            "docker-compose-plugin": v.docker_compose_plugin + docker,
            **dict.fromkeys(gpuroute.TOOLKIT_PACKAGES, f"{v.toolkit_pinned}-1")}


@pytest.mark.parametrize("which", SETS)
def test_first_run_installs_from_the_upstream_repositories(upstream: Upstream, which: str) -> None:
    first, n = upstream.first, upstream.nodes[which]
    assert first.rc == 0, first.tail(80)
    assert first.recap[n.node.name]["changed"] > 0
    status = n.exec("dpkg-query", "-W", "-f", "${Package} ${Version} ${Status}\\n", *UPSTREAM_PACKAGES)
    rows = {line.split()[0]: line.split() for line in status.stdout.splitlines()}
    assert set(rows) == set(UPSTREAM_PACKAGES), status.stdout
    assert all(r[2:] == ["install", "ok", "installed"] for r in rows.values()), status.stdout
    # the versions the set claims (Docker's packages, not Debian's docker.io)
    assert {name: rows[name][1] for name in _claimed(n)} == _claimed(n), status.stdout
    debian_engine = n.exec("dpkg-query", "-W", "-f", "${Status}", "docker.io", "docker-compose",
                           check=False).stdout
    assert "install ok installed" not in debian_engine
    # the engine runs, and Compose answers as the plugin with the claimed version where the roles and
    # community.docker read it
    assert n.exec("systemctl", "is-active", "docker").stdout.strip() == "active"
    claimed = n.versions.docker_compose_plugin
    assert n.exec("docker", "compose", "version", "--short").stdout.strip() == claimed
    assert n.exec("docker", "compose", "version").stdout.strip() == f"Docker Compose version v{claimed}"
    assert json.loads(n.exec("docker", "compose", "version", "--format", "json").stdout) == {
        "version": f"v{claimed}"}
    plugins = json.loads(n.exec("docker", "info", "--format", "{{json .ClientInfo.Plugins}}").stdout)
    assert [p["Version"] for p in plugins if p["Name"] == "compose"] == [f"v{claimed}"], plugins
    # ... and every other command is Debian's Compose, working
    config = n.exec("sh", "-c", "cd /tmp && printf 'services:\\n  probe:\\n    image: probe\\n' "
                    "> compose.yaml && docker compose config --services")
    assert config.stdout.split() == ["probe"]


@pytest.mark.parametrize("which", SETS)
def test_each_repository_added_signed_by_its_fetched_key_and_its_index_fetched(upstream: Upstream,
                                                                                which: str) -> None:
    n = upstream.nodes[which]
    req = n.requests_first
    # the keys fetched where the roles fetch the real ones (Docker: <repo>/gpg, NVIDIA: gpgkey)
    assert f"/{upstream_repo.DOCKER_DIR}/gpg" in req and f"/{upstream_repo.NVIDIA_DIR}/gpgkey" in req
    # the signed Release files and both package indexes were fetched (the refresh after adding
    # each repository: a refresh bound to cache_valid_time never asks for them)
    assert f"/{upstream_repo.DOCKER_DIR}/dists/trixie/InRelease" in req
    assert any(r.startswith("/" + n.site.docker_index) for r in req), req
    assert any(r.startswith("/" + n.site.nvidia_index) for r in req), req
    sources = n.exec("cat", "/etc/apt/sources.list.d/docker.sources",
                     "/etc/apt/sources.list.d/nvidia-container-toolkit.sources").stdout
    assert "Signed-By: /etc/apt/keyrings/docker.asc" in sources
    assert "Signed-By: /etc/apt/keyrings/nvidia-container-toolkit.asc" in sources
    # apt verifies the repositories with those keys: an update now is clean
    update = n.exec("apt-get", "update", check=False)
    assert update.returncode == 0, update.stdout + update.stderr
    assert "Conflicting values" not in update.stderr and "NO_PUBKEY" not in update.stderr


@pytest.mark.parametrize("which", SETS)
def test_definitions_with_another_keyring_were_moved_aside(upstream: Upstream, which: str) -> None:
    n = upstream.nodes[which]
    listing = n.exec("ls", "/etc/apt/sources.list.d").stdout.split()
    assert "nvidia-container-toolkit.list" not in listing and "docker.list" not in listing
    assert {"nvidia-container-toolkit.list.disabled", "docker.list.disabled"} <= set(listing), listing
    kept = n.exec("cat", "/etc/apt/sources.list.d/nvidia-container-toolkit.list.disabled").stdout
    assert NOTEBOOK_NVIDIA_KEYRING in kept  # moved, not edited
    flat = upstream.first.flat.replace("''", "'")  # the yaml callback doubles quotes in quoted strings
    nvidia = upstream_repo.node_vars(n.server.base_url)["nvidia_container_toolkit_repo_url"]
    assert (f"/etc/apt/sources.list.d/nvidia-container-toolkit.list defined {nvidia} already "
            "(another keyring makes apt refuse everything): moved to "
            "/etc/apt/sources.list.d/nvidia-container-toolkit.list.disabled") in flat
    docker = f"{n.server.base_url}/{upstream_repo.DOCKER_DIR}"
    assert f"/etc/apt/sources.list.d/docker.list defined {docker} already" in flat


@pytest.mark.parametrize("which", SETS)
def test_nvidia_branch_runs_its_install_without_a_gpu_and_says_what_it_skips(upstream: Upstream,
                                                                             which: str) -> None:
    n = upstream.nodes[which]
    assert (f"{n.node.name}: no NVIDIA GPU found (PCI vendor 10de, class 03xx): installing the NVIDIA "
            "container toolkit anyway (nvidia_container_toolkit_install_without_gpu); the driver check "
            "(nvidia-smi) and the GPU container check are skipped") in upstream.first.flat
    daemon = json.loads(n.exec("cat", "/etc/docker/daemon.json").stdout)
    assert daemon["runtimes"]["nvidia"] == upstream_repo.NVIDIA_RUNTIME  # nvidia-ctk's edit
    assert daemon["exec-opts"] == ["native.cgroupdriver=cgroupfs"]
    # the graph driver on a volume; with containerd's store, containerd's default snapshotter
    assert daemon.get("storage-driver") == (None if n.versions.containerd_image_store else "overlay2")
    info = n.exec("docker", "info", "--format", "{{json .Runtimes}}")
    assert "nvidia" in json.loads(info.stdout)  # dockerd was restarted with it


@pytest.mark.parametrize("which", SETS)
def test_toolkit_pinned_over_the_newest_installed_by_hand(upstream: Upstream, which: str) -> None:
    """The node had the newest toolkit (the notebook's unpinned install); the role's pin takes it to the
    pinned version (today: 1.19.0 over 1.20.0, a downgrade), fetched from NVIDIA's repository."""
    n = upstream.nodes[which]
    pinned = f"{n.versions.toolkit_pinned}-1"
    prefs = n.exec("cat", gpuroute.PREFERENCES_FILE).stdout
    repo = upstream_repo.node_vars(n.server.base_url)["nvidia_container_toolkit_repo_url"]
    assert prefs == gpuroute.preferences(["nvidia-container-toolkit"], pinned, repo)
    policy = n.exec("apt-cache", "policy", *gpuroute.TOOLKIT_PACKAGES).stdout
    assert policy.count(f"Candidate: {pinned}") == 4 and policy.count(f"Installed: {pinned}") == 4, policy
    assert gpuroute.policy_problem(policy, gpuroute.TOOLKIT_PACKAGES, pinned, repo, n.node.name) == ""
    flat = n.site.nvidia_index.rsplit("/", 1)[0]
    debs = {f"/{flat}/{p}_{pinned}_amd64.deb" for p in gpuroute.TOOLKIT_PACKAGES}
    if n.versions.nvidia_container_toolkit != n.versions.toolkit_pinned:
        assert debs <= set(n.requests_first), n.requests_first  # downloaded: the newest went back to the pin
    else:
        assert not debs & set(n.requests_first)  # installed by hand at the pinned version already


@pytest.mark.parametrize("which", SETS)
def test_gpu_route_recorded_and_shown(upstream: Upstream, which: str) -> None:
    n = upstream.nodes[which]
    pinned = n.versions.toolkit_pinned
    facts = json.loads(n.exec("cat", "/opt/serve-system/nvidia-container-toolkit.json").stdout)
    assert facts["nvidia_ctk_version"] == pinned and facts["pinned_version"] == f"{pinned}-1"
    assert facts["packages"] == dict.fromkeys(sorted(gpuroute.TOOLKIT_PACKAGES), f"{pinned}-1")
    assert facts["cdi_devices"] == []  # no GPU, no CDI spec
    engine = n.exec("docker", "version", "--format", "{{.Server.Version}}").stdout.strip()
    assert facts["docker"]["server_version"] == engine and "nvidia" in facts["docker"]["runtimes"]
    assert gpuroute.route_line(n.node.name, facts) in upstream.first.flat


@pytest.mark.parametrize("which", SETS)
def test_second_run_changes_nothing(upstream: Upstream, which: str) -> None:
    second, n = upstream.second, upstream.nodes[which]
    assert second.rc == 0, second.tail(80)
    assert second.recap[n.node.name]["changed"] == 0, second.tail(120)
    # no refresh: the repositories are unchanged and every package is there (only the keys are
    # fetched again, to compare them with the installed ones)
    assert n.requests_second, "the second run fetched nothing: did it reach the repository?"
    assert not [r for r in n.requests_second if "Release" in r or "/Packages" in r], n.requests_second


def test_image_store_is_containerds_where_the_engine_defaults_to_it(upstream: Upstream) -> None:
    for which in SETS:
        n = upstream.nodes[which]
        driver = n.exec("docker", "info", "--format", "{{json .DriverStatus}}").stdout
        # Docker reports containerd's snapshotter as the driver status "driver-type"
        uses_containerd = "io.containerd.snapshotter.v1" in driver
        assert uses_containerd == n.versions.containerd_image_store, (which, driver)


def test_image_built_on_the_node_through_the_roles_build_task_file(upstream: Upstream) -> None:
    build, n = upstream.build_first, upstream.nodes["today"]
    assert build.rc == 0, build.tail(80)
    assert "TASK [serve_stack : Build image serve-system-rehearsal-build:" in build.stdout
    assert build.recap[n.node.name]["changed"] > 0
    tag = _recipe_digest([str(BUILD_PLAYBOOK.parent / "recipe"),
                          str(REPO / "model_repository" / "requirements.txt")])
    listed = n.exec("docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", BUILD_REPOSITORY).stdout
    assert listed.split() == [f"{BUILD_REPOSITORY}:{tag}"]
    # in containerd's store: containerd lists it in Docker's namespace
    in_containerd = n.exec("ctr", "--namespace", "moby", "images", "list", "--quiet").stdout.split()
    assert f"docker.io/library/{BUILD_REPOSITORY}:{tag}" in in_containerd, in_containerd
    # the build-time import check ran in the image: its layer history holds the RUN
    history = n.exec("docker", "history", "--no-trunc", "--format", "{{.CreatedBy}}",
                     f"{BUILD_REPOSITORY}:{tag}").stdout
    assert "import serve_system_probe" in history
    # and what it imported works in a container of the image
    run = n.exec("docker", "run", "--rm", "--network", "none", f"{BUILD_REPOSITORY}:{tag}", "python3", "-c",
                 "import serve_system_probe; "
                 "serve_system_probe.check('/opt/serve-system/models-requirements.txt'); print('ok')",
                 check=False)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


def test_second_build_run_builds_nothing(upstream: Upstream) -> None:
    second, n = upstream.build_second, upstream.nodes["today"]
    assert second.rc == 0, second.tail(80)
    assert second.recap[n.node.name]["changed"] == 0, second.tail(80)


def test_notebook_list_added_after_the_roles_ran(upstream: Upstream) -> None:
    """The reverse order: the node has the roles' NVIDIA source already, and the lab notebook's list
    (its own keyring; NVIDIA's experimental line enabled too) is added afterwards."""
    n = upstream.nodes["today"]
    _write_on_node(n.node.name, "/etc/apt/sources.list.d/nvidia-container-toolkit.list",
                   _notebook_nvidia_list(n.server.base_url, experimental=True))
    third = run_playbook("site.yml", upstream.inventory, "--tags", TAGS, limit=n.node.name)
    assert third.rc == 0, third.tail(80)
    assert "nvidia-container-toolkit.list" not in n.exec("ls", "/etc/apt/sources.list.d").stdout.split()
    update = n.exec("apt-get", "update", check=False)
    assert update.returncode == 0, update.stdout + update.stderr
    assert "Conflicting values" not in update.stderr
