"""Bad input on real nodes: unknown or mistyped role variables, an unreachable host."""

from __future__ import annotations

import pytest
import yaml

from .ansible_run import run_playbook
from .conftest import RehearsalCluster

pytestmark = pytest.mark.windows("none")


def test_unknown_role_variable_is_rejected_by_name(rehearsal_cluster: RehearsalCluster) -> None:
    node = rehearsal_cluster.nodes[0].name
    res = rehearsal_cluster.playbook("deploy.yml", "-e", "serve_stack_wait_timout=5", limit=node)
    assert res.rc != 0
    assert "unknown variable(s) serve_stack_wait_timout for role serve_stack" in res.flat
    assert res.recap[node]["changed"] == 0


def test_wrong_type_is_rejected_by_argument_specs(rehearsal_cluster: RehearsalCluster) -> None:
    node = rehearsal_cluster.nodes[0].name
    res = rehearsal_cluster.playbook("deploy.yml", "-e", "serve_stack_wait_timeout=soon", limit=node)
    assert res.rc != 0
    assert "serve_stack_wait_timeout" in res.stdout
    assert "int" in res.stdout
    assert res.recap[node]["changed"] == 0


def test_unreachable_host_fails_that_host_only(rehearsal_cluster: RehearsalCluster, tmp_path) -> None:
    doc = yaml.safe_load(rehearsal_cluster.inventory.read_text())
    hosts = doc["all"]["children"]["serve_nodes"]["hosts"]
    ghost = dict(hosts[rehearsal_cluster.nodes[1].name])
    ghost["ansible_port"] = 9  # discard port on loopback: nothing listens, connection refused
    hosts["ghost-node"] = ghost
    inv = tmp_path / "hosts.yml"
    inv.write_text(yaml.safe_dump(doc))
    res = run_playbook("deploy.yml", inv)
    assert res.rc != 0
    assert res.recap["ghost-node"]["unreachable"] == 1
    for node in rehearsal_cluster.nodes:
        assert res.host_ok(node.name), res.tail()
        assert res.recap[node.name]["changed"] == 0
