"""Issue 26, output hygiene: the rules of :mod:`serve_system.textsafe` and the places that print or
write data through them (the CLI's error line, the status board, --json, every CSV)."""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from pathlib import Path

import pytest
from rich.console import Console

from serve_system import textsafe
from serve_system.cli import run
from serve_system.errors import ServeSystemError
from serve_system.provision import board
from serve_system.provision.nodes import Node
from serve_system.results.report import write_summary

HOSTILE = ["\x1b[2J\x1b]0;owned\x07", "a\rb", "\x9b31m", "x\u202eevil", "\x00", "\x7f", "tab\there", "l1\nl2"]


@pytest.mark.parametrize("text", HOSTILE)
def test_clean_leaves_no_control_character(text: str) -> None:
    out = textsafe.clean(text)
    assert all(ch.isprintable() for ch in out), repr(out)
    assert "\\" in out


def test_clean_keeps_ordinary_text_and_our_own_lines() -> None:
    assert textsafe.clean("café 東京 ✓ [x]") == "café 東京 ✓ [x]"
    assert textsafe.clean("a\nb\tc", lines=True) == "a\nb\tc"
    assert textsafe.clean("a\x1b[1mb\nc", lines=True) == "a\\x1b[1mb\nc"


@pytest.mark.parametrize("text", ["[red]x", "[/]", "[bold][/italic]", "a [link=file:///etc]b[/link]",
                                  "\\[x]"])
def test_markup_in_data_is_shown_literally(text: str) -> None:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(f"value: {textsafe.markup(text)}")
    assert console.file.getvalue().rstrip("\n") == f"value: {text}"  # type: ignore[attr-defined]


def test_status_board_shows_brackets_and_escapes_of_inventory_values() -> None:
    row = board.NodeHealth("node-1", "ACTIVE [/]", "10.0.0.1[x]", ssh=True, docker="27.[/bold]",
                           models=["m[/]"], progress={"experiment": "\x1b[2Jexp"}, problem="[/] bad")
    console = Console(file=io.StringIO(), width=300, color_system=None)
    console.print(board.table([row], "Nodes [/]"))  # crashed with MarkupError before
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert "ACTIVE [/]" in out and "10.0.0.1[x]" in out and "m[/]" in out and "[/] bad" in out
    assert "\x1b" not in out and "\\x1b[2Jexp" in out


def test_dumps_is_strict_json_with_non_finite_as_null() -> None:
    doc = {"a": math.inf, "b": [-math.inf, math.nan, 1.5], "c": {"d": (math.nan,)}, "e": "\x1b"}
    text = textsafe.dumps(doc, indent=1)
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}")) == {
        "a": None, "b": [None, None, 1.5], "c": {"d": [None]}, "e": "\x1b"}
    assert "\x1b" not in text  # JSON escapes control characters itself
    assert textsafe.dumps({"p": Path("/x")}, default=str) == '{"p": "/x"}'
    with pytest.raises(TypeError):
        textsafe.dumps({"p": Path("/x")})


@pytest.mark.parametrize("value, cell", [
    ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"),
    ("+1+cmd|' /C calc'!A0", "'+1+cmd|' /C calc'!A0"),
    ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"), ("\t=1", "'\t=1"), ("\r=1", "'\r=1"),
    ("-3.5", "-3.5"), ("+7", "+7"), ("-1e-3", "-1e-3"), ("plain", "plain"), ("a=b", "a=b"),
    (-3.5, -3.5), (-7, -7), (None, None), (True, True),
])
def test_csv_cell_neutralises_formulas_and_keeps_numbers(value: object, cell: object) -> None:
    assert textsafe.csv_cell(value) == cell


def test_summary_csv_has_no_live_formula_and_summary_json_is_strict(tmp_path: Path) -> None:
    rows = [{"experiment": "e", "run_id": "r", "host": "h", "variant": "=cmd|' /C calc'!A0",
             "mode": "concurrency",
             "load": 1.0, "repetition": 1, "status": "failed", "error": "@SUM(1+1)*cmd", "throughput": -2.5,
             "p95_us": math.inf}]
    csv_path, json_path = write_summary(tmp_path, rows)
    with csv_path.open(newline="", encoding="utf-8") as fh:
        cells = [c for row in csv.reader(fh) for c in row]
    assert not [c for c in cells if c.startswith(textsafe.FORMULA_START) and c != "-2.5"], cells
    assert "-2.5" in cells and "'=cmd|' /C calc'!A0" in cells
    json.loads(json_path.read_text(), parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))


def test_the_cli_error_line_is_one_clean_line(capsys: pytest.CaptureFixture[str]) -> None:
    def fail(_args: object) -> int:
        raise ServeSystemError("config.pbtxt: value 'a\x1b]0;title\x07\nforged: ok' is bad")

    assert run(fail, None) == 1  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "\\x1b]0;title\\x07\\nforged" in err


@pytest.mark.parametrize("name", ["node-1\n", "node-1\nevil", "node 1", "-x"])
def test_host_names_match_whole(name: str) -> None:
    with pytest.raises(ServeSystemError):
        Node(name=name, address="1.2.3.4", user="cc", key_path="/k")


def test_validate_prints_hostile_file_names_cleanly(tmp_path: Path) -> None:
    import subprocess

    spec = tmp_path / "a\x1b[31mb.yml"
    spec.write_text("name: t\nmodel: m\n")
    proc = subprocess.run([sys.executable, "-m", "serve_system.cli", "validate", str(spec)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and "\x1b" not in proc.stderr and "a\\x1b[31mb.yml" in proc.stderr
