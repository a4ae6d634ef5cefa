"""Run notebooks/serve_system_lab.ipynb headless, some of its steps, as papermill would set its parameters.

The notebook's own cells run unchanged in a real IPython kernel (nbclient, the kernel of this Python). The
test chooses which steps run by their cell tags (``lease``, ``launch``, ``configure``, ``experiment``,
``report``, ``teardown``; the ``parameters`` and ``setup`` cells always run), sets parameters in a cell
put right after the ``parameters`` cell (papermill's "injected-parameters"), and may put a harness cell
before everything (a fake site served inside the kernel) and one after (its state written back).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "serve_system_lab.ipynb"
STEPS = ("lease", "launch", "configure", "experiment", "report", "teardown")
ALWAYS = ("parameters", "setup")


def _tags(cell: Any) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def run(steps: tuple[str, ...], parameters: dict[str, Any], cwd: Path, *, before: str = "",
        after: str = "", timeout: int = 600) -> nbformat.NotebookNode:
    """Execute the notebook's ``steps`` with ``parameters`` in a kernel started in ``cwd``; return the
    executed notebook (written beside, as ``executed.ipynb``, for a failure's reader). A cell that raises
    fails the run (nbclient's CellExecutionError names the cell and the error)."""
    unknown = set(steps) - set(STEPS)
    assert not unknown, f"no such step: {sorted(unknown)}"
    source = nbformat.read(NOTEBOOK, as_version=4)
    cells = []
    if before:
        cells.append(nbformat.v4.new_code_cell(before, metadata={"tags": ["harness"]}))
    for cell in source.cells:
        tags = _tags(cell)
        if cell.cell_type != "code" or not (set(tags) & {*ALWAYS, *steps}):
            continue
        cells.append(copy.deepcopy(cell))
        if "parameters" in tags:
            lines = [f"{k} = {v!r}" for k, v in parameters.items()]
            cells.append(nbformat.v4.new_code_cell("\n".join(lines),
                                                   metadata={"tags": ["injected-parameters"]}))
    if after:
        cells.append(nbformat.v4.new_code_cell(after, metadata={"tags": ["harness"]}))
    nb = nbformat.v4.new_notebook(cells=cells, metadata=source.metadata)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd)}})
    try:
        client.execute()
    finally:
        nbformat.write(nb, cwd / "executed.ipynb")
    return nb


def text(nb: nbformat.NotebookNode, tag: str) -> str:
    """Everything the cells tagged ``tag`` printed and displayed (streams, text/plain and text/markdown)."""
    out: list[str] = []
    for cell in nb.cells:
        if tag not in _tags(cell):
            continue
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream":
                out.append(o.get("text", ""))
            elif "data" in o:
                data = o["data"]
                out.append(data.get("text/markdown") or data.get("text/plain") or "")
    return "".join(out)
