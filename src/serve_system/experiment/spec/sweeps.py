"""A sweep grid expanded into variants: one variant per combination of the grid's values, the
``{param}`` placeholders of its name, config, load and perf substituted."""

from __future__ import annotations

import itertools
import re
from typing import Any

from pydantic import ValidationError

from .messages import format_errors
from .models import MAX_VARIANTS, Sweep, Variant


def expand_sweep(sweep: Sweep, where: str, errs: list[str]) -> list[Variant]:
    keys = list(sweep.grid)
    total = 1
    for k in keys:
        total *= len(sweep.grid[k])
    if total > MAX_VARIANTS:
        errs.append(f"{where}: sweep.grid: {total} combinations: keep a sweep under {MAX_VARIANTS}")
        return []
    out: list[Variant] = []
    for values in itertools.product(*(sweep.grid[k] for k in keys)):
        env = dict(zip(keys, values))
        try:
            name = sweep.name.format(**env)
        except (KeyError, IndexError, ValueError) as exc:
            errs.append(f"{where}: sweep.name: {sweep.name!r}: unknown parameter {exc}: use the grid's "
                        f"({', '.join(keys)}), e.g. '{{{keys[0]}}}'")
            return []
        data: dict[str, Any] = {"name": name, "config": _subst(sweep.config or {}, env)}
        for k in ("load", "perf"):
            val = getattr(sweep, k)
            if val is not None:
                data[k] = _subst(val, env)
        try:
            out.append(Variant.model_validate(data))
        except ValidationError as exc:
            for line in format_errors(exc, Variant, where):
                fld = line[len(where) + 2:]
                fld = fld.replace("name: ", "name: generated ", 1) if fld.startswith("name:") else fld
                errs.append(f"{where}: sweep.{fld}")
            return []
    return out


def _subst(obj: Any, env: dict[str, Any]) -> Any:
    """Replace ``"{param}"`` strings (whole string: typed value) and ``{param}`` inside strings."""
    if isinstance(obj, dict):
        return {k: _subst(v, env) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_subst(v, env) for v in obj]
    if isinstance(obj, str):
        m = re.fullmatch(r"\{(\w+)\}", obj)
        if m and m.group(1) in env:
            return env[m.group(1)]
        try:
            return obj.format(**env) if "{" in obj else obj
        except (KeyError, IndexError, ValueError):
            return obj
    return obj
