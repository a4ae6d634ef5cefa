"""Protobuf's errors in the user's words: a configuration value that Triton's schema refuses, named by its
field (``instance_group[0].kind``) with the fix and, for a name, the valid choices.

Protobuf's own parsers say what went wrong in their terms (``repeated field preferred_batch_size must be
in [] which is 4, 6, 8``, ``Invalid enum value KIND_GUP for enum type inference.ModelInstanceGroup.Kind``).
:func:`check_data` walks a configuration's JSON form (a spec's ``config`` over its base) against the
schema first and says the first problem as a fix; :func:`text_error` rewrites the text parser's
(``config.pbtxt``) messages the same way. Whatever they do not know is left to protobuf's parser.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor

#: the range of each integer type (proto3's JSON form also takes integers as decimal text)
_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1), FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1), FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1), FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1), FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1), FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}
_FLOATS = (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE)
_TEXTS = (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES)


def words(name: str) -> str:
    """A schema name as words: ``data_type`` and ``DataType`` -> ``data type``, ``Kind`` -> ``kind``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").lower()


def choices(enum: EnumDescriptor) -> str:
    """An enum's names as a choice: ``A, B or C``."""
    names = [v.name for v in enum.values]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def flow(value: Any) -> str:
    """A value as YAML's flow style writes it (what a spec would hold): ``[4, 6, 8]``,
    ``{kind: KIND_GPU}``."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def _as_list(value: Any) -> str:
    """What a single value given for a list field should have been."""
    if isinstance(value, str) and "," in value:
        return "[" + ", ".join(p.strip() for p in value.split(",")) + "]"
    return f"[{flow(value)}]"


def _field_names(desc: Descriptor) -> list[str]:
    return [f.name for f in desc.fields]


def check_data(data: Any, desc: Descriptor, path: str = "") -> str | None:
    """The first problem of ``data`` (a message's JSON form) against the schema ``desc``, as
    ``field.path: what is wrong: the fix``; None where the schema's parser is left to judge."""
    if desc.full_name.startswith("google.protobuf."):
        return None  # a well-known type has a JSON form of its own
    if not isinstance(data, dict):
        fields = ", ".join(_field_names(desc)[:4])
        return (f"{path or 'config'}: {flow(data)!s} is not a mapping of {words(desc.name)}'s fields: give "
                f"its fields by name ({fields}, ...)")
    by_name = {**{f.json_name: f for f in desc.fields}, **{f.name: f for f in desc.fields}}
    for key, value in data.items():
        where = f"{path}.{key}" if path else str(key)
        f = by_name.get(str(key))
        if f is None:
            close = difflib.get_close_matches(str(key), _field_names(desc), n=1)
            hint = f'did you mean "{close[0]}"? ' if close else ""
            return (f"{where}: not a field of {words(desc.name)} ({hint}its fields: "
                    f"{', '.join(_field_names(desc))})")
        problem = _check_field(value, f, where)
        if problem is not None:
            return problem
    return None


def _is_map(f: FieldDescriptor) -> bool:
    return f.message_type is not None and f.message_type.GetOptions().map_entry


def _check_field(value: Any, f: FieldDescriptor, where: str) -> str | None:
    if value is None:
        return None  # protobuf's JSON form: a null is the field's default
    if _is_map(f):
        if not isinstance(value, dict):
            return f"{where}: {flow(value)} is not a mapping: give names and values, e.g. {{name: value}}"
        value_field = f.message_type.fields_by_name["value"]
        for k, v in value.items():
            problem = _check_field(v, value_field, f"{where}.{k}")
            if problem is not None:
                return problem
        return None
    if f.label == FieldDescriptor.LABEL_REPEATED:
        if not isinstance(value, list):
            return f"{where}: a list, not one value: give {_as_list(value)}"
        for i, item in enumerate(value):
            problem = _check_one(item, f, f"{where}[{i}]")
            if problem is not None:
                return problem
        return None
    return _check_one(value, f, where)


def _check_one(value: Any, f: FieldDescriptor, where: str) -> str | None:
    """One value of field ``f`` (an item of a list field)."""
    if f.message_type is not None:
        return check_data(value, f.message_type, where)
    if f.enum_type is not None:
        names = {v.name for v in f.enum_type.values}
        numbers = {v.number for v in f.enum_type.values}
        if (isinstance(value, str) and value in names) or (
                isinstance(value, int) and not isinstance(value, bool) and value in numbers):
            return None
        return f"{where}: {flow(value)} is not a {words(f.name)}; use {choices(f.enum_type)}"
    if f.type in _INT_RANGES:
        number = value
        if (isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,20}", value.strip())) or (
                isinstance(value, float) and value.is_integer()):
            number = int(value)
        if isinstance(number, bool) or not isinstance(number, int):
            name = where.rsplit(".", 1)[-1]
            return f"{where}: {flow(value)} is not a whole number: give one, e.g. {name}: 8"
        low, high = _INT_RANGES[f.type]
        if number < low:
            return f"{where}: {number} is negative: give 0 or more" if low == 0 else \
                f"{where}: {number} is too small: give {low} or more"
        if number > high:
            return f"{where}: {number} is too large: give at most {high}"
        return None
    if f.type in _FLOATS:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{where}: {flow(value)} is not a number: give one, e.g. 0.5"
        return None
    if f.type == FieldDescriptor.TYPE_BOOL:
        if not isinstance(value, bool):
            return f"{where}: {flow(value)} is not true or false: give true or false"
        return None
    if f.type in _TEXTS and not isinstance(value, str):
        return f'{where}: {flow(value)} is not text: quote it, e.g. "{flow(value)}"'
    return None


#: the text parser's messages this module says in the user's words
_ENUM = re.compile(r'Enum type "(?P<enum>[\w.]+)" has no value named (?P<value>[^\s.]+)\.?')
_ENUM_NUMBER = re.compile(r'Enum type "(?P<enum>[\w.]+)" has no value with number (?P<value>-?[0-9]+)\.?')
_FIELD = re.compile(r'Message type "(?P<msg>[\w.]+)" has no field named "(?P<field>[^"]+)"\.?')
_INTEGER = re.compile(r"Couldn't parse integer: (?P<value>.*)")


def text_error(message: str, pool: Any) -> str:
    """A text-format (config.pbtxt) parse error's message in the user's words, with the fix; one the
    module does not know as it is. ``pool``: the schema's descriptor pool (enums and messages by name)."""
    m = _ENUM.search(message) or _ENUM_NUMBER.search(message)
    if m:
        try:
            enum = pool.FindEnumTypeByName(m["enum"])
        except KeyError:
            return message
        return message[:m.start()] + f"{m['value']} is not a {words(enum.name)}; use {choices(enum)}"
    m = _FIELD.search(message)
    if m:
        try:
            desc = pool.FindMessageTypeByName(m["msg"])
        except KeyError:
            return message
        close = difflib.get_close_matches(m["field"], _field_names(desc), n=1)
        hint = f'did you mean "{close[0]}"? ' if close else ""
        return (message[:m.start()] + f"{m['field']} is not a field of {words(desc.name)} ({hint}its fields: "
                f"{', '.join(_field_names(desc))})")
    m = _INTEGER.search(message)
    if m:
        return message[:m.start()] + f"{m['value']} is not a whole number: give one, e.g. 8"
    return message
