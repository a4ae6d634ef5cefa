"""The Node record and the inventory both providers write."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from serve_system.errors import ServeSystemError
from serve_system.provision.nodes import (
    GROUP,
    Node,
    read_inventory,
    record_host_keys,
    render_inventory,
    write_inventory,
)


def _node(name: str = "node-serve-system-alice-1", **kw) -> Node:  # type: ignore[no-untyped-def]
    base = {"name": name, "address": "129.114.108.42", "user": "cc", "key_path": "/home/a/.ssh/id_chi",
            "gpus": 2}
    base.update(kw)
    return Node(**base)  # type: ignore[arg-type]


def test_inventory_round_trip(tmp_path: Path) -> None:
    nodes = [
        _node(provider_ids={"server_id": "s1", "floating_ip_id": "f1"}),
        _node("node-serve-system-alice-2", address="129.114.108.43", vars={"docker_source": "distro"}),
    ]
    inv = tmp_path / "inventory" / "hosts.yml"
    kh = tmp_path / "inventory" / "known_hosts"
    write_inventory(nodes, inv, known_hosts=kh)
    doc = yaml.safe_load(inv.read_text())
    group = doc["all"]["children"][GROUP]
    assert set(group["hosts"]) == {"node-serve-system-alice-1", "node-serve-system-alice-2"}
    h1 = group["hosts"]["node-serve-system-alice-1"]
    assert h1["ansible_host"] == "129.114.108.42"
    assert h1["ansible_user"] == "cc"
    assert h1["serve_gpus"] == 2
    assert h1["serve_provider_ids"] == {"floating_ip_id": "f1", "server_id": "s1"}
    assert f"UserKnownHostsFile={kh.resolve()}" in group["vars"]["ansible_ssh_common_args"]
    assert "StrictHostKeyChecking=yes" in group["vars"]["ansible_ssh_common_args"]
    assert sorted(read_inventory(inv), key=lambda n: n.name) == sorted(nodes, key=lambda n: n.name)


def test_written_inventory_passes_ansible_lint_yaml_rules(tmp_path: Path) -> None:
    """What launch writes to inventory/hosts.yml passes the yamllint rules ansible-lint applies: a list
    (the rehearsal nodes' image archives, a roster's keys) is indented under its key."""
    from ansiblelint.yaml_utils import load_yamllint_config  # the rules of ansible-lint's yaml[...] checks
    from yamllint import linter

    def archives() -> list[dict[str, object]]:
        return [{"image": f"localhost/serve-system-{k}:1", "archive": f"/root/.cache/{k}.tar",
                 "remote_src": True}
                for k in ("triton", "client")]

    nodes = [
        _node("rehearsal-1", address="127.0.0.1", port=2201, gpus=0, provider="local",
              provider_ids={"container": "rehearsal-1", "image": "localhost/serve-system-node:1"},
              vars={"docker_source": "distro", "serve_stack_image_archives": archives()}),
        _node("rehearsal-2", address="127.0.0.1", port=2202, gpus=0, provider="local",
              vars={"serve_stack_image_archives": archives(), "class_access_keys": [],
                    "serve_stack_flask_build_context": ""}),
    ]
    inv = tmp_path / "inventory" / "hosts.yml"
    write_inventory(nodes, inv, known_hosts=tmp_path / "inventory" / "known_hosts")
    text = inv.read_text()
    assert "serve_stack_image_archives:\n            - image: localhost/serve-system-triton:1\n" in text
    problems = [f"{p.line}:{p.column} {p.desc} ({p.rule})"
                for p in linter.run(text, load_yamllint_config(), str(inv))]
    assert problems == [], text
    assert sorted(read_inventory(inv), key=lambda n: n.name) == nodes


def test_inventory_holds_key_path_not_key(tmp_path: Path) -> None:
    key = tmp_path / "id"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n")
    inv = tmp_path / "hosts.yml"
    write_inventory([_node(key_path=str(key))], inv)
    text = inv.read_text()
    assert str(key) in text
    assert "PRIVATE KEY" not in text and "b3BlbnNzaC1rZXktdjEAAAAA" not in text


def test_duplicate_and_invalid_names_are_refused() -> None:
    with pytest.raises(ServeSystemError, match="duplicate node names: n1"):
        render_inventory([_node("n1"), _node("n1")])
    with pytest.raises(ServeSystemError, match="not a valid inventory host name"):
        _node("bad name")
    with pytest.raises(ServeSystemError, match="out of range"):
        _node(port=70000)


def test_read_inventory_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yml"
    with pytest.raises(ServeSystemError, match=r"nope.yml: inventory not found; run chi_scripts/launch.py"):
        read_inventory(missing)
    bad = tmp_path / "bad.yml"
    bad.write_text("all: {children: {}}\n")
    with pytest.raises(ServeSystemError, match=r"bad.yml: no 'serve_nodes' group"):
        read_inventory(bad)


def test_record_host_keys_replaces_only_that_host(tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text("[127.0.0.1]:2201 ssh-ed25519 OLD\n10.0.0.9 ssh-ed25519 OTHER\n")
    record_host_keys(kh, "127.0.0.1", 2201, ["[127.0.0.1]:2201 ssh-ed25519 NEW", "junk line"])
    assert kh.read_text().splitlines() == ["10.0.0.9 ssh-ed25519 OTHER", "[127.0.0.1]:2201 ssh-ed25519 NEW"]
    record_host_keys(kh, "1.2.3.4", 22, ["1.2.3.4 ssh-rsa K"])
    assert "1.2.3.4 ssh-rsa K" in kh.read_text().splitlines()


def test_cli_inventory_json_and_clear_error(tmp_path: Path) -> None:
    inv = tmp_path / "hosts.yml"
    write_inventory([_node()], inv)
    ok = subprocess.run(
        [sys.executable, "-m", "serve_system.cli", "inventory", "-i", str(inv), "--json"],
        capture_output=True, text=True, check=False,
    )
    assert ok.returncode == 0, ok.stderr
    assert '"ansible_host": "129.114.108.42"' in ok.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "serve_system.cli", "inventory", "-i", str(tmp_path / "x.yml")],
        capture_output=True, text=True, check=False,
    )
    assert bad.returncode == 1
    assert bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
    assert "x.yml: inventory not found" in bad.stderr
