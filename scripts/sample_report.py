#!/usr/bin/env python3
"""Rebuild the sample report in docs/sample-report/ from the recorded dynbatch rehearsal run.

The run is real (tests/unit/fixtures/rehearsal/dynbatch_run.tar.xz: one rehearsal node, dynbatch as
shipped, 4 repetitions a side). It is unpacked into a temporary folder, reported by the CLI exactly
as a user runs it (``serve-system report RUN``), and the report's files are copied into
docs/sample-report/: report.md, summary.csv and the plots. tests/unit/test_sample_report.py rebuilds
it the same way and fails when the committed copy differs from what the code writes today.

    .venv/bin/python scripts/sample_report.py          # rewrite docs/sample-report/
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "unit" / "fixtures" / "rehearsal" / "dynbatch_run.tar.xz"
DEST = ROOT / "docs" / "sample-report"
#: the report's text files kept in docs (summary.json and summary_stats.csv are left out: long, and
#: the glossary describes them)
TEXT_FILES = ("report.md", "summary.csv")


def build(into: Path) -> Path:
    """The recorded run unpacked into ``into``/run and reported there; returns the run folder."""
    run = into / "run"
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(run, filter="data")
    done = subprocess.run([sys.executable, "-m", "serve_system.cli", "report", str(run)],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"serve-system report failed on the recorded run:\n{done.stdout}{done.stderr}")
    return run


def report_files(run: Path) -> dict[str, Path]:
    """The files of the sample report, by their path under docs/sample-report/."""
    files = {name: run / name for name in TEXT_FILES}
    files |= {f"plots/{p.name}": p for p in sorted((run / "plots").glob("*.png"))}
    return files


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="serve-system-sample-") as tmp:
        files = report_files(build(Path(tmp)))
        (DEST / "plots").mkdir(parents=True, exist_ok=True)
        for old in (DEST / "plots").glob("*.png"):  # only the plots this script wrote before
            if f"plots/{old.name}" not in files:
                old.unlink()
        for rel, src in files.items():
            shutil.copyfile(src, DEST / rel)
    print(f"wrote {len(files)} files into {DEST.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
