"""What every provider shares: the Provider protocol, launch requests, progress, the finish step.

A provider (Chameleon through python-chi, or local rehearsal nodes in podman) turns a
:class:`LaunchRequest` into SSH-reachable :class:`~serve_system.provision.nodes.Node` records, reports the
machines of a prefix (:class:`Machine`), rebuilds nodes to a fresh image and tears them down.
:func:`finish` is the one place host keys are pinned and the inventory is written, whoever made
the nodes. Long waits report through a :class:`Progress` (the CLI renders it with rich).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..errors import UsageError
from .nodes import Node, record_host_keys, scan_host_keys, write_inventory


def default_prefix(user: str) -> str:
    """The one default node-name prefix of both providers."""
    return f"node-serve-system-{user}"


_SUFFIX_RE = re.compile(r"[A-Za-z0-9_]+")


def server_names(prefix: str, count: int) -> list[str]:
    """``<prefix>`` for one node, ``<prefix>-1 .. <prefix>-N`` for more."""
    if count < 1:
        raise UsageError(f"--count must be at least 1, got {count}")
    return [prefix] if count == 1 else [f"{prefix}-{i}" for i in range(1, count + 1)]


def is_ours(name: str, prefix: str) -> bool:
    """``<prefix>`` or ``<prefix>-<suffix>`` with a suffix of letters, digits and '_' (a number or a
    roster's student): ``<prefix>-x-1`` belongs to the longer prefix ``<prefix>-x``, not to us."""
    if name == prefix:
        return True
    head, sep, tail = name.rpartition("-")
    return bool(sep) and head == prefix and _SUFFIX_RE.fullmatch(tail) is not None


class Progress(Protocol):
    """Where providers report long work: bars for waits, lines for events."""

    def step(self, task: str, description: str, completed: int, total: int | None) -> None:
        """Task ``task`` (e.g. "lease", "servers", "ssh") is at ``completed`` of ``total``."""

    def note(self, message: Any) -> None:
        """A one-off line or a rich renderable (a table)."""


class _Quiet:
    def step(self, task: str, description: str, completed: int, total: int | None) -> None:
        return None

    def note(self, message: Any) -> None:
        return None


#: a Progress that shows nothing (library use, tests)
quiet: Progress = _Quiet()


@dataclass(frozen=True)
class LaunchRequest:
    """What to launch, the same for both providers."""

    names: tuple[str, ...]
    dry_run: bool = False
    #: per node name: extra host variables (a roster's student and key)
    node_vars: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Machine:
    """A provider's view of one node: does the machine exist and run, and where to reach it."""

    name: str
    state: str  # ACTIVE / BUILD / ERROR (Chameleon), running / exited (rehearsal)
    running: bool
    address: str | None = None
    port: int = 22
    fault: str = ""


@dataclass(frozen=True)
class Fleet:
    """Everything a provider knows about a prefix, from one listing (status reads this)."""

    machines: list[Machine]
    #: lease name, status, end (ISO 8601 UTC) and minutes left; None where there is no lease
    lease: dict[str, Any] | None = None


class Provider(Protocol):
    """Launch, list, rebuild and tear down the nodes of a prefix."""

    name: str
    prefix: str

    def launch(self, req: LaunchRequest, progress: Progress) -> list[Node]: ...

    def fleet(self) -> Fleet: ...

    def rebuild(self, nodes: Sequence[Node], progress: Progress) -> list[Node]: ...

    def teardown(self, progress: Progress, *, dry_run: bool = False) -> list[str]: ...


def pin_host_keys(nodes: Sequence[Node], known_hosts: Path, progress: Progress) -> None:
    """Scan and record the host keys of ``nodes`` (and only theirs) in ``known_hosts``."""
    for i, node in enumerate(nodes):
        progress.step("hostkeys", "pinning SSH host keys", i, len(nodes))
        lines = scan_host_keys(node.address, node.port)
        if not lines:
            progress.note(
                f"warning: no SSH host key from {node.name} ({node.address}:{node.port}); "
                "re-run launch once sshd answers, or Ansible will refuse the unknown host"
            )
        record_host_keys(known_hosts, node.address, node.port, lines)
    progress.step("hostkeys", "pinning SSH host keys", len(nodes), len(nodes))


def finish(nodes: Sequence[Node], inventory: Path, known_hosts: Path, progress: Progress,
           *, pin: Sequence[Node] | None = None) -> None:
    """The shared last step: pin host keys (of ``pin``, default all) and write the inventory."""
    pin_host_keys(list(nodes) if pin is None else pin, known_hosts, progress)
    write_inventory(list(nodes), inventory, known_hosts)
