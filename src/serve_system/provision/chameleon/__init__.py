"""The Chameleon provider: bare-metal GPU nodes on a Blazar lease, through python-chi.

Split by concern: :mod:`.credentials` (openrc, credentials, errors, site), :mod:`.leases` (Blazar)
and :mod:`.servers` (Nova servers, Neutron floating IPs). This module plans and runs launch,
rebuild and teardown over them, and reports the fleet for ``status``. The python-chi traps each
piece avoids are listed in chi_scripts/README.md ("python-chi traps handled here").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from rich.table import Table

from ...errors import ServeSystemError
from ..base import Fleet, LaunchRequest, Machine, Progress
from ..nodes import Node
from .credentials import DEFAULT_SITE, SITES, api_errors
from .leases import (
    DEFAULT_NODE_TYPE,
    GPUS_BY_NODE_TYPE,
    LIVE_LEASE,
    LeaseInfo,
    delete_lease,
    find_leases,
    get_lease,
    wait_for_lease,
)
from .servers import (
    ServerInfo,
    delete_server,
    ensure_floating_ip,
    list_servers,
    rebuild_server,
    release_floating_ip,
    wait_active,
    wait_deleted,
    wait_for_tcp_all,
)

DEFAULT_IMAGE = "CC-Ubuntu24.04-CUDA"
DEFAULT_NETWORK = "sharednet1"
NODE_USER = "cc"

__all__ = ["DEFAULT_IMAGE", "DEFAULT_NETWORK", "DEFAULT_SITE", "SITES", "ChameleonProvider"]


def _plan_table(title: str, plan: list[tuple[str, str]], existing: dict[str, ServerInfo],
                deleting: dict[str, list[ServerInfo]]) -> Table:
    """The launch plan as a table: each server asked for, what launch does with it, its state, its address."""
    table = Table(title=title)
    for col in ("server", "action", "status", "floating IP"):
        table.add_column(col)
    for name, action in plan:
        cur = existing.get(name) or (deleting[name][0] if name in deleting else None)
        table.add_row(name, action, cur.state if cur else "-",
                      existing[name].floating_ip if name in existing and existing[name].floating_ip
                      else ("would allocate" if action != "failed" else "-"))
    return table


@dataclass
class ChameleonProvider:
    """Nodes named by ``prefix`` on the lease ``lease_name`` at ``site`` (a connected session)."""

    site: str
    prefix: str
    lease_name: str
    key_name: str = ""
    key_path: str = ""
    image: str = DEFAULT_IMAGE
    network: str = DEFAULT_NETWORK
    node_type: str | None = None  # None: from the lease's reservation
    replace_failed: bool = False
    lease_timeout: float = 3600.0
    server_timeout: float = 1800.0
    ssh_timeout: float = 600.0
    ssh_port: int = 22
    poll: float = 15.0
    margin: timedelta = timedelta(minutes=30)
    #: the other nodes of a class over several leases at this site: not "left alone" in the plan's note
    class_names: frozenset[str] = frozenset()
    name: str = field(default="chameleon", init=False)

    # --- launch --------------------------------------------------------------------------------

    def _check_image_and_key(self) -> None:
        from chi.image import get_image
        from chi.server import get_keypair

        with api_errors(f"looking up image {self.image}"):
            try:
                get_image(self.image)
            except Exception as exc:
                if type(exc).__name__ == "CHIValueError":
                    raise ServeSystemError(f"unknown image {self.image!r} at {self.site}: "
                                           "pass --image NAME") from exc
                raise
        with api_errors(f"looking up key pair {self.key_name}"):
            kp = get_keypair(self.key_name)
        if not kp.public_key:  # python-chi returns an empty Keypair instead of failing
            raise ServeSystemError(
                f"unknown key pair {self.key_name!r} at {self.site}: upload your public key "
                "(Horizon > Key Pairs, or `openstack keypair create --public-key FILE NAME`) "
                "or pass --key-name"
            )

    def _existing(self) -> tuple[dict[str, ServerInfo], dict[str, list[ServerInfo]]]:
        """Our servers by name, and apart from them those Nova is deleting (gone for us)."""
        live: dict[str, list[ServerInfo]] = {}
        gone: dict[str, list[ServerInfo]] = {}
        for s in list_servers(self.prefix):
            (gone if s.gone else live).setdefault(s.name, []).append(s)
        for name, same in live.items():
            if len(same) > 1:
                raise ServeSystemError(
                    f"{len(same)} servers are named {name}: {', '.join(s.id for s in same)}; "
                    "remove the extra ones (serve-system teardown or Horizon)"
                )
        return {n: same[0] for n, same in live.items()}, gone

    def launch(self, req: LaunchRequest, progress: Progress) -> list[Node]:
        """Make the named servers SSH-reachable on the lease; idempotent. Returns their nodes."""
        names = list(req.names)
        lease = get_lease(self.lease_name, self.site)
        if req.dry_run:
            if lease.status != "ACTIVE":
                progress.note(f"[dry run] lease {lease.name} is {lease.status} "
                              f"(starts {lease.start:%H:%M} UTC): would wait")
        else:
            lease = wait_for_lease(lease, progress, timeout=self.lease_timeout, poll=self.poll,
                                   margin=self.margin)
        if not lease.reservation_id:
            raise ServeSystemError(f"lease {lease.name} ({lease.id}) has no node reservation; "
                                   "create a new one")
        node_type = self.node_type or lease.node_type or DEFAULT_NODE_TYPE

        existing, deleting = self._existing()
        extra = sorted(n for n in existing if n not in names and n not in self.class_names)
        if extra:
            progress.note(f"Note: servers not asked for are left alone: {', '.join(extra)}")
        plan: list[tuple[str, str]] = []
        for name in names:
            cur = existing.get(name)
            if cur is None:
                # a server Nova is still deleting is gone: a fresh one once the delete is done
                plan.append((name, "create after delete" if name in deleting else "create"))
            elif cur.status == "ERROR":
                plan.append((name, "replace" if self.replace_failed else "failed"))
            else:
                plan.append((name, "reuse"))

        progress.note(_plan_table(f"Launch plan on lease {lease.name} ({lease.status}) at {self.site}",
                                  plan, existing, deleting))
        failed = [existing[n] for n, a in plan if a == "failed"]
        # being deleted, of the servers asked for; those without a live namesake are waited for
        doomed = [s for n in names for s in deleting.get(n, [])]
        awaited = [s for n, a in plan if a == "create after delete" for s in deleting[n]]
        if req.dry_run:
            for s in doomed:
                progress.note(f"[dry run] {s.name} ({s.id}) is being deleted ({s.state}): would "
                              + ("wait for Nova to finish" if s in awaited else "leave it to Nova")
                              + (f" and release {s.floating_ip}" if s.floating_ip else ""))
            progress.note("[dry run] nothing was changed")
            return []
        if failed:
            desc = "; ".join(f"{s.name} ({s.id}) {s.fault or 'no fault message'}" for s in failed)
            raise ServeSystemError(f"server in ERROR: {desc}; "
                                   "re-run with --replace-failed to delete and recreate it")
        to_create = [n for n, a in plan if a in ("create", "create after delete", "replace")]
        if to_create:
            self._check_image_and_key()
        for name, action in plan:
            if action == "replace":
                old = existing[name]
                progress.note(f"Deleting failed server {name} ({old.id})")
                delete_server(old, progress)
                awaited.append(old)
        for s in doomed:
            if s in awaited:
                progress.note(f"Server {s.name} ({s.id}) is being deleted: waiting for Nova, "
                              "then a fresh one")
            # its address would stay allocated to the project, bound to nothing, once Nova drops the port
            release_floating_ip(s, progress)
        if awaited:
            wait_deleted(awaited, self.server_timeout, self.poll, progress)

        servers: dict[str, ServerInfo] = {n: existing[n] for n, a in plan if a == "reuse"}
        for name in to_create:
            servers[name] = self._create(name, lease, progress)

        wait_active([servers[n] for n in names if servers[n].status != "ACTIVE"],
                    self.server_timeout, self.poll, progress)
        for name in names:
            ensure_floating_ip(servers[name], progress)
        self._wait_ssh([servers[n] for n in names], progress)
        return [self._node(servers[n], lease, node_type, req.node_vars.get(n, {})) for n in names]

    def _create(self, name: str, lease: LeaseInfo, progress: Progress) -> ServerInfo:
        """Ask Nova for server ``name`` on the lease's reservation; the new server's id is Nova's answer
        (python-chi's ``Server.submit`` drops it, and a lookup by name would need every page)."""
        import chi
        from chi.network import get_network_id
        from chi.server import BAREMETAL_FLAVOR, instance_create_args

        progress.note(f"Creating server {name} ({self.image}, key {self.key_name}, "
                      f"reservation {lease.reservation_id})")
        with api_errors(f"creating server {name}"):
            created = chi.connection().compute.create_server(**instance_create_args(
                lease.reservation_id, name=name, image=self.image, flavor=BAREMETAL_FLAVOR,
                key=self.key_name, net_ids=[get_network_id(self.network)]))
        return ServerInfo(created.id, name, created.status or "BUILD")

    def _wait_ssh(self, servers: list[ServerInfo], progress: Progress) -> None:
        targets = {s.name: (s.floating_ip or "", self.ssh_port) for s in servers}
        failed = wait_for_tcp_all(targets, self.ssh_timeout, progress, poll=min(5.0, self.poll))
        if failed:
            raise ServeSystemError(
                f"timed out after {int(self.ssh_timeout)} s waiting for SSH on {', '.join(failed)} "
                f"(port {self.ssh_port}); bare-metal boots take ~10 min: re-run launch (it resumes)"
            )

    def _node(self, s: ServerInfo, lease: LeaseInfo, node_type: str, extra: dict[str, object]) -> Node:
        assert s.floating_ip is not None
        return Node(
            name=s.name, address=s.floating_ip, user=NODE_USER, key_path=self.key_path, port=self.ssh_port,
            gpus=GPUS_BY_NODE_TYPE.get(node_type, 0), provider="chameleon",
            provider_ids={"server_id": s.id, "floating_ip_id": s.floating_ip_id or "", "lease_id": lease.id,
                          "reservation_id": lease.reservation_id or "", "site": self.site},
            vars={"serve_node_type": node_type, "serve_lease_end": lease.end_iso(), "serve_site": self.site,
                  "serve_lease": lease.name, **extra},
        )

    # --- fleet (status) --------------------------------------------------------------------------

    def lease_summary(self) -> dict[str, object] | None:
        found = find_leases(self.lease_name)
        live = [lz for lz in found if lz.status in LIVE_LEASE] or found
        if len(live) > 1:
            return {"name": self.lease_name, "status": "DUPLICATE", "ids": [lz.id for lz in live]}
        if live:
            return live[0].as_dict()
        return {"name": self.lease_name, "status": "NOT FOUND"}

    def fleet(self) -> Fleet:
        # a server Nova is deleting is gone, whatever its status still says (and so is its address)
        machines = [
            Machine(s.name, s.state, s.status == "ACTIVE", s.floating_ip, self.ssh_port, s.fault)
            for s in list_servers(self.prefix) if not s.gone
        ]
        return Fleet(machines, self.lease_summary())

    # --- rebuild -----------------------------------------------------------------------------------

    def rebuild(self, nodes: Sequence[Node], progress: Progress) -> list[Node]:
        """Nova's rebuild on each node's server (same server, reservation and floating IP)."""
        existing, deleting = self._existing()
        missing = [n.name for n in nodes if n.name not in existing]
        being_deleted = [n for n in missing if n in deleting]
        if being_deleted:
            raise ServeSystemError(
                f"server {', '.join(being_deleted)} at {self.site} is being deleted (Nova task_state "
                "deleting): nothing to rebuild; run launch to create a fresh one (it waits for the delete)")
        if missing:
            raise ServeSystemError(f"no server named {', '.join(missing)} at {self.site}: run launch first")
        servers = [existing[n.name] for n in nodes]
        for s in servers:
            progress.note(f"Rebuilding {s.name} ({s.id}) from {self.image}; "
                          f"floating IP {s.floating_ip} stays")
            rebuild_server(s, self.image)
            s.status = "REBUILD"
        wait_active(servers, self.server_timeout, self.poll, progress, what="servers rebuilding")
        self._wait_ssh(servers, progress)
        by_name = {s.name: s for s in servers}
        out = []
        for n in nodes:
            s = by_name[n.name]
            if s.floating_ip != n.address:
                raise ServeSystemError(f"{n.name}: floating IP changed from {n.address} to {s.floating_ip} "
                                       "during the rebuild; re-run launch to refresh the inventory")
            out.append(n)
        return out

    # --- teardown ------------------------------------------------------------------------------

    def teardown(self, progress: Progress, *, dry_run: bool = False,
                 delete_lease_too: bool = False) -> list[str]:
        """Delete our servers (by prefix) and their floating IPs, and the lease if asked; idempotent."""
        servers = list_servers(self.prefix)
        removed: list[str] = []
        for s in servers:
            if dry_run:
                progress.note(f"[dry run] would delete server {s.name} ({s.id})"
                              + (f" and release {s.floating_ip}" if s.floating_ip else ""))
                continue
            removed += delete_server(s, progress)
        if not servers:
            progress.note(f"No servers named {self.prefix} or {self.prefix}-N at {self.site}")
        if delete_lease_too:
            removed += self.remove_lease(self.lease_name, progress, dry_run=dry_run)
        return removed

    def remove_lease(self, name: str, progress: Progress, *, dry_run: bool = False) -> list[str]:
        """Delete lease ``name`` at this site (a class has several); idempotent."""
        if dry_run:
            for lz in find_leases(name):
                progress.note(f"[dry run] would delete lease {lz.name} ({lz.id}, {lz.status})")
            return []
        return delete_lease(name, self.site, progress)
