"""Spec problems as users read them: :class:`SpecError` and pydantic's errors turned into
``FILE: field.path: message (fix)`` lines, with did-you-mean hints from the models' own fields."""

from __future__ import annotations

import difflib
import types
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from ...errors import ServeSystemError
from ...textsafe import clean


class SpecError(ServeSystemError):
    """A spec or argument with problems; ``lines`` holds one ``FILE: field.path: message`` line each."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        super().__init__(lines[0] if len(lines) == 1 else f"{lines[0]} (and {len(lines) - 1} more)")


def format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + clean(part)  # a key from the file: one line whatever it holds
    return out or "(spec)"


def _model_fields_at(cls: Any, loc: tuple[Any, ...]) -> list[str] | None:
    """The keys a model accepts at ``loc`` (for did-you-mean), or None when not a model there."""
    ann: Any = cls
    for part in loc:
        ann = _unwrap(ann, part)
        if ann is None:
            return None
    ann = _unwrap_model(ann)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return sorted((f.alias or n) for n, f in ann.model_fields.items())
    return None


def _unwrap_model(ann: Any) -> Any:
    while True:
        origin = get_origin(ann)
        if origin is Annotated:
            ann = get_args(ann)[0]
        elif origin in (Union, types.UnionType):
            models = [a for a in get_args(ann) if isinstance(a, type) and issubclass(a, BaseModel)]
            others = [a for a in get_args(ann) if a is not type(None) and a not in models]
            if models:
                ann = models[0]
            elif others:
                ann = others[0]
            else:
                return None
        else:
            return ann


def _unwrap(ann: Any, part: Any) -> Any:
    ann = _unwrap_model(ann)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        if not isinstance(part, str):
            return None
        for n, f in ann.model_fields.items():
            if part in (n, f.alias):
                return f.annotation if not f.metadata else Annotated[(f.annotation, *f.metadata)]
        return None
    origin = get_origin(ann)
    if origin is list and isinstance(part, int):
        return get_args(ann)[0]
    if origin is dict:
        return get_args(ann)[1]
    return None


def _message(err: dict[str, Any], cls: Any) -> str:
    typ, loc, given = err["type"], tuple(err["loc"]), err.get("input")
    shown = repr(given)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    if typ == "extra_forbidden":
        known = _model_fields_at(cls, loc[:-1]) or []
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"unknown key ({hint}known: {', '.join(known)})"
    if typ == "missing":
        return "missing (required): add it"
    if typ == "value_error":
        return str(err["msg"]).removeprefix("Value error, ")
    if typ in ("literal_error", "enum"):
        expected = err.get("ctx", {}).get("expected", "")
        return f"is {shown}: use {expected}"
    if typ in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        ctx = err.get("ctx", {})
        sign = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=",
                "less_than": "<"}[typ]
        bound = next(iter(ctx.values()), "")
        return f"is {shown}: use a number {sign} {bound}"
    if typ in ("int_type", "int_parsing", "int_from_float"):
        return f"is {shown}: use a whole number"
    if typ in ("float_type", "float_parsing", "finite_number"):
        return f"is {shown}: use a number"
    if typ in ("string_type",):
        return f"is {shown}: use text (quote it)"
    if typ in ("bool_type", "bool_parsing"):
        return f"is {shown}: use true or false"
    if typ in ("list_type",):
        return f"is {shown}: use a list ([...])"
    if typ in ("dict_type", "model_type", "model_attributes_type"):
        return f"is {shown}: use a mapping (key: value)"
    if typ in ("too_short",):
        return "is empty: give at least one entry"
    if typ == "too_long":
        return f"has too many entries: {err['msg']}"
    return f"{err['msg']} (got {shown})"


def format_errors(exc: ValidationError, cls: Any, where: str) -> list[str]:
    lines = []
    seen: set[str] = set()
    for err in exc.errors():
        loc = tuple(p for p in err["loc"]
                    if not (isinstance(p, str) and ("[" in p or p.startswith("function-"))))
        line = f"{where}: {format_loc(loc)}: {_message({**err, 'loc': loc}, cls)}"
        if line not in seen:
            seen.add(line)
            lines.append(line)
    return lines
