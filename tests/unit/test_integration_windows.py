"""Every integration test says which windows it measures with (tests/integration/windows.py).

Read from the test modules' source (no rehearsal node, no import of the integration package): each
``test_*`` function of tests/integration carries ``@pytest.mark.windows(KIND)``, on itself or on its
module's ``pytestmark``, with KIND one of windows.KINDS. A new integration test without it fails here,
before it can add minutes of windows nobody chose.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

INTEGRATION = Path(__file__).resolve().parents[1] / "integration"


def _kinds() -> tuple[str, ...]:
    tree = ast.parse((INTEGRATION / "windows.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "KINDS"
                                                for t in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, tuple)
            return value
    raise AssertionError("windows.py defines no KINDS")


def _windows_marks(expr: ast.expr) -> list[ast.Call]:
    """The ``pytest.mark.windows(...)`` calls in a decorator or a ``pytestmark`` value."""
    return [n for n in ast.walk(expr) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "windows" and isinstance(n.func.value, ast.Attribute)
            and n.func.value.attr == "mark"]


def _kind(call: ast.Call) -> object:
    return ast.literal_eval(call.args[0]) if len(call.args) == 1 and not call.keywords else None


def unmarked(source: str, kinds: tuple[str, ...]) -> list[str]:
    """The test functions of a module's source without a windows marker of a known kind (with why)."""
    tree = ast.parse(source)
    module_marks: list[ast.Call] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                                                for t in node.targets):
            module_marks += _windows_marks(node.value)
    out = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not node.name.startswith("test"):
            continue
        own = [m for d in node.decorator_list for m in _windows_marks(d)]
        marks = own or module_marks
        if not marks:
            out.append(f"{node.name}: no @pytest.mark.windows(KIND)")
        elif any(_kind(m) not in kinds for m in marks):
            out.append(f"{node.name}: windows kind not one of {kinds}")
    return out


def test_every_integration_test_names_its_windows() -> None:
    kinds = _kinds()
    modules = sorted(INTEGRATION.glob("test_*.py"))
    assert modules
    missing = [f"{p.name}::{line}" for p in modules for line in unmarked(p.read_text(), kinds)]
    assert missing == [], "integration tests without a windows marker (tests/integration/windows.py):\n" + \
        "\n".join(missing)


@pytest.mark.parametrize(("source", "expected"), [
    ("def test_a():\n    pass\n", ["test_a: no @pytest.mark.windows(KIND)"]),
    ("import pytest\n@pytest.mark.windows('long')\ndef test_a():\n    pass\n",
     ["test_a: windows kind not one of ('behaviour', 'none')"]),
    (("import pytest\npytestmark = [pytest.mark.integration, pytest.mark.windows('none')]\n"
     "def test_a():\n    pass\n@pytest.mark.windows('behaviour')\ndef test_b():\n    pass\n"), []),
    (("import pytest\npytestmark = pytest.mark.integration\ndef helper():\n    pass\n"
     "@pytest.mark.windows('behaviour')\ndef test_b():\n    pass\ndef test_c():\n    pass\n"),
     ["test_c: no @pytest.mark.windows(KIND)"]),
])
def test_the_check_finds_a_test_without_its_marker(source: str, expected: list[str]) -> None:
    assert unmarked(source, ("behaviour", "none")) == expected
