"""A sweep grid expanded into variants: one variant per combination of the grid's values, the
``{param}`` placeholders of its name, config, load and perf substituted.

A placeholder is a plain substitution (:func:`fill`): ``{param}`` becomes ``str(value)``. No Python
format specification, conversion, attribute or index is ever applied to the spec's text (``{n:>9999}``
or ``{n.__class__}`` would size memory or read objects at the user's word): in a name such a
placeholder is refused, elsewhere it is left as the text it is. What the substitutions produce is
checked again for Jinja, since two harmless values can meet as ``{{``."""

from __future__ import annotations

import itertools
import re
from typing import Any

from pydantic import ValidationError

from .messages import format_errors
from .models import MAX_VARIANTS, Sweep, Variant, data_problems

#: a placeholder as the grid names it: ``{param}``
PLACEHOLDER = re.compile(r"\{(\w+)\}")
#: anything between braces, to find placeholders that are not plain in a name
_BRACED = re.compile(r"\{([^{}]*)\}")


def fill(text: str, env: dict[str, Any]) -> str:
    """``text`` with each ``{param}`` of ``env`` replaced by ``str(value)``; other braces stay as they are."""
    return PLACEHOLDER.sub(lambda m: str(env[m.group(1)]) if m.group(1) in env else m.group(0), text)


def name_problem(pattern: str, keys: list[str]) -> str | None:
    """Why a sweep's name pattern is not plain placeholders of the grid (None when it is)."""
    for m in _BRACED.finditer(pattern):
        inner = m.group(1)
        if inner in keys:
            continue
        example = f"'{{{keys[0]}}}'" if keys else "'{param}'"
        if re.fullmatch(r"\w+", inner):
            return f"unknown parameter {inner!r}: use the grid's ({', '.join(keys)}), e.g. {example}"
        return (f"{_short(m.group(0))} is not a plain placeholder (no format specs, attributes or "
                f"indexes): write the parameter's name alone, e.g. {example}")
    return None


def variant_name(pattern: str, env: dict[str, Any]) -> str:
    """The name a grid point gets (the pattern checked by :func:`name_problem` first)."""
    return fill(pattern, env)


def _short(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:37] + "...")


def expand_sweep(sweep: Sweep, where: str, errs: list[str]) -> list[Variant]:
    keys = list(sweep.grid)
    total = 1
    for k in keys:
        total *= len(sweep.grid[k])
    if total > MAX_VARIANTS:
        errs.append(f"{where}: sweep.grid: {total} combinations: keep a sweep under {MAX_VARIANTS}")
        return []
    problem = name_problem(sweep.name, keys)
    if problem is not None:
        errs.append(f"{where}: sweep.name: {_short(sweep.name)}: {problem}")
        return []
    out: list[Variant] = []
    for values in itertools.product(*(sweep.grid[k] for k in keys)):
        env = dict(zip(keys, values))
        data: dict[str, Any] = {"name": variant_name(sweep.name, env),
                                "config": _subst(sweep.config or {}, env)}
        for k in ("load", "perf"):
            val = getattr(sweep, k)
            if val is not None:
                data[k] = _subst(val, env)
        jinja = data_problems(data, f"{where}: sweep (generated {_short(data['name'])})")
        if jinja:
            errs += jinja
            return []
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
        m = PLACEHOLDER.fullmatch(obj)
        if m and m.group(1) in env:
            return env[m.group(1)]
        return fill(obj, env)
    return obj
