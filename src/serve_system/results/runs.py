"""Reading a run folder: its manifest (objectives and smallest effect checked), what an interrupted run
lacks, the sequential looks it planned, and :func:`check_run`, which the report, the class comparison
and ``repetitions: auto`` call before they judge anything.

Every file is read through :mod:`serve_system.safeio` (via :mod:`serve_system.node.records` and
:mod:`serve_system.results.tree`): a link out of the run, a pipe or an oversized record is refused with
one line naming it. Nothing here writes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import ServeSystemError
from ..experiment.spec.models import DEFAULT_OBJECTIVES as _DEFAULT
from ..experiment.spec.models import DEFAULT_SMALLEST_EFFECT
from ..experiment.spec.reader import read_objectives
from ..node import records
from . import sequential
from . import tree as res

DEFAULT_OBJECTIVES = [o.as_record() for o in _DEFAULT]


def read_manifest(run: Path) -> dict[str, Any]:
    """The run's manifest.json, its objectives and smallest effect checked (the defaults without one)."""
    path = run / records.MANIFEST_FILE
    if not os.path.lexists(path):
        return {"objectives": list(DEFAULT_OBJECTIVES)}
    data = records.to_json(res.read_manifest(run))  # typed: one line naming the field
    # the spec's own rules for objectives (names, metrics, goals, loads, constraints); none: the default
    data["objectives"] = [o.as_record() for o in read_objectives(data.get("objectives"), path)]
    data["smallest_effect"] = _smallest_effect(data, path)
    return data


def _smallest_effect(data: dict[str, Any], path: Path) -> float:
    """The spec's smallest effect of interest, as the run's manifest keeps it (its own field, or the
    spec as run); the default where neither has one (runs planned before the field existed)."""
    spec = data["spec"] if isinstance(data.get("spec"), dict) else {}
    for field, value in (("smallest_effect", data.get("smallest_effect")),
                         ("spec.smallest_effect", spec.get("smallest_effect"))):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
            raise ServeSystemError(f"{path}: field '{field}' must be a share between 0 and 1 (0.05 = 5 %), "
                                   f"found {value!r}; fix it in the spec and plan the run again")
        return float(value)
    return DEFAULT_SMALLEST_EFFECT


def host_end(run: Path, host: str) -> str | None:
    """When a host's part of the run ended (its host.json), None while it has none."""
    path = run / host / records.HOST_FILE
    if not os.path.lexists(path):
        return None
    try:
        return records.read(path, records.HostRecord).end
    except records.RecordError:
        return None  # not the runner's record: the host reads as not finished


def missing(run: Path, manifest: dict[str, Any]) -> list[str]:
    """What an interrupted run lacks: hosts, variants or levels that were planned or started, unfinished.

    ``repetitions: auto`` plans repetitions up to its budget and measures those beyond the first ones
    only while a claim is undecided: a repetition past the first ones that was never started is what
    the run decided it did not need, not missing."""
    out: list[str] = []
    hosts = {p.name: p for p in res.host_dirs(run)}
    for h in manifest.get("hosts") or []:
        if str(h) not in hosts:
            out.append(f"{h}/ (a host of manifest.json without results)")
    for name, hdir in hosts.items():
        plan = res.read_json(hdir / records.PLAN_FILE, kind="plan")
        if isinstance(plan, dict):
            if not os.path.lexists(hdir / records.HOST_FILE):
                out.append(f"{name}/host.json (the host never finished)")
            # a search measures the levels it picks; what it did not pick is not missing
            adaptive = plan.get("adaptive") if isinstance(plan.get("adaptive"), dict) else None
            start = int(adaptive.get("start") or 0) if adaptive else None
            for v in [] if plan.get("search") else plan.get("variants") or []:
                if not isinstance(v, dict):
                    continue
                vdir = hdir / str(v.get("name"))
                vmeta = res.read_json(vdir / records.VARIANT_FILE) or {}
                if vmeta.get("status") in records.NOT_MEASURED:
                    continue
                for lv in v.get("levels") or []:
                    if not isinstance(lv, dict) or records.level_done(vdir / str(lv.get("id"))):
                        continue
                    if start is not None and int(lv.get("repetition") or 0) > start \
                            and not (vdir / str(lv.get("id"))).exists():
                        continue  # an extra repetition auto did not ask for
                    out.append(f"{name}/{v.get('name')}/{lv.get('id')}")
        for ldir in sorted(hdir.glob("*/*/")):
            if ldir.is_dir() and not ldir.name.startswith(".") and not ldir.parent.name.startswith(".") \
                    and not records.level_done(ldir) \
                    and any(ldir.iterdir()) and f"{name}/{ldir.parent.name}/{ldir.name}" not in out:
                out.append(f"{name}/{ldir.parent.name}/{ldir.name} (started, no level.json)")
    return out


def plan_looks(run: Path) -> sequential.Looks | None:
    """The sequential looks of a ``repetitions: auto`` run (every host plans the same), else None."""
    for hdir in res.host_dirs(run):
        plan = res.read_json(hdir / "plan.json")
        looks = sequential.looks_of(plan.get("adaptive")) if isinstance(plan, dict) else None
        if looks is not None:
            return looks
    return None


def check_run(run_dir: str | Path, partial: bool = False
              ) -> tuple[Path, dict[str, Any], list[dict[str, Any]], list[str]]:
    """Read and check a run folder; return (run, manifest, rows, missing). Raises before anything is
    written."""
    run = Path(run_dir)
    if not run.is_dir():
        raise ServeSystemError(f"{run}: no such run folder; give results/<experiment>/<run-id>")
    manifest = read_manifest(run)
    if not os.path.lexists(run / records.MANIFEST_FILE) and not res.host_dirs(run):
        raise ServeSystemError(f"{run}: empty run folder (no manifest.json, no <host>/ folder); give "
                               "results/<experiment>/<run-id> as an experiment playbook wrote it")
    rows = res.collect(run)
    gaps = missing(run, manifest)
    if not any(r.get("load") is not None for r in rows) and not any(r["status"] in records.NOT_MEASURED
                                                                   for r in rows):
        what = f"; missing: {', '.join(gaps[:6])}{' ...' if len(gaps) > 6 else ''}" if gaps else ""
        raise ServeSystemError(f"{run}: nothing measured yet (no <host>/<variant>/<level>/level.json){what}; "
                               "run the experiment (ansible-playbook experiments/NAME.yml -e run_id=...) "
                               "first")
    if gaps and not partial:
        raise ServeSystemError(
            f"{run}: interrupted run, {len(gaps)} missing: {', '.join(gaps[:6])}"
            f"{' ...' if len(gaps) > 6 else ''}; resume it (run the experiment again with "
            f"-e run_id={run.name}) or report what is there with --partial")
    return run, manifest, rows, gaps
