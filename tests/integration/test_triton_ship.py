"""One Triton image for a class (``serve_stack_triton_ship``, the default): on the shared rehearsal
nodes, serve_stack's images task file with no archive providing the Triton image builds it on the
play's first node only, keeps it on the controller and loads it on the other node; both then hold the
same image (one ID). A second run changes nothing; a node that lost the image (as a rebuilt one has)
loads the kept archive in a play of its own.

The recipe is small and starts from an image already on the nodes (nothing can be pulled), the way
tests/integration/build_on_node stands in for the Triton GPU recipe; the task files are the real ones.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from .conftest import RehearsalCluster

pytestmark = pytest.mark.windows("none")

PLAYBOOK = Path(__file__).resolve().parent / "ship_triton" / "ship.yml"
REPO = Path(__file__).resolve().parents[2]


def _image_id(cluster: RehearsalCluster, index: int, ref: str) -> str:
    out = cluster.exec(cluster.nodes[index], "docker", "image", "inspect", "--format", "{{.Id}}", ref,
                       check=False)
    return out.stdout.strip() if out.returncode == 0 else ""


def test_the_first_node_builds_the_triton_image_and_the_others_load_it(
        rehearsal_cluster: RehearsalCluster, tmp_path: Path) -> None:
    cluster = rehearsal_cluster
    first, second = (n.name for n in cluster.nodes)
    base = cluster.nodes[0].vars["serve_stack_fastapi_image"]  # on every node already (an archive)
    recipe = tmp_path / "recipe"
    recipe.mkdir()
    (recipe / "Dockerfile").write_text(
        f"FROM {base}\nARG TORCH_SOURCE\nCOPY requirements.txt pincheck.py /opt/ship/\n"
        "RUN echo \"$TORCH_SOURCE\" > /opt/ship/torch-source\n")
    ref = f"serve-system-ship-rehearsal:{secrets.token_hex(4)}"
    shipped = tmp_path / "shipped"
    extra = json.dumps({
        "serve_stack_image_archives": [],
        "serve_stack_triton_image": ref,
        "serve_stack_triton_build_context": str(recipe),
        "serve_stack_triton_requirements": str(REPO / "model_repository" / "requirements.txt"),
        "serve_stack_triton_ship_dir": str(shipped),
    })
    try:
        run = cluster.playbook(str(PLAYBOOK), "-e", extra)
        assert run.rc == 0, run.tail(80)
        archive = shipped / (ref.replace(":", "_") + ".tar.gz")
        assert archive.is_file() and archive.stat().st_size > 1_000_000, sorted(shipped.iterdir())
        assert not list(shipped.glob("*.part"))
        flat = run.flat
        # built on the first node only, loaded on the second
        assert f"changed: [{first}]" in flat.split("TASK [serve_stack : Build image")[1].split("TASK [")[0]
        assert "TASK [serve_stack : Load the shipped Triton image]" in flat
        assert f"changed: [{second}]" in flat.split("TASK [serve_stack : Load the shipped Triton image]")[1]
        assert "triton base nvcr.io/nvidia/tritonserver:24.10-py3 was pulled at no registry digest" in flat
        ids = [_image_id(cluster, i, ref) for i in (0, 1)]
        assert ids[0] and ids[0] == ids[1], ids
        loaded = cluster.exec(second, "docker", "run", "--rm", ref, "cat", "/opt/ship/torch-source")
        assert loaded.stdout.strip() == "pytorch-index"  # the build argument the role passes
        # nothing left behind on the nodes
        for node in (first, second):
            assert cluster.exec(node, "sh", "-c", "ls /opt/serve-system/images/*.tar.gz",
                                check=False).returncode != 0

        again = cluster.playbook(str(PLAYBOOK), "-e", extra)
        assert again.rc == 0, again.tail(60)
        assert all(again.recap[n]["changed"] == 0 for n in (first, second)), again.recap

        # a node that lost the image (a rebuilt one) loads the kept archive, in a play of its own
        cluster.exec(second, "docker", "image", "rm", ref)
        alone = cluster.playbook(str(PLAYBOOK), "-e", extra, limit=second)
        assert alone.rc == 0, alone.tail(60)
        assert "TASK [serve_stack : Build image" not in alone.flat
        assert _image_id(cluster, 1, ref) == ids[0]
    finally:
        for index in (0, 1):
            cluster.exec(cluster.nodes[index], "docker", "image", "rm", "-f", ref, check=False)
