"""The GPU route of a node, checked for CUDA: the NVIDIA container toolkit pinned to a known-good version,
what the route is made of recorded, and CUDA initialized in a container the way the stack's services get
their GPUs.

Why NVML is not enough: with Engine >= 29.2 Docker serves ``--gpus`` and Compose's ``driver: nvidia`` as a
CDI device request when CDI specs exist (moby/moby#50228), and users reported ``cuInit`` failing with
CUDA_ERROR_UNKNOWN (999) inside containers with toolkit 1.19.1 and 1.20.0 while ``nvidia-smi`` (NVML) still
worked (NVIDIA/nvidia-container-toolkit#1967; 1.19.0 worked for the reporter). The toolkit is also in the
CUDA repository a CUDA image carries (nvidia-docker#1731), so an unpinned install takes whichever version is
newest in either.

* :func:`preferences` is the apt preferences file of role ``nvidia_container_toolkit``: the toolkit's
  packages at the pinned version get priority 1001 (installed even over a newer one, a downgrade), every
  other version of them -1 (never installed, from any repository). apt_preferences(5) has no record that
  pins an origin *and* a version (the first record that matches a version decides), so the origin is
  checked instead: :func:`policy_problem` reads ``apt-cache policy`` and names what is wrong when NVIDIA's
  repository does not offer the pinned version, before anything is installed.
* :func:`wanted` names what the role installs (all four toolkit packages, each at the pinned version) and
  :func:`unmet` tells from ``dpkg-query`` which of them are not installed at it (the role refreshes apt's
  lists and installs only then: a second run changes nothing).
* :func:`route_facts` / :func:`route_line`: ``nvidia-ctk --version``, ``nvidia-ctk cdi list`` and Docker's
  CDI spec directories and discovered devices (``docker info``), as the play prints and saves them.
* :data:`CUDA_PROBE` runs in a container (``python3 -c``): it loads the driver's ``libcuda.so.1`` that
  the toolkit mounts, calls ``cuInit(0)`` and prints one marked JSON line (the CUresult, its name as the
  driver gives it, the number of GPUs). :func:`cuda_verdict` turns the container's result into ok, or one
  line naming the toolkit version, the CUresult and the fix.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .aptsources import normalize_uri

#: the toolkit's packages as NVIDIA's repository splits them: nvidia-container-toolkit depends on the
#: base and the tools at exactly its own version, the tools on libnvidia-container1 at least at it
TOOLKIT_PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
                    "libnvidia-container1")

#: the role's file in /etc/apt/preferences.d (apt reads names without an extension or ending in .pref)
PREFERENCES_FILE = "/etc/apt/preferences.d/nvidia-container-toolkit.pref"

ISSUE_1967 = "NVIDIA/nvidia-container-toolkit#1967"


def _packages(packages: Iterable[str]) -> list[str]:
    """:data:`TOOLKIT_PACKAGES` and any more the role installs, each once, in that order."""
    out: list[str] = []
    for name in (*TOOLKIT_PACKAGES, *packages):
        if name not in out:
            out.append(name)
    return out


def wanted(packages: Iterable[str], version: str) -> list[str]:
    """The packages the role installs: with a pinned ``version`` all of the toolkit's, each explicitly (apt
    would leave an installed newer ``libnvidia-container1`` alone: the tools need it only at least at
    their version), and ``packages``; without a pin ``packages`` alone."""
    return _packages(packages) if version else list(dict.fromkeys(packages))


def apt_names(packages: Iterable[str], version: str) -> list[str]:
    """``name=version`` for apt (the names alone without a pin)."""
    return [f"{p}={version}" if version else p for p in packages]


def preferences(packages: Iterable[str], version: str, repo_url: str) -> str:
    """The apt preferences file pinning the toolkit's packages (and ``packages``) to ``version``, which
    NVIDIA's repository ``repo_url`` offers (:func:`policy_problem` checks that)."""
    if not version or any(c.isspace() for c in version):
        raise ValueError(f"nvidia_container_toolkit_version {version!r}: a Debian version such as 1.19.0-1")
    names = " ".join(_packages(packages))
    return (
        "# Written by role nvidia_container_toolkit (serve-system): the NVIDIA container toolkit stays\n"
        f"# at the known-good version {version} from NVIDIA's repository {repo_url}\n"
        "# (nvidia_container_toolkit_version; roles/nvidia_container_toolkit/README.md says why that one).\n"
        "# The first record that matches a version decides: this version, even as a downgrade ...\n"
        f"Package: {names}\n"
        f"Pin: version {version}\n"
        "Pin-Priority: 1001\n"
        "\n"
        "# ... and no other version of these packages, from any repository (the CUDA repository's too).\n"
        f"Package: {names}\n"
        "Pin: version *\n"
        "Pin-Priority: -1\n"
    )


def unmet(dpkg_lines: Iterable[str], packages: Iterable[str], version: str) -> list[str]:
    """Which of ``packages`` are not installed (at ``version``, when one is pinned), from the lines of
    ``dpkg-query --show --showformat='${Package} ${Version} ${Status}\\n'``."""
    installed = installed_versions(dpkg_lines)
    return [p for p in packages if p not in installed or (version and installed[p] != version)]


def _policy(text: str) -> dict[str, dict[str, Any]]:
    """``apt-cache policy PKG...`` parsed: per package its candidate and {version: [source lines]}."""
    out: dict[str, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    version: str | None = None
    for raw in text.splitlines():
        if raw and not raw[0].isspace() and raw.rstrip().endswith(":"):
            current = out.setdefault(raw.rstrip()[:-1], {"candidate": "", "versions": {}})
            version = None
            continue
        if current is None:
            continue
        line = raw.strip()
        if line.startswith("Candidate:"):
            current["candidate"] = line.split(":", 1)[1].strip()
        elif line.startswith(("Installed:", "Version table:")) or not line:
            continue
        else:
            # "     VERSION PRIORITY" (" *** " when installed), then its sources indented by 8
            m = re.match(r"^ (?:\*\*\*|   ) (\S+) (-?\d+)\s*$", raw)
            if m:
                version = m.group(1)
                current["versions"].setdefault(version, [])
            elif version is not None:
                current["versions"][version].append(line)
    return out


def _offered_by(sources: Iterable[str], repo_url: str) -> bool:
    """Whether one of a version's source lines (``500 URI SUITE/COMPONENT arch Packages``) is ``repo_url``."""
    want = normalize_uri(repo_url, "")
    for line in sources:
        parts = line.split()
        if len(parts) >= 2 and normalize_uri(parts[1], "") == want:
            return True
    return False


def policy_problem(policy_text: str, packages: Iterable[str], version: str, repo_url: str, host: str) -> str:
    """What stops ``packages`` being installed at ``version`` from NVIDIA's repository ``repo_url``, as one
    line naming the fix; empty when nothing does (``policy_text``: ``apt-cache policy`` of ``packages``)."""
    policy = _policy(policy_text)
    problems = []
    for pkg in packages:
        info = policy.get(pkg)
        if info is None or not info["versions"]:
            problems.append(f"apt knows no {pkg} at all (is NVIDIA's repository {repo_url} reachable?)")
            continue
        ours = sorted((v for v, src in info["versions"].items() if _offered_by(src, repo_url)), reverse=True)
        if version not in info["versions"] or not _offered_by(info["versions"][version], repo_url):
            problems.append(f"NVIDIA's repository {repo_url} does not offer {pkg} {version} "
                            f"(it offers {', '.join(ours) if ours else 'none'})")
        elif info["candidate"] != version:
            problems.append(f"apt's candidate for {pkg} is {info['candidate']}, not {version} "
                            f"(is {PREFERENCES_FILE} overridden by another file in /etc/apt/preferences.d?)")
    if not problems:
        return ""
    return (f"{host}: the NVIDIA container toolkit cannot be installed at the pinned version: "
            f"{'; '.join(problems)}; set nvidia_container_toolkit_version to a version NVIDIA's repository "
            "offers (roles/nvidia_container_toolkit/README.md), or to \"\" for no pin")


def ctk_version(text: str) -> str:
    """The version ``nvidia-ctk --version`` prints (``NVIDIA Container Toolkit CLI version 1.19.0`` ...);
    empty when it printed none."""
    m = re.search(r"\bversion\s+v?(\d[\w.~+-]*)", text or "")
    return m.group(1) if m else ""


def cdi_devices(stdout: str) -> list[str]:
    """The devices ``nvidia-ctk cdi list`` prints, one a line (its log line goes to stderr)."""
    return [line.strip() for line in (stdout or "").splitlines() if "=" in line and " " not in line.strip()]


def docker_cdi(info_json: str) -> dict[str, Any]:
    """From ``docker info --format '{{json .}}'``: the engine's version, its runtimes, its CDI spec
    directories and the devices it discovered (Engine 28.3 and later say so; older ones leave it out)."""
    try:
        info = json.loads(info_json or "{}")
    except ValueError:
        info = {}
    if not isinstance(info, dict):
        info = {}
    devices = []
    for d in info.get("DiscoveredDevices") or []:
        if isinstance(d, Mapping):
            devices.append(f"{d.get('Source', '?')}: {d.get('ID', '?')}")
    return {
        "server_version": str(info.get("ServerVersion") or ""),
        "runtimes": sorted(info.get("Runtimes") or {}),
        "cdi_spec_dirs": [str(d) for d in info.get("CDISpecDirs") or []],
        "discovered_devices": devices,
    }


def route_facts(ctk_stdout: str, cdi_stdout: str, docker_info_json: str, pinned: str,
                installed: Mapping[str, str]) -> dict[str, Any]:
    """What the node's GPU route is made of, as the role prints it and saves it for later tools."""
    return {
        "nvidia_ctk_version": ctk_version(ctk_stdout),
        "pinned_version": pinned,
        "packages": dict(sorted(installed.items())),
        "cdi_devices": cdi_devices(cdi_stdout),
        "docker": docker_cdi(docker_info_json),
    }


def installed_versions(dpkg_lines: Iterable[str]) -> dict[str, str]:
    """{package: version} of the installed ones among ``dpkg-query`` lines (as :func:`unmet` reads them)."""
    out = {}
    for line in dpkg_lines:
        parts = line.split()
        if len(parts) >= 5 and parts[2:] == ["install", "ok", "installed"]:
            out[parts[0]] = parts[1]
    return out


def route_line(host: str, facts: Mapping[str, Any]) -> str:
    """``facts`` (:func:`route_facts`) in one line."""
    docker = facts.get("docker") or {}
    pinned = facts.get("pinned_version") or ""
    pin = f"pinned to {pinned}" if pinned else "not pinned"
    return (f"{host}: NVIDIA Container Toolkit {facts.get('nvidia_ctk_version') or 'unknown'} ({pin}); "
            f"CDI devices (nvidia-ctk cdi list): {', '.join(facts.get('cdi_devices') or []) or 'none'}; "
            f"Docker {docker.get('server_version') or 'unknown'}: runtimes "
            f"{', '.join(docker.get('runtimes') or []) or 'none'}, CDI spec dirs "
            f"{', '.join(docker.get('cdi_spec_dirs') or []) or 'none'}, discovered devices "
            f"{', '.join(docker.get('discovered_devices') or []) or 'none'}")


#: marks the probe's result line among whatever the image's entrypoint prints first
PROBE_MARK = "serve-system-cuda-probe"

#: run in the container as ``python3 -c CUDA_PROBE``: the driver's libcuda.so.1 (mounted by the toolkit),
#: cuInit(0), the result's name as the driver gives it, the number of GPUs; always exits 0 with one line
CUDA_PROBE = f'''import ctypes, json
out = {{}}
try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError as exc:
    out["load_error"] = str(exc)
else:
    out["cuInit"] = int(cuda.cuInit(0))
    name = ctypes.c_char_p()
    if cuda.cuGetErrorName(out["cuInit"], ctypes.byref(name)) == 0 and name.value:
        out["name"] = name.value.decode()
    version = ctypes.c_int()
    if cuda.cuDriverGetVersion(ctypes.byref(version)) == 0:
        out["driver_cuda"] = version.value
    if out["cuInit"] == 0:
        count = ctypes.c_int()
        out["cuDeviceGetCount"] = int(cuda.cuDeviceGetCount(ctypes.byref(count)))
        out["devices"] = count.value
print("{PROBE_MARK} " + json.dumps(out, sort_keys=True), flush=True)
'''

#: CUresult names (cuda.h) the verdict may meet; the probe asks the driver first (cuGetErrorName)
CU_RESULTS = {
    0: "CUDA_SUCCESS", 1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY",
    3: "CUDA_ERROR_NOT_INITIALIZED", 4: "CUDA_ERROR_DEINITIALIZED", 34: "CUDA_ERROR_STUB_LIBRARY",
    46: "CUDA_ERROR_DEVICES_UNAVAILABLE", 100: "CUDA_ERROR_NO_DEVICE", 101: "CUDA_ERROR_INVALID_DEVICE",
    304: "CUDA_ERROR_OPERATING_SYSTEM", 802: "CUDA_ERROR_SYSTEM_NOT_READY",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", 804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    999: "CUDA_ERROR_UNKNOWN",
}

_REGENERATE = ("regenerate the CDI spec with the device nodes present (sudo nvidia-modprobe -u -c=0 && "
               "sudo nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml, or sudo systemctl restart "
               "nvidia-cdi-refresh.service)")
_PIN = ("keep the toolkit at its known-good version (nvidia_container_toolkit_version, "
        "roles/nvidia_container_toolkit/README.md)")

#: CUresult -> (what it means here, the fix)
_CAUSES = {
    999: ((f"the driver's NVML can still work in such a container while CUDA does not ({ISSUE_1967}, "
           "reported with toolkit 1.19.1 and 1.20.0 through Docker's CDI route): a device node CUDA needs, "
           "/dev/nvidia-uvm, is missing from the container or has the wrong major number in the CDI spec"),
          f"{_REGENERATE}, or {_PIN}; then run site.yml again"),
    100: ("the container got no GPU from the device request",
          f"check that nvidia-ctk cdi list names the GPUs and {_REGENERATE}; then run site.yml again"),
    34: ("the image's CUDA stub libcuda.so shadows the driver's library",
         "remove the CUDA stubs directory from the image's LD_LIBRARY_PATH and rebuild it"),
    803: (("the container's libcuda.so.1 is not the node driver's (CUDA forward-compatibility libraries of "
           "the image over the node's driver)"),
          ("use an image whose CUDA the node's driver supports, or the node driver's own libcuda (the "
           "toolkit's enable-cuda-compat hook picks the compat libraries only where they fit)")),
    804: ("the image's CUDA forward-compatibility libraries are not supported on this GPU",
          "use an image whose CUDA the node's driver supports (Triton 24.10 on driver 560 for the P100)"),
    46: ("the GPUs are in an exclusive compute mode and in use",
         "stop what holds them, or set the default compute mode (sudo nvidia-smi -c DEFAULT)"),
    802: ("the driver says the system is not ready (on NVSwitch systems: the fabric manager is not running)",
          "start nvidia-fabricmanager, or wait for the driver, and run site.yml again"),
}


def _probe_result(output: str) -> dict[str, Any] | None:
    for line in (output or "").splitlines():
        if line.startswith(PROBE_MARK + " "):
            try:
                data = json.loads(line[len(PROBE_MARK) + 1:])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def _one_line(text: str, limit: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def cuda_verdict(run: Mapping[str, Any], host: str, image: str, ctk_stdout: str, gpus: int) -> dict[str, Any]:
    """The check container's result (``run``: what ``community.docker.docker_container`` registered, with
    ``failed_when: false``) as ``{"ok": bool, "msg": one line}``: on failure the line names the toolkit
    version, the CUresult and the fix; ``gpus``: how many GPUs the node's stack expects."""
    toolkit = ctk_version(ctk_stdout)
    toolkit = toolkit or "version unknown: nvidia-ctk --version answered nothing"
    route = (f"a container of {image} with the stack's GPU request (driver nvidia, count all, capabilities "
             f"gpu; NVIDIA Container Toolkit {toolkit})")
    head = f"{host}: CUDA does not initialize in {route}"
    container = run.get("container")
    if not isinstance(container, Mapping):
        error = _one_line(run.get("msg") or run.get("stderr") or "no result")
        if "could not select device driver" in error:
            fix = ("register the nvidia runtime with Docker (sudo nvidia-ctk runtime configure "
                   "--runtime=docker && sudo systemctl restart docker; role nvidia_container_toolkit does) "
                   "and run site.yml again")
        elif "CDI" in error or "cdi" in error:
            fix = f"{_REGENERATE}; then run site.yml again"
        elif "Error connecting" in error or "Cannot connect to the Docker daemon" in error:
            fix = "start Docker (sudo systemctl start docker; role docker does) and run site.yml again"
        else:
            fix = "run docker run --rm --gpus all IMAGE nvidia-smi on the node to see Docker's own error"
        return {"ok": False, "msg": f"{head}: the container did not run ({error}); fix: {fix}"}
    output = str(container.get("Output") or "")
    result = _probe_result(output)
    if result is None:
        return {"ok": False, "msg": f"{head}: the check printed no result (output: "
                                    f"{_one_line(output) or 'none'}); fix: the image needs python3 (the "
                                    "Triton image has it); run the check's command by hand to see why"}
    if "load_error" in result:
        return {"ok": False, "msg": (
            f"{head}: libcuda.so.1 could not be loaded ({_one_line(result['load_error'], 200)}): the "
            "toolkit mounted no driver library into the container; fix: the image must allow the compute "
            "capability (NVIDIA_DRIVER_CAPABILITIES compute) and the CDI spec must list the driver's "
            f"libraries: {_REGENERATE}; then run site.yml again")}
    code = int(result.get("cuInit", -1))
    name = str(result.get("name") or CU_RESULTS.get(code, "an unknown CUresult"))
    if code == 0:
        seen = int(result.get("devices", 0))
        if seen < gpus:
            return {"ok": False, "msg": (
                f"{head}: cuInit returned 0 CUDA_SUCCESS but the container sees {seen} GPU(s) of the {gpus} "
                "the stack expects (serve_gpus); fix: check nvidia-ctk cdi list and nvidia-smi -L on the "
                f"node and {_REGENERATE}, or set serve_gpus to {seen}")}
        driver = result.get("driver_cuda")
        cuda = f", driver CUDA {int(driver) // 1000}.{int(driver) % 1000 // 10}" if driver else ""
        return {"ok": True, "msg": (
            f"{host}: CUDA initializes in {route}: cuInit 0 CUDA_SUCCESS, {seen} GPU(s){cuda}")}
    cause, fix = _CAUSES.get(code, (
        "the driver refused CUDA in the container",
        ("see the CUresult in NVIDIA's CUDA driver API reference and check nvidia-smi on the node; then run "
         "site.yml again")))
    return {"ok": False, "msg": f"{head}: cuInit returned {code} {name}: {cause}; fix: {fix}"}
