"""``serve-system doctor``: the verdicts on a node's facts, the probe's own pieces, the command line.

The facts are what :mod:`serve_system.doctorprobe` prints. ``fixtures/doctor/rehearsal_node.json`` is its
answer recorded on a rehearsal node as site.yml leaves it (no GPU). A GPU node's facts are built below by
hand, in the probe's form, from the outputs nvidia-smi, nvidia-ctk and Triton print (``gpu_node``): no
GPU machine took part (docs/real-node.md says what a real node still has to show). Every judgement is also
made on hostile facts: each field of both replaced by values of the wrong type, control characters and
huge numbers, the verdict must still be one line per check, never a traceback.
"""

from __future__ import annotations

import copy
import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from serve_system import doctor, doctorprobe
from serve_system.cli import main
from serve_system.doctor import CHECKS, FAIL, OK, SKIPPED, judge
from serve_system.provision import board
from serve_system.provision.nodes import Node, write_inventory

FIXTURE = Path(__file__).parent / "fixtures" / "doctor" / "rehearsal_node.json"


def rehearsal_node() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text())
    return data


def _run(out: str = "", rc: int | None = 0, err: str = "", error: str = "") -> dict[str, Any]:
    res: dict[str, Any] = {"rc": rc, "out": out, "err": err}
    if error:
        res["error"] = error
    return res


GPU_REQUEST = ["--gpus", "driver=nvidia,count=all,capabilities=gpu"]


def gpu_node() -> dict[str, Any]:
    """A gpu_p100 node where every check passes, in the probe's form."""
    f = rehearsal_node()
    f["gpus_pci"] = 2
    f["nvidia_smi"] = _run("0, Tesla P100-PCIE-16GB, 6.0, 560.35.03\n"
                           "1, Tesla P100-PCIE-16GB, 6.0, 560.35.03\n")
    f["ctk_version"] = _run("NVIDIA Container Toolkit CLI version 1.17.8\n"
                            "commit: f202b80a9b9d0db00d9b1d73c0128c8962c55f4d\n")
    f["cdi_list"] = _run("nvidia.com/gpu=0\nnvidia.com/gpu=1\nnvidia.com/gpu=all\n",
                         err='time="2026-11-28T10:00:00Z" level=info msg="Found 3 CDI devices"\n')
    f["containers"]["triton_server"]["gpu_request"] = GPU_REQUEST
    image = f["containers"]["triton_server"]["image"]
    f["cuinit"] = {"like": "triton_server", "image": image, "request": GPU_REQUEST,
                   "run": _run('{"rc": 0, "count_rc": 0, "devices": 2}\n'),
                   "result": {"rc": 0, "count_rc": 0, "devices": 2}}
    labels = ['nv_gpu_utilization{gpu_uuid="GPU-0a1b"}', 'nv_gpu_utilization{gpu_uuid="GPU-2c3d"}']
    f["triton"]["load"] = {"model": "food_classifier_onnx", "ok": 212, "failed": 0, "error": "",
                           "samples": [{"status": 200, "values": {labels[0]: 0.0, labels[1]: 0.0}},
                                       {"status": 200, "values": {labels[0]: 0.41, labels[1]: 0.0}}]}
    return f


def by_name(facts: Any, **kwargs: Any) -> dict[str, doctor.Check]:
    checks = judge(facts, **kwargs)
    return {c.name: c for c in checks}


# --- whole nodes ---------------------------------------------------------------------------------


def test_a_rehearsal_node_as_site_yml_leaves_it_is_ok_or_skipped_everywhere() -> None:
    checks = judge(rehearsal_node())
    assert [c.name for c in checks] == list(CHECKS)
    got = {c.name: c for c in checks}
    for name in ("gpu_driver", "nvidia_toolkit", "cdi_devices", "cuinit", "triton_gpu_metrics"):
        assert got[name].status == SKIPPED and "no GPU" in got[name].detail, got[name]
    for name in ("apt_locks", "docker_storage", "jupyter_work", "triton_ready"):
        assert got[name].status == OK, got[name]
    storage = got["docker_storage"].detail
    assert "overlay2" in storage and "free under /var/lib/docker" in storage
    assert "can write /work (/opt/serve-system/work on the node)" in got["jupyter_work"].detail
    assert "food_classifier_onnx" in got["triton_ready"].detail


def test_a_gpu_node_that_works_is_ok_on_every_line() -> None:
    got = by_name(gpu_node())
    assert {c.status for c in got.values()} == {OK}, [c for c in got.values() if c.status != OK]
    assert got["gpu_driver"].detail == "driver 560.35.03; 2 GPU(s): Tesla P100-PCIE-16GB (6.0) x2"
    assert got["nvidia_toolkit"].detail == "NVIDIA Container Toolkit 1.17.8"
    assert got["cdi_devices"].detail == ("3 CDI device(s): nvidia.com/gpu=0, nvidia.com/gpu=1, "
                                         "nvidia.com/gpu=all")
    assert "cuInit succeeded, 2 CUDA device(s)" in got["cuinit"].detail
    assert "started like triton_server (--gpus driver=nvidia,count=all,capabilities=gpu)" in \
        got["cuinit"].detail
    assert got["triton_gpu_metrics"].detail == (
        "nv_gpu_utilization for 2 GPU(s), peak 41% while 212 requests ran on food_classifier_onnx")


def test_every_line_is_one_line_with_its_verdict_first() -> None:
    f = gpu_node()
    f["apt_locks"][0] = {"path": "/var/lib/dpkg/lock-frontend", "held": True,
                         "holders": [{"pid": 812, "comm": "unattended-upgr"}]}
    for c in judge(f):
        line = c.line()
        assert "\n" not in line and line.split(":")[0] in (OK, SKIPPED, FAIL)
        assert (c.status == FAIL) == ("; fix: " in line)


# --- each check's failures and their fixes --------------------------------------------------------


def test_a_held_apt_lock_names_its_holder_and_the_wait() -> None:
    f = rehearsal_node()
    f["apt_locks"][0] = {"path": "/var/lib/dpkg/lock-frontend", "held": True,
                         "holders": [{"pid": 812, "comm": "unattended-upgr"}]}
    c = by_name(f)["apt_locks"]
    assert c.status == FAIL
    assert c.detail == "/var/lib/dpkg/lock-frontend held by pid 812 (unattended-upgr)"
    assert "cloud-init status --wait" in c.fix and "never delete a lock file" in c.fix
    f["apt_locks"][0]["holders"] = []  # an open file description lock of a process gone from /proc
    assert by_name(f)["apt_locks"].detail.endswith("held by an unknown process")


@pytest.mark.parametrize(("smi", "detail", "fix"), [
    (_run(rc=None, error="not found"), "nvidia-smi not found on a node with 2 NVIDIA GPU(s)",
     "install the NVIDIA driver"),
    (_run(rc=9, out="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"),
     "nvidia-smi fails: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
     "DKMS"),
    (_run("0, Tesla P100-PCIE-16GB, 6.0, 560.35.03\n"),
     "nvidia-smi sees 1 of the 2 NVIDIA GPU(s) on the PCI bus", "--exclude-node"),
    (_run("0, Tesla K80, 3.7, 470.256.02\n1, Tesla K80, 3.7, 470.256.02\n"),
     "Tesla K80 (3.7): compute capability below 6.0, the oldest the stack's Triton (24.10) runs on",
     "gpu_p100"),
])
def test_the_driver_check_fails_with_its_fix(smi: dict[str, Any], detail: str, fix: str) -> None:
    f = gpu_node()
    f["nvidia_smi"] = smi
    c = by_name(f)["gpu_driver"]
    assert (c.status, c.detail) == (FAIL, detail) and fix in c.fix


def test_an_old_driver_that_refuses_compute_cap_is_judged_by_the_gpus_name() -> None:
    f = gpu_node()
    f["nvidia_smi"] = _run(rc=2, out='Field "compute_cap" is not a valid field to query.\n')
    f["nvidia_smi"]["without_compute_cap"] = _run("0, Tesla P100-PCIE-16GB, 470.256.02\n"
                                                  "1, Tesla P100-PCIE-16GB, 470.256.02\n")
    assert by_name(f)["gpu_driver"].detail == "driver 470.256.02; 2 GPU(s): Tesla P100-PCIE-16GB (6.0) x2"
    f["nvidia_smi"]["without_compute_cap"] = _run("0, Tesla M40, 470.256.02\n1, Tesla M40, 470.256.02\n")
    assert by_name(f)["gpu_driver"].status == FAIL


def test_the_toolkit_and_cdi_checks() -> None:
    f = gpu_node()
    f["ctk_version"] = f["cdi_list"] = _run(rc=None, error="not found")
    got = by_name(f)
    assert got["nvidia_toolkit"].status == FAIL and "not installed" in got["nvidia_toolkit"].detail
    assert "playbooks/site.yml" in got["nvidia_toolkit"].fix
    f = gpu_node()
    f["cdi_list"] = _run("nvidia.com/gpu=0\nnvidia.com/gpu=1\nnvidia.com/gpu=2\nnvidia.com/gpu=3\n"
                         "nvidia.com/gpu=all\n")
    c = by_name(f)["cdi_devices"]
    assert c.status == FAIL and "4 GPU(s) by index, the node has 2" in c.detail
    assert c.fix == "sudo nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml"
    f["cdi_list"] = _run("", err='level=info msg="Found 0 CDI devices"\n')
    c = by_name(f)["cdi_devices"]
    assert c.status == OK and "no CDI devices" in c.detail
    # the UUID names newer toolkits add beside the index ones are devices, not GPUs to count
    f["cdi_list"] = _run("nvidia.com/gpu=0\nnvidia.com/gpu=1\nnvidia.com/gpu=GPU-0a1b\n"
                         "nvidia.com/gpu=GPU-2c3d\nnvidia.com/gpu=all\n")
    assert by_name(f)["cdi_devices"].status == OK


def test_cuinit_failing_in_the_stacks_route_fails_with_the_toolkit_fix() -> None:
    f = gpu_node()
    f["cuinit"]["result"] = {"rc": 999, "name": "CUDA_ERROR_UNKNOWN"}
    c = by_name(f)["cuinit"]
    assert c.status == FAIL
    assert c.detail.startswith("cuInit returned 999 (CUDA_ERROR_UNKNOWN) in a container of ")
    assert "NVIDIA/nvidia-container-toolkit#1967" in c.detail
    assert "playbooks/site.yml" in c.fix and "nvidia-ctk cdi generate" in c.fix
    f["cuinit"]["result"] = {"error": "libcuda.so.1 cannot be loaded: libcuda.so.1: cannot open shared "
                                      "object file"}
    assert "libcuda.so.1 cannot be loaded" in by_name(f)["cuinit"].detail
    f["cuinit"] = {"like": "triton_server", "image": "x", "request": GPU_REQUEST, "result": None,
                   "run": _run(rc=125, err="docker: Error response from daemon: could not select device "
                                           'driver "nvidia" with capabilities: [[gpu]].\n')}
    assert "could not select device driver" in by_name(f)["cuinit"].detail
    f["cuinit"] = {"like": None}
    c = by_name(f)["cuinit"]
    assert c.status == FAIL and "no container of the stack asks for the GPUs" in c.detail
    assert "serve_gpus" in c.fix
    f["cuinit"] = {"like": "triton_server", "image": "x", "request": GPU_REQUEST, "run": _run(),
                   "result": {"rc": 0, "devices": 1}}
    assert "CUDA sees 1 of the 2 GPU(s)" in by_name(f)["cuinit"].detail


def test_docker_storage_fails_on_vfs_low_disk_and_a_silent_docker() -> None:
    f = rehearsal_node()
    f["docker"]["driver"] = "vfs"
    f["docker"]["disks"] = [{"path": "/var/lib/docker", "free": 3 * 2**30, "total": 50 * 2**30, "dev": 1}]
    c = by_name(f)["docker_storage"]
    assert c.status == FAIL
    assert c.detail == ("storage driver vfs (it copies every layer whole: slow, and disk-hungry); only "
                        "3.0 GiB free under /var/lib/docker (at least 10 GiB)")
    assert "docker_storage_driver: overlay2" in c.fix and "docker image prune -a" in c.fix
    assert by_name(f, min_free_gib=2)["docker_storage"].detail.startswith("storage driver vfs")
    f["docker"] = {"rc": 1, "error": "",
                   "err": "Cannot connect to the Docker daemon at unix:///var/run/docker.sock."}
    f["containers"], f["jupyter"], f["triton"] = None, {}, {}  # as the probe says it then
    got = by_name(f)
    c = got["docker_storage"]
    assert c.status == FAIL and "Cannot connect to the Docker daemon" in c.detail
    assert "systemctl start docker" in c.fix
    assert got["jupyter_work"].line() == ("FAIL: Docker does not answer, so the jupyter container cannot be "
                                          "looked at; fix: see docker_storage")
    assert got["triton_ready"].detail == ("Docker does not answer, so the triton_server container cannot be "
                                          "looked at")


def _jupyter_cannot_write(code: int, error: str) -> doctor.Check:
    f = rehearsal_node()
    f["jupyter"]["servers"][0].update(uid=1000, gid=100, user="jovyan")
    f["jupyter"]["write"]["as"] = "1000:100"
    f["jupyter"]["write"]["result"] = {"path": "/work/.serve-system-doctor-7", "ok": False, "errno": code,
                                       "error": error}
    return by_name(f)["jupyter_work"]


def test_jupyter_without_write_access_fails_with_the_chown_fix() -> None:
    c = _jupyter_cannot_write(13, "Permission denied")
    assert c.status == FAIL
    assert c.detail == ("the Jupyter server runs as jovyan (uid 1000, gid 100) and cannot write /work "
                        "(/opt/serve-system/work on the node) (Permission denied): the notebook cannot save")
    assert c.fix == ("run playbooks/site.yml (it gives the work folder to the server's user); by hand: "
                     "sudo chown -R 1000:100 /opt/serve-system/work")
    c = _jupyter_cannot_write(30, "Read-only file system")
    assert "(Read-only file system)" in c.detail and "docker restart jupyter" in c.fix
    assert "free space" in _jupyter_cannot_write(28, "No space left on device").fix


def test_jupyter_down_or_without_a_server_fails() -> None:
    f = rehearsal_node()
    f["containers"]["jupyter"].update(running=False, status="exited", exit_code=1)
    c = by_name(f)["jupyter_work"]
    assert (c.status, c.detail) == (FAIL, "the jupyter container is exited (exit code 1)")
    f = rehearsal_node()
    f["containers"]["jupyter"] = None
    assert by_name(f)["jupyter_work"].fix == "run playbooks/deploy.yml"
    f = rehearsal_node()
    f["jupyter"] = {"find": {"rc": 126, "err": "OCI runtime exec failed"}, "servers": []}
    c = by_name(f)["jupyter_work"]
    assert c.status == FAIL and "no Jupyter server process" in c.detail
    assert "OCI runtime exec failed" in c.detail


def test_triton_down_not_ready_and_fastapi_mode() -> None:
    f = gpu_node()
    f["containers"]["triton_server"].update(running=False, status="restarting", exit_code=1)
    got = by_name(f)
    assert got["triton_ready"].status == FAIL and "restarting (exit code 1)" in got["triton_ready"].detail
    assert got["triton_gpu_metrics"].status == SKIPPED  # its failure is said once, on triton_ready
    f = gpu_node()
    f["triton"]["ready_status"] = 503
    assert by_name(f)["triton_ready"].detail == "Triton is not ready (HTTP 503)"
    f = rehearsal_node()
    f["containers"]["triton_server"] = None
    f["containers"]["fastapi_server"] = {"running": True, "status": "running", "image": "x", "mounts": [],
                                         "gpu_request": []}
    c = by_name(f)["triton_ready"]
    assert c.status == SKIPPED and "fastapi mode" in c.detail


def test_triton_gpu_metrics_fail_without_gpus_seen_or_with_an_idle_gpu() -> None:
    f = gpu_node()
    for s in f["triton"]["load"]["samples"]:
        s["values"] = {}
    c = by_name(f)["triton_gpu_metrics"]
    assert c.status == FAIL and "no nv_gpu_utilization" in c.detail and "cuinit" in c.fix
    f = gpu_node()
    for s in f["triton"]["load"]["samples"]:
        s["values"] = dict.fromkeys(s["values"], 0.0)
    c = by_name(f)["triton_gpu_metrics"]
    assert c.status == FAIL and "the model runs on the CPU" in c.detail
    f = gpu_node()
    f["triton"]["load"].update(ok=0, failed=30, error="HTTP 400: unexpected shape for input 'input'")
    c = by_name(f)["triton_gpu_metrics"]
    assert c.status == FAIL and "every request to food_classifier_onnx failed (30)" in c.detail
    f = gpu_node()
    f["triton"]["load"]["samples"] = [{"status": None, "error": "[Errno 111] Connection refused"}]
    c = by_name(f)["triton_gpu_metrics"]
    assert "metrics port (8002) does not answer ([Errno 111] Connection refused)" in c.detail
    f = gpu_node()
    f["triton"]["load"]["model"] = None
    c = by_name(f)["triton_gpu_metrics"]
    assert c.status == OK and "no load sent" in c.detail


# --- hostile facts -------------------------------------------------------------------------------

HOSTILE: list[Any] = [None, True, -1, 10**29, 1e30, -1e30, "", "\x1b[2J\x1b]0;pwned\x07\n" + "x" * 5000,
                      [], {}, [None], {"": None}]


def _paths(node: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if at:
        yield at
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*at, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*at, i))


def _assert_lines(checks: list[doctor.Check]) -> None:
    assert [c.name for c in checks] in (list(CHECKS), ["probe"])
    for c in checks:
        line = c.line()
        assert c.status in (OK, SKIPPED, FAIL)
        assert not any(ord(ch) < 32 or 0x7f <= ord(ch) < 0xa0 for ch in line), line[:200]
        assert len(line) < 3000


@pytest.mark.parametrize("base", [rehearsal_node, gpu_node])
def test_every_field_of_the_facts_replaced_by_hostile_values_gives_lines_never_a_traceback(base: Any) -> None:
    facts = base()
    count = 0
    for path in list(_paths(facts)):
        for value in HOSTILE:
            f = copy.deepcopy(facts)
            node = f
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
            _assert_lines(judge(f))
            count += 1
    assert count > 500


@pytest.mark.parametrize("facts", [None, [], "facts", 1, {}, {"probe": 2}, {"probe": 1},
                                   {"probe": 1, "gpus_pci": 65}, {"probe": 1, "gpus_pci": True}])
def test_facts_of_another_form_fail_in_lines(facts: Any) -> None:
    checks = judge(facts)
    _assert_lines(checks)
    assert all(c.status == FAIL for c in checks)


def test_a_malformed_field_fails_its_own_check_only() -> None:
    f = gpu_node()
    f["nvidia_smi"]["out"] = "0, Tesla P100-PCIE-16GB\n1, x\n"  # a row of the wrong width
    got = by_name(f)
    assert got["gpu_driver"].status == FAIL and "malformed" in got["gpu_driver"].detail
    assert [n for n, c in got.items() if c.status == FAIL] == ["gpu_driver"]


# --- the probe's pieces, run here ----------------------------------------------------------------


def test_output_the_probe_parses_itself_is_kept_whole_and_what_it_ships_is_cut() -> None:
    """``docker info --format '{{json .}}'`` and ``docker inspect`` print far more than the facts keep: cut,
    they were no JSON, and a rehearsal node's Docker read as silent (seen in the first CI run)."""
    big = f"import json; print(json.dumps({{'x': 'y' * {3 * doctorprobe.CAP}}}))"
    whole = doctorprobe.run([sys.executable, "-c", big], timeout=30, cap=doctorprobe.READ_CAP)
    assert doctorprobe.last_json(whole) == {"x": "y" * 3 * doctorprobe.CAP}
    cut = doctorprobe.run([sys.executable, "-c", big], timeout=30)
    assert len(cut["out"]) < doctorprobe.CAP + 10
    assert doctorprobe.last_json(cut) != doctorprobe.last_json(whole)
    assert doctorprobe.run(["/nonexistent/docker"], timeout=5) == {"rc": None, "error": "not found",
                                                                   "out": "", "err": ""}
    assert doctorprobe.run([sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.5)["error"] == \
        "timed out after 0.5 s"


def test_the_gpu_request_is_the_stacks_own() -> None:
    compose = {"HostConfig": {"DeviceRequests": [{"Driver": "nvidia", "Count": -1, "DeviceIDs": None,
                                                  "Capabilities": [["gpu"]], "Options": {}}]}}
    assert doctorprobe.gpu_request(compose) == GPU_REQUEST
    two = {"HostConfig": {"Runtime": "nvidia", "DeviceRequests": [
        {"Driver": "", "Count": 0, "DeviceIDs": ["0", "1"], "Capabilities": [["gpu", "utility"]]}]}}
    assert doctorprobe.gpu_request(two) == ["--runtime", "nvidia",
                                            "--gpus", '"device=0,1","capabilities=gpu,utility"']
    assert doctorprobe.gpu_request({"HostConfig": {"Runtime": "runc"}}) == []


def test_a_held_lock_is_seen_with_its_holder_and_released_one_is_free(tmp_path: Path) -> None:
    lock = tmp_path / "lock-frontend"
    lock.touch()
    code = ("import fcntl, os, sys, time\n"
            f"fd = os.open({str(lock)!r}, os.O_RDWR); fcntl.lockf(fd, fcntl.LOCK_EX)\n"
            "print('locked', flush=True); time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        state = doctorprobe.lock_state(str(lock))
        assert state is not None and state["held"] is True
        assert [h["pid"] for h in state["holders"]] == [holder.pid]
    finally:
        holder.kill()
        holder.wait()
    assert doctorprobe.lock_state(str(lock)) == {"path": str(lock), "held": False}
    assert doctorprobe.lock_state(str(tmp_path / "absent")) is None
    fd = os.open(lock, os.O_RDWR)  # F_GETLK reports another process's lock, never the caller's own
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        assert doctorprobe.lock_state(str(lock)) == {"path": str(lock), "held": False}
    finally:
        os.close(fd)


def test_the_jupyter_server_is_found_by_its_command_line_not_its_wrappers(tmp_path: Path) -> None:
    started = [subprocess.Popen(["bash", "-c", f"exec -a {name} sleep 60"]) for name in
               ("jupyter-lab", "tini", "jupyter-nbconvert")]
    try:
        time.sleep(0.3)
        res = subprocess.run([sys.executable, "-c", doctorprobe.FIND_JUPYTER], capture_output=True, text=True,
                             check=True, timeout=60)
        found = {s["pid"]: s for s in json.loads(res.stdout)["servers"]}
        ours = {p.pid for p in started}
        assert set(found) & ours == {started[0].pid}, found
        server = found[started[0].pid]
        assert (server["uid"], server["gid"]) == (os.geteuid(), os.getegid())
        assert server["argv"].startswith("jupyter-lab 60")
    finally:
        for p in started:
            p.kill()
            p.wait()


def test_the_write_probe_writes_and_removes_or_says_why(tmp_path: Path) -> None:
    ok = subprocess.run([sys.executable, "-c", doctorprobe.WRITE_PROBE, str(tmp_path)], capture_output=True,
                        text=True, check=True)
    assert json.loads(ok.stdout)["ok"] is True and list(tmp_path.iterdir()) == []
    gone = subprocess.run([sys.executable, "-c", doctorprobe.WRITE_PROBE, str(tmp_path / "absent")],
                          capture_output=True, text=True, check=True)
    assert json.loads(gone.stdout) | {"path": ""} == {"path": "", "ok": False, "errno": 2,
                                                       "error": "No such file or directory"}


def test_a_load_request_fills_numeric_inputs_with_zeros(monkeypatch: pytest.MonkeyPatch) -> None:
    configs = {
        "food_classifier_onnx": {"max_batch_size": 16, "input": [{"name": "input", "data_type": "TYPE_FP32",
                                                                  "dims": [3, 224, 224]}]},
        "food_classifier": {"max_batch_size": 16, "input": [{"name": "INPUT_IMAGE",
                                                             "data_type": "TYPE_STRING", "dims": [1]}]},
        "ragged": {"max_batch_size": 0, "input": [{"name": "ids", "data_type": "TYPE_INT64",
                                                   "dims": [-1, 4]}]},
    }

    def http(url: str, *a: Any, **k: Any) -> tuple[int | None, bytes, str]:
        name = url.split("/v2/models/")[1].split("/")[0]
        return (200, json.dumps(configs[name]).encode(), "") if name in configs else (404, b"", "")

    monkeypatch.setattr(doctorprobe, "http", http)
    assert doctorprobe.load_request("food_classifier") is None  # a BYTES input: not made of zeros
    assert doctorprobe.load_request("absent") is None
    got = doctorprobe.load_request("food_classifier_onnx")
    assert got is not None
    body, headers = got
    size = int(headers["Inference-Header-Content-Length"])
    assert json.loads(body[:size]) == {"inputs": [{
        "name": "input", "shape": [1, 3, 224, 224], "datatype": "FP32",
        "parameters": {"binary_data_size": 4 * 3 * 224 * 224}}]}
    assert body[size:] == bytes(4 * 3 * 224 * 224)
    ragged = doctorprobe.load_request("ragged")
    assert ragged is not None and b'"shape": [1, 4], "datatype": "INT64"' in ragged[0]


# --- the command line ----------------------------------------------------------------------------


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    key = tmp_path / "id_ed25519"
    key.write_text("not a real key\n")
    nodes = [Node(f"node-{i}", "127.0.0.1", "cc", str(key), port=2200 + i, provider="local") for i in (1, 2)]
    write_inventory(nodes, tmp_path / "hosts.yml")
    (tmp_path / "known_hosts").write_text("")
    return tmp_path / "hosts.yml"


def test_the_command_prints_one_line_per_check_and_exits_1_on_a_failure(
        inventory: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    sent: list[tuple[str, str, tuple[str, ...]]] = []

    def ssh_python(node: Node, address: str, port: int, known_hosts: Path, script: str, *, timeout: int,
                   wait: float, args: tuple[str, ...] = ()) -> dict[str, Any] | str:
        sent.append((node.name, script, args))
        if node.name == "node-2":
            return "SSH: Connection refused"
        return rehearsal_node()

    monkeypatch.setattr(board, "ssh_python", ssh_python)
    assert main(["doctor", "-i", str(inventory), "--load-seconds", "3"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert sorted(n for n, _, _ in sent) == ["node-1", "node-2"]
    assert all(script == doctor.probe_script() and args == ("--load-seconds", "3")
               for _, script, args in sent)
    assert [ln.split()[1] for ln in out if ln.startswith("node-1  ")] == list(CHECKS)
    assert "node-1  jupyter_work        ok: the Jupyter server runs as " in "\n".join(out)
    assert "node-1: 4 ok, 5 skipped, 0 failed" in out
    assert any(ln.startswith("node-2  ssh ")
               and "FAIL: SSH: Connection refused; fix: check the node is up" in ln for ln in out)
    assert out[-1] == "doctor: 1 of 2 node(s) pass; failing: node-2"
    assert main(["doctor", "-i", str(inventory), "--limit", "node-1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is True and [n["node"] for n in doc["nodes"]] == ["node-1"]
    assert [c["name"] for c in doc["nodes"][0]["checks"]] == list(CHECKS)


def test_the_command_refuses_what_it_cannot_use_in_one_line(
        inventory: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(board, "ssh_python", lambda *a, **k: pytest.fail("no SSH for a refused command line"))
    assert main(["doctor", "-i", str(inventory), "--limit", "node-9,node-1"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"serve-system: error: --limit: no node of {inventory} matches 'node-9'; its nodes: node-1, node-2")
    assert main(["doctor", "-i", str(inventory), "--known-hosts", str(inventory.parent / "absent")]) == 2
    assert "known_hosts file not found" in capsys.readouterr().err
    (inventory.parent / "id_ed25519").unlink()
    assert main(["doctor", "-i", str(inventory)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "node node-1: SSH key" in err[0] and "not found" in err[0]
