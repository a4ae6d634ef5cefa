"""Nova servers and Neutron floating IPs through python-chi.

* Listing is done once per call: one server listing, one port listing and one floating-IP listing,
  joined here (not one Neutron round trip per server: about 80 calls at 40 nodes).
* Floating IPs: the one attached to a server is reused; otherwise a *new* one is allocated (never an
  unbound IP of the project someone else may be holding), and released again if association fails.
* ``Server.wait`` returns on ERROR without raising: statuses are polled and checked here.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from ... import interrupt
from ...errors import ServeSystemError
from ..base import Progress, is_ours
from .credentials import api_errors, one_line


@dataclass
class ServerInfo:
    id: str
    name: str
    status: str
    fault: str = ""
    floating_ip: str | None = None
    floating_ip_id: str | None = None


def list_servers(prefix: str) -> list[ServerInfo]:
    """Our servers with their floating IPs: one server, one port and one floating-IP listing."""
    import chi

    with api_errors("listing servers"):
        found = []
        for s in chi.nova().servers.list():
            if is_ours(s.name, prefix):
                fault = getattr(s, "fault", None) or {}
                found.append(ServerInfo(s.id, s.name, s.status, one_line(fault.get("message", ""))))
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


def _server_status(server_id: str) -> tuple[str, str]:
    import chi

    with api_errors(f"reading server {server_id}"):
        s = chi.nova().servers.get(server_id)
    fault = getattr(s, "fault", None) or {}
    return s.status, one_line(fault.get("message", ""))


def ensure_floating_ip(server: ServerInfo, progress: Progress) -> None:
    """Reuse the floating IP attached to ``server``, else allocate a new one and attach it."""
    import chi
    from chi.network import PUBLIC_NETWORK, get_network_id
    from chi.server import associate_floating_ip

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
    try:
        with api_errors(f"attaching floating IP {new['floating_ip_address']} to {server.name}"):
            associate_floating_ip(server.id, floating_ip_address=new["floating_ip_address"])
    except ServeSystemError:
        with api_errors(f"releasing floating IP {new['floating_ip_address']}"):
            chi.neutron().delete_floatingip(new["id"])
        raise
    server.floating_ip, server.floating_ip_id = new["floating_ip_address"], new["id"]
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


def server_status(server_id: str) -> tuple[str, str]:
    import chi

    with api_errors(f"reading server {server_id}"):
        s = chi.nova().servers.get(server_id)
    fault = getattr(s, "fault", None) or {}
    return s.status, one_line(fault.get("message", ""))


def wait_active(servers: list[ServerInfo], timeout: float, poll: float, progress: Progress,
                what: str = "servers building") -> None:
    """Poll until every server is ACTIVE; one ERROR stops with its fault."""
    deadline = time.monotonic() + timeout
    pending = {s.id: s for s in servers}
    total = len(servers)
    while True:
        for s in list(pending.values()):
            s.status, s.fault = server_status(s.id)
            if s.status == "ACTIVE":
                del pending[s.id]
            elif s.status == "ERROR":
                raise ServeSystemError(
                    f"server {s.name} ({s.id}) went to ERROR: {s.fault or 'no fault message'}; "
                    "re-run with --replace-failed to recreate it"
                )
        progress.step("servers", f"{what} (bare metal takes ~10 min)", total - len(pending), total)
        if not pending:
            return
        if time.monotonic() >= deadline:
            names = ", ".join(f"{s.name}={s.status}" for s in pending.values())
            raise ServeSystemError(
                f"timed out after {int(timeout)} s waiting for servers to be ACTIVE ({names}); "
                "re-run to keep waiting"
            )
        time.sleep(poll)


def wait_gone(server_id: str, timeout: float, poll: float) -> None:
    import contextlib
    import io

    import chi
    from novaclient.exceptions import NotFound

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                chi.nova().servers.get(server_id)
        except NotFound:
            return
        time.sleep(poll)
    raise ServeSystemError(f"timed out waiting for server {server_id} to be deleted")


def delete_server(s: ServerInfo, progress: Progress) -> list[str]:
    """Release the server's floating IP, then delete the server; missing pieces are not an error."""
    import chi
    from neutronclient.common.exceptions import NotFound as NeutronNotFound
    from novaclient.exceptions import NotFound

    removed = []
    if s.floating_ip_id:
        try:
            with api_errors(f"releasing floating IP {s.floating_ip}"):
                chi.neutron().delete_floatingip(s.floating_ip_id)
        except ServeSystemError as exc:
            if not isinstance(exc.__cause__, NeutronNotFound):
                raise
        removed.append(f"floating IP {s.floating_ip}")
        progress.note(f"Released floating IP {s.floating_ip} of {s.name}")
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
