"""The one way to read a spec file: :func:`load_spec`.

It reads a file with limits (size, aliases, nesting), refuses what Ansible or the file system could
misread (Jinja expressions, names that are not plain names, paths that leave the spec's folder), checks
the data against :mod:`.models` and raises :class:`~.messages.SpecError`, whose lines each read
``FILE: field.path: message (fix)``.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ...secretfiles import secret_reason
from ...textsafe import clean
from ..perf import CONCURRENCY, REQUEST_RATE
from .messages import SpecError, format_errors
from .models import (
    DEFAULT_OBJECTIVES,
    KINDS,
    MAX_BYTES,
    MAX_DEPTH,
    MAX_NODES,
    MAX_RUNS,
    MAX_VARIANTS,
    AnySpec,
    FastapiSpec,
    Load,
    Objective,
    TritonSpec,
    data_problems,
    expand_levels,
)
from .sweeps import expand_sweep


def repo_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding ``ansible.cfg``."""
    for d in [start, *start.parents]:
        if (d / "ansible.cfg").exists():
            return d
    return None


def allowed_roots(spec_path: Path) -> list[Path]:
    """Folders a spec's paths may point into: its own folder and the repository root above it."""
    folder = spec_path.resolve().parent
    root = repo_root(folder)
    return [folder] + ([root] if root is not None else [])


def resolve(spec_path: Path, rel: str) -> Path:
    """A spec's path: against the spec's folder, else the repository root; :class:`ValueError` if it
    points outside both, or at a key, credentials or the inventory (:func:`secret_reason`: the path as
    resolved, links followed)."""
    roots = allowed_roots(spec_path)
    p = Path(rel)
    candidates = [p.resolve()] if p.is_absolute() else [(r / p).resolve() for r in roots]
    inside = [c for c in candidates if any(c == r or c.is_relative_to(r) for r in roots)]
    if not inside:
        raise ValueError(f"{rel!r} points outside the spec's folder and its repository "
                         f"({', '.join(map(str, roots))}): keep the file inside them")
    found = next((c for c in inside if c.exists()), inside[0])
    reason = secret_reason(found, roots[-1] if len(roots) > 1 else repo_root(found.parent))
    if reason is not None:
        raise ValueError(f"{rel!r} may not be read for a spec nor sent to a node: {reason}: name another "
                         "file")
    return found


def load_spec(path: str | Path) -> AnySpec:
    """Read and check a spec file; raise :class:`SpecError` (nothing is written either way)."""
    p = Path(path)
    raw = read_yaml(p)
    return spec_from_data(raw, p)


def read_yaml(p: Path, max_bytes: int = MAX_BYTES) -> Any:
    """Safe YAML of a file with size, alias, nesting and duplicate-key limits; :class:`SpecError`."""
    where = str(p)
    try:
        if p.is_dir():
            raise SpecError([f"{where}: (file): is a folder: give a spec file (.yml)"])
        if p.exists() and not p.is_file():
            raise SpecError([f"{where}: (file): not a regular file: give a spec file (.yml)"])
        with p.open("rb") as fh:
            blob = fh.read(max_bytes + 1)
    except OSError as exc:
        raise SpecError([f"{where}: (file): cannot read: {exc.strerror} (check the path)"]) from None
    if len(blob) > max_bytes:
        raise SpecError([(f"{where}: (file): larger than {max_bytes // 1024} KiB: a spec is a small "
                         "YAML file (put data in files it names)")])
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = blob[:exc.start].count(b"\n") + 1
        raise SpecError([(f"{where}:{line}: (file): not UTF-8 text (byte 0x{blob[exc.start]:02x} at offset "
                         f"{exc.start}): save the file as UTF-8")]) from None
    loader = _Loader(text)
    try:
        _check_depth(text, where)
        node = loader.get_single_node()
        if node is None:
            raise SpecError(
                [f"{where}: (file): empty: a spec is a mapping (name, model, load, variants, ...)"])
        _check_nodes(node, where)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        loc = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        problem = str(getattr(exc, "problem", None) or exc).replace("\n", " ")
        raise SpecError([f"{where}{loc}: (file): not valid YAML: {problem} (fix the syntax there)"]) from None
    finally:
        loader.dispose()


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, whose every value that its tag cannot make (``!!bool maybe``, a date
    ``2024-13-45``, an integer of 5000 digits, ``!!timestamp x``) is a YAML error at that value, not an
    exception from inside the constructor."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError, IndexError) as exc:
            shown = repr(node.value)[:40] if isinstance(node, yaml.ScalarNode) else "this value"
            tag = node.tag.removeprefix("tag:yaml.org,2002:")
            reason = str(exc).split(";")[0].replace("\n", " ")[:120]
            raise yaml.constructor.ConstructorError(
                None, None, f"{shown} is not a valid {tag} ({reason})", node.start_mark) from None


def _check_depth(text: str, where: str) -> None:
    """Refuse deep nesting from the event stream (the parser does not recurse; composing does)."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                m = event.start_mark
                at = f":{m.line + 1}:{m.column + 1}" if m is not None else ""
                raise SpecError(
                    [f"{where}{at}: (file): nested deeper than {MAX_DEPTH} levels: flatten the spec"])
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1


def _check_nodes(root: yaml.Node, where: str) -> None:
    """Refuse alias bombs (counted before anything is expanded), deep nesting, recursion and
    duplicate keys."""
    sizes: dict[int, int] = {}

    def at(node: yaml.Node) -> str:
        m = node.start_mark
        return f"{where}:{m.line + 1}:{m.column + 1}"

    def size(node: yaml.Node, depth: int, stack: set[int]) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in stack:
            raise SpecError([f"{at(node)}: (file): an alias refers to itself: remove the recursive alias"])
        if depth > MAX_DEPTH:
            raise SpecError([f"{at(node)}: (file): nested deeper than {MAX_DEPTH} levels: flatten the spec"])
        total = 1
        if isinstance(node, (yaml.SequenceNode, yaml.MappingNode)):
            stack.add(key)
            if isinstance(node, yaml.MappingNode):
                seen: set[str] = set()
                for k, _v in node.value:
                    if isinstance(k, yaml.ScalarNode) and k.value != "<<":
                        if k.value in seen:
                            raise SpecError([f"{at(k)}: {clean(k.value)}: key given twice: keep one"])
                        seen.add(k.value)
                children = [c for pair in node.value for c in pair]
            else:
                children = list(node.value)
            for c in children:
                total += size(c, depth + 1, stack)
                if total > MAX_NODES:
                    raise SpecError([(f"{at(node)}: (file): expands to more than {MAX_NODES} values (aliases "
                                     "included): a spec is a small file; remove the repeated aliases")])
            stack.discard(key)
        sizes[key] = total
        return total

    size(root, 0, set())


def spec_from_data(raw: Any, p: Path) -> AnySpec:
    """Check parsed spec data (see :func:`load_spec`)."""
    where = str(p)
    if not isinstance(raw, dict):
        raise SpecError([(f"{where}: (spec): is {type(raw).__name__}: a spec is a mapping (name, model, "
                         "load, variants, ...)")])
    plain = data_problems(raw, where)
    if plain:
        raise SpecError(plain)
    kind = raw.get("kind", "triton")
    if not isinstance(kind, str) or kind not in KINDS:
        close = difflib.get_close_matches(str(kind), list(KINDS), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise SpecError([f"{where}: kind: {kind!r} is not a kind of spec ({hint}use triton or fastapi)"])
    cls = KINDS[kind]
    try:
        spec = cls.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(format_errors(exc, cls, where)) from None
    spec._path = p
    spec._raw = raw
    errs: list[str] = []
    if isinstance(spec, TritonSpec):
        _check_triton(spec, raw, where, errs)
    else:
        _check_fastapi(spec, where, errs)
    if errs:
        raise SpecError(errs)
    return spec


def _check_fastapi(spec: FastapiSpec, where: str, errs: list[str]) -> None:
    _duplicates([v.name for v in spec.variants], "variants", where, errs)
    for i, lv in enumerate(spec.levels):
        if lv.requests < lv.senders:
            errs.append(f"{where}: levels[{i}].requests: {lv.requests} requests for {lv.senders} senders: "
                        "send at least one request per sender")
    pairs = [(lv.senders, lv.requests) for lv in spec.levels]
    for i, pair in enumerate(pairs):
        if pair in pairs[:i]:
            errs.append(f"{where}: levels[{i}]: the same level as an earlier one: list each level once")


def _duplicates(names: list[str], field: str, where: str, errs: list[str]) -> None:
    seen: set[str] = set()
    for i, n in enumerate(names):
        if n in seen:
            errs.append(f"{where}: {field}[{i}].name: {n!r} is a duplicate variant name: give each variant "
                        "its own name (it names a results folder)")
        seen.add(n)


def _check_triton(spec: TritonSpec, raw: dict[str, Any], where: str, errs: list[str]) -> None:
    if spec.base_config is None and spec.base_config_text is None:
        errs.append(f"{where}: base_config: missing: give base_config (a config.pbtxt path) or "
                    "base_config_text")
    if spec.objectives is not None and spec.objective is not None:
        errs.append(f"{where}: objective: given with objectives: move it into objectives")
    variants = list(spec.variants)
    if spec.sweep is not None:
        variants += expand_sweep(spec.sweep, where, errs)
    if not variants and not errs:
        errs.append(f"{where}: variants: no variants: give 'variants' (a list) or 'sweep'")
    if len(variants) > MAX_VARIANTS:
        errs.append(f"{where}: sweep.grid: {len(variants)} variants: keep a spec under {MAX_VARIANTS}")
        variants = []
    names = [v.name for v in spec.variants]
    _duplicates(names, "variants", where, errs)
    swept = [v.name for v in variants[len(spec.variants):]]
    for n in swept:
        if n in names:
            errs.append(
                f"{where}: sweep.name: generates {n!r}, already a variant's name: make the names differ")
        names.append(n)
    # paths stay inside the spec's folder and its repository
    paths = [("base_config", spec.base_config), ("perf.input_data", spec.perf.input_data)]
    for i, v in enumerate(spec.variants):
        paths += [(f"variants[{i}].base_config", v.base_config),
                  (f"variants[{i}].perf.input_data", v.perf.input_data if v.perf else None)]
    for fld, rel in paths:
        if rel is None or (fld.endswith("input_data") and rel in ("random", "zero")):
            continue
        try:
            resolve(spec.path, rel)
        except ValueError as exc:
            errs.append(f"{where}: {fld}: {exc}")
    # every variant's own load, merged with the spec's
    levels: set[float] = set()
    runs = 0
    for i, v in enumerate(variants):
        fld = f"variants[{i}].load" if i < len(spec.variants) else "sweep.load"
        load = spec.merged_load(v)
        try:
            merged = Load.model_validate(load)
            lv = expand_levels(merged.levels)
        except (ValidationError, ValueError) as exc:
            msg = exc.errors()[0]["msg"].removeprefix("Value error, ") if isinstance(exc, ValidationError) \
                else str(exc)
            errs.append(f"{where}: {fld}.levels: {msg}")
            continue
        if merged.distribution is not None and merged.mode != REQUEST_RATE:
            errs.append(f"{where}: {fld if v.load and v.load.distribution else 'load'}.distribution: only "
                        "for mode request_rate: remove it or set mode: request_rate")
        if merged.mode == CONCURRENCY and any(not x.is_integer() for x in lv):
            errs.append(f"{where}: {fld if v.load and v.load.levels is not None else 'load'}.levels: "
                        "concurrency levels are whole numbers >= 1")
        levels.update(lv)
        runs += len(lv) * spec.max_repetitions
    if spec.shard is not None:
        errs += shard_problems(spec, names, where, "shard")
    if spec.budget is not None and spec.repetitions != "auto":
        errs.append(f"{where}: budget: only with repetitions: auto: set repetitions: auto, or remove budget")
    if runs > MAX_RUNS:
        errs.append(f"{where}: variants: {runs} perf_analyzer runs (variants x levels x repetitions): keep a "
                    f"spec under {MAX_RUNS}, split it into several")
    for i, o in enumerate(spec.goals() if (spec.objectives or spec.objective) else []):
        fld = f"objectives[{i}]" if spec.objectives else "objective"
        if o.at_load is not None and levels and o.at_load not in levels:
            shown = ", ".join(f"{x:g}" for x in sorted(levels))
            errs.append(f"{where}: {fld}.at_load: {o.at_load:g} is not a load level of any variant: use one "
                        f"of {shown}")
    _check_search(spec, variants, where, errs)
    # dedupe (a shared error repeated per variant reads once)
    uniq = list(dict.fromkeys(errs))
    errs[:] = uniq
    spec._expanded = variants



def shard_problems(spec: TritonSpec, names: list[str], where: str, field: str) -> list[str]:
    """Why a spec cannot be sharded (``field``: how the setting was given: the spec's ``shard`` or
    ``-e shard``); [] when it can."""
    errs = []
    ref = spec.shard.reference if spec.shard is not None else "first"
    if ref != "first" and ref not in names:
        errs.append(f"{where}: shard.reference: no variant named {ref!r}: give one of "
                    f"{', '.join(names[:8])}{' ...' if len(names) > 8 else ''}, or first")
    if len(names) < 2:
        errs.append(f"{where}: {field}: one variant, nothing to spread over hosts: remove {field}, or add "
                    "variants")
    if spec.repetitions == "auto":
        errs.append(f"{where}: {field}: not with repetitions: auto yet (its decisions compare variants on "
                    "one host): give repetitions a number")
    if spec.searching is not None and spec.searching.strategy != "halving":  # optuna: a trial at a time
        errs.append(f"{where}: {field}: not with search.strategy {spec.searching.strategy} yet: use strategy "
                    "halving (its rungs are measured across the hosts), or remove one of the two")
    return errs


def _check_search(spec: TritonSpec, variants: list[Any], where: str, errs: list[str]) -> None:
    """A search (halving, optuna) ranks the candidates by one objective at its load level, within a
    budget that can measure at least its first batch."""
    search = spec.searching
    if search is None:
        return
    if spec.repetitions != 1:
        errs.append(f"{where}: repetitions: {spec.repetitions!r} with search.strategy {search.strategy}: "
                    "remove repetitions (the search repeats its candidates itself: search.repetitions)")
    goal = spec.search_objective()
    if goal is None:
        names = ", ".join(o.title for o in spec.goals())
        errs.append(f"{where}: search.objective: {search.objective!r} is not an objective of the spec: name "
                    f"one of {names}")
    elif goal.at_load is None:
        errs.append(f"{where}: search.objective: {goal.title!r} has no at_load: give the objective at_load "
                    "(the load level the search measures)")
    if search.strategy == "optuna" and (spec.sweep is None or spec.variants):
        errs.append(f"{where}: search.strategy: optuna draws candidates from a sweep's grid only: "
                    + ("move the listed variants into sweep:, or use halving" if spec.sweep is not None
                       else "add a sweep:, or use halving"))
    if len(variants) < 2:
        errs.append(f"{where}: search.strategy: {len(variants)} candidate(s), nothing to search: use grid")
    budget = search.budget
    if budget is None or (budget.runs is None and budget.minutes is None):
        errs.append(f"{where}: search.budget: missing: give runs: N (perf_analyzer runs) or minutes: M "
                    "(measured minutes)")
        return
    first = search.repetitions * (len(variants) if search.strategy == "halving" else 1)
    if budget.runs is not None and budget.runs < first:
        what = (f"the first rung ({len(variants)} candidates x {search.repetitions} repetitions)"
                if search.strategy == "halving" else f"one trial ({search.repetitions} repetitions)")
        errs.append(f"{where}: search.budget.runs: {budget.runs} runs cannot measure {what} = {first}: "
                    "raise runs or lower search.repetitions")


def read_objectives(records: Any, where: Path | str) -> list[Objective]:
    """Objectives as a run's manifest keeps them (:meth:`Objective.record`); none: the default."""
    if not records:
        return list(DEFAULT_OBJECTIVES)
    if not isinstance(records, list):
        raise SpecError([f"{where}: objectives: is not a list: re-plan the run (serve-system plan)"])
    out = []
    for i, rec in enumerate(records):
        try:
            out.append(Objective.model_validate(rec))
        except ValidationError as exc:
            lines = format_errors(exc, Objective, str(where))
            raise SpecError(
                [ln.replace(f"{where}: ", f"{where}: objectives[{i}].", 1) for ln in lines]) from None
    return out
