"""site.yml on two rehearsal nodes at once: Docker, GPU role, nvtop, the serve stack, Triton serving."""

from __future__ import annotations

import base64
import io
import json
import re

import pytest

from serve_system import labrepo
from serve_system.standin import CLASSES

from .conftest import DPKG_HOLDER, RehearsalCluster
from .windows import Windows

pytestmark = pytest.mark.windows("none")


def test_site_succeeds_on_every_node_at_once(rehearsal_cluster: RehearsalCluster) -> None:
    site = rehearsal_cluster.site
    assert site.rc == 0, site.tail()
    assert sorted(site.recap) == sorted(n.name for n in rehearsal_cluster.nodes)
    for node in rehearsal_cluster.nodes:
        assert site.host_ok(node.name), site.tail()
        assert site.recap[node.name]["changed"] > 0  # it really did configure a fresh node


def test_site_waited_for_dpkg_locks_held_when_it_started(rehearsal_cluster: RehearsalCluster) -> None:
    """Node 2's dpkg locks were held for DPKG_HOLD_S (120) s from just before site.yml started, as
    unattended-upgrades holds them on a first boot: apt itself was kept out (its own refusal, naming the
    holder), the play named the holder at once, waited longer than apt's own 60 s, and passed."""
    hold = rehearsal_cluster.dpkg_hold
    assert hold is not None
    apt_refused = f"Could not get lock /var/lib/dpkg/lock-frontend. It is held by process {hold.pid}"
    assert apt_refused in hold.apt_said, hold.apt_said
    site = rehearsal_cluster.site
    assert site.rc == 0 and site.host_ok(hold.node), site.tail()
    holder = f"pid {hold.pid} (python3: python3 {DPKG_HOLDER} {hold.seconds}, running "
    flat = site.flat
    assert f"{hold.node}: waiting before apt (0 s of 900 s, apt_guard_lock_timeout): {holder}" in flat
    assert "holds /var/lib/dpkg/lock-frontend, /var/lib/dpkg/lock" in flat
    waited = re.search(rf"{re.escape(hold.node)}: waited (\d+) s for apt's locks \({re.escape(holder)}", flat)
    assert waited is not None, site.tail()
    assert 60 < int(waited[1]) <= hold.seconds + 5  # longer than apt's own lock_timeout; until it let go
    print(f"site.yml: {site.seconds:.0f} s, of which {waited[1]} s waiting for node 2's dpkg locks")
    other = next(n.name for n in rehearsal_cluster.nodes if n.name != hold.node)
    assert f"{other}: waiting before apt" not in flat  # nothing held there: one look, no line


@pytest.mark.parametrize("index", [0, 1])
def test_docker_and_compose_services_running(rehearsal_cluster: RehearsalCluster, index: int) -> None:
    host = rehearsal_cluster.host(rehearsal_cluster.nodes[index])
    assert host.service("docker").is_running
    assert host.service("docker").is_enabled
    assert host.package("docker.io").is_installed
    assert host.run("docker compose version --short").stdout.strip().startswith("2.")
    ps_lines = host.check_output("docker compose -p serve ps --format json").splitlines()
    ps = json.loads("[" + ",".join(ps_lines) + "]")
    states = {c["Name"]: c["State"] for c in ps}
    assert states.get("triton_server") == "running", states
    assert states.get("jupyter") == "running", states
    assert "flask" not in states  # no build context on rehearsal nodes: skipped, and the play said so
    assert ("the stack runs without the Flask app (our web page, service webapp, takes its place)"
            in rehearsal_cluster.site.flat)
    assert states.get("webapp") == "running", states
    user = rehearsal_cluster.nodes[index].user
    assert "docker" in host.user(user).groups


def _png_b64() -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (64, 48), (200, 120, 40)).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def test_triton_serves_a_label_on_the_node(rehearsal_cluster: RehearsalCluster) -> None:
    host = rehearsal_cluster.host(rehearsal_cluster.nodes[0])
    ready = host.run("curl -fsS -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/v2/health/ready")
    assert ready.stdout == "200"
    body = json.dumps({
        "inputs": [{"name": "INPUT_IMAGE", "shape": [2, 1], "datatype": "BYTES",
                    "data": [_png_b64(), _png_b64()]}],
        "outputs": [{"name": "FOOD_LABEL"}, {"name": "PROBABILITY"}],
    })
    out = host.check_output(
        "curl -fsS -X POST -H 'Content-Type: application/json' --data-binary @- "
        "http://127.0.0.1:8000/v2/models/food_classifier/infer <<'EOF'\n" + body + "\nEOF"
    )
    outputs = {o["name"]: o for o in json.loads(out)["outputs"]}
    assert outputs["FOOD_LABEL"]["shape"] == [2, 1]
    assert all(label in CLASSES for label in outputs["FOOD_LABEL"]["data"])
    assert all(0.0 < p < 1.0 for p in outputs["PROBABILITY"]["data"])


def test_onnx_model_through_the_shim_from_the_jupyter_container(rehearsal_cluster: RehearsalCluster) -> None:
    """The client container reaches triton_server by name and gets [N,11] logits from the ONNX shim."""
    script = (
        "import numpy as np, tritonclient.http as h\n"
        "c = h.InferenceServerClient('triton_server:8000')\n"
        "x = np.random.rand(3, 3, 224, 224).astype(np.float32)\n"
        "i = h.InferInput('input', list(x.shape), 'FP32'); i.set_data_from_numpy(x)\n"
        "r = c.infer('food_classifier_onnx', [i])\n"
        "print(r.as_numpy('output').shape)\n"
        "print(c.get_model_config('food_classifier_onnx')['backend'])\n"
    )
    res = rehearsal_cluster.exec(rehearsal_cluster.nodes[1], "docker", "exec", "jupyter", "python3", "-c",
                                 script)
    assert res.stdout.split() == ["(3,", "11)", "python"]
    # and the play's model table said which backend serves it and that the weights are a stand-in
    site = rehearsal_cluster.site.flat
    assert "food_classifier_onnx | python | serve-system ONNX shim" in site
    assert "stand-in" in site


@pytest.mark.windows("behaviour")
def test_perf_analyzer_runs_in_the_jupyter_container(rehearsal_cluster: RehearsalCluster,
                                                     windows: Windows) -> None:
    """The lab's benchmark path: perf_analyzer 2.60.0 in the client container, results in /work."""
    res = rehearsal_cluster.exec(
        rehearsal_cluster.nodes[0], "docker", "exec", "jupyter", "perf_analyzer", "-u", "triton_server:8000",
        "-m", "food_classifier_onnx", "-b", "1", "--shape", "input:3,224,224", "--concurrency-range", "1",
        *windows.cli, "-f", "/work/pa.csv", check=False,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "Throughput" in res.stdout
    host = rehearsal_cluster.host(rehearsal_cluster.nodes[0])
    csv = host.file("/opt/serve-system/work/pa.csv")  # the work dir is shared between node and container
    assert csv.exists and csv.content_string.startswith("Concurrency,")


def test_triton_ports_answer_on_loopback_only(rehearsal_cluster: RehearsalCluster) -> None:
    node = rehearsal_cluster.nodes[0]
    host = rehearsal_cluster.host(node)
    other = host.check_output(
        "ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -n1").strip()
    assert other and not other.startswith("127.")
    for port in (8000, 8001, 8002):  # a TCP connect: 8001 is gRPC, curl would not speak it
        assert host.run(f"timeout 3 bash -c '</dev/tcp/127.0.0.1/{port}'").rc == 0, port
        refused = host.run(f"timeout 3 bash -c '</dev/tcp/{other}/{port}'")
        assert refused.rc != 0, f"Triton port {port} answers on {other}"
    listeners = host.check_output("ss -Hltn '( sport = :8000 or sport = :8001 or sport = :8002 )'")
    assert listeners.strip(), "no listener found for Triton's ports"
    assert all("127.0.0.1:" in line for line in listeners.splitlines()), listeners


def test_daemon_json_merged_keeping_the_nvidia_runtime(rehearsal_cluster: RehearsalCluster) -> None:
    seeded = json.loads(
        rehearsal_cluster.host(rehearsal_cluster.nodes[0]).file("/etc/docker/daemon.json").content_string)
    assert seeded["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"
    assert seeded["exec-opts"] == ["native.cgroupdriver=cgroupfs"]
    assert seeded["storage-driver"] == "overlay2"
    fresh = json.loads(
        rehearsal_cluster.host(rehearsal_cluster.nodes[1]).file("/etc/docker/daemon.json").content_string)
    assert "runtimes" not in fresh
    assert fresh["exec-opts"] == ["native.cgroupdriver=cgroupfs"]
    info = rehearsal_cluster.exec(rehearsal_cluster.nodes[0], "docker", "info",
                                  "--format", "{{json .Runtimes}} {{.Driver}}")
    runtimes, driver = info.stdout.rsplit(" ", 1)
    assert "nvidia" in json.loads(runtimes)  # dockerd really loaded the merged file
    assert driver.strip() == "overlay2"


def test_gpu_role_skips_cleanly_without_gpus(rehearsal_cluster: RehearsalCluster) -> None:
    for node in rehearsal_cluster.nodes:
        assert (f"{node.name}: no NVIDIA GPU found (PCI vendor 10de, class 03xx): "
                "skipping the NVIDIA container toolkit") in rehearsal_cluster.site.flat
        assert not rehearsal_cluster.host(node).package("nvidia-container-toolkit").is_installed
        assert rehearsal_cluster.host(node).package("nvtop").is_installed


LAB = "/opt/serve-system/lab"


@pytest.mark.parametrize("index", [0, 1])
def test_the_labs_repository_was_fetched_from_the_local_stand_in_and_its_checksums_recorded(
        rehearsal_cluster: RehearsalCluster, index: int) -> None:
    """The same fetch as on a real node (git installed, git clone at the pinned commit) from the
    rehearsal's stand-in in the lab's layout (a file:// URL the node reaches through its read-only
    mount); each weights file's sha256 in weights.json (every level's provenance) and the configs,
    marked as a stand-in everywhere; the lab's notebooks in Jupyter's work folder."""
    node = rehearsal_cluster.nodes[index]
    url, commit = node.vars["serve_stack_lab_repo"], node.vars["serve_stack_lab_commit"]
    assert url.startswith("file:///") and url.endswith("/serve-system-chi.git") and len(commit) == 40

    def run(*argv: str) -> str:
        return rehearsal_cluster.exec(node, *argv).stdout

    assert run("git", "-C", LAB, "rev-parse", "HEAD").strip() == commit
    assert run("git", "-C", LAB, "remote", "get-url", "origin").strip() == url
    assert run("git", "-C", LAB, "status", "--porcelain").strip() == ""
    record = json.loads(run("cat", "/opt/serve-system/weights.json"))
    assert (record["weights"], record["repository"], record["commit"]) == ("lab", url, commit)
    on_node = {f["path"]: f for f in record["files"]}
    assert sorted(on_node) == sorted(f.path for f in labrepo.WEIGHTS)
    sums = dict(reversed(line.split()) for line in run(
        "sh", "-c", f"cd {LAB} && sha256sum {' '.join(sorted(on_node))}").splitlines())
    for path, f in on_node.items():
        assert f["sha256"] == sums[path] and f["standin"] is True, path
    # copied where Triton serves them, the same bytes; the configs carry the checksums
    repo = "/opt/serve-system/model_repository"
    served = dict(reversed(line.split()) for line in run(
        "sha256sum", f"{repo}/food_classifier_onnx/1/model.onnx", f"{repo}/food_classifier/1/food11.pth",
        f"{repo}/food_classifier/1/model.onnx").splitlines())
    onnx_sha = on_node["models_staging/food_classifier_onnx/1/model.onnx"]["sha256"]
    assert served[f"{repo}/food_classifier_onnx/1/model.onnx"] == onnx_sha
    assert served[f"{repo}/food_classifier/1/model.onnx"] == onnx_sha  # no GPU: the ONNX export too
    assert served[f"{repo}/food_classifier/1/food11.pth"] == \
        on_node["models_staging/food_classifier/1/food11.pth"]["sha256"]
    config = run("cat", f"{repo}/food_classifier_onnx/config.pbtxt")
    assert f"model.onnx={onnx_sha}" in config
    assert "stand-in: generated stand-in model" in config
    assert "from the rehearsal stand-in of the lab repository" in config
    # the play's model table said it
    assert ("food_classifier_onnx | python | serve-system ONNX shim (Python backend + onnxruntime, CPU) | "
            "1xCPU | stand-in: generated stand-in model") in rehearsal_cluster.site.flat
    # the lab's own files, from the checkout, in Jupyter's work folder
    for name in ("triton.ipynb", "fastapi.ipynb", "input.json", "test_image.jpeg"):
        assert run("cmp", f"{LAB}/workspace/{name}", f"/opt/serve-system/work/{name}") == ""


def test_second_site_run_changes_nothing(rehearsal_cluster: RehearsalCluster) -> None:
    again = rehearsal_cluster.playbook("site.yml")
    assert again.rc == 0, again.tail()
    for node in rehearsal_cluster.nodes:
        assert again.recap[node.name]["changed"] == 0, again.tail(120)
    # the lab's repository: its checkout at the commit, nothing fetched, nothing copied (the first run
    # installed git, which the node image lacks, and cloned)
    assert "Install git where it is missing" in rehearsal_cluster.site.stdout
    assert "Clone the lab's repository" in rehearsal_cluster.site.stdout
    assert "Clone the lab's repository" not in again.stdout and "Install git where it is missing" \
        not in again.stdout


def test_deploy_puts_back_what_differs_in_the_model_repository(rehearsal_cluster: RehearsalCluster) -> None:
    node = rehearsal_cluster.nodes[0]
    repo = "/opt/serve-system/model_repository"
    committed = rehearsal_cluster.exec(node, "cat", f"{repo}/food_classifier/config.pbtxt").stdout
    rehearsal_cluster.exec(node, "sh", "-c",
                           f"echo 'dynamic_batching {{ }}' >> {repo}/food_classifier/config.pbtxt"
                           f" && chmod 0600 {repo}/blip/config.pbtxt && touch {repo}/blip/1/leftover.txt")
    deploy = rehearsal_cluster.playbook("deploy.yml", limit=node.name)
    assert deploy.rc == 0, deploy.tail()
    assert deploy.recap[node.name]["changed"] > 0
    assert rehearsal_cluster.exec(node, "cat", f"{repo}/food_classifier/config.pbtxt").stdout == committed
    stat = rehearsal_cluster.exec(node, "stat", "-c", "%a %U", f"{repo}/blip/config.pbtxt")
    assert stat.stdout.split() == ["644", "root"]
    leftover = rehearsal_cluster.exec(node, "test", "-e", f"{repo}/blip/1/leftover.txt", check=False)
    assert leftover.returncode == 1
    assert "| READY" in deploy.flat  # Triton restarted on the repository put back, models READY again
