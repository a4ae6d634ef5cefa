"""The local rehearsal provider: nodes that stand in for Chameleon bare-metal nodes.

A rehearsal node is a privileged podman container running systemd as PID 1 (Debian 13, the ``node``
image of :mod:`serve_system.images`), with sshd published on a free 127.0.0.1 port, a user ``cc``
with password-less sudo (like Chameleon's CC-* images) and the project's generated ed25519 key. The
``docker`` role installs a real Docker engine in it, which runs the real serve stack.

:class:`LocalProvider` is the :class:`~serve_system.provision.base.Provider` for these nodes: it
returns :class:`~serve_system.provision.nodes.Node` records and the shared finish step pins their host keys
and writes the inventory, exactly as for Chameleon nodes. Nodes carry host variables that adapt the
roles to a container (``docker_source: distro``, ``docker_storage_driver: overlay2`` on a volume, the
locally built stack images and their archives, the ONNX shim, and the lab's repository: a local stand-in
in the lab's layout with generated weights, :func:`serve_system.labrepo.ensure_standin_repo`, fetched
by the same git task as on a real node from a ``file://`` URL).

Containers are labelled ``serve-system.rehearsal.prefix=<prefix>``: :func:`teardown_nodes` removes
only the containers of that prefix, never anyone else's. A rebuild removes a node's container and
starts a new one from the node image with the same name, SSH port and key.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import interrupt, labrepo
from ..errors import ServeSystemError
from ..images import build as images
from ..images import schedule
from ..images.stack import IMAGE_KEYS, ensure_images, stack_of, stack_refs
from ..podman import podman, require_podman
from .base import Fleet, LaunchRequest, Machine, Progress, quiet
from .nodes import Node, scan_host_keys

NODE_USER = "cc"
LABEL = "serve-system.rehearsal.prefix"
KEY_NAME = "id_ed25519"
SSH_WAIT_S = 90.0


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
        raise ServeSystemError("ssh-keygen not found: "
                               "install openssh-client (scripts/bootstrap.sh does)") from exc
    except subprocess.CalledProcessError as exc:
        raise ServeSystemError(f"ssh-keygen failed for {key}: {exc.stderr.strip()}") from exc
    return key


def _inspect(name: str) -> dict[str, Any] | None:
    proc = podman("container", "inspect", name, check=False)
    if proc.returncode != 0:
        return None
    data = json.loads(proc.stdout or "[]")
    return data[0] if data else None


def _ssh_port(name: str) -> int:
    proc = podman("port", name, "22/tcp")
    for line in proc.stdout.splitlines():
        _, _, port = line.strip().rpartition(":")
        if port.isdigit():
            return int(port)
    raise ServeSystemError(f"rehearsal node {name}: no published SSH port (podman port says {proc.stdout!r})")


def lab_dir() -> Path:
    """Where the rehearsal's stand-ins of the lab's repository are made (mounted into every node)."""
    return images.cache_dir() / "lab"


def _start(name: str, prefix: str, image: str, archive_dir: Path, port: int | None = None) -> None:
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
    lab_dir().mkdir(parents=True, exist_ok=True)
    podman(
        "run", "-d", "--name", name, "--hostname", name,
        "--label", f"{LABEL}={prefix}",
        "--privileged", "--systemd=always", "--cgroupns=host",
        "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
        # Docker's data on an (anonymous) volume, i.e. on the host's file system rather than the
        # container's overlayfs root: dockerd can then use overlay2 instead of the slow, space-hungry
        # vfs driver. Removed with the node (podman rm -v).
        "-v", "/var/lib/docker",
        # containerd's too: with Docker's containerd image store (Engine 29's default, the upstream
        # mode's today versions) images live in containerd's overlayfs snapshotter, which cannot
        # stack an overlay on the container's overlayfs root
        "-v", "/var/lib/containerd",
        # the serve-stack image archives, read-only at the same path as on the controller
        "-v", f"{archive_dir}:{archive_dir}:ro",
        # the stand-ins of the lab's repository, read-only at the same path (serve_stack_lab_repo: file://)
        "-v", f"{lab_dir()}:{lab_dir()}:ro",
        "-p", f"127.0.0.1:{port or ''}:22",
        image, "/sbin/init",
        timeout=120,
    )


#: sshd settings of a rehearsal node: every client reaches it through the same published port (one
#: source address), so OpenSSH 10's per-source penalties would lock the instructor and every
#: student out after a few failed logins of anyone (Chameleon nodes see each client's own address)
SSHD_SNIPPET = ("/etc/ssh/sshd_config.d/serve-system-rehearsal.conf", "PerSourcePenalties no\n")


def _authorize(name: str, pubkey: str) -> None:
    """Add the project key to cc's authorized_keys unless it is there; other lines (a roster's
    students, kept by the class_access role) stay, so re-running launch keeps their access.
    Also writes :data:`SSHD_SNIPPET` (sshd reads it when it starts, or now through a reload)."""
    keys = f"/home/{NODE_USER}/.ssh/authorized_keys"
    conf, text = SSHD_SNIPPET
    script = (
        f"mkdir -p {conf.rsplit('/', 1)[0]} && printf '{text}' > {conf} && "
        "{ systemctl reload ssh 2>/dev/null || true; } && "
        f"install -d -o {NODE_USER} -g {NODE_USER} -m 0700 /home/{NODE_USER}/.ssh && "
        f"key=$(cat) && touch {keys} && "
        f"{{ grep -qxF \"$key\" {keys} || printf '%s\\n' \"$key\" >> {keys}; }} && "
        f"chown {NODE_USER}:{NODE_USER} {keys} && chmod 0600 {keys}"
    )
    podman("exec", "-i", name, "sh", "-c", script, input=pubkey.strip(), timeout=60)


def _wait_ssh(name: str, port: int, timeout: float = SSH_WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if scan_host_keys("127.0.0.1", port, timeout=3):
            return
        if interrupt.stopping.wait(1.0):
            raise KeyboardInterrupt
    logs = podman("logs", "--tail", "5", name, check=False).stdout.strip().replace("\n", " | ")
    raise ServeSystemError(f"rehearsal node {name}: sshd on 127.0.0.1:{port} not up after {timeout:.0f} s "
                           f"({logs})")


def node_vars_for(stack: dict[str, images.StackImage], lab: labrepo.StandinRepo) -> dict[str, Any]:
    """Host variables that adapt the roles to a rehearsal node (see each role's README); ``lab``: the
    stand-in of the lab's repository the node fetches."""
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
        "serve_stack_lab_repo": lab.url,
        "serve_stack_lab_commit": lab.commit,
    }


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


@dataclass
class LocalProvider:
    """Rehearsal nodes of ``prefix``; their key lives next to ``inventory``."""

    prefix: str
    inventory: Path
    #: the images built before :meth:`launch` returns: all of them (site.yml's serve stack loads the
    #: stack's), or only ``("node",)`` for nodes that run only the roles before the stack
    images: tuple[str, ...] = IMAGE_KEYS
    name: str = field(default="local", init=False)

    def _bring_up(self, names: Sequence[str], progress: Progress, *, node_vars: dict[str, dict[str, Any]],
                  ports: dict[str, int] | None = None) -> list[Node]:
        """Build (or reuse) the images and start the nodes: the nodes start as soon as the node image
        is there, while the serve stack's images are still being built (their refs and archive paths
        are known from the recipes; the archive folder is mounted into each node, so archives written
        later are there too). Returns once every image is built and every node answers on SSH."""
        require_podman()
        key = ensure_key(self.inventory)
        pubkey = key.with_suffix(".pub").read_text(encoding="utf-8")
        node_image = images.NODE.ref
        stack = stack_refs()
        archive_dir = images.cache_dir() / "images"
        lab = labrepo.ensure_standin_repo(lab_dir())
        done = [0]
        built = [0]
        what = "rehearsal images (built once per recipe)"
        progress.step("images", what, 0, len(self.images))

        def image_done(step_key: str) -> None:
            if step_key.startswith("image:"):
                built[0] += 1
                progress.step("images", what, built[0], len(self.images))

        def bring_up(name: str) -> Node:
            _start(name, self.prefix, node_image, archive_dir, (ports or {}).get(name))
            port = _ssh_port(name)
            _authorize(name, pubkey)
            _wait_ssh(name, port)
            info = _inspect(name) or {}
            done[0] += 1
            progress.step("ssh", "starting nodes, waiting for SSH", done[0], len(names))
            return Node(
                name=name, address="127.0.0.1", user=NODE_USER, key_path=str(key), port=port, gpus=0,
                provider="local",
                provider_ids={"container": name, "container_id": str(info.get("Id", ""))[:12],
                              "image": node_image},
                vars={**node_vars_for(stack, lab), **node_vars.get(name, {})},
            )

        def start_all() -> list[Node]:
            progress.step("ssh", "starting nodes, waiting for SSH", 0, len(names))
            return interrupt.parallel(bring_up, names, max_workers=8)

        nodes_step = schedule.Step("nodes", f"starting the rehearsal node(s) {', '.join(names)}",
                                   ("image:node",), start_all)
        if "node" not in self.images:
            raise ServeSystemError("rehearsal nodes need the node image: add 'node' to the provider's images")
        results = ensure_images(self.images, progress.note, extra=[nodes_step], on_done=image_done)
        if set(stack) <= set(self.images) and stack_of(results) != stack:  # the refs given are the ones built
            raise ServeSystemError("rehearsal images: the built refs differ from the planned ones "
                                   f"({stack_of(results)} vs {stack})")
        nodes: list[Node] = results["nodes"]
        return nodes

    def launch(self, req: LaunchRequest, progress: Progress = quiet) -> list[Node]:
        """Start (or reuse) the named nodes; returns once every node's sshd answers."""
        if req.dry_run:
            existing = {r["name"]: r["state"] for r in list_nodes(self.prefix)}
            for n in req.names:
                progress.note(f"[dry run] {n}: "
                              + (f"reuse ({existing[n]})" if n in existing else "would start"))
            return []
        return self._bring_up(req.names, progress, node_vars=req.node_vars)

    def fleet(self) -> Fleet:
        rows = [r for r in list_nodes(self.prefix) if r["prefix"] == self.prefix]
        return Fleet([
            Machine(r["name"], r["state"], r["state"] == "running", "127.0.0.1" if r["ssh_port"] else None,
                    int(r["ssh_port"] or 22))
            for r in rows
        ])

    def rebuild(self, nodes: Sequence[Node], progress: Progress = quiet) -> list[Node]:
        """A new container from the node image for each node: same name, SSH port and key."""
        known = {r["name"] for r in list_nodes(self.prefix) if r["prefix"] == self.prefix}
        missing = [n.name for n in nodes if n.name not in known]
        if missing:
            raise ServeSystemError(f"no rehearsal node named {', '.join(missing)} (prefix {self.prefix}): "
                                   "run launch first")
        for n in nodes:
            progress.note(f"Rebuilding {n.name}: new container from the node image, SSH port {n.port} kept")
            podman("rm", "-f", "-v", "-t", "5", n.name, timeout=300)
        fresh = self._bring_up([n.name for n in nodes], progress, node_vars={},
                               ports={n.name: n.port for n in nodes})
        # keep what the inventory knew about each node (a roster's student, its key), new container id
        return [dataclasses.replace(old, provider_ids=new.provider_ids)
                for old, new in zip(nodes, fresh, strict=True)]

    def teardown(self, progress: Progress = quiet, *, dry_run: bool = False) -> list[str]:
        if dry_run:
            names = [r["name"] for r in list_nodes(self.prefix) if r["prefix"] == self.prefix]
            for n in names:
                progress.note(f"[dry run] would remove rehearsal node {n}")
            return []
        removed = teardown_nodes(self.prefix)
        for n in removed:
            progress.note(f"Removed rehearsal node {n}")
        return removed
