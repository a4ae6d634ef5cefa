"""The doctor's probe: what ``serve-system doctor`` runs on a node, in one SSH session.

It runs as root on the node (``sudo -n python3 - ARGS``, this file's text on stdin), standard library only
and self-contained: it imports nothing of ``serve_system``, since it travels as its own source. It
gathers the facts each of :mod:`serve_system.doctor`'s checks judges and prints them as one JSON object
on its last line; it decides nothing (the controller reads the facts as hostile data and judges them).

What it looks at: apt's and dpkg's locks (``F_GETLK``, never taking one) and who holds them; the NVIDIA GPUs
on the PCI bus (sysfs, as roles/nvidia_container_toolkit counts them) and, on a node that has one,
``nvidia-smi``, ``nvidia-ctk --version``, ``nvidia-ctk cdi list`` and ``cuInit`` in a container started with
the GPU request of the stack's own GPU container; ``docker info`` and the free space under Docker's root;
the Jupyter server's user inside the ``jupyter`` container and a probe file written and removed in its
work folder as that user; Triton's readiness and, on a GPU node, ``nv_gpu_utilization`` on its metrics
port while a short load runs. Every command has a timeout and every text it keeps is cut short.
"""

from __future__ import annotations

import argparse
import csv
import fcntl
import io
import json
import math
import os
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any

#: the most characters kept of a command's output that goes into the facts
CAP = 2000
#: the most characters kept of a command's output the probe reads itself (docker info, docker inspect)
READ_CAP = 8 * 2**20
#: apt's and dpkg's lock files, in the order apt takes them
APT_LOCKS = ("/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock", "/var/lib/apt/lists/lock",
             "/var/cache/apt/archives/lock")
#: the stack's containers the probe inspects (serve_stack's container names)
CONTAINERS = ("jupyter", "triton_server", "fastapi_server")
TRITON = "http://127.0.0.1:8000"
METRICS = "http://127.0.0.1:8002/metrics"
#: bytes per element of Triton's numeric data types (a model with only such inputs can be loaded with zeros)
SIZES = {"BOOL": 1, "UINT8": 1, "UINT16": 2, "UINT32": 4, "UINT64": 8, "INT8": 1, "INT16": 2, "INT32": 4,
         "INT64": 8, "FP16": 2, "BF16": 2, "FP32": 4, "FP64": 8}
#: the largest zero-filled input the load sends (bytes per request)
MAX_INPUT_BYTES = 16 * 2**20

#: runs in the jupyter container (python3 is there: Jupyter is Python): the Jupyter server's process
#: (not a wrapper such as tini, sudo or start.sh, nor a one-off ``jupyter nbconvert``) and its work folder
FIND_JUPYTER = r"""
import json, os, pwd, grp
WRAPPERS = {"tini", "sudo", "su", "gosu", "sh", "bash", "dash", "start.sh", "start-notebook.sh",
            "start-notebook.py", "start-singleuser.sh", "start-singleuser.py"}
SERVE = {"lab", "server", "notebook", "jupyter-lab", "jupyter-server", "jupyter-notebook",
         "jupyterhub-singleuser"}
found = []
for pid in sorted((int(p) for p in os.listdir("/proc") if p.isdigit())):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = [a.decode("utf-8", "replace") for a in fh.read().split(b"\0") if a]
        with open(f"/proc/{pid}/status") as fh:
            st = dict(ln.split(":", 1) for ln in fh.read().splitlines() if ":" in ln)
    except OSError:
        continue
    names = [os.path.basename(a) for a in argv]
    if not names or names[0] in WRAPPERS or (len(names) > 1 and names[0].startswith("python")
                                             and names[1] in WRAPPERS):
        continue
    if not any(n.startswith("jupyter") for n in names) or not SERVE & set(names):
        continue
    uid, gid = int(st["Uid"].split()[1]), int(st["Gid"].split()[1])
    root = ""
    for i, a in enumerate(argv):
        for opt in ("--ServerApp.root_dir", "--NotebookApp.notebook_dir", "--notebook-dir"):
            if a.startswith(opt + "="):
                root = a.split("=", 1)[1]
            elif a == opt and i + 1 < len(argv):
                root = argv[i + 1]
    if not root:
        try:
            root = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            root = ""
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = ""
    try:
        group = grp.getgrgid(gid).gr_name
    except KeyError:
        group = ""
    found.append({"pid": pid, "uid": uid, "gid": gid, "user": user, "group": group, "root_dir": root,
                  "argv": " ".join(argv)[:300]})
print(json.dumps({"servers": found[:5]}))
"""

#: runs in the jupyter container as the server's user: a probe file created, written and removed
WRITE_PROBE = r"""
import json, os, sys
path = os.path.join(sys.argv[1], ".serve-system-doctor-%d" % os.getpid())
out = {"path": path}
try:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, b"serve-system doctor\n")
    finally:
        os.close(fd)
        try:
            os.unlink(path)
        except OSError as exc:
            out["unlink_errno"], out["unlink_error"] = exc.errno, exc.strerror
    out["ok"] = "unlink_errno" not in out
except OSError as exc:
    out.update(ok=False, errno=exc.errno, error=exc.strerror)
print(json.dumps(out))
"""

#: runs in a container started with the stack's GPU request: what CUDA's driver API says
CUINIT = r"""
import ctypes, json
out = {}
try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError as exc:
    out["error"] = "libcuda.so.1 cannot be loaded: %s" % exc
else:
    rc = cuda.cuInit(0)
    out["rc"] = rc
    if rc == 0:
        n = ctypes.c_int(0)
        out["count_rc"] = cuda.cuDeviceGetCount(ctypes.byref(n))
        out["devices"] = n.value
    else:
        name = ctypes.c_char_p()
        if cuda.cuGetErrorName(rc, ctypes.byref(name)) == 0 and name.value:
            out["name"] = name.value.decode("ascii", "replace")
print(json.dumps(out))
"""


def cut(text: str, cap: int = CAP) -> str:
    return text if len(text) <= cap else text[:cap // 2] + " ... " + text[-cap // 2:]


def run(argv: list[str], timeout: float, stdin: str | None = None, cap: int = CAP) -> dict[str, Any]:
    """``argv``'s exit status and output (cut short); ``rc`` None, with ``error``, when it did not run or
    did not end."""
    try:
        p = subprocess.run(argv, input=stdin, capture_output=True, text=True, errors="replace", check=False,
                           timeout=timeout, stdin=None if stdin is not None else subprocess.DEVNULL)
    except FileNotFoundError:
        return {"rc": None, "error": "not found", "out": "", "err": ""}
    except subprocess.TimeoutExpired:
        return {"rc": None, "error": f"timed out after {timeout:g} s", "out": "", "err": ""}
    except OSError as exc:
        return {"rc": None, "error": str(exc.strerror), "out": "", "err": ""}
    return {"rc": p.returncode, "out": cut(p.stdout, cap), "err": cut(p.stderr)}


def last_json(res: dict[str, Any]) -> Any:
    """The JSON object on the last line of a command's output, or None."""
    lines = [ln for ln in str(res.get("out") or "").splitlines() if ln.strip()]
    try:
        return json.loads(lines[-1]) if lines else None
    except ValueError:
        return None


# --- apt ---------------------------------------------------------------------------------------


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()[:64]
    except OSError:
        return ""


def openers(path: str) -> list[int]:
    """The processes that hold ``path`` open (what ``fuser`` finds)."""
    real = os.path.realpath(path)
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{entry}/fd/{fd}") == real:
                    pids.append(int(entry))
                    break
            except OSError:
                continue
    return sorted(pids)[:8]


def lock_state(path: str) -> dict[str, Any] | None:
    """Whether a write lock on ``path`` would be refused now, and by whom (``F_GETLK``: no lock is
    taken, so apt is never kept waiting by the probe); None when the file does not exist."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return {"path": path, "error": str(exc.strerror)}
    try:
        # struct flock: l_type, l_whence, l_start, l_len, l_pid (native layout, padded to its size)
        fmt = "hhqqi4x"
        got = fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack(fmt, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
        kind, _whence, _start, _len, pid = struct.unpack(fmt, got)
    except OSError as exc:
        return {"path": path, "error": str(exc.strerror)}
    finally:
        os.close(fd)
    if kind == fcntl.F_UNLCK:
        return {"path": path, "held": False}
    pids = sorted({pid, *openers(path)} - {0, -1, os.getpid()}) if pid > 0 else openers(path)
    return {"path": path, "held": True,
            "holders": [{"pid": p, "comm": comm(p)} for p in pids if p != os.getpid()][:8]}


# --- GPUs --------------------------------------------------------------------------------------


def nvidia_pci() -> int:
    """The NVIDIA display devices (PCI vendor 0x10de, class 0x03xx) sysfs lists, as the role counts them."""
    base = "/sys/bus/pci/devices"
    count = 0
    try:
        devices = os.listdir(base)
    except OSError:
        return 0
    for dev in devices:
        try:
            with open(f"{base}/{dev}/vendor") as v, open(f"{base}/{dev}/class") as c:
                if v.read().strip() == "0x10de" and c.read().strip().startswith("0x03"):
                    count += 1
        except OSError:
            continue
    return count


def gpu_request(container: dict[str, Any]) -> list[str]:
    """The ``docker run`` options that ask for the GPUs as ``container`` was started (compose's
    ``deploy.resources.reservations.devices`` is such a request: ``driver: nvidia, count: all``)."""
    host = container.get("HostConfig") or {}
    opts = []
    runtime = host.get("Runtime") or ""
    if runtime not in ("", "runc"):
        opts += ["--runtime", runtime]
    for req in host.get("DeviceRequests") or []:
        fields = []
        if req.get("Driver"):
            fields.append(f"driver={req['Driver']}")
        if req.get("DeviceIDs"):
            fields.append("device=" + ",".join(req["DeviceIDs"]))
        else:
            count = req.get("Count")
            fields.append("count=" + ("all" if count in (None, -1) else str(count)))
        caps = [c for group in (req.get("Capabilities") or [["gpu"]]) for c in group]
        fields.append("capabilities=" + ",".join(caps or ["gpu"]))
        buf = io.StringIO()
        csv.writer(buf, lineterminator="").writerow(fields)  # docker reads --gpus as one CSV record
        opts += ["--gpus", buf.getvalue()]
    return opts


def cuinit(containers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``cuInit`` in a container of the image of the stack's GPU container, started with its GPU request."""
    for name in ("triton_server", "fastapi_server"):
        c = containers.get(name)
        if c is None:
            continue
        request = gpu_request(c)
        if not request:
            continue
        image = (c.get("Config") or {}).get("Image") or c.get("Image") or ""
        argv = ["docker", "run", "--rm", "--network", "none", *request, "--entrypoint", "python3", image,
                "-c", CUINIT]
        res = run(argv, timeout=180)
        return {"like": name, "image": image, "request": request, "run": res, "result": last_json(res)}
    return {"like": None}


# --- Docker ------------------------------------------------------------------------------------


def disk(path: str) -> dict[str, Any]:
    try:
        st = os.statvfs(path)
        dev = os.stat(path).st_dev
    except OSError as exc:
        return {"path": path, "error": str(exc.strerror)}
    return {"path": path, "free": st.f_bavail * st.f_frsize, "total": st.f_blocks * st.f_frsize, "dev": dev}


def docker_facts() -> dict[str, Any]:
    res = run(["docker", "info", "--format", "{{json .}}"], timeout=30, cap=READ_CAP)
    info = last_json(res) if res["rc"] == 0 else None
    out: dict[str, Any] = {"rc": res["rc"], "error": res.get("error", ""), "err": res["err"][-500:]}
    if not isinstance(info, dict):
        return out
    root = str(info.get("DockerRootDir") or "")
    status = {str(k): str(v) for k, v in (info.get("DriverStatus") or []) if isinstance(k, str)}
    out.update(version=str(info.get("ServerVersion") or ""), driver=str(info.get("Driver") or ""),
               root=root, driver_type=status.get("driver-type", ""), disks=[disk(root)] if root else [])
    # the containerd image store (Engine 29's default) keeps the images under containerd's root
    if status.get("driver-type", "").startswith("io.containerd.snapshotter") and os.path.isdir(
            "/var/lib/containerd"):
        extra = disk("/var/lib/containerd")
        if all(d.get("dev") != extra.get("dev") for d in out["disks"]):
            out["disks"].append(extra)
    return out


def inspect(names: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    res = run(["docker", "inspect", *names], timeout=30, cap=READ_CAP)
    try:
        found = json.loads(res["out"]) if res["out"].strip().startswith("[") else []
    except ValueError:
        found = []
    return {str(c.get("Name", "")).lstrip("/"): c for c in found if isinstance(c, dict)}


def container_facts(c: dict[str, Any] | None) -> dict[str, Any] | None:
    if c is None:
        return None
    state = c.get("State") or {}
    return {"running": bool(state.get("Running")), "status": str(state.get("Status") or ""),
            "exit_code": state.get("ExitCode"), "restarting": bool(state.get("Restarting")),
            "image": str((c.get("Config") or {}).get("Image") or ""),
            "mounts": [{"source": str(m.get("Source") or ""), "destination": str(m.get("Destination") or ""),
                        "rw": bool(m.get("RW"))} for m in c.get("Mounts") or []][:20],
            "gpu_request": gpu_request(c)}


# --- Jupyter -----------------------------------------------------------------------------------


def jupyter_facts(running: bool) -> dict[str, Any]:
    if not running:
        return {}
    found = run(["docker", "exec", "jupyter", "python3", "-c", FIND_JUPYTER], timeout=60)
    out: dict[str, Any] = {"find": {k: found[k] for k in ("rc", "err") if k in found}, "servers": []}
    data = last_json(found)
    servers = data.get("servers") if isinstance(data, dict) else None
    if not isinstance(servers, list) or not servers:
        return out
    out["servers"] = servers
    server = servers[0]
    root = str(server.get("root_dir") or "/work")
    user = f"{int(server['uid'])}:{int(server['gid'])}"
    wrote = run(["docker", "exec", "-u", user, "jupyter", "python3", "-c", WRITE_PROBE, root], timeout=60)
    out["write"] = {"as": user, "root_dir": root, "rc": wrote["rc"], "err": wrote["err"][-500:],
                    "result": last_json(wrote)}
    return out


# --- Triton ------------------------------------------------------------------------------------


def http(url: str, data: bytes | None = None, headers: dict[str, str] | None = None,
         timeout: float = 5) -> tuple[int | None, bytes, str]:
    req = urllib.request.Request(url, data=data, headers=headers or {},
                                 method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(4 * 2**20), ""
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(4000), ""
    except Exception as exc:  # noqa: BLE001 - any failure to reach it is a fact to report
        return None, b"", str(exc)[:300]


def gpu_metrics() -> dict[str, Any]:
    """``nv_gpu_utilization`` (its GPUs and their values) from one scrape of Triton's metrics."""
    status, body, error = http(METRICS)
    if status != 200:
        return {"status": status, "error": error}
    values = {}
    for line in body.decode("utf-8", "replace").splitlines():
        if line.startswith(("nv_gpu_utilization{", "nv_gpu_utilization ")):
            labels, _, value = line.rpartition(" ")
            try:
                v = float(value)
            except ValueError:
                continue
            if math.isfinite(v):
                values[labels[:200]] = v
    return {"status": status, "values": values}


def load_request(model: str) -> tuple[bytes, dict[str, str]] | None:
    """An inference request for ``model`` of zeros (Triton's binary tensor extension), or None when an
    input is not numeric or its shape not fixed enough to fill."""
    status, body, _ = http(f"{TRITON}/v2/models/{model}/config")
    if status != 200:
        return None
    try:
        cfg = json.loads(body)
    except ValueError:
        return None
    batch = [1] if int(cfg.get("max_batch_size") or 0) > 0 else []
    inputs, blobs = [], []
    for spec in cfg.get("input") or []:
        dtype = str(spec.get("data_type", "")).removeprefix("TYPE_")
        if dtype not in SIZES:
            return None
        shape = batch + [1 if int(d) < 0 else int(d) for d in spec.get("dims") or []]
        n = SIZES[dtype] * math.prod(shape)
        if n > MAX_INPUT_BYTES:
            return None
        inputs.append({"name": spec.get("name"), "shape": shape, "datatype": dtype,
                       "parameters": {"binary_data_size": n}})
        blobs.append(bytes(n))
    if not inputs:
        return None
    header = json.dumps({"inputs": inputs}).encode()
    return header + b"".join(blobs), {"Inference-Header-Content-Length": str(len(header)),
                                       "Content-Type": "application/octet-stream"}


def gpu_load(models: list[str], seconds: float) -> dict[str, Any]:
    """Requests to the first READY model that zeros can feed, from 4 threads for ``seconds``, while the
    metrics are scraped every half second."""
    chosen = None
    for model in models:
        req = load_request(model)
        if req is not None:
            chosen = (model, req)
            break
    out: dict[str, Any] = {"model": chosen[0] if chosen else None, "ok": 0, "failed": 0, "error": "",
                           "samples": []}
    stop = time.monotonic() + seconds
    lock = threading.Lock()

    def worker() -> None:
        assert chosen is not None
        model, (body, headers) = chosen
        while time.monotonic() < stop:
            status, resp, error = http(f"{TRITON}/v2/models/{model}/infer", body, headers, timeout=30)
            with lock:
                if status == 200:
                    out["ok"] += 1
                else:
                    out["failed"] += 1
                    out["error"] = out["error"] or (error or f"HTTP {status}: "
                                                    + resp[:300].decode("utf-8", "replace"))

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(4 if chosen else 0)]
    for t in threads:
        t.start()
    while True:
        out["samples"].append(gpu_metrics())
        if time.monotonic() >= stop:
            break
        time.sleep(0.5)
    for t in threads:
        t.join(timeout=35)
    out["samples"] = out["samples"][-40:]
    return out


def triton_facts(running: bool, gpus: int, load_seconds: float) -> dict[str, Any]:
    if not running:
        return {}
    status, _, error = http(f"{TRITON}/v2/health/ready")
    out: dict[str, Any] = {"ready_status": status, "ready_error": error, "models": []}
    st, body, _ = http(f"{TRITON}/v2/repository/index", b"{}")
    try:
        index = json.loads(body) if st == 200 else []
        out["models"] = sorted(str(m["name"]) for m in index if m.get("state") == "READY")[:50]
    except (ValueError, KeyError, TypeError, AttributeError):
        out["models"] = []
    if gpus > 0 and status == 200:
        out["load"] = gpu_load(out["models"], load_seconds)
    return out


# --- the whole probe ---------------------------------------------------------------------------


def probe(load_seconds: float) -> dict[str, Any]:
    gpus = nvidia_pci()
    facts: dict[str, Any] = {"probe": 1, "gpus_pci": gpus,
                             "apt_locks": [s for s in map(lock_state, APT_LOCKS) if s is not None]}
    if gpus > 0:
        smi = run(["nvidia-smi", "--query-gpu=index,name,compute_cap,driver_version",
                   "--format=csv,noheader"], timeout=30)
        if smi["rc"] not in (0, None):  # an old driver refuses compute_cap: the names tell it
            smi["without_compute_cap"] = run(["nvidia-smi", "--query-gpu=index,name,driver_version",
                                              "--format=csv,noheader"], timeout=30)
        facts["nvidia_smi"] = smi
        facts["ctk_version"] = run(["nvidia-ctk", "--version"], timeout=30)
        facts["cdi_list"] = run(["nvidia-ctk", "cdi", "list"], timeout=30)
    facts["docker"] = docker_facts()
    found = inspect(CONTAINERS) if facts["docker"].get("driver") else {}
    # None: Docker does not answer, so nothing is known of the containers
    containers = {name: container_facts(found.get(name)) for name in CONTAINERS}
    facts["containers"] = containers if facts["docker"].get("driver") else None
    if gpus > 0:
        facts["cuinit"] = cuinit(found)
    jupyter, triton = containers["jupyter"], containers["triton_server"]
    facts["jupyter"] = jupyter_facts(bool(jupyter and jupyter["running"]))
    facts["triton"] = triton_facts(bool(triton and triton["running"]), gpus, load_seconds)
    return facts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="doctorprobe")
    parser.add_argument("--load-seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    seconds = args.load_seconds if math.isfinite(args.load_seconds) else 5.0
    print(json.dumps(probe(min(max(seconds, 1.0), 60.0))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
