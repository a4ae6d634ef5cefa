"""The local rehearsal provider: nodes that stand in for Chameleon bare-metal nodes.

A rehearsal node is a privileged podman container running systemd as PID 1 (Debian 13, the ``node``
image of :mod:`serve_system.images`), with sshd published on a free 127.0.0.1 port, a user ``cc``
with password-less sudo (like Chameleon's CC-* images) and the project's generated ed25519 key. The
``docker`` role installs a real Docker engine in it, which runs the real serve stack.

:func:`launch_nodes` returns :class:`~serve_system.nodes.Node` records; the caller writes the
inventory and records host keys (:mod:`serve_system.nodes`), exactly as for Chameleon nodes. Nodes
carry host variables that adapt the roles to a container (``docker_source: distro``,
``docker_storage_driver: overlay2`` on a volume, the locally built stack images and their archives, the ONNX shim).

Containers are labelled ``serve-system.rehearsal.prefix=<prefix>``: :func:`teardown_nodes` removes
only the containers of that prefix, never anyone else's.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from . import images
from .errors import ServeSystemError
from .nodes import Node, scan_host_keys
from .podman import podman, require_podman

NODE_USER = "cc"
LABEL = "serve-system.rehearsal.prefix"
KEY_NAME = "id_ed25519"
#: where the image archive directory is mounted in a node (the same path as on the controller)
SSH_WAIT_S = 90.0

Report = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


def state_dir(inventory: Path) -> Path:
    """``<inventory dir>/.rehearsal`` (git-ignored): the generated key lives there."""
    inventory = Path(inventory)
    base = inventory if inventory.is_dir() or not inventory.suffix else inventory.parent
    return base.resolve() / ".rehearsal"


def ensure_key(inventory: Path) -> Path:
    """The private key of the rehearsal nodes (generated once, ed25519, no passphrase)."""
    key = state_dir(inventory) / KEY_NAME
    if key.is_file() and key.with_suffix(".pub").is_file():
        return key
    key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key.unlink(missing_ok=True)
    key.with_suffix(".pub").unlink(missing_ok=True)
    try:
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "serve-system-rehearsal", "-f", str(key)],
            check=True, capture_output=True, text=True,
        )
    except FileNotFoundError as exc:
        raise ServeSystemError("ssh-keygen not found: install openssh-client (scripts/bootstrap.sh does)") from exc
    except subprocess.CalledProcessError as exc:
        raise ServeSystemError(f"ssh-keygen failed for {key}: {exc.stderr.strip()}") from exc
    return key


def node_names(prefix: str, count: int) -> list[str]:
    if count < 1:
        raise ServeSystemError(f"--count must be at least 1, got {count}")
    return [f"{prefix}-{i}" for i in range(1, count + 1)]


def _inspect(name: str) -> dict[str, Any] | None:
    proc = podman("container", "inspect", name, check=False)
    if proc.returncode != 0:
        return None
    data = json.loads(proc.stdout or "[]")
    return data[0] if data else None


def _ssh_port(name: str) -> int:
    proc = podman("port", name, "22/tcp")
    for line in proc.stdout.splitlines():
        host, _, port = line.strip().rpartition(":")
        if port.isdigit():
            return int(port)
    raise ServeSystemError(f"rehearsal node {name}: no published SSH port (podman port says {proc.stdout!r})")


def _start(name: str, prefix: str, image: str, archive_dir: Path) -> None:
    info = _inspect(name)
    if info is not None:
        labels = (info.get("Config") or {}).get("Labels") or {}
        if labels.get(LABEL) != prefix:
            raise ServeSystemError(
                f"a container named {name} exists and is not a rehearsal node of prefix {prefix!r}: "
                "pick another --prefix"
            )
        if not (info.get("State") or {}).get("Running"):
            podman("start", name, timeout=120)
        return
    archive_dir.mkdir(parents=True, exist_ok=True)
    podman(
        "run", "-d", "--name", name, "--hostname", name,
        "--label", f"{LABEL}={prefix}",
        "--privileged", "--systemd=always", "--cgroupns=host",
        "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
        # Docker's data on an (anonymous) volume, i.e. on the host's file system rather than the
        # container's overlayfs root: dockerd can then use overlay2 instead of the slow, space-hungry
        # vfs driver. Removed with the node (podman rm -v).
        "-v", "/var/lib/docker",
        # the serve-stack image archives, read-only at the same path as on the controller
        "-v", f"{archive_dir}:{archive_dir}:ro",
        "-p", "127.0.0.1::22",
        image, "/sbin/init",
        timeout=120,
    )


def _authorize(name: str, pubkey: str) -> None:
    script = (
        f"install -d -o {NODE_USER} -g {NODE_USER} -m 0700 /home/{NODE_USER}/.ssh && "
        f"cat > /home/{NODE_USER}/.ssh/authorized_keys && "
        f"chown {NODE_USER}:{NODE_USER} /home/{NODE_USER}/.ssh/authorized_keys && "
        f"chmod 0600 /home/{NODE_USER}/.ssh/authorized_keys"
    )
    podman("exec", "-i", name, "sh", "-c", script, input=pubkey, timeout=60)


def _wait_ssh(name: str, port: int, timeout: float = SSH_WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if scan_host_keys("127.0.0.1", port, timeout=3):
            return
        time.sleep(1.0)
    logs = podman("logs", "--tail", "5", name, check=False).stdout.strip().replace("\n", " | ")
    raise ServeSystemError(f"rehearsal node {name}: sshd on 127.0.0.1:{port} not up after {timeout:.0f} s ({logs})")


def node_vars(stack: dict[str, images.StackImage]) -> dict[str, Any]:
    """Host variables that adapt the roles to a rehearsal node (see each role's README)."""
    return {
        "docker_source": "distro",
        "docker_storage_driver": "overlay2",
        "serve_stack_triton_image": stack["triton"].ref,
        "serve_stack_jupyter_image": stack["client"].ref,
        "serve_stack_fastapi_image": stack["fastapi"].ref,
        "serve_stack_image_archives": [
            {**s.role_item(), "remote_src": True} for s in stack.values()
        ],
        "serve_stack_onnx_serving": "python_shim",
        "serve_stack_flask_build_context": "",
    }


def launch_nodes(
    count: int, prefix: str, inventory: Path, known_hosts: Path, report: Report = _quiet
) -> list[Node]:
    """Start (or reuse) ``count`` rehearsal nodes ``<prefix>-1..N``; returns their Node records.

    Builds the node image and the serve-stack image archives first when their recipes changed
    (cached otherwise). Nodes already running are reused, stopped ones restarted. Returns once
    every node's sshd answers (its host keys can be scanned). ``known_hosts`` is not written here:
    the caller records the host keys, as for Chameleon nodes.
    """
    require_podman()
    del known_hosts  # the caller records host keys (serve_system.nodes.record_host_keys)
    names = node_names(prefix, count)
    key = ensure_key(inventory)
    pubkey = key.with_suffix(".pub").read_text(encoding="utf-8")
    node_image = images.ensure_image(images.NODE, report)
    stack = images.ensure_stack_images(report)
    archive_dir = images.cache_dir() / "images"
    report(f"starting {count} rehearsal node(s): {', '.join(names)}")

    def bring_up(name: str) -> Node:
        _start(name, prefix, node_image, archive_dir)
        port = _ssh_port(name)
        _authorize(name, pubkey)
        _wait_ssh(name, port)
        info = _inspect(name) or {}
        return Node(
            name=name,
            address="127.0.0.1",
            user=NODE_USER,
            key_path=str(key),
            port=port,
            gpus=0,
            provider="local",
            provider_ids={"container": name, "container_id": str(info.get("Id", ""))[:12],
                          "image": node_image},
            vars=node_vars(stack),
        )

    with ThreadPoolExecutor(max_workers=min(8, count)) as pool:
        nodes = list(pool.map(bring_up, names))
    report(f"{count} rehearsal node(s) up")
    return nodes


def list_nodes(prefix: str | None = None) -> list[dict[str, str]]:
    """Rehearsal node containers (of ``prefix``, or all): name, prefix, state, ssh port."""
    require_podman()
    flt = f"label={LABEL}={prefix}" if prefix else f"label={LABEL}"
    proc = podman("ps", "-a", "--filter", flt, "--format", "json")
    out = []
    for item in json.loads(proc.stdout or "[]"):
        name = (item.get("Names") or ["?"])[0]
        ports = [p.get("host_port") for p in item.get("Ports") or [] if p.get("container_port") == 22]
        out.append({
            "name": name,
            "prefix": (item.get("Labels") or {}).get(LABEL, ""),
            "state": item.get("State", ""),
            "ssh_port": str(ports[0]) if ports else "",
        })
    return sorted(out, key=lambda r: r["name"])


def teardown_nodes(prefix: str) -> list[str]:
    """Remove the rehearsal nodes of ``prefix`` (only containers carrying its label); their names."""
    require_podman()
    if not prefix:
        raise ServeSystemError("teardown needs a non-empty --prefix")
    names = [r["name"] for r in list_nodes(prefix) if r["prefix"] == prefix]
    if names:
        podman("rm", "-f", "-v", "-t", "5", *names, timeout=300)
    return names
