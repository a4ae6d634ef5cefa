"""``serve-system doctor`` on the session's rehearsal nodes, through SSH as an instructor runs it.

As site.yml leaves the cluster, every check is ok or skipped (the nodes have no GPU: the GPU checks say
so) and the command exits 0. Then Jupyter's work folder is made read-only on one node, inside the
jupyter container (its /work remounted read-only in the container's mount namespace, from the node:
the server cannot write it whoever it runs as), and where the server runs as a user other than root,
the folder on the node is also made unwritable by mode (``chmod a-w``): each time the jupyter_work
check alone fails, with its fix, and the command exits 1. Last, a process on the node holds dpkg's
lock and apt_locks names it. Everything is restored in a ``finally``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from serve_system import doctorprobe
from serve_system.doctor import CHECKS
from serve_system.podman import podman

from .conftest import RehearsalCluster

pytestmark = pytest.mark.windows("none")

WORK = "/opt/serve-system/work"
NO_GPU = "no GPU (no NVIDIA display device on the PCI bus)"
GPU_CHECKS = {"gpu_driver", "nvidia_toolkit", "cdi_devices", "cuinit", "triton_gpu_metrics"}


def _doctor(cluster: RehearsalCluster, *args: str) -> tuple[int, str]:
    proc = subprocess.run([str(Path(sys.executable).parent / "serve-system"), "doctor",
                           "-i", str(cluster.inventory), "--known-hosts", str(cluster.known_hosts), *args],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.stderr == "", proc.stderr[-2000:]
    return proc.returncode, proc.stdout


def _checks(out: str) -> dict[str, dict[str, dict[str, Any]]]:
    doc = json.loads(out)
    return {n["node"]: {c["name"]: c for c in n["checks"]} for n in doc["nodes"]}


def test_doctor_is_ok_on_every_node_as_site_yml_leaves_them(rehearsal_cluster: RehearsalCluster) -> None:
    rc, out = _doctor(rehearsal_cluster, "--json")
    got = _checks(out)
    assert sorted(got) == sorted(n.name for n in rehearsal_cluster.nodes)
    for node, checks in got.items():
        assert list(checks) == list(CHECKS), node
        for name, c in checks.items():
            if name in GPU_CHECKS:
                assert (c["status"], c["detail"]) == ("skipped", NO_GPU)
            else:
                assert c["status"] == "ok", (node, c)
        assert "no apt or dpkg lock held" in checks["apt_locks"]["detail"]
        assert checks["docker_storage"]["detail"].startswith("overlay2")
        assert f"can write /work ({WORK} on the node)" in checks["jupyter_work"]["detail"]
        assert "food_classifier" in checks["triton_ready"]["detail"]
    assert rc == 0
    rc, text = _doctor(rehearsal_cluster)
    assert rc == 0 and text.splitlines()[-1] == f"doctor: {len(got)} of {len(got)} node(s) pass"


def _jupyter_work_fails(cluster: RehearsalCluster, node: str, why: str) -> dict[str, Any]:
    """The doctor's verdicts on ``node``: jupyter_work failed with ``why``, nothing else failed, exit 1."""
    rc, out = _doctor(cluster, "--limit", node, "--json")
    checks = _checks(out)[node]
    assert rc == 1
    assert [n for n, c in checks.items() if c["status"] == "FAIL"] == ["jupyter_work"], checks
    c = checks["jupyter_work"]
    assert f"cannot write /work ({WORK} on the node) ({why}): the notebook cannot save" in c["detail"], c
    return dict(c)


def test_a_work_folder_jupyter_cannot_write_fails_its_check_with_the_fix(
        rehearsal_cluster: RehearsalCluster) -> None:
    node = rehearsal_cluster.nodes[-1].name

    def in_jupyter(*argv: str) -> subprocess.CompletedProcess[str]:
        return rehearsal_cluster.exec(node, "docker", "exec", "-u", "0", "jupyter", *argv)

    def remount(mode: str) -> None:
        # from the node, in the container's mount namespace: inside the container, even a privileged
        # `docker exec` was refused the remount ("mount: /work: permission denied")
        pid = rehearsal_cluster.exec(node, "docker", "inspect", "-f", "{{.State.Pid}}", "jupyter").stdout
        rehearsal_cluster.exec(node, "nsenter", "-t", pid.strip(), "-m", "mount", "-o",
                               f"remount,bind,{mode}", "/work")

    remount("ro")
    try:
        c = _jupyter_work_fails(rehearsal_cluster, node, "Read-only file system")
        assert c["fix"] == ("the folder is mounted read-only: docker restart jupyter (a fresh read-write "
                            "mount), or run playbooks/deploy.yml")
        rc, text = _doctor(rehearsal_cluster, "--limit", node)
        line = next(ln for ln in text.splitlines() if ln.startswith(f"{node}  jupyter_work "))
        assert rc == 1 and "  FAIL: the Jupyter server runs as " in line
        assert "; fix: the folder is mounted" in line
    finally:
        remount("rw")
    in_jupyter("touch", "/work/.doctor-restored")  # writable again
    in_jupyter("rm", "/work/.doctor-restored")

    rc, out = _doctor(rehearsal_cluster, "--limit", node, "--json")
    server = out[out.index("the Jupyter server runs as"):].split(")")[0]
    assert rc == 0, out
    if "(uid 0," in server:
        return  # root writes through any mode: the read-only mount above is the case that fails it
    mode = rehearsal_cluster.exec(node, "stat", "-c", "%a", WORK).stdout.strip()
    rehearsal_cluster.exec(node, "chmod", "a-w", WORK)
    try:
        c = _jupyter_work_fails(rehearsal_cluster, node, "Permission denied")
        assert c["fix"].startswith("run playbooks/site.yml (it gives the work folder to the server's user); "
                                   "by hand: sudo chown -R ")
    finally:
        rehearsal_cluster.exec(node, "chmod", mode, WORK)
    assert _doctor(rehearsal_cluster, "--limit", node)[0] == 0


PIDFILE = "/run/doctor-lock-holder.pid"
HOLD_LOCK = """
import fcntl, os, time
fd = os.open("/var/lib/dpkg/lock-frontend", os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX)
with open("PIDFILE", "w") as fh:
    fh.write(str(os.getpid()))
time.sleep(60)
""".replace("PIDFILE", PIDFILE)


def test_a_held_dpkg_lock_is_named_with_its_holder(rehearsal_cluster: RehearsalCluster) -> None:
    node = rehearsal_cluster.nodes[-1].name
    podman("exec", "-d", node, "python3", "-c", HOLD_LOCK, timeout=60)
    pid = ""
    try:
        for _ in range(100):
            pid = rehearsal_cluster.exec(node, "cat", PIDFILE, check=False).stdout.strip()
            if pid:
                break
            time.sleep(0.1)
        assert pid, "the lock holder did not start"
        rc, out = _doctor(rehearsal_cluster, "--limit", node, "--json")
        c = _checks(out)[node]["apt_locks"]
        assert rc == 1 and c["status"] == "FAIL"
        assert c["detail"] == f"/var/lib/dpkg/lock-frontend held by pid {pid} (python3)"
        assert "cloud-init status --wait" in c["fix"]
    finally:
        if pid:
            rehearsal_cluster.exec(node, "kill", pid, check=False)
        rehearsal_cluster.exec(node, "rm", "-f", PIDFILE)


def test_the_probes_load_is_served_by_a_real_triton(rehearsal_cluster: RehearsalCluster) -> None:
    """The GPU nodes' load (zeros through Triton's binary tensor extension) against the node's real Triton:
    the BYTES-input food_classifier is passed over, food_classifier_onnx answers every request, and the
    metrics port answers (with no nv_gpu_utilization: the rehearsal Triton runs on the CPU)."""
    node = rehearsal_cluster.nodes[0].name
    code = ("import json, sys\nsys.path.insert(0, '/run')\nimport doctorprobe\n"
            "print(json.dumps(doctorprobe.gpu_load(['food_classifier', 'food_classifier_onnx'], 3)))\n")
    podman("exec", "-i", node, "sh", "-c", "cat > /run/doctorprobe.py",
           input=Path(doctorprobe.__file__).read_text(), timeout=60)
    try:
        out = json.loads(rehearsal_cluster.exec(node, "python3", "-c", code).stdout.splitlines()[-1])
    finally:
        rehearsal_cluster.exec(node, "rm", "-f", "/run/doctorprobe.py")
    assert out["model"] == "food_classifier_onnx"
    assert out["ok"] > 0 and out["failed"] == 0, out["error"]
    assert out["samples"] and all(s == {"status": 200, "values": {}} for s in out["samples"])
