"""Node records and the Ansible inventory they become.

A :class:`Node` is the only thing stage 1 (provisioning) hands to stage 2 (configuration). Both
providers, Chameleon (python-chi) and the local rehearsal nodes (podman), produce the same records
and write them with :func:`write_inventory`; nothing after stage 1 knows which provider made a node.

Secrets never go into the inventory: only the *path* of the SSH private key is written.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .. import safeio
from ..errors import ServeSystemError

#: The inventory group every provisioned node belongs to; playbooks target it.
GROUP = "serve_nodes"

#: the most GPUs a node may say it has
MAX_GPUS = 64
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Node:
    """One SSH-reachable node, as provisioning hands it to configuration."""

    name: str
    address: str
    user: str
    key_path: str
    port: int = 22
    gpus: int = 0
    provider: str = "chameleon"
    #: provider-specific identifiers (server id, floating IP id, container id, ...), for teardown
    provider_ids: dict[str, str] = field(default_factory=dict)
    #: extra Ansible host variables the provider knows (e.g. ``docker_source: distro``)
    vars: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.fullmatch(self.name):
            raise ServeSystemError(
                f"node name {self.name!r} is not a valid inventory host name "
                "(use letters, digits, '-', '_' and '.')"
            )
        if not 0 < self.port < 65536:
            raise ServeSystemError(f"node {self.name}: SSH port {self.port} is out of range 1-65535")
        if not 0 <= self.gpus <= MAX_GPUS:
            raise ServeSystemError(f"node {self.name}: gpus must be 0 to {MAX_GPUS}, got {self.gpus}")

    def host_vars(self) -> dict[str, Any]:
        """The Ansible host variables of this node."""
        hv: dict[str, Any] = {
            "ansible_host": self.address,
            "ansible_port": self.port,
            "ansible_user": self.user,
            "ansible_ssh_private_key_file": self.key_path,
            "serve_gpus": self.gpus,
            "serve_provider": self.provider,
        }
        if self.provider_ids:
            hv["serve_provider_ids"] = dict(sorted(self.provider_ids.items()))
        hv.update(self.vars)
        return hv

    @classmethod
    def from_host_vars(cls, name: Any, hv: dict[str, Any]) -> Node:
        known = {
            "ansible_host",
            "ansible_port",
            "ansible_user",
            "ansible_ssh_private_key_file",
            "serve_gpus",
            "serve_provider",
            "serve_provider_ids",
        }
        try:
            return cls(
                name=name,
                address=str(hv["ansible_host"]),
                user=str(hv.get("ansible_user", "cc")),
                key_path=str(hv.get("ansible_ssh_private_key_file", "")),
                port=int(hv.get("ansible_port", 22)),
                gpus=int(hv.get("serve_gpus", 0)),
                provider=str(hv.get("serve_provider", "chameleon")),
                provider_ids={str(k): str(v) for k, v in (hv.get("serve_provider_ids") or {}).items()},
                vars={k: v for k, v in hv.items() if k not in known},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ServeSystemError(f"inventory host {name}: bad or missing field ({exc})") from exc


def render_inventory(nodes: list[Node], known_hosts: Path | None = None) -> dict[str, Any]:
    """The inventory document (as a dict) for ``nodes``."""
    names = [n.name for n in nodes]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ServeSystemError(f"duplicate node names: {', '.join(dupes)}")
    group: dict[str, Any] = {"hosts": {n.name: n.host_vars() for n in sorted(nodes, key=lambda n: n.name)}}
    if known_hosts is not None:
        group["vars"] = {
            "ansible_ssh_common_args": (
                f"-o UserKnownHostsFile={known_hosts.resolve()} -o StrictHostKeyChecking=yes"
            )
        }
    return {"all": {"children": {GROUP: group}}}


def atomic_write(path: Path, text: str, mode: int = 0o644) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never half."""
    with safeio.open_write(path, mode=mode) as fh:  # the one write path: never through a link
        fh.write(text)


class _IndentedListDumper(yaml.SafeDumper):
    """PyYAML's safe dumper, but a list's ``- item`` lines are indented one level deeper than its key.

    PyYAML writes them at the key's own indentation; yamllint's indentation rule, which ansible-lint
    applies to every YAML file, wants them one level deeper.
    """

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def write_inventory(nodes: list[Node], path: Path, known_hosts: Path | None = None) -> None:
    """Write the inventory for ``nodes`` to ``path`` (atomically; the previous file is replaced)."""
    doc = render_inventory(nodes, known_hosts)
    header = (
        "# Generated by serve-system (chi_scripts/launch.py); do not edit by hand.\n"
        "# Re-run launch.py to refresh it. It holds no secrets: only the SSH key's path.\n"
    )
    body = yaml.dump(doc, Dumper=_IndentedListDumper, sort_keys=False, default_flow_style=False)
    atomic_write(path, header + body)


def read_inventory(path: Path) -> list[Node]:
    """Read the nodes of the ``serve_nodes`` group back from an inventory written by us."""
    try:
        # the one read path: a regular file, bounded, strictly decoded, plain data, finite numbers
        doc = safeio.read_yaml(path, kind="spec", fix="re-run launch to rewrite the inventory") or {}
    except safeio.MissingFile as exc:
        raise ServeSystemError(
            f"{path}: inventory not found; run chi_scripts/launch.py first (or pass -i PATH)"
        ) from exc
    try:
        group = doc["all"]["children"][GROUP]
    except (KeyError, TypeError) as exc:
        raise ServeSystemError(f"{path}: no '{GROUP}' group under all.children; "
                               "re-run launch to rewrite it") from exc
    hosts = ((group or {}).get("hosts") or {}) if isinstance(group, dict | None) else None
    if not isinstance(hosts, dict):
        raise ServeSystemError(f"{path}: all.children.{GROUP}.hosts must map host names to their variables; "
                               "re-run launch to rewrite it")
    nodes = []
    for name, hv in hosts.items():
        where = f"{path}: all.children.{GROUP}.hosts.{str(name)[:80]!r}"
        if not isinstance(hv, dict | None):
            raise ServeSystemError(f"{where}: its variables must be a mapping; re-run launch to rewrite it")
        try:
            node = Node.from_host_vars(str(name) if isinstance(name, int) else name, hv or {})
            student = node.vars.get("serve_student")
            if student is not None:  # it becomes a file name (access sheets) and a folder: one plain name
                safeio.plain_name(student, "serve_student", "student")
        except ServeSystemError as exc:
            raise ServeSystemError(f"{where}: {exc}; fix the inventory or re-run launch to rewrite "
                                   "it") from None
        nodes.append(node)
    return nodes


# --- known_hosts -------------------------------------------------------------------------------


def known_hosts_key(address: str, port: int) -> str:
    """The host field ssh uses in known_hosts for ``address``:``port``."""
    return address if port == 22 else f"[{address}]:{port}"


def scan_host_keys(address: str, port: int = 22, timeout: int = 10) -> list[str]:
    """Fetch the host's public keys with ssh-keyscan; returns known_hosts lines (maybe empty)."""
    from .. import interrupt

    try:  # its own process group, killed on Ctrl-C
        proc = interrupt.run_child(["ssh-keyscan", "-T", str(timeout), "-p", str(port), address],
                                   timeout=timeout + 5)
    except FileNotFoundError as exc:
        raise ServeSystemError("ssh-keyscan not found: install openssh-client") from exc
    except subprocess.TimeoutExpired:
        return []
    return [ln.strip() for ln in proc.stdout.splitlines() if ln.strip() and not ln.startswith("#")]


def record_host_keys(known_hosts: Path, address: str, port: int, lines: list[str]) -> None:
    """Replace the entries of ``address``:``port`` in ``known_hosts`` with ``lines``.

    A node we (re)provisioned has a new host key even when it reuses an address, so the old entry
    is dropped rather than left to trip StrictHostKeyChecking.
    """
    host = known_hosts_key(address, port)
    existing = known_hosts.read_text(encoding="utf-8").splitlines() if known_hosts.exists() else []
    kept = [ln for ln in existing if ln.split(" ", 1)[0] != host]
    new = [ln for ln in lines if ln.split(" ", 1)[0] == host]
    atomic_write(known_hosts, "\n".join(kept + new) + ("\n" if kept or new else ""), mode=0o644)
