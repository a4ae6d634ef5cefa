"""A class comparison's output folder (:mod:`.classcmp`): where it goes, what it may not be, and
class.md, class.csv, class.json and the box plots written into it."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from .. import ownedtree, textsafe
from ..errors import ServeSystemError
from .claim import JsonObject
from .classcmp import ClassResult
from .classmd import markdown
from .classplots import box_plots
from .classstats import Outlier

#: the files a class report consists of (a --force run removes only these before writing)
FILES = ("class.md", "class.csv", "class.json")
CSV_COLUMNS: tuple[str, ...] = ("variant", "mode", "load", "metric", "n", "median", "q1", "q3", "min", "max",
                                "mean", "cv", "mad", "outliers")


def default_out(run_dirs: list[Path]) -> Path:
    """Where a class report goes without --out: ``results/class/<experiment>`` beside the runs'
    experiment folder (for runs in ``results/<experiment>/<run-id>``)."""
    first = run_dirs[0]
    return first.resolve().parent.parent / "class" / first.resolve().parent.name


def check_out(out: Path, run_dirs: list[Path], force: bool) -> None:
    """Refuse an output folder that is a file, lies in or holds one of the runs, or is not empty
    (without ``force``)."""
    if out.exists() and not out.is_dir():
        raise ServeSystemError(f"--out {out}: is a file; give a folder for the class report")
    target = out.resolve()
    for run in run_dirs:
        r = run.resolve()
        if target == r or r in target.parents:
            raise ServeSystemError(f"--out {out}: lies inside run folder {run}; write the class report "
                                   "elsewhere (a run keeps its own report)")
        if target in r.parents:
            raise ServeSystemError(f"--out {out}: holds run folder {run}; write the class report elsewhere")
    if out.is_symlink():
        raise ServeSystemError(f"--out {out}: is a link; give a folder of its own for the class report")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ServeSystemError(f"--out {out}: folder exists and is not empty; give another folder or "
                               "--force to replace the class report in it (only the files it wrote there)")


def _jsonable(result: ClassResult) -> JsonObject:
    """class.json's document: the result's fields in order, each record as a JSON object (written JSON,
    made only to be written)."""
    def o(x: Outlier) -> JsonObject:
        return {**dataclasses.asdict(x), "z": None if math.isinf(x.z) else x.z}

    doc = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    return {**doc, "nodes": [dataclasses.asdict(n) for n in result.nodes],
            "cells": [dataclasses.asdict(c) for c in result.cells],
            "outliers": [o(x) for x in result.outliers],
            "suspects": [{**dataclasses.asdict(s), "outliers": [o(x) for x in s.outliers]}
                         for s in result.suspects],
            "findings": [f.to_json() for f in result.findings]}


def write(result: ClassResult, out: Path) -> list[Path]:
    """class.md, class.csv, class.json and plots/box_*.png into ``out`` (replacing only those files)."""
    # check_out has refused a user's non-empty folder (without --force): only the files this command put
    # there before are removed (its list, ownedtree.OwnedFolder), a user's own files stay
    folder = ownedtree.OwnedFolder(out, force=True, option="--out")
    folder.clear()
    for name in FILES:
        folder.add(name)
    plots = box_plots(result, out)
    for p in plots:
        folder.add(p.relative_to(out).as_posix())
    folder.write_text("class.md", markdown(result, plots))
    with folder.open("class.csv", newline="") as fh:
        w = textsafe.DictWriter(fh, fieldnames=list(CSV_COLUMNS))
        w.writeheader()
        for c in result.cells:
            row = {k: "" if getattr(c, k) is None else getattr(c, k) for k in CSV_COLUMNS}
            w.writerow({**row, "load": f"{c.load:g}", "outliers": ";".join(c.outliers)})
    folder.write_text("class.json", textsafe.dumps(_jsonable(result), indent=1, default=str) + "\n")
    return [out / n for n in FILES] + plots
