"""The rehearsal's stand-in for Docker's and NVIDIA's apt repositories (serve_system.provision.upstream_repo
with its debs, aptindex, aptsign and aptserve): layouts, signatures checked with gpgv, indexes that match
the packages, nvidia-ctk's daemon.json edit, the HTTP server."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from serve_system.errors import ServeSystemError
from serve_system.gpuroute import TOOLKIT_PACKAGES
from serve_system.provision.aptserve import serve
from serve_system.provision.upstream_repo import (
    COMPOSE_REAL,
    NVIDIA_RUNTIME,
    OLDEST,
    ROLE_TOOLKIT_PIN,
    TODAY,
    Site,
    build,
    node_vars,
)

REPO = Path(__file__).resolve().parents[2]


def _debian_deb(out: Path, name: str, conflicts: str) -> Path:
    """A small package shaped like Debian's ``name`` (control fields, a file, a postinst)."""
    root = out / name
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {name}\nSource: docker.io (26.1.5+dfsg1-9)\nVersion: 26.1.5+dfsg1-9+deb13u1+b1\n"
        "Architecture: amd64\nMaintainer: Debian Go Packaging Team <team+pkg-go@tracker.debian.org>\n"
        "Depends: libc6 (>= 2.34), containerd (>= 1.4~)\nRecommends: git\n"
        f"Conflicts: {conflicts}\nSection: admin\nPriority: optional\n"
        f"Description: {name} of Debian\n more lines\n .\n of description\n")
    (root / "DEBIAN" / "postinst").write_text("#!/bin/sh\nset -e\nexit 0\n")
    (root / "DEBIAN" / "postinst").chmod(0o755)
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / f"{name}-binary").write_text("#!/bin/sh\necho binary\n")
    deb = out / f"{name}_26.1.5+dfsg1-9+deb13u1+b1_amd64.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(root), str(deb)], check=True,
                   capture_output=True)
    return deb


def _debian_compose_deb(out: Path) -> Path:
    """A package laid out as Debian's docker-compose: the plugin binary at Docker's CLI plugin path
    (here a script printing its arguments), a /usr/bin link to it."""
    root = out / "docker-compose"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        "Package: docker-compose\nVersion: 2.26.1-4\nArchitecture: amd64\n"
        "Maintainer: Debian Go Packaging Team <team+pkg-go@tracker.debian.org>\nDepends: libc6 (>= 2.34)\n"
        "Recommends: docker-cli\nSection: admin\nPriority: optional\nDescription: compose of Debian\n")
    plugin = root / "usr" / "libexec" / "docker" / "cli-plugins" / "docker-compose"
    plugin.parent.mkdir(parents=True)
    plugin.write_text('#!/bin/sh\necho "debian compose: $*"\n')
    plugin.chmod(0o755)
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "docker-compose").symlink_to("../libexec/docker/cli-plugins/docker-compose")
    deb = out / "docker-compose_2.26.1-4_amd64.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(root), str(deb)], check=True,
                   capture_output=True)
    return deb


@pytest.fixture(scope="module")
def debian_debs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("debian")
    return {"docker.io": _debian_deb(out, "docker.io", "docker-ce, docker-ce-rootless-extras"),
            "docker-cli": _debian_deb(out, "docker-cli", "docker-ce-cli, podman-docker"),
            "docker-compose": _debian_compose_deb(out)}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, debian_debs: dict[str, Path]) -> Site:
    return build(tmp_path_factory.mktemp("repo") / "site", "trixie", debian_debs)


def _fields(deb: Path) -> dict[str, str]:
    text = subprocess.run(["dpkg-deb", "--field", str(deb)], capture_output=True, text=True,
                          check=True).stdout
    return dict(re.findall(r"^(\S+): (.*)$", text, re.MULTILINE))


def test_dockers_engine_and_cli_are_debians_repacked_under_dockers_names(site: Site, tmp_path: Path) -> None:
    pool = site.root / DOCKER_DIST / "pool" / "stable" / "amd64"
    ce = _fields(next(pool.glob("docker-ce_*.deb")))
    assert ce["Package"] == "docker-ce" and ce["Version"] == f"5:{TODAY.docker_ce}-1~debian.13~trixie"
    assert ce["Depends"] == "libc6 (>= 2.34), containerd (>= 1.4~), containerd.io, docker-ce-cli"
    assert ce["Conflicts"] == "docker.io" and "Recommends" not in ce and "Source" not in ce
    cli = _fields(next(pool.glob("docker-ce-cli_*.deb")))
    assert cli["Package"] == "docker-ce-cli" and cli["Conflicts"] == "docker-cli, podman-docker"
    # the same files and maintainer scripts
    subprocess.run(["dpkg-deb", "-R", str(next(pool.glob("docker-ce_*.deb"))), str(tmp_path / "ce")],
                   check=True)
    assert (tmp_path / "ce" / "usr" / "bin" / "docker.io-binary").read_text() == "#!/bin/sh\necho binary\n"
    assert (tmp_path / "ce" / "DEBIAN" / "postinst").stat().st_mode & 0o111


def _versions(root: Path) -> dict[str, str]:
    """{package: version} of Docker's packages, {package: versions, oldest first} of NVIDIA's."""
    pool = root / DOCKER_DIST / "pool" / "stable" / "amd64"
    flat = root / NVIDIA_FLAT
    out = {f["Package"]: f["Version"] for f in map(_fields, pool.glob("*.deb"))}
    for f in sorted(map(_fields, flat.glob("*.deb")), key=lambda f: f["Version"]):
        out[f["Package"]] = (out.get(f["Package"], "") + " " + f["Version"]).strip()
    return out


def test_packages_claim_the_version_set(site: Site, tmp_path: Path, debian_debs: dict[str, Path]) -> None:
    docker = "-1~debian.13~trixie"
    assert site.versions is TODAY
    # NVIDIA's repository carries the newest toolkit (1.20.0) and the role's pin (1.19.0), as NVIDIA's
    # carries every release: without the pin a node would take the newest
    assert _versions(site.root) == {
        "docker-ce": f"5:29.8.2{docker}", "docker-ce-cli": f"5:29.8.2{docker}",
        "containerd.io": f"2.1.5{docker}", "docker-buildx-plugin": f"0.29.1{docker}",
        "docker-compose-plugin": f"5.5.0{docker}",
        **dict.fromkeys(TOOLKIT_PACKAGES, "1.19.0-1 1.20.0-1")}
    assert TODAY.toolkit_pinned == "1.19.0"
    oldest = build(tmp_path / "oldest", "trixie", debian_debs, versions=OLDEST)
    assert oldest.versions is OLDEST
    assert _versions(oldest.root) == {
        "docker-ce": f"5:26.1.5{docker}", "docker-ce-cli": f"5:26.1.5{docker}",
        "containerd.io": f"1.7.24{docker}", "docker-buildx-plugin": f"0.14.1{docker}",
        "docker-compose-plugin": f"2.26.1{docker}", **dict.fromkeys(TOOLKIT_PACKAGES, "1.14.0-1")}
    assert OLDEST.toolkit_pinned == "1.14.0"


def test_todays_pin_is_the_roles_default() -> None:
    role = REPO / "roles" / "nvidia_container_toolkit"
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text())
    assert defaults["nvidia_container_toolkit_version"] == f"{ROLE_TOOLKIT_PIN}-1"
    assert TODAY.nvidia_container_toolkit_pin == ""  # the role's default is what the today node runs


def _compose_plugin(site: Site, tmp_path: Path) -> Path:
    """docker-compose-plugin unpacked into ``tmp_path/x``; its wrapper pointed at the unpacked
    Debian Compose."""
    deb = next((site.root / DOCKER_DIST / "pool" / "stable" / "amd64").glob("docker-compose-plugin_*.deb"))
    fields = _fields(deb)
    assert fields["Conflicts"] == "docker-compose" and fields["Replaces"] == "docker-compose"
    assert "Recommends" not in fields
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path / "x")], check=True)
    x = tmp_path / "x"
    assert not (x / "usr" / "bin" / "docker-compose").exists()  # Docker's package has no /usr/bin link
    plugin = x / "usr" / "libexec" / "docker" / "cli-plugins" / "docker-compose"
    assert plugin.stat().st_mode & 0o111 and (x / COMPOSE_REAL.lstrip("/")).stat().st_mode & 0o111
    plugin.write_text(plugin.read_text().replace(COMPOSE_REAL, str(x / COMPOSE_REAL.lstrip("/"))))
    return plugin


@pytest.mark.parametrize(("argv", "out"), [
    (["docker-cli-plugin-metadata"],
     ('{"SchemaVersion":"0.1.0","Vendor":"Docker Inc.","Version":"v5.5.0",'
      '"ShortDescription":"Docker Compose"}')),
    (["compose", "version"], "Docker Compose version v5.5.0"),
    (["compose", "version", "--short"], "5.5.0"),
    (["compose", "version", "--format", "json"], '{"version":"v5.5.0"}'),
    (["compose", "version", "--format=json", "--short"], "5.5.0"),
    (["version", "-f", "json"], '{"version":"v5.5.0"}'),
    (["compose", "--version"], "Docker Compose version v5.5.0"),
    (["-v"], "Docker Compose version v5.5.0"),
    # everything else: Debian's Compose, with the arguments as given
    (["compose", "up", "-d"], "debian compose: compose up -d"),
    (["compose", "version", "--format", "{{.}}"], "debian compose: compose version --format {{.}}"),
    (["compose", "ps", "--format", "json"], "debian compose: compose ps --format json"),
    (["compose", "--version", "extra"], "debian compose: compose --version extra"),
])
def test_compose_plugin_answers_version_queries_with_the_claimed_version(
        site: Site, tmp_path: Path, argv: list[str], out: str) -> None:
    plugin = _compose_plugin(site, tmp_path)
    run = subprocess.run([str(plugin), *argv], capture_output=True, text=True, check=False)
    assert (run.returncode, run.stdout) == (0, out + "\n"), run.stderr


def test_build_needs_debians_packages(tmp_path: Path, debian_debs: dict[str, Path]) -> None:
    with pytest.raises(ServeSystemError, match="needs Debian's docker-cli .deb"):
        build(tmp_path / "site", "trixie", {"docker.io": debian_debs["docker.io"],
                                            "docker-compose": debian_debs["docker-compose"]})
    with pytest.raises(ServeSystemError, match="is package 'docker.io', not docker-cli"):
        build(tmp_path / "site2", "trixie", {**debian_debs, "docker-cli": debian_debs["docker.io"]})


def _gpgv(tmp_path: Path, key_armored: Path, *files: Path) -> subprocess.CompletedProcess[str]:
    keyring = tmp_path / f"{key_armored.name}.gpg"
    subprocess.run(["gpg", "--batch", "--yes", "--dearmor", "--output", str(keyring), str(key_armored)],
                   check=True, capture_output=True)
    return subprocess.run(["gpgv", "--keyring", str(keyring), *map(str, files)], capture_output=True,
                          text=True, check=False)


def _release_sha256(release: Path) -> dict[str, tuple[int, str]]:
    text = release.read_text()
    block = text.split("SHA256:\n", 1)[1]
    out = {}
    for line in block.splitlines():
        if not line.startswith(" "):
            break
        sha, size, name = line.split()
        out[name] = (int(size), sha)
    return out


DOCKER_DIST = "linux/debian/dists/trixie"
NVIDIA_FLAT = "libnvidia-container/stable/deb/amd64"


@pytest.mark.parametrize(("release_dir", "key"), [(DOCKER_DIST, "linux/debian/gpg"),
                                                  (NVIDIA_FLAT, "libnvidia-container/gpgkey")])
def test_release_files_are_signed_by_the_published_key(site: Site, tmp_path: Path, release_dir: str,
                                                        key: str) -> None:
    d = site.root / release_dir
    inline = _gpgv(tmp_path, site.root / key, d / "InRelease")
    assert inline.returncode == 0, inline.stderr
    detached = _gpgv(tmp_path, site.root / key, d / "Release.gpg", d / "Release")
    assert detached.returncode == 0, detached.stderr
    # a changed Release no longer verifies
    tampered = tmp_path / "Release"
    tampered.write_text((d / "Release").read_text().replace("Date:", "Date: 1"))
    assert _gpgv(tmp_path, site.root / key, d / "Release.gpg", tampered).returncode != 0
    # the clear-signed text is the Release file
    assert (d / "Release").read_text().strip() in (d / "InRelease").read_text()
    # only the public key is published: no private key anywhere in the site
    for f in site.root.rglob("*"):
        if f.is_file() and not f.name.endswith(".deb"):
            assert "PRIVATE KEY" not in f.read_text(errors="replace"), f


@pytest.mark.parametrize(("release_dir", "index"), [(DOCKER_DIST, "stable/binary-amd64/Packages"),
                                                    (NVIDIA_FLAT, "Packages")])
def test_release_hashes_match_the_indexes_and_the_indexes_the_packages(site: Site, release_dir: str,
                                                                        index: str) -> None:
    d = site.root / release_dir
    listed = _release_sha256(d / "Release")
    assert set(listed) == {index, index + ".gz"}
    for name, (size, sha) in listed.items():
        data = (d / name).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (size, sha)
    repo_root = site.root / ("linux/debian" if release_dir == DOCKER_DIST else NVIDIA_FLAT)
    stanzas = [dict(re.findall(r"^(\S+): (.*)$", s, re.MULTILINE))
               for s in (d / index).read_text().split("\n\n") if s.strip()]
    for st in stanzas:
        deb = repo_root / st["Filename"]
        data = deb.read_bytes()
        assert int(st["Size"]) == len(data) and st["SHA256"] == hashlib.sha256(data).hexdigest()
        fields = subprocess.run(["dpkg-deb", "--field", str(deb), "Package"], capture_output=True, text=True,
                                check=True).stdout.strip()
        assert fields == st["Package"]
    names = {st["Package"]: st for st in stanzas}
    if release_dir == DOCKER_DIST:
        assert set(names) == {"docker-ce", "docker-ce-cli", "containerd.io", "docker-buildx-plugin",
                              "docker-compose-plugin"}
        assert all(st["Filename"].startswith("dists/trixie/pool/stable/amd64/") for st in stanzas)
    else:
        assert set(names) == set(TOOLKIT_PACKAGES)
        assert all(st["Filename"].startswith("./") for st in stanzas)
        # as NVIDIA's: the toolkit needs its base and tools at its own version, the tools the library
        toolkit = [st for st in stanzas if st["Package"] == "nvidia-container-toolkit"
                   and st["Version"] == "1.19.0-1"]
        assert toolkit[0]["Depends"] == ("nvidia-container-toolkit-base (= 1.19.0-1), "
                                         "libnvidia-container-tools (= 1.19.0-1)")


def _nvidia_ctk(site: Site, tmp_path: Path, version: str = "1.19.0") -> Path:
    deb = site.root / NVIDIA_FLAT / f"nvidia-container-toolkit-base_{version}-1_amd64.deb"  # as NVIDIA's
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path / "x")], check=True)
    ctk = tmp_path / "x" / "usr" / "bin" / "nvidia-ctk"
    assert ctk.stat().st_mode & 0o111
    return ctk


def test_nvidia_ctk_adds_the_runtime_as_nvidias_does(site: Site, tmp_path: Path) -> None:
    ctk = _nvidia_ctk(site, tmp_path)
    daemon = tmp_path / "daemon.json"
    before = {"storage-driver": "overlay2", "exec-opts": ["native.cgroupdriver=cgroupfs"]}
    daemon.write_text(json.dumps(before))
    run = subprocess.run([str(ctk), "runtime", "configure", "--runtime=docker", f"--config={daemon}"],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    written = daemon.read_text()
    assert json.loads(written) == {**before, "runtimes": {"nvidia": NVIDIA_RUNTIME}}
    assert written == json.dumps(json.loads(written), indent=4, sort_keys=True)  # Go's MarshalIndent layout
    # anything else is refused, and the file is left alone
    other = subprocess.run([str(ctk), "runtime", "configure", "--runtime=containerd", f"--config={daemon}"],
                           capture_output=True, text=True, check=False)
    assert other.returncode == 2 and daemon.read_text() == written


@pytest.mark.parametrize("version", ["1.19.0", "1.20.0"])
def test_nvidia_ctk_says_the_version_its_package_claims(site: Site, tmp_path: Path, version: str) -> None:
    run = subprocess.run([str(_nvidia_ctk(site, tmp_path, version)), "--version"], capture_output=True,
                         text=True, check=True)
    # as NVIDIA's prints it (urfave/cli's version line, then the commit)
    assert run.stdout == f"NVIDIA Container Toolkit CLI version {version}\ncommit: serve-system-rehearsal\n"


def test_nvidia_ctk_lists_the_devices_of_the_cdi_specs(site: Site, tmp_path: Path) -> None:
    ctk = _nvidia_ctk(site, tmp_path)
    specs = tmp_path / "cdi"
    specs.mkdir()
    env = {"NVIDIA_CTK_CDI_SPEC_DIRS": f"{specs},{tmp_path / 'none'}", "PATH": "/usr/bin:/bin"}
    empty = subprocess.run([str(ctk), "cdi", "list"], capture_output=True, text=True, check=True, env=env)
    assert (empty.stdout, empty.stderr) == ("", "INFO[0000] Found 0 CDI devices\n")
    devices = [{"name": "0", "containerEdits": {}}, {"name": "all", "containerEdits": {}}]
    (specs / "nvidia.json").write_text(json.dumps({"cdiVersion": "0.7.0", "kind": "nvidia.com/gpu",
                                                   "devices": devices}))
    two = subprocess.run([str(ctk), "cdi", "list"], capture_output=True, text=True, check=True, env=env)
    assert (two.stdout, two.stderr) == ("nvidia.com/gpu=0\nnvidia.com/gpu=all\n",
                                        "INFO[0000] Found 2 CDI devices\n")


def test_nvidia_ctk_on_a_missing_file_writes_only_the_runtime(site: Site, tmp_path: Path) -> None:
    ctk = _nvidia_ctk(site, tmp_path)
    daemon = tmp_path / "etc" / "docker" / "daemon.json"
    subprocess.run([str(ctk), "runtime", "configure", "--runtime=docker", f"--config={daemon}"], check=True,
                   capture_output=True)
    assert json.loads(daemon.read_text()) == {"runtimes": {"nvidia": NVIDIA_RUNTIME}}


def test_build_refuses_a_directory_that_is_not_empty(tmp_path: Path, debian_debs: dict[str, Path]) -> None:
    (tmp_path / "mine.txt").write_text("keep")
    with pytest.raises(ServeSystemError, match="not empty"):
        build(tmp_path, "trixie", debian_debs)
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]


def test_served_over_http_with_every_request_recorded(site: Site) -> None:
    with serve(site.root, "127.0.0.1") as server:
        with urllib.request.urlopen(f"{server.base_url}/{site.docker_index}", timeout=10) as resp:
            body = resp.read()
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"{server.base_url}/linux/debian/nothing", timeout=10)
        flat_dir = site.nvidia_index.rsplit("/", 1)[0]
        with urllib.request.urlopen(f"{server.base_url}/{flat_dir}/./Packages", timeout=10) as resp:
            flat = resp.read()
    assert body == (site.root / site.docker_index).read_bytes()
    assert flat == (site.root / site.nvidia_index).read_bytes()
    assert server.requests == [f"/{site.docker_index}", "/linux/debian/nothing", f"/{site.nvidia_index}"]


def test_node_vars_point_the_roles_at_the_layouts() -> None:
    v = node_vars("http://10.88.0.1:8080/", versions=OLDEST)
    common = {
        "docker_source": "upstream",
        "docker_upstream_repo_url": "http://10.88.0.1:8080/linux/debian",
        "nvidia_container_toolkit_repo_url": "http://10.88.0.1:8080/libnvidia-container/stable/deb/amd64",
        "nvidia_container_toolkit_key_url": "http://10.88.0.1:8080/libnvidia-container/gpgkey",
        "nvidia_container_toolkit_install_without_gpu": True,
    }
    # the oldest set pins its own toolkit
    assert v == {**common, "nvidia_container_toolkit_version": "1.14.0-1"}
    # today's engine keeps its images in containerd's store: the stand-in's dockerd is told so; its
    # toolkit is the role's default pin
    assert node_vars("http://10.88.0.1:8080/") == {
        **common, "docker_daemon_options": {"features": {"containerd-snapshotter": True}},
        "docker_storage_driver": ""}


def test_serving_on_an_address_not_of_this_host_says_what_to_do(site: Site) -> None:
    wanted = r"cannot serve the rehearsal repository on 192\.0\.2\.1:.*start a rehearsal node first"
    # TEST-NET-1: never an address of this host
    with pytest.raises(ServeSystemError, match=wanted), serve(site.root, "192.0.2.1"):
        pass
