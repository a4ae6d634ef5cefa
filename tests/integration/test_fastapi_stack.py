"""The fastapi stack mode and the FastAPI benchmark experiment on a rehearsal node.

Uses the shared session nodes (tests/integration/conftest.py) and leaves the node as it found it:
the Triton stack is brought back at the end of the module.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from serve_system.node import records
from serve_system.results.fastapi_tree import bench_fields
from serve_system.standin import CLASSES

from .conftest import RehearsalCluster

pytestmark = pytest.mark.windows("none")

RUN_ID = "it-fastapi"
LEVELS = [{"senders": 1, "requests": 12}, {"senders": 4, "requests": 40}]


def _jpeg_b64() -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (320, 200), (180, 90, 30)).save(buf, format="JPEG")
    return base64.b64encode(buf.getvalue()).decode()


@pytest.fixture(scope="module")
def node(rehearsal_cluster: RehearsalCluster) -> Iterator[str]:
    """The node these tests use; the Triton stack is restored on it afterwards."""
    name = rehearsal_cluster.nodes[-1].name
    yield name
    back = rehearsal_cluster.playbook("deploy.yml", "-e", "serve_stack_mode=triton", limit=name)
    assert back.rc == 0, back.tail()


def _containers(cluster: RehearsalCluster, node: str) -> dict[str, str]:
    out = cluster.exec(node, "docker", "ps", "-a", "--format", "{{.Names}} {{.State}}").stdout
    return dict(line.split(" ", 1) for line in out.splitlines() if line.strip())


def _post(cluster: RehearsalCluster, node: str, body: str) -> tuple[int, dict]:
    cmd = ("curl -sS -o /tmp/fastapi-answer.json -w '%{http_code}' -X POST "
           "-H 'Content-Type: application/json' "
           f"--data-binary @- http://127.0.0.1:8000/predict <<'EOF'\n{body}\nEOF\n"
           "cat /tmp/fastapi-answer.json")
    out = cluster.exec(node, "sh", "-c", cmd).stdout
    return int(out[:3]), json.loads(out[3:])


def test_fastapi_mode_replaces_triton_and_predicts(rehearsal_cluster: RehearsalCluster, node: str) -> None:
    up = rehearsal_cluster.playbook("deploy.yml", "-e", "serve_stack_mode=fastapi", limit=node)
    assert up.rc == 0, up.tail()
    assert "fastapi_server on" in up.stdout and "STAND-IN" in up.stdout
    states = _containers(rehearsal_cluster, node)
    assert states.get("fastapi_server") == "running" and states.get("jupyter") == "running", states
    assert "triton_server" not in states  # the two share port 8000: one mode at a time
    health = json.loads(rehearsal_cluster.exec(node, "curl", "-fsS", "http://127.0.0.1:8000/health").stdout)
    assert health["status"] == "ok" and health["runtime"] == "onnx" and health["standin"] is True
    # the lab's FastAPI model, read in its checkout (the rehearsal's: a generated stand-in, and said so)
    assert health["model_path"] == "/lab/fastapi_onnx/food11.onnx"
    code, answer = _post(rehearsal_cluster, node, json.dumps({"image": _jpeg_b64()}))
    assert code == 200 and answer["prediction"] in CLASSES and 0 <= answer["probability"] <= 1
    code, answer = _post(rehearsal_cluster, node, json.dumps({"image": "bm90IGFuIGltYWdl"}))
    assert code == 400 and "not a picture" in answer["detail"]
    # the client container reaches it by name, as the benchmark does
    out = rehearsal_cluster.exec(node, "docker", "exec", "jupyter", "python3", "-c",
                                 "import requests; print(requests.get('http://fastapi_server:8000/health').status_code)")
    assert out.stdout.strip() == "200"


def test_second_fastapi_run_changes_nothing(rehearsal_cluster: RehearsalCluster, node: str) -> None:
    again = rehearsal_cluster.playbook("deploy.yml", "-e", "serve_stack_mode=fastapi", limit=node)
    assert again.rc == 0, again.tail()
    assert again.recap[node]["changed"] == 0, again.tail(120)


def test_switching_fastapi_triton_fastapi(rehearsal_cluster: RehearsalCluster, node: str) -> None:
    to_triton = rehearsal_cluster.playbook("deploy.yml", "-e", "serve_stack_mode=triton", limit=node)
    assert to_triton.rc == 0, to_triton.tail()
    states = _containers(rehearsal_cluster, node)
    assert states.get("triton_server") == "running" and "fastapi_server" not in states, states
    ready = rehearsal_cluster.exec(node, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                                   "http://127.0.0.1:8000/v2/health/ready").stdout
    assert ready == "200"
    to_fastapi = rehearsal_cluster.playbook("deploy.yml", "-e", "serve_stack_mode=fastapi", limit=node)
    assert to_fastapi.rc == 0, to_fastapi.tail()
    states = _containers(rehearsal_cluster, node)
    assert states.get("fastapi_server") == "running" and "triton_server" not in states, states
    again = rehearsal_cluster.playbook("deploy.yml", "-e", "serve_stack_mode=fastapi", limit=node)
    assert again.rc == 0 and again.recap[node]["changed"] == 0, again.tail(120)


def test_benchmark_experiment_measures_onnx_and_reports_pytorch_unavailable(
        rehearsal_cluster: RehearsalCluster, node: str, tmp_path: Path) -> None:
    # the shipped FastAPI spec (kind: fastapi), run by the same role and runner as the Triton specs
    spec_path = Path(__file__).resolve().parents[2] / "experiments" / "specs" / "fastapi.yml"
    spec = yaml.safe_load(spec_path.read_text())
    spec["levels"] = LEVELS
    spec_path = tmp_path / "fastapi.yml"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    extra = {"run_id": RUN_ID, "experiment_spec": str(spec_path), "experiment_results_dir": str(tmp_path),
             "experiment_fastapi_restore_mode": "triton"}
    run = rehearsal_cluster.playbook("../experiments/fastapi.yml", "-e", json.dumps(extra), limit=node)
    assert run.rc == 0, run.tail(120)
    run_dir = tmp_path / "fastapi" / RUN_ID
    host_dir = run_dir / node
    torch_variant = json.loads((host_dir / "pytorch" / "variant.json").read_text())
    assert torch_variant["status"] == "unavailable"
    assert "torch cannot be imported" in torch_variant["error"]
    onnx_variant = json.loads((host_dir / "onnx" / "variant.json").read_text())
    assert onnx_variant["status"] == "measured" and onnx_variant["stand_in"]
    for level, n in (("c1_r1", 12), ("c4_r1", 40)):
        meta = records.read(host_dir / "onnx" / level / "level.json", records.LevelRecord)
        assert meta.status == "ok" and meta.mode == "concurrency" and meta.tool == "fastapi_bench"
        assert meta.requests == n
        assert meta.attempts[0].argv[:2] == ["python3", f"/work/fastapi/{RUN_ID}/fastapi_bench.py"]
        fields = bench_fields(host_dir / "onnx" / level)
        assert fields is not None and fields.status == "ok" and fields.errors == 0
        assert fields.throughput > 0 and 0 < fields.p50_us <= fields.p95_us <= fields.p99_us
        bench = json.loads((host_dir / "onnx" / level / "bench.json").read_text())
        assert len(bench["phases"][0]["latencies_s"]) == n
    # the summary (same schema as the Triton experiments) has the rows
    summary = json.loads((run_dir / "summary.json").read_text())["rows"]
    rows = {(r["variant"], r["load"]): r for r in summary if r["host"] == node}
    assert rows[("onnx", 1)]["status"] == "ok" and rows[("onnx", 4)]["status"] == "ok"
    assert rows[("onnx", 4)]["errors"] == 0 and rows[("onnx", 4)]["p99_us"] > 0
    assert any(r["variant"] == "pytorch" and r["status"] == "unavailable" for r in summary)
    assert "unavailable" in (run_dir / "report.md").read_text()
    # Triton is back (restore mode)
    states = _containers(rehearsal_cluster, node)
    assert states.get("triton_server") == "running" and "fastapi_server" not in states, states
