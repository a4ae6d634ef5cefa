"""Every shipped Triton spec, in a short form, end to end on a rehearsal node (CPU, stand-in models).

Uses the shared rehearsal cluster of tests/integration/conftest.py. Each spec of experiments/specs/
is run by its own playbook (experiments/<name>.yml, the generic ``experiment`` role) with a short
form of itself, derived by rules rather than per spec (:func:`short_form`):

- load levels: the first and the last level of every variant; concurrency capped at 8; request
  rates divided by 10 (a 2-core node serves the Food-11 stand-in, 16 ms of CPU per image, at a few
  tens of requests per second, the lab's GPU at hundreds);
- sweeps: the first and the last value of each grid axis (mnist_cpu_sweep: 24 and 4 instances,
  100 and 4000 us of queue delay);
- perf_analyzer: count windows of 12 requests, at most 5 trials, one retry; request counts and
  time intervals dropped; a warm-up of 4 requests; one repetition;
- objectives keep their load when the short form still measures it (after the same scaling).

The short copies are written under the repository's git-ignored .cache/ (a spec's paths must stay
inside its folder or its repository). Variants that ask for GPUs or TensorRT are adapted to CPU by
the specs' own ``on_missing_gpus: adapt``. The test asserts that every planned variant has its rows
in summary.json (every level measured, or the variant refused/unavailable with its reason), that
the report names the stand-in and every adaptation, and that it has a ``## Findings`` section with
one verdict per finding (a verdict of :mod:`serve_system.results.findings`).
"""

from __future__ import annotations

import copy
import json
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from serve_system.experiment import plan as exp
from serve_system.experiment.spec.models import TritonSpec, expand_levels
from serve_system.experiment.spec.reader import load_spec, resolve
from serve_system.node import plans, records
from serve_system.results import findings as fnd

from .ansible_run import REPO, run_playbook
from .windows import BEHAVIOUR, Windows

pytestmark = pytest.mark.integration

SPECS = REPO / "experiments" / "specs"
#: the shipped Triton specs; FastAPI specs are run by test_fastapi_stack.py
TRITON_SPECS = ("arrivals", "backends", "blip", "dli_bert", "dynbatch", "instances", "mnist_cpu_sweep",
                "noise")
MAX_CONCURRENCY = 8
RATE_DIVISOR = 10


def _short_level(mode: str, x: float) -> int:
    return max(1, round(x / RATE_DIVISOR)) if mode == "request_rate" else int(min(x, MAX_CONCURRENCY))


def _short_levels(load: dict[str, Any]) -> list[int]:
    levels = expand_levels(load["levels"])
    mode = load.get("mode", "concurrency")
    return sorted({_short_level(mode, levels[0]), _short_level(mode, levels[-1])})


def short_form(path: Path, windows: Windows = BEHAVIOUR) -> dict[str, Any]:
    """The spec of ``path`` made short (see the module docstring), its file paths made absolute; it
    measures with ``windows`` (the spec's request counts and time windows dropped)."""
    spec = yaml.safe_load(path.read_text())
    out = copy.deepcopy(spec)
    top_load = spec["load"]
    mode = top_load.get("mode", "concurrency")
    out["load"] = {**top_load, "levels": _short_levels(top_load)}
    holders = [out, *(out.get("variants") or [])]
    if out.get("sweep"):
        holders.append(out["sweep"])
        out["sweep"]["grid"] = {k: list(dict.fromkeys([v[0], v[-1]])) for k,
                                v in out["sweep"]["grid"].items()}
    for holder in holders:
        if holder.get("base_config"):
            holder["base_config"] = str(resolve(path, holder["base_config"]))
        perf = holder.get("perf")
        if perf:
            perf = holder["perf"] = windows.dropped(perf)
            if perf.get("input_data") and perf["input_data"] not in ("random", "zero"):
                perf["input_data"] = str(resolve(path, perf["input_data"]))
        if holder is not out and holder.get("load") and holder["load"].get("levels") is not None:
            holder["load"] = {**holder["load"], "levels": _short_levels({**top_load, **holder["load"]})}
    out["perf"] = windows.spec_perf(out.get("perf"))
    out["warmup"] = {"requests": windows.warmup}
    out["repetitions"] = 1
    out.pop("budget", None)  # repetitions: auto's budget goes with it
    if out.get("search"):  # a search: one rung of two short measurements (test_search_role.py runs rungs)
        out["search"].update(repetitions=2, rungs=1, budget={"runs": 100})
        out["search"].pop("window_ms", None)
    measured = {lv for h in holders for lv in (h.get("load") or {}).get("levels", [])}
    for objective in out.get("objectives") or []:
        if objective.get("at_load") is not None:
            objective["at_load"] = _short_level(mode, objective["at_load"])
            if objective["at_load"] not in measured:
                del objective["at_load"]
    return out


@pytest.mark.windows("none")
def test_every_shipped_triton_spec_is_run_here() -> None:
    shipped = {p.stem for p in SPECS.glob("*.yml")
               if (yaml.safe_load(p.read_text()) or {}).get("kind", "triton") == "triton"}
    assert shipped == set(TRITON_SPECS), "a new Triton spec must be added to TRITON_SPECS (and so run in CI)"
    for name in TRITON_SPECS:
        assert (REPO / "experiments" / f"{name}.yml").exists(), f"{name}: no playbook experiments/{name}.yml"


@pytest.mark.windows("none")
def test_short_forms_are_valid_and_short() -> None:
    """The rules give specs the planner accepts, with at most 2 levels per variant and small windows."""
    d = REPO / ".cache" / "short_specs" / f"check-{uuid.uuid4().hex[:8]}"
    d.mkdir(parents=True)
    try:
        for name in TRITON_SPECS:
            p = d / f"{name}.yml"
            p.write_text(yaml.safe_dump(short_form(SPECS / f"{name}.yml"), sort_keys=False))
            spec = load_spec(p)
            assert isinstance(spec, TritonSpec)
            for v in exp.plan(spec, 0):
                assert 1 <= len(v.levels) <= 2, (name, v.name, [lv.load for lv in v.levels])
                for lv in v.levels:
                    assert lv.load <= (30 if lv.mode == "request_rate" else MAX_CONCURRENCY), (name, v.name,
                                                                                               lv.load)
                    assert "--measurement-request-count" in lv.argv and "--request-count" not in lv.argv
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def spec_dir() -> Iterator[Path]:
    """A folder for short spec copies inside the repository (git-ignored), removed afterwards."""
    d = REPO / ".cache" / "short_specs" / uuid.uuid4().hex[:8]
    d.mkdir(parents=True)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.windows("behaviour")
@pytest.mark.parametrize("name", TRITON_SPECS)
def test_shipped_spec_runs_short_on_a_rehearsal_node(rehearsal_cluster, tmp_path: Path,
                                                     spec_dir: Path,  # type: ignore[no-untyped-def]
                                                     name: str, windows: Windows) -> None:
    cluster = rehearsal_cluster
    node = cluster.nodes[0]
    spec_path = spec_dir / f"{name}.yml"
    spec_path.write_text(yaml.safe_dump(short_form(SPECS / f"{name}.yml", windows), sort_keys=False))
    spec = load_spec(spec_path)
    assert isinstance(spec, TritonSpec)
    planned = exp.plan(spec, 0)
    results = tmp_path / "results"
    started = time.monotonic()
    res = run_playbook(f"../experiments/{name}.yml", cluster.inventory,
                       "-e", f"experiment_spec={spec_path}", "-e", f"experiment_results_dir={results}",
                       "-e", "run_id=short", limit=node.name)
    print(f"{name}: playbook {time.monotonic() - started:.0f} s")
    assert res.rc == 0, res.tail(80)
    run = results / name / "short"
    summary = json.loads((run / "summary.json").read_text())
    rows = summary["rows"]
    for v in planned:
        mine = [r for r in rows if r["variant"] == v.name]
        assert mine, f"{name}: {v.name} has no row in summary.json (silently dropped)"
        not_run = [r for r in mine if r["status"] in ("refused", "unavailable")]
        if not_run:  # the product could not run it here: it must say why
            assert all((r.get("error") or "").strip() for r in not_run), f"{name}: {v.name}: {not_run}"
            continue
        got = {float(r["load"]): r for r in mine}
        for lv in v.levels:
            row = got.get(float(lv.load))
            assert row is not None, f"{name}: no row for {v.name} at {lv.load}"
            # a level the busy 2-core machine could not measure stably is recorded with its reason (the
            # runner's promise); every variant still needs a measured level
            assert (row["status"] == "ok" and row["throughput"] > 0) or (
                row["status"] == "failed" and (row["error"] or "").strip()), f"{name}: {v.name}: {row}"
            assert row["stand_in"], f"{name}: {v.name}: the stand-in is not marked"
        assert any(r["status"] == "ok" for r in mine), f"{name}: {v.name}: nothing measured: {mine}"
    md = (run / "report.md").read_text()
    assert "> **Stand-in model.** stand-in" in md
    # the lab's claims, each with exactly one verdict
    assert "\n## Findings\n" in md
    assert summary["findings"] and all(f["verdict"] in fnd.VERDICTS for f in summary["findings"])
    section = md.split("\n## Findings\n", 1)[1].split("\n## ", 1)[0]
    for f in summary["findings"]:
        assert f"**{f['verdict']}**" in section, (f, section)
    # the plan made on the node's own base configs (rendered for a node without GPU)
    host_plan = records.read(run / node.name / "plan.json", plans.HostPlan)
    assert {v.name for v in host_plan.variants} == {v.name for v in planned}
    adapted = [f"{node.name}/{v.name}: {n}" for v in host_plan.variants for n in v.notes if "->" in n
               or "dropped" in n]
    # every variant the lab ran on a GPU says it ran on CPU here
    on_gpu = [v.name for v in planned if any("KIND_GPU" in n for n in v.notes)]
    assert all(any(n.startswith(f"{node.name}/{name}: ") and "KIND_CPU" in n for n in adapted)
               for name in on_gpu), \
        (on_gpu, adapted)
    if adapted:
        listed = md.split("\n## Adapted to the host\n", 1)[1]
        assert all(n in listed for n in adapted), (adapted, listed)
    if any("tensorrt" in n for n in adapted):
        assert "GPU accelerator tensorrt dropped (host has no GPU)" in md
