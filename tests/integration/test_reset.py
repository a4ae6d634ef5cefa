"""reset.yml: stack down, models back to the committed ones, work kept; deploy.yml brings it back."""

from __future__ import annotations

import pytest

from .conftest import RehearsalCluster

pytestmark = pytest.mark.windows("none")


def test_reset_then_deploy(rehearsal_cluster: RehearsalCluster) -> None:
    node = rehearsal_cluster.nodes[1]
    host = rehearsal_cluster.host(node)
    # an experiment's leftovers: an edited config, an extra file, a result in the work dir
    host.run("echo 'dynamic_batching { }' >> /opt/serve-system/model_repository/food_classifier/config.pbtxt")
    host.run("touch /opt/serve-system/model_repository/food_classifier/1/leftover.txt")
    host.run("echo keep > /opt/serve-system/work/result.csv")

    reset = rehearsal_cluster.playbook("reset.yml", limit=node.name)
    assert reset.rc == 0, reset.tail()
    assert host.run("docker ps -a --format '{{.Names}}'").stdout.split() == []
    config = host.file("/opt/serve-system/model_repository/food_classifier/config.pbtxt").content_string
    assert "dynamic_batching" not in config and "KIND_CPU" in config
    assert not host.file("/opt/serve-system/model_repository/food_classifier/1/leftover.txt").exists
    assert host.file("/opt/serve-system/work/result.csv").content_string.strip() == "keep"

    deploy = rehearsal_cluster.playbook("deploy.yml", limit=node.name)
    assert deploy.rc == 0, deploy.tail()
    assert "| READY" in deploy.flat
    assert host.run("curl -fsS http://127.0.0.1:8000/v2/models/food_classifier/ready").rc == 0
