"""Resuming a run id: what a level is measured under, and what a changed plan measures again.

A re-run of a run id (the default run id is the date) measures only what is not done yet. What is done is
decided by one rule, :func:`.records.level_resume`: a level with a complete record whose :class:`Setting`
(its configuration, load and perf settings, as hashes: :func:`level_setting`) is the plan's. A level the
plan changed (a variant's ``max_queue_delay_microseconds`` edited, another window, another arrival
distribution) is measured again, and its old measurement is set aside by :func:`settle`, never deleted:
moved with the variant's old records into ``<variant>/.superseded/<UTC time>/`` with
``superseded.json`` saying why; hidden folders are no part of a run's results, so a report never mixes
two configurations. :func:`settle` runs on both sides with the same rule: on the controller when the
plan is written (``serve-system plan``: the plan says each level it measures again, and why), and on
the node when the runner starts (the node keeps its copy of the run between plays).

Standard library only: it is shipped to the node in the runner's bundle.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import safeio
from . import plans
from . import records as rec

#: the folder, in a variant's folder, that what a changed plan measures again is moved into
SUPERSEDED = ".superseded"
#: the note in each set-aside folder: when and why
NOTE_FILE = "superseded.json"
#: a variant's files that belong to its configuration (set aside with it when it changed)
VARIANT_FILES = (rec.VARIANT_FILE, rec.CONFIG_FILE, rec.LOAD_BODY_FILE)


def _sha(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def config_sha256(v: plans.VariantPlan) -> str:
    """A variant's configuration as a hash: its config.pbtxt's (the level records' provenance
    ``config_sha256``, the same hash); a FastAPI variant (no config.pbtxt): its runtime's."""
    text = f"runtime: {v.runtime}" if v.runtime is not None and not v.config_pbtxt else v.config_pbtxt
    return hashlib.sha256(text.encode()).hexdigest()


def level_setting(v: plans.VariantPlan, lv: plans.LevelPlan) -> rec.Setting:
    """What level ``lv`` of variant ``v`` is measured under (:class:`records.Setting`), from the plan
    alone: the controller and the node, reading the same plan, make the same hashes."""
    load = {"mode": lv.mode, "load": float(lv.load), "repetition": lv.repetition, "requests": lv.requests,
            "distribution": v.perf.get("distribution")}
    perf = {"argv": [str(a) for a in lv.argv], "retry_argv": [[str(a) for a in r] for r in lv.retry_argv],
            "warmup_argv": [str(a) for a in v.warmup_argv]}
    return rec.Setting(config_sha256=config_sha256(v), load_sha256=_sha(load), perf_sha256=_sha(perf))


@dataclass(frozen=True)
class Superseded:
    """One level a plan measures again: its variant, its id and what changed, in words."""

    variant: str
    level: str
    why: str

    def __str__(self) -> str:
        return f"{self.variant} {self.level}: measured again: {self.why}"


def check_host(host_dir: str | Path, variants: list[plans.VariantPlan]
               ) -> tuple[set[tuple[str, str]], list[Superseded]]:
    """A host folder's levels against its plan's ``variants``, nothing moved: the (variant, level) pairs
    done (:func:`.records.level_resume`: a complete record under the plan's setting; a variant the plan
    does not name: a complete record), and the levels measured under other settings than the plan's
    (a level the plan no longer has: when its configuration is not the variant's now), with what changed."""
    host = Path(host_dir)
    by_name = {v.name: v for v in variants}
    done: set[tuple[str, str]] = set()
    stale: list[Superseded] = []
    for vdir in rec.plain_dirs(host):
        v = by_name.get(vdir.name)
        planned = {lv.id: (lv, level_setting(v, lv)) for lv in v.levels} if v is not None else {}
        other = rec.Setting(config_sha256=config_sha256(v)) if v is not None else None
        old_config = _text(vdir / rec.CONFIG_FILE) if v is not None else None
        for ldir in rec.plain_dirs(vdir):
            lv, setting = planned.get(ldir.name, (None, other))
            level, changed = rec.level_resume(ldir, setting)
            if level is None:
                continue
            if not changed:
                done.add((vdir.name, ldir.name))
                continue
            assert v is not None  # only a planned variant's setting differs
            words = describe(level, changed, v, lv, old_config)
            words = words if lv is not None else f"no longer planned; {words}"
            stale.append(Superseded(v.name, ldir.name, words))
    return done, stale


def settle(host_dir: str | Path, variants: list[plans.VariantPlan], within: str | Path | None = None
           ) -> list[Superseded]:
    """Set aside, in each planned variant's folder under ``host_dir``, the levels the plan measures again
    (:func:`check_host`) and, where the variant's configuration changed, its old variant record,
    config.pbtxt and load body; each variant's into one new folder ``<variant>/.superseded/<UTC time>/``
    with a note of why (:data:`NOTE_FILE`). Returns what is measured again, level by level. Nothing is
    deleted; levels without a record (interrupted attempts) are left to the runner, which measures them
    again from scratch."""
    host = Path(host_dir)
    root = Path(within) if within is not None else host
    _, stale = check_host(host, variants)
    for v in variants:
        vdir = host / v.name
        if vdir.is_symlink() or not vdir.is_dir():
            continue
        why = {s.level: s.why for s in stale if s.variant == v.name}
        files = [n for n in VARIANT_FILES if os.path.lexists(vdir / n)] \
            if _variant_changed(vdir, config_sha256(v), _text(vdir / rec.CONFIG_FILE)) else []
        if why or files:
            set_aside(vdir, [*sorted(why), *files], why, root)
    return stale


def describe(level: rec.LevelRecord, changed: list[str], v: plans.VariantPlan, lv: plans.LevelPlan | None,
             old_config: str | None) -> str:
    """What changed for a level, in words: each changed part, with its first differences where the
    records show them (the configuration's lines, the command's options)."""
    parts = []
    for what in changed:
        detail: list[str] = []
        if what == "configuration" and old_config is not None \
                and hashlib.sha256(old_config.encode()).hexdigest() == level.recorded_setting().config_sha256:
            detail = _lines_changed(old_config, v.config_pbtxt)
        elif what == "perf settings" and lv is not None and level.attempts:
            detail = _options_changed([str(a) for a in level.attempts[0].argv], [str(a) for a in lv.argv])
        elif what == "load" and lv is not None and lv.requests != level.requests:
            detail = [f"requests {level.requests} -> {lv.requests}"]
        parts.append(f"{what} changed" + (f" ({'; '.join(detail[:3])})" if detail else ""))
    return ", ".join(parts)


def _lines_changed(old: str, new: str) -> list[str]:
    """The lines of a config.pbtxt that differ: ``key: old -> new`` where one key's value changed."""
    old_lines = [ln.strip() for ln in old.splitlines() if ln.strip()]
    new_lines = [ln.strip() for ln in new.splitlines() if ln.strip()]
    gone = [ln for ln in old_lines if ln not in new_lines]
    came = [ln for ln in new_lines if ln not in old_lines]
    out = []
    for ln in gone:
        key = ln.partition(":")[0]
        match = next((c for c in came if c.partition(":")[0] == key), None)
        if match is not None and ":" in ln:
            came.remove(match)
            out.append(f"{key}: {ln.partition(':')[2].strip()} -> {match.partition(':')[2].strip()}")
        else:
            out.append(f"- {ln}")
    return out + [f"+ {ln}" for ln in came]


def _options_changed(old: list[str], new: list[str]) -> list[str]:
    """The options of two command lines that differ: ``--option old -> new``."""
    def options(argv: list[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for i, a in enumerate(argv):
            if a.startswith("-"):
                nxt = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("-") else ""
                out[a] = nxt
        return out
    o, n = options(old), options(new)
    return [f"{k} {o.get(k, '(none)') or '(set)'} -> {n.get(k, '(none)') or '(set)'}"
            for k in sorted(set(o) | set(n)) if o.get(k) != n.get(k)]


def _variant_changed(vdir: Path, config: str, old_config: str | None) -> bool:
    """Whether the variant's records in ``vdir`` belong to another configuration than ``config``: its
    variant record says so (its ``config_sha256``), else its config.pbtxt (the controller's copy)."""
    path = vdir / rec.VARIANT_FILE
    if os.path.lexists(path):
        try:
            recorded = rec.read(path, rec.VariantRecord).config_sha256
        except rec.RecordError:
            recorded = None
        if recorded is not None:
            return recorded != config
    if old_config is None:
        return False
    return hashlib.sha256(old_config.encode()).hexdigest() != config


def set_aside(vdir: Path, names: list[str], why: dict[str, str], within: Path) -> Path:
    """Move ``names`` (levels, variant files) of a variant folder into a new folder
    ``<vdir>/.superseded/<UTC time>[-N]/`` beside a note of why (:data:`NOTE_FILE`); the folder."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    base = safeio.make_dirs(vdir / SUPERSEDED, within)
    dest = base / stamp
    n = 1
    while True:
        try:
            dest.mkdir()
            break
        except FileExistsError:
            n += 1
            dest = base / f"{stamp}-{n}"
    for name in names:
        os.rename(vdir / name, dest / name)
    safeio.write_json(dest / NOTE_FILE, {"set_aside": stamp, "why": why,
                                         "moved": names}, within=within)
    return dest


def _text(path: Path) -> str | None:
    """A small text file of the run (a variant's config.pbtxt), or None: none, or not readable."""
    if not os.path.lexists(path):
        return None
    try:
        return safeio.read_text(path, kind="config", within=path.parent)
    except (safeio.UnsafeFile, OSError):
        return None
