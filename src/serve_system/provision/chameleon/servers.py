"""Nova servers and Neutron floating IPs through python-chi and openstacksdk.

* Listing is done once per call: one server listing (all of Nova's pages: a class shares its
  project with other users' servers), one port listing and one floating-IP listing, joined here
  (not one Neutron round trip per server: about 80 calls at 40 nodes).
* Nova deletes asynchronously: a deleted server stays listed, its status unchanged and
  ``OS-EXT-STS:task_state`` ``deleting``, until the delete is done (bare metal: minutes). Such a
  server is *gone* (:attr:`ServerInfo.gone`): never reused, rebuilt or shown as a node; a floating
  IP still attached to its port is not its address any more (and is released with it).
* Floating IPs: the one attached to a server is reused; otherwise a *new* one is allocated (never an
  unbound IP of the project someone else may be holding) and attached through openstacksdk, whose
  error carries Neutron's own reason (python-chi's ``associate_floating_ip`` swallows it); a new IP
  that cannot be attached is released again.
* ``Server.wait`` returns on ERROR without raising: statuses are polled and checked here.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ... import interrupt
from ...errors import ServeSystemError
from ..base import Progress, is_ours
from .credentials import api_errors, one_line

#: Nova statuses of a server that is deleted (SOFT_DELETED: restorable for a while, gone for us)
DELETED_STATUSES = frozenset({"DELETED", "SOFT_DELETED"})


@dataclass
class ServerInfo:
    id: str
    name: str
    status: str
    fault: str = ""
    floating_ip: str | None = None
    floating_ip_id: str | None = None
    #: Nova's OS-EXT-STS:task_state ("deleting", "spawning", ...; "" when none)
    task_state: str = ""

    @property
    def gone(self) -> bool:
        """Deleted, or being deleted: not a server to use any more."""
        return self.status in DELETED_STATUSES or self.task_state == "deleting"

    @property
    def state(self) -> str:
        """The status, with the task in progress: ``ACTIVE (deleting)``, ``BUILD (spawning)``."""
        return f"{self.status} ({self.task_state})" if self.task_state else self.status


def _info(s: Any) -> ServerInfo:
    """A ServerInfo from an openstacksdk or a novaclient server."""
    fault = getattr(s, "fault", None) or {}
    task = getattr(s, "task_state", None) or getattr(s, "OS-EXT-STS:task_state", None)
    return ServerInfo(s.id, s.name, s.status or "", one_line(fault.get("message", "")), task_state=task or "")


def list_servers(prefix: str) -> list[ServerInfo]:
    """Our servers (those being deleted too) with their floating IPs: one server listing (every
    page), one port and one floating-IP listing."""
    import chi

    with api_errors("listing servers"):
        # openstacksdk follows Nova's servers_links page by page; novaclient's list() stops at the first
        found = [_info(s) for s in chi.connection().compute.servers(details=True) if is_ours(s.name, prefix)]
    if found:
        with api_errors("listing ports and floating IPs"):
            neutron = chi.neutron()
            ours = {s.id for s in found}
            port_owner = {p["id"]: p["device_id"] for p in neutron.list_ports()["ports"]
                          if p.get("device_id") in ours}
            by_server = {port_owner[f["port_id"]]: f for f in neutron.list_floatingips()["floatingips"]
                         if f.get("port_id") in port_owner}
        for s in found:
            fip = by_server.get(s.id)
            if fip:
                s.floating_ip, s.floating_ip_id = fip["floating_ip_address"], fip["id"]
    return sorted(found, key=lambda s: s.name)


def attached_floating_ip(server_id: str) -> dict[str, Any] | None:
    import chi

    with api_errors(f"reading the floating IP of server {server_id}"):
        neutron = chi.neutron()
        ports = {p["id"] for p in neutron.list_ports(device_id=server_id)["ports"]}
        if not ports:
            return None
        for fip in neutron.list_floatingips()["floatingips"]:
            if fip.get("port_id") in ports:
                return dict(fip)
    return None


def ensure_floating_ip(server: ServerInfo, progress: Progress) -> None:
    """Reuse the floating IP attached to ``server``, else allocate a new one and attach it.

    The new IP goes to the server's first port Neutron accepts; when none does, Neutron's own
    reason (for instance 404 "External network ... is not reachable from subnet ...") is the error,
    and the new IP is released again.
    """
    import chi
    from chi.network import PUBLIC_NETWORK, get_network_id
    from openstack.exceptions import SDKException

    if server.floating_ip:
        return
    fip = attached_floating_ip(server.id)
    if fip:
        server.floating_ip, server.floating_ip_id = fip["floating_ip_address"], fip["id"]
        return
    with api_errors(f"allocating a floating IP for {server.name} (quota or pool exhausted?)"):
        neutron = chi.neutron()
        public = get_network_id(PUBLIC_NETWORK)
        new = neutron.create_floatingip({"floatingip": {"floating_network_id": public}})["floatingip"]
    address = new["floating_ip_address"]
    try:
        with api_errors(f"attaching floating IP {address} to {server.name}"):
            network = chi.connection().network
            ports = [p for p in network.ports(device_id=server.id) if p.fixed_ips]
            if not ports:
                raise ServeSystemError(f"attaching floating IP {address} to {server.name}: the server has "
                                       "no port with an address yet; re-run launch")
            refusal: SDKException | None = None
            for port in ports:
                try:
                    network.update_ip(new["id"], port_id=port.id)
                    break
                except SDKException as exc:  # this port cannot have it (another network?): try the next
                    refusal = refusal or exc
            else:
                assert refusal is not None
                raise refusal
    except ServeSystemError:
        with api_errors(f"releasing floating IP {address}"):
            chi.neutron().delete_floatingip(new["id"])
        raise
    server.floating_ip, server.floating_ip_id = address, new["id"]
    progress.note(f"Attached new floating IP {server.floating_ip} to {server.name}")


def wait_for_tcp(host: str, port: int, timeout: float, poll: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=min(5.0, max(timeout, 0.1))):
                return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            if interrupt.stopping.wait(min(poll, max(0.0, deadline - time.monotonic())) or 0.05):
                raise KeyboardInterrupt from None


def wait_for_tcp_all(targets: dict[str, tuple[str, int]], timeout: float, progress: Progress,
                     poll: float = 5.0) -> list[str]:
    """Wait for TCP on every ``name: (host, port)`` at once; returns the names that never answered."""
    if not targets:
        return []
    done = [0]
    lock = threading.Lock()
    progress.step("ssh", "waiting for SSH", 0, len(targets))

    def one(name: str) -> bool:
        host, port = targets[name]
        ok = wait_for_tcp(host, port, timeout, poll)
        with lock:
            done[0] += 1
            progress.step("ssh", "waiting for SSH", done[0], len(targets))
        return ok

    names = list(targets)
    answered = interrupt.parallel(one, names, max_workers=64)
    return sorted(n for n, ok in zip(names, answered, strict=True) if not ok)


def server_status(server_id: str) -> ServerInfo | None:
    """The server as Nova shows it now; None once it is deleted (404)."""
    import chi
    from novaclient.exceptions import NotFound

    try:
        with api_errors(f"reading server {server_id}"):
            return _info(chi.nova().servers.get(server_id))
    except ServeSystemError as exc:
        if isinstance(exc.__cause__, NotFound):
            return None
        raise


def _summary(servers: Sequence[ServerInfo]) -> str:
    shown = ", ".join(f"{s.name} {s.state}" for s in servers[:3])
    return shown + (f" and {len(servers) - 3} more" if len(servers) > 3 else "")


def wait_active(servers: list[ServerInfo], timeout: float, poll: float, progress: Progress,
                what: str = "servers building") -> None:
    """Poll until every server is ACTIVE; one ERROR (or a delete) stops with its reason.

    The progress bar says which servers are still at which Nova status and task (a bare-metal
    deploy is ``BUILD`` for about ten minutes: scheduling, networking, spawning)."""
    deadline = time.monotonic() + timeout
    pending = {s.id: s for s in servers}
    total = len(servers)
    while True:
        for s in list(pending.values()):
            now = server_status(s.id)
            if now is None or now.gone:
                raise ServeSystemError(
                    f"server {s.name} ({s.id}) was deleted while it was being waited for "
                    f"({'gone' if now is None else now.state}); re-run launch to create a fresh one")
            s.status, s.fault, s.task_state = now.status, now.fault, now.task_state
            if s.status == "ACTIVE":
                del pending[s.id]
            elif s.status == "ERROR":
                raise ServeSystemError(
                    f"server {s.name} ({s.id}) went to ERROR: {s.fault or 'no fault message'}; "
                    "re-run with --replace-failed to recreate it"
                )
        left = list(pending.values())
        progress.step("servers", f"{what} (bare metal takes ~10 min)"
                      + (f": {_summary(left)}" if left else ""), total - len(left), total)
        if not pending:
            return
        if time.monotonic() >= deadline:
            names = ", ".join(f"{s.name}={s.state}" for s in left)
            raise ServeSystemError(
                f"timed out after {int(timeout)} s waiting for servers to be ACTIVE ({names}); "
                "re-run to keep waiting"
            )
        time.sleep(poll)


def wait_deleted(servers: Sequence[ServerInfo], timeout: float, poll: float, progress: Progress) -> None:
    """Wait until Nova has finished deleting ``servers`` (404, or status DELETED/SOFT_DELETED).

    Bounded by ``timeout``; the error names the servers still there and what to do."""
    deadline = time.monotonic() + timeout
    pending = {s.id: s for s in servers}
    total = len(pending)
    while True:
        for s in list(pending.values()):
            now = server_status(s.id)
            if now is None or now.status in DELETED_STATUSES:
                del pending[s.id]
            else:
                s.status, s.task_state = now.status, now.task_state
        left = list(pending.values())
        progress.step("deletes", "Nova deleting servers (bare metal takes minutes)"
                      + (f": {_summary(left)}" if left else ""), total - len(left), total)
        if not pending:
            return
        if time.monotonic() >= deadline:
            names = ", ".join(f"{s.name} ({s.id}, {s.state})" for s in left)
            raise ServeSystemError(
                f"timed out after {int(timeout)} s waiting for Nova to delete {names}; nothing new was "
                "created: re-run launch once it is gone (serve-system status no longer lists it), "
                "or give it longer with --server-timeout")
        time.sleep(poll)


def release_floating_ip(s: ServerInfo, progress: Progress) -> list[str]:
    """Release the floating IP attached to ``s`` (gone already is fine); what was released."""
    import chi
    from neutronclient.common.exceptions import NotFound as NeutronNotFound

    if not s.floating_ip_id:
        return []
    try:
        with api_errors(f"releasing floating IP {s.floating_ip}"):
            chi.neutron().delete_floatingip(s.floating_ip_id)
    except ServeSystemError as exc:
        if not isinstance(exc.__cause__, NeutronNotFound):
            raise
    progress.note(f"Released floating IP {s.floating_ip} of {s.name}")
    released = [f"floating IP {s.floating_ip}"]
    s.floating_ip = s.floating_ip_id = None
    return released


def delete_server(s: ServerInfo, progress: Progress) -> list[str]:
    """Release the server's floating IP, then delete the server; missing pieces are not an error.

    A server Nova is already deleting is not asked again; its floating IP is still released (it
    would stay allocated to the project, attached to nothing, once the port is gone)."""
    import chi
    from novaclient.exceptions import NotFound

    removed = release_floating_ip(s, progress)
    if s.gone:
        progress.note(f"Server {s.name} ({s.id}) is already being deleted ({s.state})")
        return removed
    try:
        with api_errors(f"deleting server {s.name}"):
            chi.nova().servers.delete(s.id)
    except ServeSystemError as exc:
        if not isinstance(exc.__cause__, NotFound):
            raise
    removed.append(f"server {s.name} ({s.id})")
    progress.note(f"Deleted server {s.name} ({s.id})")
    return removed


def rebuild_server(s: ServerInfo, image: str) -> None:
    """Nova's rebuild action: a fresh disk from ``image``; server id, reservation and ports stay."""
    import chi
    from chi.image import get_image_id

    with api_errors(f"rebuilding server {s.name}"):
        chi.nova().servers.rebuild(s.id, get_image_id(image))
