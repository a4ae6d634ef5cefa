"""Every shipped Triton spec, in a short form, end to end on a rehearsal node (CPU, stand-in models).

Uses the shared rehearsal cluster of tests/integration/conftest.py. Each spec of experiments/specs/
is run by its own playbook (experiments/<name>.yml) with a short form of itself, derived by rules
rather than per spec: the first and the last load level of every variant (concurrency capped at
8; request rates divided by 10, since a 2-core node serves the stand-ins at tens, not hundreds, of
requests per second), the first and last value of each sweep axis, count windows of a few requests,
no long request counts. The short copies are written under the repository's git-ignored .cache/
(a spec's paths must stay inside its folder or its repository). Variants that ask for GPUs or TensorRT are adapted to CPU by the specs'
own ``on_missing_gpus: adapt``; the test asserts that every variant measured every level, and that
the report names the stand-in and every adaptation.
"""

from __future__ import annotations

import copy
import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from serve_system import experiment as exp

from .ansible_run import REPO, run_playbook

pytestmark = pytest.mark.integration

SPECS = REPO / "experiments" / "specs"
#: the shipped Triton specs; FastAPI specs are run by test_fastapi_stack.py
TRITON_SPECS = ("arrivals", "backends", "blip", "dli_bert", "dynbatch", "instances", "mnist_cpu_sweep")
SHORT_PERF = {"measurement_mode": "count_windows", "measurement_request_count": 12, "max_trials": 5,
              "stability_percentage": 60, "retries": 1}
LONG_RUN_KEYS = ("request_count", "warmup_request_count", "measurement_interval_ms")


def _short_level(mode: str, x: float) -> int:
    return max(1, round(x / 10)) if mode == "request_rate" else int(min(x, 8))


def _short_levels(load: dict[str, Any]) -> list[int]:
    levels = exp.expand_levels(load["levels"])
    mode = load.get("mode", "concurrency")
    return sorted({_short_level(mode, levels[0]), _short_level(mode, levels[-1])})


def short_form(path: Path) -> dict[str, Any]:
    """The spec of ``path`` made short (see the module docstring), with absolute paths."""
    spec = yaml.safe_load(path.read_text())
    out = copy.deepcopy(spec)
    top_load = spec["load"]
    out["load"] = {**top_load, "levels": _short_levels(top_load)}
    for holder in [out, *(out.get("variants") or [])]:
        if holder.get("base_config"):
            holder["base_config"] = str(exp.resolve(path, holder["base_config"]))
        perf = holder.get("perf")
        if perf:
            for k in LONG_RUN_KEYS:
                perf.pop(k, None)
            if perf.get("input_data"):
                perf["input_data"] = str(exp.resolve(path, perf["input_data"]))
        if holder is not out and holder.get("load"):
            holder["load"] = {**holder["load"], "levels": _short_levels({**top_load, **holder["load"]})}
    out["perf"] = {**(out.get("perf") or {}), **SHORT_PERF}
    out["warmup"] = {"requests": 4}
    out["repetitions"] = 1
    short_levels = {lv for h in [out, *(out.get("variants") or [])] for lv in (h.get("load") or {}).get("levels", [])}
    for objective in out.get("objectives") or []:
        if objective.get("at_load") is not None:
            objective["at_load"] = _short_level(top_load.get("mode", "concurrency"), objective["at_load"])
            if objective["at_load"] not in short_levels:
                del objective["at_load"]
    if out.get("sweep"):
        out["sweep"]["grid"] = {k: list(dict.fromkeys([v[0], v[-1]])) for k, v in out["sweep"]["grid"].items()}
    return out


def test_every_shipped_triton_spec_has_a_short_form_here() -> None:
    shipped = {p.stem for p in SPECS.glob("*.yml")
               if (yaml.safe_load(p.read_text()) or {}).get("kind", "triton") == "triton"}
    assert shipped == set(TRITON_SPECS), "a new spec must be added to TRITON_SPECS (and so run in CI)"


@pytest.fixture
def spec_dir() -> Iterator[Path]:
    """A folder for short spec copies inside the repository (git-ignored), removed afterwards."""
    d = REPO / ".cache" / "short_specs" / uuid.uuid4().hex[:8]
    d.mkdir(parents=True)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("name", TRITON_SPECS)
def test_shipped_spec_runs_short_on_a_rehearsal_node(rehearsal_cluster, tmp_path: Path, spec_dir: Path,  # type: ignore[no-untyped-def]
                                                     name: str) -> None:
    cluster = rehearsal_cluster
    node = cluster.nodes[0]
    spec_path = spec_dir / f"{name}.yml"
    spec_path.write_text(yaml.safe_dump(short_form(SPECS / f"{name}.yml"), sort_keys=False))
    planned = exp.plan(exp.load_spec(spec_path), 0)
    results = tmp_path / "results"
    res = run_playbook(f"../experiments/{name}.yml", cluster.inventory,
                       "-e", f"triton_experiment_spec={spec_path}", "-e", f"triton_experiment_results_dir={results}",
                       "-e", "run_id=short", limit=node.name)
    assert res.rc == 0, res.tail(80)
    run = results / name / "short"
    rows = json.loads((run / "summary.json").read_text())
    got = {(r["variant"], float(r["load"])): r for r in rows}
    for v in planned:
        for lv in v.levels:
            row = got.get((v.name, float(lv.load)))
            assert row is not None, f"{name}: no row for {v.name} at {lv.load}"
            assert row["status"] == "ok" and row["throughput"] > 0, f"{name}: {v.name} at {lv.load}: {row}"
            assert row["stand_in"], f"{name}: {v.name}: the stand-in is not marked"
    md = (run / "report.md").read_text()
    assert "Stand-in model" in md
    adapted = [n for v in planned for n in v.notes if "->" in n or "dropped" in n]
    if adapted:
        assert "## Adapted to the host" in md
        assert all(n in md for n in adapted)
    if any("tensorrt" in n for n in adapted):
        assert "GPU accelerator tensorrt dropped (host has no GPU)" in md


def test_perf_analyzer_container_is_under_a_memory_cap(rehearsal_cluster) -> None:  # type: ignore[no-untyped-def]
    """The client container (where perf_analyzer runs) has a kernel-enforced memory limit."""
    cluster = rehearsal_cluster
    node = cluster.nodes[0]
    out = cluster.exec(node, "docker", "exec", "jupyter", "sh", "-c",
                       "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes")
    assert int(out.stdout.strip()) == 4 * 1024**3  # serve_stack_jupyter_mem_limit: 4g
