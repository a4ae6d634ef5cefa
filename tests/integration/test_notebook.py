"""notebooks/serve_system_lab.ipynb, headless: its node steps (configure, experiment, report) on a rehearsal
node.

The shape, the cheapest honest one: the notebook's own cells run unchanged in a real IPython kernel
(nbclient; tests/notebook_exec.py) with ``PROVIDER = "local"`` and the inventory of the session's shared
rehearsal cluster (no node of its own: its lease, launch and teardown steps run against the fake
Chameleon in tests/unit/test_notebook.py). Configure re-runs site.yml on one node (already configured
by the cluster's fixture: the play must succeed, as a student's second run does); the experiment is the
shipped dynbatch spec cut to its two variants at concurrency 1 and 8, one repetition, with the
"behaviour" windows (windows.py): four levels, well under two minutes; report renders report.md in the
notebook, and what it shows is the run's own report.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from notebook_exec import run, text  # tests/, on the path as this package's root

from .conftest import RehearsalCluster
from .test_experiments import _dynbatch, _write
from .windows import Windows

pytestmark = pytest.mark.integration


@pytest.mark.windows("behaviour")
def test_configure_experiment_and_report_cells_on_a_rehearsal_node(
        rehearsal_cluster: RehearsalCluster, tmp_path: Path, windows: Windows) -> None:
    node = rehearsal_cluster.nodes[0]
    spec = _write(tmp_path, "dynbatch", _dynbatch(tmp_path, windows))
    results = tmp_path / "results"
    nb = run(("configure", "experiment", "report"),
             {"PROVIDER": "local", "INVENTORY": str(rehearsal_cluster.inventory), "LIMIT": node.name,
              "SPEC": str(spec), "RUN_ID": "notebook", "RESULTS_DIR": str(results)},
             tmp_path, timeout=900)

    configured = text(nb, "configure")
    assert "site.yml: successful (rc=0)" in configured, configured[-2000:]
    assert f"{node.name}: FAILED" not in configured

    run_dir = results / "dynbatch" / "notebook"
    assert f"run folder: {run_dir}" in text(nb, "experiment")
    rows = json.loads((run_dir / "summary.json").read_text())["rows"]
    measured = sorted((r["variant"], r["load"]) for r in rows if r["status"] == "ok")
    assert measured == [("baseline", 1), ("baseline", 8), ("dynbatch", 1), ("dynbatch", 8)], rows

    shown = text(nb, "report")
    report_md = (run_dir / "report.md").read_text()
    assert report_md.strip() and report_md.strip() in shown  # the run's report.md, rendered in the notebook
