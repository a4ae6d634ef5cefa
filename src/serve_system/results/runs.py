"""Reading a run folder: its manifest (objectives and smallest effect checked), what an interrupted run
lacks, the sequential looks it planned, and :func:`check_run`, which the report, the class comparison
and ``repetitions: auto`` call before they judge anything.

Every file is read through :mod:`serve_system.safeio` (via :mod:`serve_system.node.records` and
:mod:`serve_system.results.tree`): a link out of the run, a pipe or an oversized record is refused with
one line naming it. Nothing here writes.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

from ..errors import ServeSystemError
from ..experiment.manifest import Manifest
from ..experiment.spec.models import DEFAULT_OBJECTIVES as _DEFAULT
from ..experiment.spec.models import DEFAULT_SMALLEST_EFFECT
from ..node import plans, records, resume
from . import sequential
from . import tree as res
from .row import Row
from .status import NOT_MEASURED


def default_objectives() -> list[plans.ObjectiveRecord]:
    """The objectives of a run whose manifest names none."""
    return [o.record() for o in _DEFAULT]


def read_manifest(run: Path) -> Manifest:
    """The run's manifest.json (:class:`Manifest`), its ``objectives`` (checked by the spec's own
    rules as it is read) and ``smallest_effect`` (a float) checked; the defaults where there is none."""
    path = run / records.MANIFEST_FILE
    if not os.path.lexists(path):
        return Manifest(objectives=default_objectives(), smallest_effect=DEFAULT_SMALLEST_EFFECT)
    man = res.read_manifest(run)  # typed: one line naming the field
    return dataclasses.replace(man, objectives=man.objectives or default_objectives(),
                               smallest_effect=_smallest_effect(man, path))


def _smallest_effect(man: Manifest, path: Path) -> float:
    """The spec's smallest effect of interest, as the run's manifest keeps it (its own field, or the
    spec as run); the default where neither has one (runs planned before the field existed)."""
    spec = man.spec if isinstance(man.spec, dict) else {}
    for field, value in (("smallest_effect", man.smallest_effect),
                         ("spec.smallest_effect", spec.get("smallest_effect"))):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
            raise ServeSystemError(f"{path}: field '{field}' must be a share between 0 and 1 (0.05 = 5 %), "
                                   f"found {value!r}; fix it in the spec and plan the run again")
        return float(value)
    return DEFAULT_SMALLEST_EFFECT


def runs_inside(folder: Path) -> list[Path]:
    """The run folders in ``folder`` (each with its manifest.json; not hidden, not links), oldest name
    first, when ``folder`` is no run itself (no manifest.json, no ``<host>/plan.json``): a folder of runs
    (``results/<experiment>``) given where one run is asked for."""
    if os.path.lexists(folder / records.MANIFEST_FILE) or any(
            os.path.lexists(h / records.PLAN_FILE) for h in res.host_dirs(folder)):
        return []
    return [p for p in res.host_dirs(folder) if os.path.isfile(p / records.MANIFEST_FILE)
            and not os.path.islink(p / records.MANIFEST_FILE)]


def host_end(run: Path, host: str) -> str | None:
    """When a host's part of the run ended (its host.json), None while it has none."""
    path = run / host / records.HOST_FILE
    if not os.path.lexists(path):
        return None
    try:
        return records.read(path, records.HostRecord).end
    except records.RecordError:
        return None  # not the runner's record: the host reads as not finished


def missing(run: Path, manifest: Manifest) -> list[str]:
    """What an interrupted run lacks: hosts, variants or levels that were planned or started, unfinished.

    ``repetitions: auto`` plans repetitions up to its budget and measures those beyond the first ones
    only while a claim is undecided: a repetition past the first ones that was never started is what
    the run decided it did not need, not missing."""
    return _gaps(run, manifest)[0]


def _gaps(run: Path, manifest: Manifest) -> tuple[list[str], list[str]]:
    """What the run lacks (:func:`missing`), and its levels measured under another configuration, load or
    perf settings than their host's plan.json (``host/variant/level (what changed)``: a plan of the run id
    after them changed them, and they were never set aside: :mod:`serve_system.node.resume`)."""
    out: list[str] = []
    mixed: list[str] = []
    hosts = {p.name: p for p in res.host_dirs(run)}
    for h in manifest.hosts:
        if str(h) not in hosts:
            out.append(f"{h}/ (a host of manifest.json without results)")
    for name, hdir in hosts.items():
        plan = res.read_plan(hdir)
        # each level's record read once, not once a question: done under the plan's settings, or not
        done, stale = resume.check_host(hdir, plan.variants if plan is not None else [])
        mixed += [f"{name}/{s.variant}/{s.level} ({s.why})" for s in stale]
        other = {(s.variant, s.level): s.why for s in stale}
        recorded = done | set(other)
        if plan is not None:
            if not os.path.lexists(hdir / records.HOST_FILE):
                out.append(f"{name}/host.json (the host never finished)")
            # a search measures the levels it picks; what it did not pick is not missing
            start = plan.adaptive.start if plan.adaptive else None
            for v in [] if plan.search else plan.variants:
                vdir = hdir / v.name
                vrec = res.read_variant(vdir)
                if vrec is not None and vrec.status in NOT_MEASURED:
                    continue
                for lv in v.levels:
                    if (v.name, lv.id) in done:
                        continue
                    if (v.name, lv.id) in other:
                        out.append(f"{name}/{v.name}/{lv.id} (measured under another plan: "
                                   f"{other[v.name, lv.id]})")
                        continue
                    if start is not None and lv.repetition > start and not (vdir / lv.id).exists():
                        continue  # an extra repetition auto did not ask for
                    out.append(f"{name}/{v.name}/{lv.id}")
        for ldir in sorted(hdir.glob("*/*/")):
            if ldir.is_dir() and not ldir.name.startswith(".") and not ldir.parent.name.startswith(".") \
                    and (ldir.parent.name, ldir.name) not in recorded \
                    and any(ldir.iterdir()) and f"{name}/{ldir.parent.name}/{ldir.name}" not in out:
                out.append(f"{name}/{ldir.parent.name}/{ldir.name} (started, no level.json)")
    return out, mixed


def plan_looks(run: Path) -> sequential.Looks | None:
    """The sequential looks of a ``repetitions: auto`` run (every host plans the same), else None."""
    for hdir in res.host_dirs(run):
        plan = res.read_plan(hdir)
        looks = None if plan is None else sequential.looks_of(plan.adaptive)
        if looks is not None:
            return looks
    return None


def check_run(run_dir: str | Path, partial: bool = False,
              each_host: Callable[[str, list[Row]], None] | None = None
              ) -> tuple[Path, Manifest, list[Row], list[str]]:
    """Read and check a run folder; return (run, manifest, rows, missing). Raises before anything is
    written. ``each_host``: given each host's rows as they are read (:func:`tree.collect`)."""
    run = Path(run_dir)
    if not run.is_dir():
        raise ServeSystemError(f"{run}: no such run folder; give results/<experiment>/<run-id>")
    inner = runs_inside(run)
    if inner:  # results/<experiment> given: its run ids are no hosts
        raise ServeSystemError(f"{run} holds runs, not one run: give one, e.g. {inner[-1]}")
    manifest = read_manifest(run)
    if not os.path.lexists(run / records.MANIFEST_FILE) and not res.host_dirs(run):
        raise ServeSystemError(f"{run}: empty run folder (no manifest.json, no <host>/ folder); give "
                               "results/<experiment>/<run-id> as an experiment playbook wrote it")
    gaps, mixed = _gaps(run, manifest)
    if mixed:  # before any row is read: a report never mixes two configurations
        raise ServeSystemError(
            f"{run}: {len(mixed)} level(s) measured under another plan than their host's plan.json, e.g. "
            f"{mixed[0]}: a report never mixes two configurations; plan the run again (serve-system plan, or "
            f"the experiment playbook with -e run_id={run.name}): it sets them aside in "
            "<host>/<variant>/.superseded/ and measures them again")
    rows = res.collect(run, each_host=each_host)
    if not any(r.get("load") is not None for r in rows) and not any(r["status"] in NOT_MEASURED
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
