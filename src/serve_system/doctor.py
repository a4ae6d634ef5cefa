"""``serve-system doctor``: the checks an instructor runs first on every node, one line each.

For each node of an inventory, one SSH session runs :mod:`serve_system.doctorprobe` with python3 as root
(the status board's SSH: :func:`serve_system.provision.board.ssh_python`); the probe prints the facts as one
JSON object and :func:`judge` turns them into one :class:`Check` per line of :data:`CHECKS`: ``ok``,
``skipped`` (with why: a node without an NVIDIA GPU skips the GPU checks, as roles/nvidia_container_toolkit
does), or ``FAIL`` with what is wrong and the fix. The facts are a node's output: hostile data, read with
:func:`serve_system.safeio.loads_json` and every field type-checked here; a field of the wrong type fails
its check ("the probe's report ... is malformed"), it never raises.

The checks and their thresholds (docs/real-node.md, "Doctor"):

- ``apt_locks``: no apt or dpkg lock held (else who holds it);
- ``gpu_driver``: nvidia-smi answers and sees every NVIDIA GPU on the PCI bus, each of compute capability
  :data:`MIN_COMPUTE_CAPABILITY` or more (what the stack's Triton 24.10 runs on);
- ``nvidia_toolkit``: ``nvidia-ctk --version``; ``cdi_devices``: ``nvidia-ctk cdi list`` (its GPU devices
  by index match the GPUs, or there are none and Docker uses the runtime hook);
- ``cuinit``: CUDA's ``cuInit`` in a container of the stack's GPU image started with the stack's own GPU
  request (compose's ``driver: nvidia, count: all``: with Engine 29.2 and CDI specs, a CDI request);
- ``docker_storage``: Docker answers, its storage driver is not ``vfs``, and at least
  :data:`MIN_FREE_GIB` GiB are free under its root (and containerd's, with the containerd image store);
- ``jupyter_work``: the user the Jupyter server runs as in the ``jupyter`` container, and a probe file
  written and removed in its work folder as that user (``docker exec -u UID:GID``);
- ``triton_ready``: Triton's readiness; ``triton_gpu_metrics``: ``nv_gpu_utilization`` on its metrics port
  while a short load runs, and the GPU busy under it.
"""

from __future__ import annotations

import csv
import errno
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import interrupt
from .provision import board
from .provision.nodes import Node
from .textsafe import clean
from .triton.host import compute_capability_of

OK, FAIL, SKIPPED = "ok", "FAIL", "skipped"
#: the lines, in the order they are printed
CHECKS = ("apt_locks", "gpu_driver", "nvidia_toolkit", "cdi_devices", "cuinit", "docker_storage",
          "jupyter_work", "triton_ready", "triton_gpu_metrics")
#: the least free space under Docker's root: an image rebuild or a new Triton image (24.10: about 15 GB
#: unpacked) needs room beside the ones it replaces
MIN_FREE_GIB = 10.0
#: the oldest GPUs the stack's Triton (24.10: the last line with a P100 build) runs on
MIN_COMPUTE_CAPABILITY = 6.0
#: seconds of load while Triton's GPU metrics are scraped (GPU nodes)
LOAD_SECONDS = 8.0
GiB = 2**30

SITE = "run playbooks/site.yml"
DEPLOY = "run playbooks/deploy.yml"
CDI_GENERATE = "sudo nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml"
NO_GPU = "no GPU (no NVIDIA display device on the PCI bus)"


@dataclass(frozen=True)
class Check:
    """One line of the doctor: a check's verdict, what was seen and (for a failure) the fix."""

    name: str
    status: str
    detail: str
    fix: str = ""

    def line(self) -> str:
        if self.status == FAIL:
            return f"FAIL: {self.detail}; fix: {self.fix}" if self.fix else f"FAIL: {self.detail}"
        return f"{self.status}: {self.detail}"


@dataclass
class NodeReport:
    """A node's checks."""

    node: str
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.status != FAIL for c in self.checks)

    def counts(self) -> Counter[str]:
        return Counter(c.status for c in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.node, "ok": self.ok, "checks": [asdict(c) for c in self.checks]}


# --- reading the facts: every field type-checked ---------------------------------------------------


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _s(value: Any, cap: int = 200) -> str:
    """A text field, one line (control characters escaped), cut to ``cap`` characters; "" if not text."""
    if not isinstance(value, str):
        return ""
    text = clean(" ".join(value.split()))
    return text if len(text) <= cap else text[:cap - 3] + "..."


def _text(value: Any) -> str:
    """A text field whole (to be searched, not shown); "" if not text."""
    return value if isinstance(value, str) else ""


def _i(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _f(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _tail(res: dict[str, Any]) -> str:
    """The last line a command wrote to stderr (or stdout), or why it did not run."""
    if _s(res.get("error")):
        return _s(res.get("error"))
    for stream in ("err", "out"):
        lines = [ln for ln in _text(res.get(stream)).splitlines() if ln.strip()]
        if lines:
            return _s(lines[-1])
    rc = _i(res.get("rc"))
    return f"exit {rc}" if rc is not None else "no output"


def _missing(res: dict[str, Any]) -> bool:
    return res.get("rc") is None and res.get("error") == "not found"


def _gib(n: float) -> str:
    return f"{n / GiB:.1f} GiB"


class Malformed(ValueError):
    """A fact of the wrong type or form: its check fails, naming it."""


# --- the checks --------------------------------------------------------------------------------


def check_apt_locks(f: dict[str, Any]) -> Check:
    locks = f.get("apt_locks")
    if not isinstance(locks, list):
        raise Malformed("apt_locks")
    held, unknown = [], []
    for lock in map(_d, locks):
        path = _s(lock.get("path")) or "?"
        if lock.get("error"):
            unknown.append(f"{path} ({_s(lock.get('error'))})")
        elif lock.get("held") is True:
            holders = [h for h in map(_d, _l(lock.get("holders"))) if _i(h.get("pid")) is not None]
            who = [f"pid {_i(h.get('pid'))} ({_s(h.get('comm'), 40) or '?'})" for h in holders]
            held.append(f"{path} held by {', '.join(who) if who else 'an unknown process'}")
        elif lock.get("held") is not False:
            raise Malformed("apt_locks[].held")
    if held:
        return Check("apt_locks", FAIL, "; ".join(held),
                     "wait for it to finish (on a first boot cloud-init and unattended-upgrades hold it for "
                     "minutes: sudo cloud-init status --wait), then re-run; never delete a lock file")
    if unknown:
        return Check("apt_locks", FAIL, "cannot test " + "; ".join(unknown),
                     "check the lock files' permissions (ls -l /var/lib/dpkg/lock*)")
    return Check("apt_locks", OK, f"no apt or dpkg lock held ({len(locks)} lock file(s) tested)")


def _smi_rows(res: dict[str, Any], with_cap: bool) -> list[tuple[str, float | None, str]]:
    """(name, compute capability, driver) per GPU from nvidia-smi's CSV."""
    rows = []
    for cells in csv.reader(_text(res.get("out")).splitlines(), skipinitialspace=True):
        if not cells or not cells[0].strip().isdigit():
            continue
        if len(cells) != (4 if with_cap else 3):
            raise Malformed("nvidia_smi.out")
        name, driver = cells[1].strip(), cells[-1].strip()
        try:
            cap: float | None = float(cells[2]) if with_cap else None
        except ValueError:
            cap = None  # "[N/A]"
        if cap is None or not 0 < cap < 100:
            cap = compute_capability_of(name)
        rows.append((_s(name, 80), cap, _s(driver, 40)))
    return rows[:64]


def check_gpu_driver(f: dict[str, Any], gpus: int) -> Check:
    name = "gpu_driver"
    if gpus == 0:
        return Check(name, SKIPPED, NO_GPU)
    smi = _d(f.get("nvidia_smi"))
    if not smi:
        raise Malformed("nvidia_smi")
    install = ("install the NVIDIA driver (Chameleon's CC-Ubuntu24.04-CUDA image has it) and reboot; after a "
               "kernel update, reboot so DKMS rebuilds the driver's module")
    if _missing(smi):
        return Check(name, FAIL, f"nvidia-smi not found on a node with {gpus} NVIDIA GPU(s)", install)
    rows: list[tuple[str, float | None, str]] = []
    if smi.get("rc") == 0:
        rows = _smi_rows(smi, with_cap=True)
    else:
        old = _d(smi.get("without_compute_cap"))
        if old.get("rc") != 0:
            return Check(name, FAIL, f"nvidia-smi fails: {_tail(smi)}", install)
        rows = _smi_rows(old, with_cap=False)
    if len(rows) < gpus:
        return Check(name, FAIL, f"nvidia-smi sees {len(rows)} of the {gpus} NVIDIA GPU(s) on the PCI bus",
                     "a GPU is faulty or fell off the bus (nvidia-smi -q, dmesg | grep -i nvrm): reboot, or "
                     "launch on another node (lease.py create --exclude-node NODE)")
    groups = Counter((n, c) for n, c, _ in rows)
    seen = ", ".join(f"{n} ({'capability unknown' if c is None else f'{c:.1f}'})"
                     + (f" x{k}" if k > 1 else "") for (n, c), k in groups.items())
    old_gpus = sorted({f"{n} ({c:.1f})" for n, c, _ in rows if c is not None and c < MIN_COMPUTE_CAPABILITY})
    if old_gpus:
        return Check(name, FAIL, f"{', '.join(old_gpus)}: compute capability below "
                     f"{MIN_COMPUTE_CAPABILITY:.1f}, the oldest the stack's Triton (24.10) runs on",
                     "launch on a gpu_p100 node or a newer GPU")
    drivers = sorted({d for _, _, d in rows})
    return Check(name, OK, f"driver {', '.join(drivers)}; {len(rows)} GPU(s): {seen}")


def check_nvidia_toolkit(f: dict[str, Any], gpus: int) -> Check:
    name = "nvidia_toolkit"
    if gpus == 0:
        return Check(name, SKIPPED, NO_GPU)
    res = _d(f.get("ctk_version"))
    if not res:
        raise Malformed("ctk_version")
    fix = f"{SITE} (roles/nvidia_container_toolkit installs the toolkit and registers it with Docker)"
    if _missing(res):
        return Check(name, FAIL, "nvidia-ctk not found: the NVIDIA container toolkit is not installed", fix)
    if res.get("rc") != 0:
        return Check(name, FAIL, f"nvidia-ctk --version fails: {_tail(res)}", fix)
    m = re.search(r"version\s+v?(\d+\.\d+\.\d+[^\s,]*)", _s(res.get("out"), 2000))
    if m is None:
        return Check(name, FAIL, f"nvidia-ctk --version printed no version ({_tail(res)})", fix)
    return Check(name, OK, f"NVIDIA Container Toolkit {m.group(1)}")


def check_cdi_devices(f: dict[str, Any], gpus: int) -> Check:
    name = "cdi_devices"
    if gpus == 0:
        return Check(name, SKIPPED, NO_GPU)
    res = _d(f.get("cdi_list"))
    if not res:
        raise Malformed("cdi_list")
    if _missing(res):
        return Check(name, FAIL, "nvidia-ctk not found: the NVIDIA container toolkit is not installed", SITE)
    if res.get("rc") != 0:
        return Check(name, FAIL, f"nvidia-ctk cdi list fails: {_tail(res)}", CDI_GENERATE)
    text = _text(res.get("out")) + "\n" + _text(res.get("err"))
    devices = sorted({_s(ln.strip(), 120) for ln in text.splitlines()
                      if re.fullmatch(r"nvidia\.com/gpu=\S+", ln.strip())})
    if not devices:
        return Check(name, OK, "no CDI devices: Docker reaches the GPUs through the NVIDIA runtime's hook")
    by_index = [d for d in devices if re.fullmatch(r"nvidia\.com/gpu=\d+", d)]
    if by_index and len(by_index) != gpus:
        return Check(name, FAIL, f"the CDI specs name {len(by_index)} GPU(s) by index, the node has {gpus}: "
                     "stale specs (written before a GPU or driver change)", CDI_GENERATE)
    shown = ", ".join(devices[:6]) + (f" and {len(devices) - 6} more" if len(devices) > 6 else "")
    return Check(name, OK, f"{len(devices)} CDI device(s): {shown}")


def check_cuinit(f: dict[str, Any], gpus: int) -> Check:
    name = "cuinit"
    if gpus == 0:
        return Check(name, SKIPPED, NO_GPU)
    probe = _d(f.get("cuinit"))
    if "like" not in probe:
        raise Malformed("cuinit")
    like = _s(probe.get("like"), 60)
    if not like:
        return Check(name, FAIL, "no container of the stack asks for the GPUs (triton_server is not there, "
                     "or runs without a GPU request)",
                     f"{SITE} with serve_gpus (the inventory) counting the node's GPUs")
    request = " ".join(_s(x, 120) for x in _l(probe.get("request")))
    image = _s(probe.get("image"), 120) or "?"
    route = f"a container of {image} started like {like} ({request or 'no --gpus'})"
    res, out = _d(probe.get("run")), _d(probe.get("result"))
    toolkit = (f"{SITE} (the known-good toolkit), then {CDI_GENERATE} and sudo systemctl restart docker; "
               "reboot after a driver update")
    if not out:
        return Check(name, FAIL, f"{route} did not run: {_tail(res)}", toolkit)
    if _s(out.get("error")):
        return Check(name, FAIL, f"{route}: {_s(out.get('error'))}", toolkit)
    rc = _i(out.get("rc"))
    if rc is None:
        raise Malformed("cuinit.result.rc")
    if rc != 0:
        what = _s(out.get("name"), 60)
        return Check(name, FAIL, f"cuInit returned {rc}{f' ({what})' if what else ''} in {route}, so CUDA "
                     "fails in the stack's containers even where nvidia-smi works (toolkit 1.19.1/1.20.0 did "
                     "this: NVIDIA/nvidia-container-toolkit#1967)", toolkit)
    devices = _i(out.get("devices"))
    if devices is None or devices < gpus:
        sees = devices if devices is not None else "no"
        return Check(name, FAIL, f"cuInit succeeded but CUDA sees {sees} of the {gpus} GPU(s) in {route}",
                     toolkit)
    return Check(name, OK, f"cuInit succeeded, {devices} CUDA device(s) in {route}")


def check_docker_storage(f: dict[str, Any], min_free_gib: float) -> Check:
    name = "docker_storage"
    d = _d(f.get("docker"))
    if not d:
        raise Malformed("docker")
    if _missing(d):
        return Check(name, FAIL, "docker not found", SITE)
    driver = _s(d.get("driver"), 60)
    if d.get("rc") != 0 or not driver:
        return Check(name, FAIL, f"Docker does not answer (docker info: {_tail(d)})",
                     "sudo systemctl start docker (journalctl -u docker says why it stopped), or " + SITE)
    problems, seen = [], []
    if driver == "vfs":
        problems.append("storage driver vfs (it copies every layer whole: slow, and disk-hungry)")
    disks = _l(d.get("disks"))
    if not disks:
        raise Malformed("docker.disks")
    for disk in map(_d, disks):
        path = _s(disk.get("path"), 120) or "?"
        free = _f(disk.get("free"))
        if disk.get("error") or free is None:
            why = _s(disk.get("error")) or "no size"
            problems.append(f"cannot measure the free space under {path} ({why})")
        elif free < min_free_gib * GiB:
            problems.append(f"only {_gib(free)} free under {path} (at least {min_free_gib:g} GiB)")
        else:
            seen.append(f"{_gib(free)} free under {path}")
    if problems:
        fixes = []
        if driver == "vfs":
            fixes.append("set docker_storage_driver: overlay2 (roles/docker) and " + SITE)
        if any("free" in p for p in problems):
            fixes.append("free space: docker image prune -a (images no container uses), docker builder prune")
        return Check(name, FAIL, "; ".join(problems),
                     "; ".join(fixes) or "check the disk under Docker's root")
    kind = f"{driver} ({_s(d.get('driver_type'), 60)})" if _s(d.get("driver_type")) else driver
    return Check(name, OK, f"{kind}, Docker {_s(d.get('version'), 40) or '?'}; {'; '.join(seen)} "
                 f"(at least {min_free_gib:g} GiB)")


def _host_path(container: dict[str, Any], inside: str) -> str:
    for m in map(_d, _l(container.get("mounts"))):
        if _s(m.get("destination"), 300).rstrip("/") == inside.rstrip("/"):
            return _s(m.get("source"), 300)
    return ""


def _not_running(name: str, c: dict[str, Any]) -> str:
    code = _i(c.get("exit_code"))
    return (f"the {name} container is {_s(c.get('status'), 30) or 'not running'}"
            + (f" (exit code {code})" if code else ""))


DOCKER_SILENT = "Docker does not answer, so the {} container cannot be looked at"


def check_jupyter_work(f: dict[str, Any]) -> Check:
    name = "jupyter_work"
    if f.get("containers") is None:
        return Check(name, FAIL, DOCKER_SILENT.format("jupyter"), "see docker_storage")
    containers = _d(f.get("containers"))
    if not containers:
        raise Malformed("containers")
    c = containers.get("jupyter")
    if c is None:
        return Check(name, FAIL, "there is no jupyter container", DEPLOY)
    c = _d(c)
    if c.get("running") is not True:
        return Check(name, FAIL, _not_running("jupyter", c),
                     f"docker logs jupyter says why; docker start jupyter, or {DEPLOY}")
    j = _d(f.get("jupyter"))
    servers = _l(j.get("servers"))
    if not servers:
        return Check(name, FAIL, "no Jupyter server process in the jupyter container "
                     f"({_tail(_d(j.get('find')))})", "docker logs jupyter says why; docker restart jupyter")
    server = _d(servers[0])
    uid, gid = _i(server.get("uid")), _i(server.get("gid"))
    if uid is None or gid is None:
        raise Malformed("jupyter.servers[0].uid")
    user = _s(server.get("user"), 40) or "an unnamed user"
    who = f"the Jupyter server runs as {user} (uid {uid}, gid {gid})"
    write = _d(j.get("write"))
    root = _s(write.get("root_dir"), 200) or _s(server.get("root_dir"), 200) or "?"
    host = _host_path(c, root)
    where = f"{root}" + (f" ({host} on the node)" if host else "")
    out = _d(write.get("result"))
    if not out:
        return Check(name, FAIL, f"{who}; the write probe in {where} printed no result ({_tail(write)})",
                     "docker logs jupyter; docker restart jupyter")
    if out.get("ok") is True:
        return Check(name, OK, f"{who} and can write {where}")
    if _i(out.get("unlink_errno")) is not None:
        return Check(name, FAIL, f"{who}: wrote a probe file in {where} but cannot remove it "
                     f"({_s(out.get('unlink_error'))})", f"remove {_s(out.get('path'), 200)} by hand")
    code = _i(out.get("errno"))
    if code is None:
        raise Malformed("jupyter.write.result.errno")
    why = _s(out.get("error"), 80) or f"errno {code}"
    seen = f"{who} and cannot write {where} ({why}): the notebook cannot save"
    if code in (errno.EACCES, errno.EPERM):
        by_hand = f"sudo chown -R {uid}:{gid} {host}" if host else f"chown -R {uid}:{gid} the folder"
        fix = f"{SITE} (it gives the work folder to the server's user); by hand: {by_hand}"
    elif code == errno.EROFS:
        fix = ("the folder is mounted read-only: docker restart jupyter (a fresh read-write mount), or "
               + DEPLOY)
    elif code in (errno.ENOSPC, errno.EDQUOT):
        fix = f"free space on the disk under {host or root}"
    else:
        fix = f"check the folder on the node: ls -ld {host or root}"
    return Check(name, FAIL, seen, fix)


def _triton_state(f: dict[str, Any]) -> tuple[str, str, str]:
    """(status, detail, fix) of Triton's container and readiness."""
    if f.get("containers") is None:
        return FAIL, DOCKER_SILENT.format("triton_server"), "see docker_storage"
    containers = _d(f.get("containers"))
    if not containers:
        raise Malformed("containers")
    c = containers.get("triton_server")
    if c is None:
        if containers.get("fastapi_server") is not None:
            return SKIPPED, "the stack runs in fastapi mode (no triton_server)", ""
        return FAIL, "there is no triton_server container", DEPLOY
    c = _d(c)
    if c.get("running") is not True:
        return FAIL, _not_running("triton_server", c), \
            f"docker logs triton_server says why (a model that fails to load, no GPU); then {DEPLOY}"
    t = _d(f.get("triton"))
    status = _i(t.get("ready_status"))
    if status != 200:
        seen = f"HTTP {status}" if status is not None else f"no answer: {_s(t.get('ready_error')) or '?'}"
        return FAIL, f"Triton is not ready ({seen})", \
            f"docker logs triton_server: a model that failed to load, or a server still starting; {DEPLOY}"
    models = [_s(m, 80) for m in _l(t.get("models")) if isinstance(m, str)]
    return OK, f"ready; READY models: {', '.join(models) if models else 'none'}", ""


def check_triton_ready(f: dict[str, Any]) -> Check:
    status, detail, fix = _triton_state(f)
    return Check("triton_ready", status, detail, fix)


def check_triton_gpu_metrics(f: dict[str, Any], gpus: int) -> Check:
    name = "triton_gpu_metrics"
    if gpus == 0:
        return Check(name, SKIPPED, NO_GPU)
    status, _, _ = _triton_state(f)
    if status != OK:
        return Check(name, SKIPPED, "Triton is not ready (see triton_ready)")
    load = _d(_d(f.get("triton")).get("load"))
    samples = [_d(s) for s in _l(load.get("samples"))]
    if not samples:
        raise Malformed("triton.load.samples")
    answered = [s for s in samples if _i(s.get("status")) == 200]
    if not answered:
        last = samples[-1]
        return Check(name, FAIL, "Triton's metrics port (8002) does not answer "
                     f"({_s(last.get('error')) or 'HTTP ' + str(_i(last.get('status')))})",
                     "docker logs triton_server; metrics must stay on (no --allow-metrics=false in "
                     "serve_stack_triton_extra_args)")
    gpu_labels: set[str] = set()
    peak = 0.0
    for s in answered:
        for labels, value in _d(s.get("values")).items():
            v = _f(value)
            if v is not None:
                gpu_labels.add(labels)
                peak = max(peak, v)
    idle = ("the container's GPU route (see cuinit), serve_gpus in the inventory counting the node's GPUs; "
            f"then {DEPLOY}")
    if not gpu_labels:
        return Check(name, FAIL, "Triton's metrics have no nv_gpu_utilization: Triton sees no GPU", idle)
    model = _s(load.get("model"), 80)
    done, failed = _i(load.get("ok")) or 0, _i(load.get("failed")) or 0
    seen = f"nv_gpu_utilization for {len(gpu_labels)} GPU(s), peak {peak * 100:.0f}%"
    if not model:
        return Check(name, OK, f"{seen}; no load sent: no READY model takes numeric inputs only")
    if done == 0:
        return Check(name, FAIL, f"{seen}; every request to {model} failed ({failed}): "
                     f"{_s(load.get('error')) or '?'}", "docker logs triton_server")
    if peak <= 0:
        return Check(name, FAIL, f"the GPUs stayed idle (nv_gpu_utilization 0%) while {done} requests ran on "
                     f"{model}: the model runs on the CPU",
                     "serve the lab's weights on the GPU (docs/real-node.md); a stand-in, or a backend on "
                     "the CPU inside a KIND_GPU instance, leaves the GPU idle")
    return Check(name, OK, f"{seen} while {done} requests ran on {model}"
                 + (f" ({failed} failed: {_s(load.get('error'), 80)})" if failed else ""))


def judge(facts: Any, *, min_free_gib: float = MIN_FREE_GIB) -> list[Check]:
    """One :class:`Check` per name of :data:`CHECKS`, from the probe's facts (any data: a malformed field
    fails its own check, never raises)."""
    f = _d(facts)
    if f.get("probe") != 1:
        return [Check("probe", FAIL, "the node's probe answered with no report of the expected form",
                      "run the same serve-system on the controller as the probe (re-run doctor)")]
    gpus = _i(f.get("gpus_pci"))
    judges = {
        "apt_locks": lambda: check_apt_locks(f),
        "gpu_driver": lambda: check_gpu_driver(f, gpus or 0),
        "nvidia_toolkit": lambda: check_nvidia_toolkit(f, gpus or 0),
        "cdi_devices": lambda: check_cdi_devices(f, gpus or 0),
        "cuinit": lambda: check_cuinit(f, gpus or 0),
        "docker_storage": lambda: check_docker_storage(f, min_free_gib),
        "jupyter_work": lambda: check_jupyter_work(f),
        "triton_ready": lambda: check_triton_ready(f),
        "triton_gpu_metrics": lambda: check_triton_gpu_metrics(f, gpus or 0),
    }
    out = []
    for name in CHECKS:
        try:
            if gpus is None or not 0 <= gpus <= 64:
                raise Malformed("gpus_pci")
            out.append(judges[name]())
        except (Malformed, csv.Error) as exc:
            out.append(Check(name, FAIL, f"the probe's report is malformed ({clean(exc)})",
                             "re-run doctor; if it stays, the node's python3 or tools answer oddly"))
    return out


# --- on the nodes ------------------------------------------------------------------------------


def probe_script() -> str:
    """The probe's source, as it travels to the node."""
    return (Path(__file__).parent / "doctorprobe.py").read_text(encoding="utf-8")


def examine(node: Node, known_hosts: Path, *, connect_timeout: int = 10, wait: float = 300,
            load_seconds: float = LOAD_SECONDS, min_free_gib: float = MIN_FREE_GIB) -> NodeReport:
    """The node's checks, from one SSH session (an SSH failure is one failed ``ssh`` line)."""
    got = board.ssh_python(node, node.address, node.port, known_hosts, probe_script(),
                           timeout=connect_timeout, wait=wait, args=("--load-seconds", f"{load_seconds:g}"))
    if isinstance(got, str):
        return NodeReport(node.name, [Check("ssh", FAIL, clean(got),
                                            "check the node is up (serve-system status), its address in "
                                            "the inventory and its host key in known_hosts")])
    return NodeReport(node.name, judge(got, min_free_gib=min_free_gib))


def examine_all(nodes: Sequence[Node], known_hosts: Path, **kwargs: Any) -> list[NodeReport]:
    """Every node at once (one SSH session each); reports in the nodes' order."""
    return interrupt.parallel(lambda n: examine(n, known_hosts, **kwargs), nodes, max_workers=32)
