"""The GPU route checked for CUDA (serve_system.gpuroute, roles nvidia_container_toolkit and serve_stack).

* The toolkit's pin, with the real apt: two signed repositories served over HTTP on loopback, NVIDIA's
  (1.19.0 and 1.20.0) and one standing for the CUDA repository (1.20.0 and a newer 1.21.0), the toolkit's
  four packages with NVIDIA's dependencies between them; apt run in a directory of its own (``-o Dir::...``,
  nothing of this machine's apt touched). Without the preferences file apt takes the CUDA repository's
  newest; with it, the pinned version, even as a downgrade.
* The facts: ``nvidia-ctk --version``, ``nvidia-ctk cdi list`` and ``docker info`` as they print them.
* The CUDA check: the probe run by Python with a ``libcuda.so.1`` built here (C, gcc) whose ``cuInit``
  returns what the test asks for, and without any (as in a container the toolkit mounted no driver into);
  the verdict's one line for each CUresult and for a container that did not run. The check container itself
  needs a GPU: not run here (docs/real-node.md).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from serve_system import gpuroute
from serve_system.provision.aptindex import packages_index, release_text, write_index
from serve_system.provision.aptserve import serve
from serve_system.provision.aptsign import Signer
from serve_system.provision.debs import Package, build_deb

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "nvidia_container_toolkit"
PINNED = "1.19.0-1"

needs_apt = pytest.mark.skipif(shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None,
                               reason="needs apt and dpkg-deb")


def _toolkit(version: str, where: str) -> list[Package]:
    """NVIDIA's four packages at ``version``, depending on each other as NVIDIA's do."""
    note = f"rehearsal of the toolkit from {where}"
    return [
        Package("nvidia-container-toolkit", version,
                f"nvidia-container-toolkit-base (= {version}), libnvidia-container-tools (= {version})",
                note),
        Package("nvidia-container-toolkit-base", version, "", note),
        Package("libnvidia-container-tools", version, f"libnvidia-container1 (>= {version})", note),
        Package("libnvidia-container1", version, "", note),
    ]


def _flat_repo(root: Path, versions: list[str], where: str, signer: Signer) -> None:
    """A signed flat repository (suite "/", NVIDIA's and the CUDA repository's layout) of the toolkit."""
    root.mkdir(parents=True)
    debs = [build_deb(p, "amd64", root) for v in versions for p in _toolkit(v, where)]
    index = write_index(root, packages_index(debs, root))
    release = root / "Release"
    release.write_text(release_text(root, index, {"Origin": where, "Label": where, "Architectures": "amd64"}))
    signer.sign_release(release)


@dataclass
class Apt:
    """apt in a directory of its own, with NVIDIA's repository and the stand-in CUDA repository."""

    root: Path
    nvidia: str
    cuda: str

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        user = pwd.getpwuid(os.getuid()).pw_name
        opts = ["-o", f"Dir::Etc={self.root / 'etc'}", "-o", f"Dir::State={self.root / 'state'}",
                "-o", f"Dir::Cache={self.root / 'cache'}", "-o", f"Dir::State::status={self.root / 'status'}",
                "-o", "Dir::Etc::Trusted=/dev/null", "-o", f"Dir::Etc::TrustedParts={self.root / 'none'}",
                "-o", "Debug::NoLocking=1", "-o", f"APT::Sandbox::User={user}",
                "-o", "APT::Architecture=amd64", "-o", "APT::Architectures=amd64"]
        proc = subprocess.run([argv[0], *opts, *argv[1:]], capture_output=True, text=True, check=False,
                              timeout=120)
        if check:
            assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc

    def sources(self, *, cuda_first: bool = True) -> None:
        """The CUDA repository's list and the role's deb822 file (named as the role and the image name
        them: ``cuda-...`` sorts before ``nvidia-...``)."""
        parts = self.root / "etc" / "sources.list.d"
        for f in parts.iterdir():
            f.unlink()
        key = self.root / "key.asc"
        (parts / ("cuda-debian13-x86_64.list" if cuda_first else "zz-cuda.list")).write_text(
            f"deb [signed-by={key}] {self.cuda}/ /\n")
        (parts / "nvidia-container-toolkit.sources").write_text(
            f"Types: deb\nURIs: {self.nvidia}\nSuites: /\nSigned-By: {key}\n")
        self.run("apt-get", "update")

    def prefer(self, text: str | None) -> None:
        pref = self.root / "etc" / "preferences.d" / "nvidia-container-toolkit.pref"
        if text is None:
            pref.unlink(missing_ok=True)
        else:
            pref.write_text(text)

    def installed(self, version: str | None) -> None:
        """dpkg's status file: the four packages installed at ``version`` (None: nothing installed)."""
        stanzas = [] if version is None else [
            f"Package: {p.name}\nStatus: install ok installed\nPriority: optional\nArchitecture: amd64\n"
            f"Version: {version}\nMaintainer: x <x@example.invalid>\nDescription: installed\n"
            + (f"Depends: {p.depends}\n" if p.depends else "")
            for p in _toolkit(version, "installed")]
        (self.root / "status").write_text("\n".join(stanzas))

    def policy(self) -> str:
        return self.run("apt-cache", "policy", *gpuroute.TOOLKIT_PACKAGES).stdout

    def simulate(self, *names: str) -> dict[str, str]:
        """{package: version} apt-get would install or downgrade to (a simulation)."""
        out = self.run("apt-get", "install", "-s", "--allow-downgrades", *names).stdout
        return {line.split()[1]: line.split("(", 1)[1].split()[0]
                for line in out.splitlines() if line.startswith("Inst ")}


@pytest.fixture(scope="module")
def apt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Apt]:
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        pytest.skip("needs apt and dpkg-deb")
    tmp = tmp_path_factory.mktemp("apt")
    signer = Signer()
    try:
        _flat_repo(tmp / "nvidia", ["1.19.0-1", "1.20.0-1"], "nvidia", signer)
        _flat_repo(tmp / "cuda", ["1.20.0-1", "1.21.0-1"], "cuda", signer)
        (tmp / "root" / "key.asc").parent.mkdir()
        (tmp / "root" / "key.asc").write_text(signer.public)
    finally:
        signer.close()
    root = tmp / "root"
    for d in ("etc/sources.list.d", "etc/preferences.d", "state/lists/partial", "cache/archives/partial"):
        (root / d).mkdir(parents=True)
    # two loopback addresses: two hosts to apt, as NVIDIA's and the CUDA repository are
    with serve(tmp / "nvidia", "127.0.0.1") as nvidia, serve(tmp / "cuda", "127.0.0.2") as cuda:
        a = Apt(root, nvidia.base_url, cuda.base_url)
        a.installed(None)
        a.sources()
        yield a


@needs_apt
def test_without_the_pin_apt_takes_the_cuda_repositorys_newest(apt: Apt) -> None:
    apt.prefer(None)
    apt.installed(None)
    assert apt.simulate("nvidia-container-toolkit") == {p: "1.21.0-1" for p in gpuroute.TOOLKIT_PACKAGES}


@needs_apt
def test_the_pin_installs_the_pinned_version_of_every_toolkit_package(apt: Apt) -> None:
    apt.prefer(gpuroute.preferences(["nvidia-container-toolkit"], PINNED, apt.nvidia))
    apt.installed(None)
    assert apt.simulate("nvidia-container-toolkit") == {p: PINNED for p in gpuroute.TOOLKIT_PACKAGES}
    # what the role installs: each of the four as name=version
    names = gpuroute.apt_names(gpuroute.wanted(["nvidia-container-toolkit"], PINNED), PINNED)
    assert apt.simulate(*names) == {p: PINNED for p in gpuroute.TOOLKIT_PACKAGES}
    policy = apt.policy()
    assert policy.count(f"Candidate: {PINNED}") == 4, policy
    # NVIDIA's repository offers it: nothing stops the install
    assert gpuroute.policy_problem(policy, gpuroute.TOOLKIT_PACKAGES, PINNED, apt.nvidia, "node-1") == ""


@needs_apt
def test_the_pin_takes_a_newer_toolkit_installed_by_hand_back(apt: Apt) -> None:
    apt.prefer(gpuroute.preferences(["nvidia-container-toolkit"], PINNED, apt.nvidia))
    apt.installed("1.21.0-1")  # the lab's notebook installs the newest it finds
    try:
        # the toolkit alone would leave libnvidia-container1 at 1.21.0-1 (the tools need it at least at
        # their version) ...
        assert apt.simulate(f"nvidia-container-toolkit={PINNED}") == {
            p: PINNED for p in gpuroute.TOOLKIT_PACKAGES if p != "libnvidia-container1"}
        # ... so the role names all four
        wanted = gpuroute.wanted(["nvidia-container-toolkit"], PINNED)
        assert wanted == list(gpuroute.TOOLKIT_PACKAGES)
        assert apt.simulate(*gpuroute.apt_names(wanted, PINNED)) == dict.fromkeys(gpuroute.TOOLKIT_PACKAGES,
                                                                                   PINNED)
        # an upgrade of the node does not move it away again
        upgrade = apt.run("apt-get", "dist-upgrade", "-s", "--allow-downgrades").stdout
        assert all(PINNED in line for line in upgrade.splitlines() if line.startswith("Inst ")), upgrade
    finally:
        apt.installed(None)


@needs_apt
def test_a_version_nvidias_repository_does_not_offer_is_named_with_those_it_does(apt: Apt) -> None:
    for version, why in [("1.18.2-1", "not anywhere"), ("1.21.0-1", "only in the CUDA repository")]:
        apt.prefer(gpuroute.preferences(["nvidia-container-toolkit"], version, apt.nvidia))
        problem = gpuroute.policy_problem(apt.policy(), ["nvidia-container-toolkit"], version, apt.nvidia,
                                          "node-1")
        assert problem == (
            "node-1: the NVIDIA container toolkit cannot be installed at the pinned version: NVIDIA's "
            f"repository {apt.nvidia} does not offer nvidia-container-toolkit {version} (it offers 1.20.0-1, "
            "1.19.0-1); set nvidia_container_toolkit_version to a version NVIDIA's repository offers "
            "(roles/nvidia_container_toolkit/README.md), or to \"\" for no pin"), why


@needs_apt
def test_a_preferences_file_of_someone_else_that_wins_is_named(apt: Apt) -> None:
    ours = gpuroute.preferences(["nvidia-container-toolkit"], PINNED, apt.nvidia)
    # a file read before ours (apt reads preferences.d in name order; the first record that matches wins)
    other = apt.root / "etc" / "preferences.d" / "00-cuda"
    other.write_text("Package: nvidia-container-toolkit\nPin: version 1.20.0-1\nPin-Priority: 1001\n")
    try:
        apt.prefer(ours)
        problem = gpuroute.policy_problem(apt.policy(), ["nvidia-container-toolkit"], PINNED, apt.nvidia, "n")
        assert f"apt's candidate for nvidia-container-toolkit is 1.20.0-1, not {PINNED}" in problem
        assert gpuroute.PREFERENCES_FILE in problem
    finally:
        other.unlink()


@needs_apt
def test_the_same_version_in_both_comes_from_the_source_listed_first(apt: Apt) -> None:
    """apt_preferences(5): preferences choose the version, not which repository's copy of it is fetched
    (the source listed first). What docs/real-node.md says of a node whose CUDA repository carries the
    pinned version too: the version is decided, its copy may be the CUDA repository's."""
    apt.prefer(gpuroute.preferences(["nvidia-container-toolkit"], "1.20.0-1", apt.nvidia))
    apt.installed(None)
    try:
        for cuda_first, fetched_from in [(True, apt.cuda), (False, apt.nvidia)]:
            apt.sources(cuda_first=cuda_first)
            uris = apt.run("apt-get", "install", "--print-uris", "-qq", "nvidia-container-toolkit").stdout
            urls = [line.split()[0].strip("'") for line in uris.splitlines() if line.startswith("'")]
            assert len(urls) == 4 and all(u.startswith(fetched_from + "/") for u in urls), uris
    finally:
        apt.sources()


def test_preferences_text_and_the_roles_names_agree() -> None:
    text = gpuroute.preferences(["nvidia-container-toolkit", "extra-tool"], PINNED, "https://nvidia.example/r")
    records = [r for r in text.split("\n\n")]
    names = ("nvidia-container-toolkit nvidia-container-toolkit-base libnvidia-container-tools "
             "libnvidia-container1 extra-tool")
    assert [[line for line in r.splitlines() if not line.startswith("#")] for r in records] == [
        [f"Package: {names}", f"Pin: version {PINNED}", "Pin-Priority: 1001"],
        [f"Package: {names}", "Pin: version *", "Pin-Priority: -1"]]
    with pytest.raises(ValueError, match="a Debian version such as 1.19.0-1"):
        gpuroute.preferences([], "", "https://nvidia.example/r")
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    assert tuple(role_vars["__nvidia_container_toolkit_all_packages"]) == gpuroute.TOOLKIT_PACKAGES
    assert role_vars["__nvidia_container_toolkit_preferences"] == gpuroute.PREFERENCES_FILE
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert defaults["nvidia_container_toolkit_version"] == PINNED


def test_without_a_pin_only_the_roles_packages_are_installed_at_any_version() -> None:
    twice = ["nvidia-container-toolkit", "nvidia-container-toolkit"]
    assert gpuroute.wanted(twice, "") == ["nvidia-container-toolkit"]
    assert gpuroute.apt_names(["nvidia-container-toolkit"], "") == ["nvidia-container-toolkit"]
    assert gpuroute.apt_names(["a", "b"], PINNED) == [f"a={PINNED}", f"b={PINNED}"]


def test_unmet_packages_are_those_not_installed_at_the_pinned_version() -> None:
    lines = ["nvidia-container-toolkit 1.20.0-1 install ok installed",
             "libnvidia-container1 1.19.0-1 install ok installed",
             "libnvidia-container-tools 1.19.0-1 deinstall ok config-files"]
    packages = ["nvidia-container-toolkit", "libnvidia-container1", "libnvidia-container-tools",
                "nvidia-container-toolkit-base"]
    assert gpuroute.unmet(lines, packages, PINNED) == [
        "nvidia-container-toolkit", "libnvidia-container-tools", "nvidia-container-toolkit-base"]
    # no pin: installed at any version is enough
    assert gpuroute.unmet(lines, packages, "") == ["libnvidia-container-tools",
                                                   "nvidia-container-toolkit-base"]


#: what NVIDIA's nvidia-ctk prints (urfave/cli's version line, then the commit)
CTK_VERSION = "NVIDIA Container Toolkit CLI version 1.19.0\ncommit: 3f2a8e1c5b7d\n"
#: docker info's JSON (the fields read), as Engine 29.7.2 reported them in
#: NVIDIA/nvidia-container-toolkit#1967
DOCKER_INFO = json.dumps({
    "ServerVersion": "29.7.2", "Runtimes": {"runc": {}, "nvidia": {}, "io.containerd.runc.v2": {}},
    "CDISpecDirs": ["/etc/cdi", "/var/run/cdi"],
    "DiscoveredDevices": [{"Source": "cdi", "ID": "nvidia.com/gpu=0"},
                          {"Source": "cdi", "ID": "nvidia.com/gpu=all"}],
    "Containers": 31})


def test_route_facts_and_their_line() -> None:
    assert gpuroute.ctk_version(CTK_VERSION) == "1.19.0"
    assert gpuroute.ctk_version("") == ""
    facts = gpuroute.route_facts(CTK_VERSION, "nvidia.com/gpu=0\nnvidia.com/gpu=1\nnvidia.com/gpu=all\n",
                                 DOCKER_INFO, PINNED, {"nvidia-container-toolkit": PINNED})
    assert facts == {
        "nvidia_ctk_version": "1.19.0", "pinned_version": PINNED,
        "packages": {"nvidia-container-toolkit": PINNED},
        "cdi_devices": ["nvidia.com/gpu=0", "nvidia.com/gpu=1", "nvidia.com/gpu=all"],
        "docker": {"server_version": "29.7.2", "runtimes": ["io.containerd.runc.v2", "nvidia", "runc"],
                   "cdi_spec_dirs": ["/etc/cdi", "/var/run/cdi"],
                   "discovered_devices": ["cdi: nvidia.com/gpu=0", "cdi: nvidia.com/gpu=all"]}}
    assert gpuroute.route_line("node-1", facts) == (
        "node-1: NVIDIA Container Toolkit 1.19.0 (pinned to 1.19.0-1); CDI devices (nvidia-ctk cdi list): "
        "nvidia.com/gpu=0, nvidia.com/gpu=1, nvidia.com/gpu=all; Docker 29.7.2: runtimes "
        "io.containerd.runc.v2, nvidia, runc, CDI spec dirs /etc/cdi, /var/run/cdi, discovered devices "
        "cdi: nvidia.com/gpu=0, cdi: nvidia.com/gpu=all")
    # an engine before 28.3 reports no discovered devices; no CDI specs, no devices
    engine26 = json.dumps({"ServerVersion": "26.1.5", "Runtimes": {"runc": {}}})
    old = gpuroute.route_facts(CTK_VERSION, "", engine26, "", {})
    assert ("(not pinned); CDI devices (nvidia-ctk cdi list): none; Docker 26.1.5: runtimes runc, CDI spec "
            "dirs none, discovered devices none") in gpuroute.route_line("n", old)


# --- the CUDA check -------------------------------------------------------------------------------------

LIBCUDA_C = r"""
#include <stdlib.h>
/* A libcuda.so.1 for the probe: cuInit returns $FAKE_CUINIT, $FAKE_GPUS GPUs. */
static const char *names[] = {"CUDA_SUCCESS", "CUDA_ERROR_NO_DEVICE", "CUDA_ERROR_UNKNOWN"};
int cuInit(unsigned int flags) { const char *r = getenv("FAKE_CUINIT"); return r ? atoi(r) : 0; }
int cuGetErrorName(int error, const char **name) {
    if (error == 0) { *name = names[0]; return 0; }
    if (error == 100) { *name = names[1]; return 0; }
    if (error == 999) { *name = names[2]; return 0; }
    return 1;
}
int cuDriverGetVersion(int *v) { *v = 12060; return 0; }
int cuDeviceGetCount(int *n) { const char *g = getenv("FAKE_GPUS"); *n = g ? atoi(g) : 2; return 0; }
"""


@pytest.fixture(scope="module")
def libcuda(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to build the probe's libcuda.so.1")
    d = tmp_path_factory.mktemp("libcuda")
    (d / "libcuda.c").write_text(LIBCUDA_C)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(d / "libcuda.so.1"), str(d / "libcuda.c")],
                   check=True)
    return d


def _probe(env: dict[str, str]) -> dict[str, object]:
    """The probe as the check container runs it (``python3 -c``), as docker_container registers it."""
    proc = subprocess.run([sys.executable, "-c", gpuroute.CUDA_PROBE], capture_output=True, text=True,
                          check=True, env={**os.environ, **env}, timeout=60)
    # the Triton image's entrypoint prints its banner first
    return {"container": {"Output": "== Triton Inference Server ==\nNVIDIA Release 24.10\n" + proc.stdout}}


def _verdict(run: dict[str, object], gpus: int = 2) -> dict[str, object]:
    return gpuroute.cuda_verdict(run, "node-1", "serve-system-triton-gpu:24.10-abc", CTK_VERSION, gpus)


ROUTE = ("a container of serve-system-triton-gpu:24.10-abc with the stack's GPU request (driver nvidia, "
         "count all, capabilities gpu; NVIDIA Container Toolkit 1.19.0)")


def test_probe_with_cuda_initializing_is_ok(libcuda: Path) -> None:
    v = _verdict(_probe({"LD_LIBRARY_PATH": str(libcuda), "FAKE_CUINIT": "0", "FAKE_GPUS": "2"}))
    assert v == {"ok": True, "msg": f"node-1: CUDA initializes in {ROUTE}: cuInit 0 CUDA_SUCCESS, 2 GPU(s), "
                                    "driver CUDA 12.6"}


def test_probe_with_cuinit_999_names_the_version_the_result_and_the_fix(libcuda: Path) -> None:
    v = _verdict(_probe({"LD_LIBRARY_PATH": str(libcuda), "FAKE_CUINIT": "999"}))
    assert v["ok"] is False
    msg = str(v["msg"])
    assert "\n" not in msg
    assert msg.startswith(f"node-1: CUDA does not initialize in {ROUTE}: cuInit returned 999 "
                          "CUDA_ERROR_UNKNOWN: ")
    assert "NVIDIA/nvidia-container-toolkit#1967" in msg and "/dev/nvidia-uvm" in msg
    assert ("; fix: regenerate the CDI spec with the device nodes present (sudo nvidia-modprobe -u -c=0 && "
            "sudo nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml") in msg
    assert "nvidia_container_toolkit_version" in msg


def test_probe_with_no_device_and_with_fewer_gpus(libcuda: Path) -> None:
    v = _verdict(_probe({"LD_LIBRARY_PATH": str(libcuda), "FAKE_CUINIT": "100"}))
    assert str(v["msg"]).startswith(f"node-1: CUDA does not initialize in {ROUTE}: cuInit returned 100 "
                                    "CUDA_ERROR_NO_DEVICE: the container got no GPU from the device request; "
                                    "fix: ")
    v = _verdict(_probe({"LD_LIBRARY_PATH": str(libcuda), "FAKE_CUINIT": "0", "FAKE_GPUS": "1"}))
    assert v["ok"] is False
    assert ("cuInit returned 0 CUDA_SUCCESS but the container sees 1 GPU(s) of the 2 the stack "
            "expects") in str(v["msg"])


def test_probe_with_a_result_the_driver_does_not_name(libcuda: Path) -> None:
    v = _verdict(_probe({"LD_LIBRARY_PATH": str(libcuda), "FAKE_CUINIT": "803"}))
    assert "cuInit returned 803 CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: the container's libcuda.so.1 is not the " \
           "node driver's" in str(v["msg"])
    v = _verdict(_probe({"LD_LIBRARY_PATH": str(libcuda), "FAKE_CUINIT": "12345"}))
    assert ("cuInit returned 12345 an unknown CUresult: the driver refused CUDA in the container; "
            "fix: ") in str(v["msg"])


def test_probe_without_the_drivers_library(tmp_path: Path) -> None:
    """No libcuda.so.1 at all, as in a container the toolkit mounted no driver library into."""
    v = _verdict(_probe({"LD_LIBRARY_PATH": str(tmp_path)}))
    assert v["ok"] is False
    assert str(v["msg"]).startswith(f"node-1: CUDA does not initialize in {ROUTE}: libcuda.so.1 could not be "
                                    "loaded (libcuda.so.1: cannot open shared object file")
    assert "NVIDIA_DRIVER_CAPABILITIES compute" in str(v["msg"])


@pytest.mark.parametrize(("error", "fix"), [
    ('Error response from daemon: could not select device driver "nvidia" with capabilities: [[gpu]]',
     "fix: register the nvidia runtime with Docker (sudo nvidia-ctk runtime configure --runtime=docker"),
    ("Error response from daemon: failed to inject CDI devices: unresolvable CDI devices nvidia.com/gpu=all",
     "fix: regenerate the CDI spec with the device nodes present"),
    (("Error connecting: Error while fetching server API version: ('Connection aborted.', "
      "FileNotFoundError(2, 'No such file or directory'))"),
     "fix: start Docker (sudo systemctl start docker"),
    ("Error pulling image: manifest unknown", "fix: run docker run --rm --gpus all IMAGE nvidia-smi"),
])
def test_a_container_that_did_not_run_says_dockers_error_and_the_fix(error: str, fix: str) -> None:
    v = _verdict({"failed": False, "msg": error})
    assert v["ok"] is False
    assert str(v["msg"]).startswith(f"node-1: CUDA does not initialize in {ROUTE}: the container did not run "
                                    f"({error}); {fix}")


def test_no_result_line_and_no_toolkit_version() -> None:
    run = {"container": {"Output": "/bin/sh: 1: python3: not found\n"}}
    v = gpuroute.cuda_verdict(run, "n", "img", "", 2)
    assert v["msg"] == (
        "n: CUDA does not initialize in a container of img with the stack's GPU request (driver nvidia, "
        "count all, capabilities gpu; NVIDIA Container Toolkit version unknown: nvidia-ctk --version "
        "answered nothing): the check printed no result (output: /bin/sh: 1: python3: not found); fix: "
        "the image needs python3 (the Triton image has it); run the check's command by hand to see why")
