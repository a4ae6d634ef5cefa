"""A class comparison's input (:mod:`.classcmp`): every (run, host) of the run folders as a node, checked
(each run folder read with :func:`.runs.check_run`: raw records, nothing needs to be reported first)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ServeSystemError
from ..experiment.manifest import Manifest
from . import findings as fnd
from . import runs
from . import tree as res
from .row import Row
from .setups import VariantSetup


@dataclass
class Node:
    """One node's result: a host of one run."""

    run: Path
    run_id: str
    host: str
    label: str
    rows: list[Row]
    setups: dict[tuple[str, str], VariantSetup]
    #: (variant, mode, load) -> the findings' level (every metric of findings.METRICS)
    means: dict[tuple[str, str, float], fnd.Level] = field(default_factory=dict)


def _not_a_run(run: Path) -> str | None:
    """Why ``run`` is not a run folder, or None."""
    if not run.is_dir():
        return f"{run}: no such run folder; give results/<experiment>/<run-id>"
    if (run / "manifest.json").is_file() or any(run.glob("*/*/variant.json")) \
            or any(run.glob("*/*/*/level.json")):
        return None
    inner = runs.runs_inside(run)
    if inner:
        return (f"{run}: not a run folder but a folder of runs; give the runs themselves, e.g. "
                f"{inner[0]}")
    return (f"{run}: not a run folder (no manifest.json, no <host>/<variant>/ records); give "
            "results/<experiment>/<run-id> as an experiment playbook wrote it")


def read_nodes(run_dirs: list[Path], partial: bool = False) -> tuple[list[Node], Manifest]:
    """Every (run, host) of the run folders as a :class:`Node`, checked; and the first run's manifest
    (objectives, smallest effect). Raises with one line naming the folder and the fix."""
    seen: dict[Path, Path] = {}
    for run in run_dirs:
        why = _not_a_run(run)
        if why:
            raise ServeSystemError(why)
        key = run.resolve()
        if key in seen:
            raise ServeSystemError(f"{run}: given twice (also as {seen[key]}); give each run folder once")
        seen[key] = run
    nodes: list[Node] = []
    manifest: Manifest | None = None
    experiment: tuple[str, Path] | None = None
    for run in run_dirs:
        _, man, rows, _gaps = runs.check_run(run, partial)
        if manifest is None:
            manifest = man
        exp = next((str(r["experiment"]) for r in rows), run.parent.name)
        if experiment is None:
            experiment = (exp, run)
        elif exp != experiment[0]:
            raise ServeSystemError(f"{run}: a run of experiment '{exp}', but {experiment[1]} is of "
                                   f"'{experiment[0]}'; compare the runs of one experiment at a time")
        setups = res.variant_setups(run)
        for host in sorted({str(r["host"]) for r in rows}):
            hrows = [r for r in rows if r["host"] == host]
            node = Node(run, str(hrows[0]["run_id"]), host, host, hrows,
                        {k: v for k, v in setups.items() if k[0] == host})
            node.means = {(v, mode, load): m for (_, v, mode, load), m in fnd.levels(hrows).items()}
            nodes.append(node)
    measured = [n for n in nodes if n.means]
    if len(measured) < 2:
        what = f"one node ({measured[0].host} of {measured[0].run})" if measured else "no node"
        raise ServeSystemError(f"{', '.join(str(r) for r in run_dirs)}: {what} with measurements; a class "
                               "comparison needs two nodes or more: give more run folders (one per "
                               "student) or a run measured on several hosts")
    hosts = Counter(n.host for n in measured)
    for n in measured:
        if hosts[n.host] > 1:
            n.label = f"{n.run_id}/{n.host}"
    labels = Counter(n.label for n in measured)
    dup = next((n for n in measured if labels[n.label] > 1), None)
    if dup is not None:
        raise ServeSystemError(f"{dup.run}: node {dup.label} appears in two run folders with the same run "
                               "id; give each run once")
    return measured, dataclasses.replace(manifest or Manifest(),
                                         experiment=experiment[0] if experiment else None)
