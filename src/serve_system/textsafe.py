"""Output hygiene: the one place data from files, nodes and users is made safe to print or write.

Everything the tool prints or writes may carry text it did not make (a config value, a stats file, an
inventory value, a node's error message). Three rules, one helper each:

* **Terminal lines** (:func:`clean`, :func:`markup`): control characters (C0 and C1, DEL) and the
  Unicode controls that reorder or hide text (bidirectional overrides, zero-width joiners are left:
  they only join) are shown as escapes (``\\x1b``, ``\\u202e``), so no data can move the cursor, clear
  the screen, set the title or fake a line. :func:`markup` also escapes rich's markup (``[red]``, a
  stray ``[/]`` that would crash a table) for text printed through rich. Every line printed through
  :func:`echo` is cleaned; the CLI's error line too.
* **JSON** (:func:`dumps`): strict JSON (``allow_nan=False``): a non-finite number (NaN, an
  infinity) becomes ``null``, the one rule everywhere (a reader of ``--json`` never meets
  ``Infinity``, which no JSON parser but Python's accepts).
* **CSV** (:func:`csv_cell`, :class:`DictWriter`): a text cell that starts with ``=``, ``+``, ``-``,
  ``@``, a tab or a carriage return is prefixed with a single quote (OWASP's rule against formula
  injection), unless the whole cell is a number (``-3.5`` stays a number); numbers are written as
  they are.
"""

from __future__ import annotations

import csv
import json
import math
import re
import sys
from collections.abc import Iterable, Mapping
from typing import IO, Any

from rich.markup import escape as _rich_escape

#: characters shown as escapes: C0 controls (but tab and newline, see :func:`clean`), DEL, C1
#: controls, and Unicode's format controls that reorder or hide text
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_LINE_BREAKS = re.compile("[\n\t\u2028\u2029\x85]")
#: what starts a Jinja expression, statement or comment: Ansible templates any string holding one (an
#: end delimiter alone is inert text, and ``}}`` is common in compact config.pbtxt text)
JINJA_RE = re.compile(r"\{\{|\{%|\{#")
#: OWASP's formula triggers: a cell starting with one of these is read as a formula by spreadsheets
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(value: Any, *, lines: bool = False) -> str:
    """``value`` as text with every control character shown as an escape. A data value is one line:
    newlines and tabs are escaped too, unless ``lines`` (a block of our own lines holding data)."""
    text = str(value)
    text = _CONTROL.sub(lambda m: _escape(m.group(0)), text)
    if not lines:
        text = _LINE_BREAKS.sub(lambda m: _escape(m.group(0)), text)
    return text


def markup(value: Any) -> str:
    """``value`` cleaned and with rich's markup escaped: safe inside a string rich renders."""
    return _rich_escape(clean(value))


def echo(text: Any, *, file: IO[str] | None = None, lines: bool = False) -> None:
    """Print one line of data-bearing text, cleaned (``lines``: a block whose newlines are ours)."""
    print(clean(text, lines=lines), file=file if file is not None else sys.stdout)


def finite(obj: Any) -> Any:
    """``obj`` with every non-finite float (NaN, infinities) replaced by None, recursively."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """Strict JSON of ``obj`` (non-finite numbers as null); ``kwargs`` as :func:`json.dumps` takes."""
    default = kwargs.pop("default", None)

    def fallback(o: Any) -> Any:
        if default is None:
            raise TypeError(f"{type(o).__name__} is not JSON")
        return finite(default(o))

    return json.dumps(finite(obj), allow_nan=False, default=fallback, **kwargs)


def csv_cell(value: Any) -> Any:
    """A CSV cell that no spreadsheet reads as a formula: numbers as they are, text starting with a
    formula character prefixed with ``'`` unless it is a number written as text."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = str(value)
    if text.startswith(FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def csv_row(row: Iterable[Any]) -> list[Any]:
    return [csv_cell(v) for v in row]


class DictWriter(csv.DictWriter):
    """:class:`csv.DictWriter` whose every cell (the header's too) goes through :func:`csv_cell`."""

    def writeheader(self) -> Any:
        return self.writer.writerow(csv_row(self.fieldnames))

    def writerow(self, rowdict: Mapping[str, Any]) -> Any:
        return super().writerow({k: csv_cell(v) for k, v in rowdict.items()})

    def writerows(self, rowdicts: Iterable[Mapping[str, Any]]) -> None:
        for row in rowdicts:
            self.writerow(row)
