"""What the ``experiment`` role is handed for a written run: each host's node bundle, and the role's view.

The node bundle (:func:`write_bundle`) is one file, a Python zip application of the package that runs on
the node (:mod:`serve_system.node`; its layout: :mod:`serve_system.node.bundle`) with the host plan and
its inputs; one small enough (:data:`~.runnercall.PUT_LIMIT`) travels on the put's stdin.
The role's view (:func:`role_view`) is everything the role runs, so that it reads nothing of the spec
and builds no command line.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import safeio
from ..node import archive, bundle, plans
from ..node import records as rec
from . import runnercall
from .spec.messages import SpecError
from .spec.models import AnySpec, FastapiSpec


def picked_names(only: Sequence[str]) -> list[str]:
    """``--only`` as given (repeated, or comma lists) as a list of names."""
    return [n.strip() for item in only for n in item.split(",") if n.strip()]


@dataclass
class HostView:
    """What the role runs for one host."""

    models: list[str]
    node_dir: str
    restore: list[str]
    #: the host's node bundle on the controller, beside its plan in the run folder
    bundle: str
    #: on the node: prints the host's records archive (``archive``) for the role to write home as
    #: ``fetched`` (base64), or exits ``fetch_too_large``: the role fetches it
    fetch: list[str]
    fetch_too_large: int
    archive: str
    fetched: str
    #: serve-system's words that ask for the host's next call (repetitions: auto, a search)
    decide: list[str]
    #: on the node: puts the bundle, sent on its stdin; None: it is copied (one over runnercall.PUT_LIMIT)
    put: list[str] | None
    calls: list[runnercall.RunnerCall]
    #: the calls the role may add, each asked of serve-system decide
    more_rounds: int
    #: what this plan measures again that an earlier plan of the run id measured under other settings
    #: (the host plan's ``measured_again``: variant, level, what changed), for the role to say
    measured_again: list[str] = field(default_factory=list)


@dataclass
class RoleView:
    """What the ``experiment`` role is handed for a written run (:func:`role_view`); a host whose own
    planning was refused (``plan --play``) has its reason instead of its view."""

    experiment: str
    kind: str
    run_dir: str
    #: a sharded run: every host of the run, over which each host's own plan deals the candidates
    shard_hosts: list[str]
    run_subdir: str
    hosts: dict[str, HostView | str]
    #: serve-system's words that end the play (``plan --play``; empty: none)
    finish: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, object]:
        """The view as the role reads it: JSON, for printing only."""
        return {"experiment": self.experiment, "kind": self.kind, "run_dir": self.run_dir,
                "shard_args": [f"--shard-hosts={','.join(self.shard_hosts)}"] if self.shard_hosts else [],
                "run_subdir": self.run_subdir,
                "hosts": {h: {"refused": v} if isinstance(v, str) else rec.to_json(v)
                          for h, v in self.hosts.items()},
                **({"finish": self.finish} if self.finish else {})}


def _put(settings: plans.RunnerSettings, path: Path, fresh: bool) -> list[str] | None:
    """The put of a host's bundle (``path``), or None where it is copied instead (one over the limit)."""
    small = path.is_file() and path.stat().st_size <= runnercall.PUT_LIMIT
    return runnercall.put_argv(settings, fresh) if small else None


def role_view(spec: AnySpec, run: Path, written: dict[str, plans.HostPlan], only: list[str],
              fresh: bool = False) -> RoleView:
    """What the ``experiment`` role needs of a written run, so that it reads nothing of the spec and
    computes nothing: the experiment's name and kind, the run folder, and per host the models to fetch,
    its node folder, its runner calls (:class:`~.runnercall.RunnerCall`: a Triton plan is one call, a
    FastAPI plan one per variant, its endpoint brought up with the variant's runtime first), the
    command that restores its baseline and how many more calls ``serve-system decide`` may add.
    ``only`` picks variants (``-e variants=...``); an unknown name is refused (:class:`SpecError`).
    ``written`` is :func:`.runfolder.write_run`'s answer (each host's plan as written); ``fresh``: the put
    empties the host's node folder first (one task on the node instead of two)."""
    names = [v.name for v in (spec.variants if isinstance(spec, FastapiSpec) else spec.all_variants)]
    only = picked_names(only)
    unknown = [n for n in only if n not in names]
    if unknown:
        raise SpecError([(f"{spec.path}: variants: no variant named {unknown[0]!r} (-e variants): "
                          f"give one of {', '.join(names)}")])
    kind = spec.kind if isinstance(spec, FastapiSpec) else rec.TRITON
    token = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    hosts: dict[str, HostView | str] = {}
    for host, hplan in written.items():
        settings, adaptive = hplan.runner, hplan.adaptive
        chosen = [v for v in hplan.variants if not only or v.name in only]
        packed = run / host / bundle.NAME
        where = HostView(models=list(hplan.models), node_dir=settings.node_dir,
                         restore=runnercall.restore_argv(settings), bundle=str(packed),
                         fetch=runnercall.fetch_argv(settings), fetch_too_large=runnercall.FETCH_TOO_LARGE,
                         archive=runnercall.archive_path(settings), fetched=str(run / host / archive.FETCHED),
                         decide=["decide", str(run), "--host", host],
                         put=_put(settings, packed, fresh), calls=[], more_rounds=0,
                         measured_again=list(hplan.measured_again))
        if hplan.search is not None:  # a search: serve-system decide picks every call, the first one too
            hosts[host] = dataclasses.replace(where, more_rounds=hplan.search.calls)
            continue
        if kind == rec.TRITON:  # one call: the runner follows the plan's rounds itself
            groups: list[tuple[list[plans.VariantPlan], int | None]] = [(chosen, None)]
        else:  # one call per load: the endpoint is brought up with the variant's runtime first
            by_name = {v.name: v for v in chosen}
            rounds = hplan.rounds or [list(by_name)]
            groups = [([by_name[n]], r if len(rounds) > 1 else None)
                      for r, names in enumerate(rounds, 1) for n in names if n in by_name]
        calls = []
        for i, (group, rep) in enumerate(groups):
            reps = [rep] if rep else list(range(1, adaptive.start + 1)) if adaptive else []
            levels = [lv for v in group for lv in v.levels if not reps or lv.repetition in reps]
            calls.append(runnercall.runner_call(
                settings, [v.name for v in group], reps, token=f"{token}-{i}",
                todo=sum(not lv.done for lv in levels), runtime=group[0].runtime if group else None,
                # the last call restores the baseline (auto: the role's restore, once it is decided, or
                # the call itself once it has spent the budget's minutes)
                restore=i == len(groups) - 1 and not adaptive,
                restore_past=adaptive.minutes if i == len(groups) - 1 and adaptive else None))
        hosts[host] = dataclasses.replace(  # auto: the calls the role may add
            where, calls=calls, more_rounds=adaptive.max - adaptive.start if adaptive else 0)
    shards = [p.shard for p in written.values() if p.shard is not None]
    return RoleView(experiment=spec.name, kind=kind, run_dir=str(run),
                    shard_hosts=list(shards[0].hosts) if shards else [],
                    run_subdir=f"{spec.name}/{run.name}", hosts=hosts)


def write_bundle(hdir: Path, hplan: plans.HostPlan, variants: list[plans.VariantPlan],
                 image: Path | None, within: Path) -> None:
    """What the role puts on the node in one task: the node bundle, a Python zip application of the
    node package with the plan and its inputs (``python3 .node.pyz`` puts them beside itself, then runs), as
    ``hdir/.node.pyz``."""
    dest = hdir / bundle.NAME
    top = Path(__file__).parents[1]  # serve_system/: the package as it imports here
    node = top / "node"
    # the code: serve_system/node/ whole (but the FastAPI client, a data member below) and what it
    # imports of serve_system, at their package paths
    code: dict[str, Path] = {f"serve_system/{name}": top / name for name in bundle.FOUNDATION}
    code.update({f"serve_system/node/{p.name}": p for p in sorted(node.glob("*.py"))
                 if p.name != bundle.CLIENT})
    # the data put beside it: the FastAPI client (a script the plan's argv names), the inputs, the image
    files: dict[str, Path] = {bundle.CLIENT: node / bundle.CLIENT}
    for data in sorted({v.input_data for v in variants if v.input_data}):
        files[Path(data).name] = Path(data)
    if image is not None and hplan.kind == rec.FASTAPI:
        files[f"image{image.suffix}"] = image
    # the one write path (a temporary name, renamed; never through a link), the one read path for every
    # file it packs (regular files only: a pipe or a device named as input data is refused, not read)
    with safeio.open_write(dest, within=within, binary=True) as fh, \
            zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        z.writestr(bundle.ENTRY, bundle.MAIN)
        for name, src in [*code.items(), *sorted(files.items())]:
            with safeio.open_read(src, kind="bundle") as stream, z.open(name, "w", force_zip64=True) as out:
                shutil.copyfileobj(stream, out, 1024 * 1024)
        z.writestr("plan.json", json.dumps(rec.to_json(hplan), indent=1) + "\n")
