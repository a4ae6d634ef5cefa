"""experiments/dynbatch.yml end to end on a rehearsal node (real Triton on CPU, real perf_analyzer).

Uses the shared rehearsal cluster of tests/integration/conftest.py. The spec is the shipped
dynbatch spec with two load levels, short measurement windows and one more variant that Triton
refuses at load time (its checks are Triton's own, not ours). The first run measures only the
baseline (as if interrupted after it); the second run resumes and measures the rest.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from serve_system import perf as perfmod

from .ansible_run import REPO, run_playbook

pytestmark = pytest.mark.integration


def _spec(tmp_path: Path) -> Path:
    spec = yaml.safe_load((REPO / "experiments" / "specs" / "dynbatch.yml").read_text())
    spec["load"]["levels"] = [1, 8]
    # the copy lives in another folder of the repository: its relative paths must point back
    spec["base_config"] = str(REPO / spec["base_config"])
    spec["perf"].update(input_data=str(REPO / "experiments" / "files" / "food_input.json"),
                        measurement_interval_ms=1500, stability_percentage=60, max_trials=8)
    spec["warmup"] = {"requests": 10}
    # valid for our checks, refused when Triton loads it: the stand-in node has no food11.pth
    spec["variants"].append({"name": "bad_priority",
                             "config": {"parameters": {"serve_system_engine": {"string_value": "pytorch"}}}})
    # a spec may only name files inside its folder or its repository: the copy lives in the repository
    p = REPO / ".cache" / "it-specs" / tmp_path.name / "dynbatch.yml"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def _live_config(cluster, node) -> dict:  # type: ignore[no-untyped-def, type-arg]
    out = cluster.exec(node, "docker", "exec", "jupyter", "curl", "-s",
                       "http://triton_server:8000/v2/models/food_classifier/config")
    return json.loads(out.stdout)


def test_dynbatch_end_to_end_with_resume_and_refusal(rehearsal_cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cluster = rehearsal_cluster
    node = cluster.nodes[0]
    spec = _spec(tmp_path)
    results = tmp_path / "results"
    common = ["-e", f"triton_experiment_spec={spec}", "-e", f"triton_experiment_results_dir={results}",
              "-e", "run_id=it1"]
    first = run_playbook("../experiments/dynbatch.yml", cluster.inventory, *common,
                         "-e", json.dumps({"variants": ["baseline"]}), limit=node.name)
    assert first.rc == 0, first.tail(80)
    run = results / "dynbatch" / "it1"
    host = run / node.name
    base_levels = {p.name: (p / "level.json").stat().st_mtime for p in (host / "baseline").iterdir()
                   if (p / "level.json").exists()}
    assert set(base_levels) == {"c1_r1", "c8_r1"}
    assert not (host / "dynbatch" / "c1_r1" / "level.json").exists()

    second = run_playbook("../experiments/dynbatch.yml", cluster.inventory, *common, limit=node.name)
    assert second.rc == 0, second.tail(80)
    # resume: the baseline was not measured again, the rest was
    assert {p: (host / "baseline" / p / "level.json").stat().st_mtime for p in base_levels} == base_levels
    assert f"{node.name} baseline: 0 level(s) measured (2 already done)" in second.stdout
    assert f"{node.name} dynbatch: 2 level(s) measured" in second.stdout
    assert f"{node.name} bad_priority: refused by Triton" in second.stdout

    refused = json.loads((host / "bad_priority" / "variant.json").read_text())
    assert refused["status"] == "refused" and "failed to load" in refused["error"]
    assert "serve_system_engine=pytorch but" in refused["error"]  # the load's own reason, from Triton's log

    rows = json.loads((run / "summary.json").read_text())["rows"]
    measured = {(r["variant"], r["load"]): r for r in rows if r["status"] == "ok"}
    assert set(measured) == {("baseline", 1), ("baseline", 8), ("dynbatch", 1), ("dynbatch", 8)}
    for (variant, load), r in measured.items():
        ldir = host / variant / f"c{load}_r1"
        (from_csv,) = perfmod.parse_csv((ldir / "perf.csv").read_text())
        assert r["throughput"] == from_csv.throughput > 0  # the summary agrees with the raw export
        assert r["p99_us"] == from_csv.p99_us and r["queue_us"] == from_csv.queue_us
        assert r["inference_count"] > 0 and r["cpu_util"] is not None  # stats deltas, metrics samples
        assert (ldir / "metrics.jsonl").stat().st_size > 0
    assert measured[("baseline", 8)]["avg_batch_size"] == 1.0
    assert measured[("dynbatch", 8)]["avg_batch_size"] > 1.0
    assert any(r["variant"] == "bad_priority" and r["status"] == "refused" for r in rows)
    md = (run / "report.md").read_text()
    assert "most_throughput_at_8" in md
    stand_in = any(json.loads((host / v / "variant.json").read_text()).get("stand_in") for v in ("baseline", "dynbatch"))
    assert ("Stand-in model" in md) == stand_in
    plots = sorted(p.name for p in (run / "plots").iterdir())
    assert f"{node.name}_throughput_latency.png" in plots and f"{node.name}_batch_sizes.png" in plots
    assert json.loads((host / "host.json").read_text())["baseline_restored"] is True
    live = _live_config(cluster, node)
    assert "dynamic_batching" not in live and live["instance_group"][0]["kind"] == "KIND_CPU"


def test_invalid_spec_stops_before_any_node_is_touched(rehearsal_cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cluster = rehearsal_cluster
    spec = yaml.safe_load(_spec(tmp_path).read_text())
    spec["name"] = "dynbatch_invalid"
    spec["variants"][1]["config"]["dynamic_batching"]["preferred_batch_size"] = [4, 32]
    p = _spec(tmp_path).with_name("bad.yml")
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    res = run_playbook("../experiments/dynbatch.yml", cluster.inventory, "-e", f"triton_experiment_spec={p}",
                       "-e", f"triton_experiment_results_dir={tmp_path / 'results'}", "-e", "run_id=bad")
    assert res.rc != 0
    assert "dynbatch: config.dynamic_batching.preferred_batch_size: preferred batch size 32 > max_batch_size 16" \
        in res.flat  # Ansible's YAML output wraps long lines
    for node in cluster.nodes:
        assert cluster.exec(node, "test", "-e", "/opt/serve-system/work/dynbatch_invalid", check=False).returncode != 0
    assert not (tmp_path / "results" / "dynbatch_invalid" / "bad").exists()
