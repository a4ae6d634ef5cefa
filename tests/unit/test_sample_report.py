"""The sample report in docs/sample-report/ is what the code writes today from the recorded run.

scripts/sample_report.py builds it from the real dynbatch rehearsal run (tests/unit/fixtures); this test
builds it again the same way and compares: a change to the report's text that did not rebuild the
sample fails here, with the command that rebuilds it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "sample_report.py"
REBUILD = ".venv/bin/python scripts/sample_report.py"


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("sample_report", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sample_report_is_what_the_report_command_writes_today(tmp_path: Path) -> None:
    script = _script()
    built = script.report_files(script.build(tmp_path))
    kept = script.DEST
    assert sorted(built) == sorted(p.relative_to(kept).as_posix() for p in kept.rglob("*") if p.is_file()), (
        f"docs/sample-report/ holds other files than the report writes: run {REBUILD}")
    for name in script.TEXT_FILES:
        assert (kept / name).read_bytes() == built[name].read_bytes(), (
            f"docs/sample-report/{name} is out of date: run {REBUILD}")
    # plots: present and a PNG (their pixels vary with matplotlib's version: not compared)
    for rel, path in ((r, p) for r, p in built.items() if r.startswith("plots/")):
        assert (kept / rel).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 1000


def test_the_sample_report_says_what_a_student_reads_first() -> None:
    md = (_script().DEST / "report.md").read_text(encoding="utf-8")
    for section in ("## Best variant per objective", "## Findings", "## Per level", "## Measurements",
                    "## Plots"):
        assert section in md, section
    glossary = (ROOT / "docs" / "reading-a-report.md").read_text(encoding="utf-8")
    for section in ("Best variant per objective", "Findings", "Per level", "Measurements",
                    "Adapted to the host", "Plots"):
        assert f"## {section}" in glossary, f"docs/reading-a-report.md explains no section {section!r}"
