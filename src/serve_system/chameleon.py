"""The Chameleon provider: python-chi, used so that none of its known traps bite.

What this module does on top of python-chi (see PLATFORM.md, section python-chi):

* Credentials come from the environment or from an openrc file that is *parsed*, never executed.
  They are handed to python-chi with ``chi.reset()`` + ``chi.set()`` (python-chi only reads
  ``OS_*`` variables at import time), and application credentials are never given a project scope.
* The site is chosen with ``chi.use_site()`` (``choose_site()`` only prints outside Jupyter), after
  checking the site list ourselves (``use_site`` only prints when the list cannot be fetched).
* Leases are found by name among *all* leases (duplicate names are an error listing the ids), and
  Blazar refusals are shown with Blazar's own reason (python-chi logs it and raises
  "Unable to make lease").
* ``Lease.wait`` / ``Server.wait`` return on ERROR without raising: we poll and check statuses
  ourselves. ``Server.submit`` gets an explicit key pair and ``show=None``.
* Floating IPs: the one attached to a server is reused; otherwise a *new* one is allocated (never an
  unbound IP of the project someone else may be holding), and released again if association fails.

Everything here talks to Chameleon only through python-chi and the OpenStack clients it builds.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from .errors import ServeSystemError, UsageError
from .nodes import Node, record_host_keys, scan_host_keys, write_inventory

DEFAULT_SITE = "CHI@TACC"
SITES = ("CHI@TACC", "CHI@UC")
DEFAULT_NODE_TYPE = "gpu_p100"
DEFAULT_IMAGE = "CC-Ubuntu24.04-CUDA"
DEFAULT_NETWORK = "sharednet1"
DEFAULT_DURATION = timedelta(hours=2, minutes=50)
NODE_USER = "cc"
#: GPUs per node type (Chameleon's hardware catalog); unknown types count 0
GPUS_BY_NODE_TYPE: dict[str, int] = {
    "gpu_p100": 2,
    "gpu_p100_nvlink": 4,
    "gpu_v100": 4,
    "gpu_v100_nvlink": 4,
    "gpu_rtx_6000": 1,
    "gpu_a100_pcie": 4,
    "gpu_a100_nvlink": 4,
    "gpu_mi100": 2,
    "gpu_k80": 2,
    "gpu_m40": 1,
}
BLAZAR_TIME = "%Y-%m-%d %H:%M"
LIVE_LEASE = ("PENDING", "STARTING", "ACTIVE", "UPDATING")

_CRED_HELP = (
    "source your Chameleon openrc, pass --openrc FILE, or export OS_APPLICATION_CREDENTIAL_ID "
    "and OS_APPLICATION_CREDENTIAL_SECRET of an unscoped application credential"
)


def default_lease_name(user: str) -> str:
    return f"serve_system_{user}"


def default_prefix(user: str) -> str:
    return f"node-serve-system-{user}"


def server_names(prefix: str, count: int) -> list[str]:
    """``<prefix>`` for one server, ``<prefix>-1 .. <prefix>-N`` for more."""
    if count < 1:
        raise UsageError(f"--count must be at least 1, got {count}")
    return [prefix] if count == 1 else [f"{prefix}-{i}" for i in range(1, count + 1)]


def _is_ours(name: str, prefix: str) -> bool:
    return name == prefix or re.fullmatch(re.escape(prefix) + r"-\d+", name) is not None


def _utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


# --- credentials -------------------------------------------------------------------------------

_EXPORT_RE = re.compile(r"^\s*(?:export\s+)?(OS_[A-Z0-9_]+)=(.*)$")


def parse_openrc(path: Path, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``OS_*`` assignments of an openrc file, read as data (the file is never executed).

    ``$VAR`` / ``${VAR}`` references are resolved from earlier assignments and ``env``; a value
    that stays unresolved (the password prompt of Chameleon's openrc) is left out, so it can come
    from the environment instead.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--openrc {path}: cannot read it ({exc.strerror})") from exc
    known: dict[str, str] = dict(env or {})
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _EXPORT_RE.match(line)
        if not m:
            continue
        name, raw = m.groups()
        try:
            parts = shlex.split(raw, comments=True)
        except ValueError as exc:
            raise UsageError(f"--openrc {path}: cannot parse the value of {name} ({exc})") from exc
        value = parts[0] if parts else ""
        unresolved = False

        def sub(mm: re.Match[str]) -> str:
            nonlocal unresolved
            ref = mm.group(1) or mm.group(2)
            if ref in known:
                return known[ref]
            unresolved = True
            return ""

        if not raw.lstrip().startswith("'"):
            value = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", sub, value)
        if unresolved or not value:
            continue
        known[name] = value
        out[name] = value
    return out


@dataclass(frozen=True)
class Credentials:
    """What python-chi needs to authenticate (never printed, never written anywhere)."""

    auth_type: str
    options: dict[str, str] = field(repr=False)
    project: str | None = None

    def describe(self) -> str:
        kind = {
            "v3applicationcredential": "application credential",
            "v3password": "password",
            "v3token": "token",
        }[self.auth_type]
        return f"{kind}" + (f", project {self.project}" if self.project else "")


def resolve_credentials(env: Mapping[str, str]) -> Credentials:
    """Pick the authentication method from ``OS_*`` variables; one clear error when incomplete."""

    def get(name: str) -> str:
        return (env.get(name) or "").strip()

    if get("OS_APPLICATION_CREDENTIAL_ID") or get("OS_APPLICATION_CREDENTIAL_SECRET"):
        missing = [n for n in ("OS_APPLICATION_CREDENTIAL_ID", "OS_APPLICATION_CREDENTIAL_SECRET") if not get(n)]
        if missing:
            raise ServeSystemError(f"missing OpenStack credentials: {', '.join(missing)}; {_CRED_HELP}")
        # Application credentials carry their project; giving them a scope makes Keystone refuse.
        return Credentials(
            "v3applicationcredential",
            {
                "application_credential_id": get("OS_APPLICATION_CREDENTIAL_ID"),
                "application_credential_secret": get("OS_APPLICATION_CREDENTIAL_SECRET"),
            },
        )
    project = get("OS_PROJECT_NAME") or get("OS_PROJECT_ID") or None
    scope = {"project_name": get("OS_PROJECT_NAME")} if get("OS_PROJECT_NAME") else {}
    if get("OS_PROJECT_ID"):
        scope = {"project_id": get("OS_PROJECT_ID")}
    if get("OS_TOKEN"):
        if not project:
            raise ServeSystemError(f"missing OpenStack credentials: OS_PROJECT_NAME or OS_PROJECT_ID; {_CRED_HELP}")
        return Credentials("v3token", {"token": get("OS_TOKEN"), **scope}, project)
    if get("OS_USERNAME") or get("OS_PASSWORD"):
        missing = [n for n in ("OS_USERNAME", "OS_PASSWORD") if not get(n)]
        if not project:
            missing.append("OS_PROJECT_NAME")
        if missing:
            raise ServeSystemError(f"missing OpenStack credentials: {', '.join(missing)}; {_CRED_HELP}")
        opts = {"username": get("OS_USERNAME"), "password": get("OS_PASSWORD"), **scope}
        if get("OS_USER_DOMAIN_NAME"):
            opts["user_domain_name"] = get("OS_USER_DOMAIN_NAME")
        return Credentials("v3password", opts, project)
    raise ServeSystemError(
        "missing OpenStack credentials: OS_APPLICATION_CREDENTIAL_ID and OS_APPLICATION_CREDENTIAL_SECRET, "
        f"or OS_USERNAME, OS_PASSWORD and OS_PROJECT_NAME; {_CRED_HELP}"
    )


# --- errors from the OpenStack clients -------------------------------------------------------


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


def _api_message(exc: BaseException) -> str:
    if exc.args and isinstance(exc.args[0], BaseException):
        return _api_message(exc.args[0])  # python-chi's retry_create wraps errors in ResourceError(exc)
    details = getattr(exc, "details", None)  # openstacksdk HttpException: the service's own words
    status = getattr(exc, "status_code", None)
    if isinstance(details, str) and details.strip():
        return _one_line(details) + (f" (HTTP {status})" if status else "")
    msg = _one_line(exc) or type(exc).__name__
    return re.sub(r"^ERROR:\s*", "", msg)


def _client_exceptions() -> tuple[type[BaseException], ...]:
    from blazarclient.exception import BlazarClientException
    from chi.exception import CHIValueError, ResourceError, ServiceError
    from glanceclient.exc import BaseException as GlanceError
    from glanceclient.exc import HTTPException as GlanceHTTPError
    from keystoneauth1.exceptions import ClientException as KsaError
    from neutronclient.common.exceptions import NeutronClientException
    from novaclient.exceptions import ClientException as NovaError
    from openstack.exceptions import SDKException

    return (
        BlazarClientException,
        CHIValueError,
        ResourceError,
        ServiceError,
        GlanceError,
        GlanceHTTPError,
        KsaError,
        NeutronClientException,
        NovaError,
        SDKException,
    )


@contextlib.contextmanager
def api_errors(what: str) -> Iterator[None]:
    """Turn any OpenStack/python-chi exception into one ServeSystemError line about ``what``."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # python-chi prints; keep our stdout clean
            yield
    except ServeSystemError:
        raise
    except _client_exceptions() as exc:
        from keystoneauth1.exceptions import ConnectFailure, Unauthorized

        if isinstance(exc, Unauthorized):
            raise ServeSystemError(
                f"{what}: Chameleon refused the credentials (HTTP 401); check them, or create a new "
                "application credential (unscoped)"
            ) from exc
        if isinstance(exc, ConnectFailure):
            raise ServeSystemError(f"{what}: cannot reach Chameleon ({_api_message(exc)})") from exc
        raise ServeSystemError(f"{what}: {_api_message(exc)}") from exc


# --- session -----------------------------------------------------------------------------------


@dataclass
class Site:
    """A python-chi context bound to one Chameleon site (python-chi's own state is global)."""

    name: str

    @classmethod
    def connect(cls, creds: Credentials, site: str) -> Site:
        import chi
        import chi.context

        with api_errors(f"selecting site {site}"):
            chi.reset()  # python-chi read OS_* at import time; start from a clean slate
            try:
                sites = chi.context.list_sites()
            except Exception as exc:  # requests errors: python-chi's use_site would only print
                raise ServeSystemError(
                    f"cannot fetch the list of Chameleon sites ({_one_line(exc)}); check your network "
                    "or CHI_RESOURCE_API_URL"
                ) from exc
            if site not in sites:
                known = ", ".join(s for s in sites if s.startswith("CHI@")) or ", ".join(sites)
                raise UsageError(f"unknown site {site!r}: use one of {known}")
            chi.set("auth_type", creds.auth_type)
            for key, value in creds.options.items():
                chi.set(key, value)
            if creds.auth_type == "v3applicationcredential":
                # never scope an application credential, whatever OS_PROJECT_* the shell has
                chi.set("project_name", None)
                chi.set("project_id", None)
            chi.use_site(site)
            if creds.project and "project_name" in creds.options:
                chi.context.use_project(creds.project)
        return cls(site)


# --- leases ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaseInfo:
    id: str
    name: str
    status: str
    start: datetime
    end: datetime
    reservation_id: str | None
    node_type: str | None

    def time_left(self, now: datetime | None = None) -> timedelta:
        return self.end - (now or _utcnow())

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "status": self.status,
            "start": self.start.strftime("%Y-%m-%d %H:%M UTC"),
            "end": self.end.strftime("%Y-%m-%d %H:%M UTC"),
            "reservation_id": self.reservation_id,
            "node_type": self.node_type,
            "minutes_left": max(0, int(self.time_left().total_seconds() // 60)),
        }


def _node_type_of(reservation: Mapping[str, Any]) -> str | None:
    raw = reservation.get("resource_properties") or ""
    try:
        props = json.loads(raw) if isinstance(raw, str) and raw else raw
    except ValueError:
        return None

    def walk(p: Any) -> str | None:
        if isinstance(p, list):
            if len(p) == 3 and p[0] == "==" and p[1] == "$node_type":
                return str(p[2])
            for q in p:
                found = walk(q)
                if found:
                    return found
        return None

    return walk(props)


def _lease_info(lease_json: dict[str, Any]) -> LeaseInfo:
    from chi.lease import Lease

    lease = Lease(lease_json=lease_json)  # python-chi's own parsing of Blazar's answer
    res = lease.node_reservations[0] if lease.node_reservations else None
    return LeaseInfo(
        id=str(lease.id),
        name=str(lease.name),
        # not lease.status: that property makes a GET to Blazar on every read
        status=str(lease_json.get("status")),
        start=lease.start_date,
        end=lease.end_date,
        reservation_id=res["id"] if res else None,
        node_type=_node_type_of(res) if res else None,
    )


def find_leases(name: str) -> list[LeaseInfo]:
    import chi

    with api_errors(f"listing leases named {name}"):
        return [_lease_info(lz) for lz in chi.blazar().lease.list() if lz.get("name") == name]


def get_lease(name: str, site: str) -> LeaseInfo:
    """The one lease called ``name`` (live ones win over terminated ones of the same name)."""
    found = find_leases(name)
    if not found:
        raise ServeSystemError(
            f"no lease named {name!r} at {site}: create one with chi_scripts/lease.py create --name {name}"
        )
    live = [lz for lz in found if lz.status in LIVE_LEASE]
    pick = live or found
    if len(pick) > 1:
        ids = ", ".join(f"{lz.id} ({lz.status})" for lz in pick)
        raise ServeSystemError(
            f"{len(pick)} leases are named {name!r} at {site}: {ids}; delete the extra ones "
            "(chi_scripts/lease.py delete --id ID) or use another --lease name"
        )
    return pick[0]


def refresh_lease(lease_id: str) -> LeaseInfo:
    import chi

    with api_errors(f"reading lease {lease_id}"):
        return _lease_info(chi.blazar().lease.get(lease_id))


@dataclass(frozen=True)
class LeaseRequest:
    name: str
    node_type: str = DEFAULT_NODE_TYPE
    count: int = 1
    start: datetime | None = None  # None: now (or the next full hour with align_hour)
    end: datetime | None = None
    duration: timedelta = DEFAULT_DURATION
    align_hour: bool = False
    exclude_nodes: tuple[str, ...] = ()

    def window(self, now: datetime | None = None) -> tuple[datetime | None, datetime]:
        """(start, end) in UTC; start None means "now"."""
        now = now or _utcnow()
        start = self.start
        if start is None and self.align_hour:
            start = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        if self.end is not None:
            end = self.end
        else:
            end = (start or now) + self.duration
        if end <= (start or now):
            raise UsageError("the lease would end before it starts: check --start/--end/--duration")
        if start is not None and start < now - timedelta(minutes=1):
            raise UsageError(f"--start {start:%Y-%m-%d %H:%M} is in the past (times are UTC)")
        return start, end

    def constraints(self) -> list[Any] | None:
        excl = [["!=", "$node_name", n] for n in self.exclude_nodes]
        if not excl:
            return None
        return excl[0] if len(excl) == 1 else ["and", *excl]

    def reservations(self) -> list[dict[str, Any]]:
        from chi.lease import add_node_reservation

        res: list[dict[str, Any]] = []
        add_node_reservation(res, count=self.count, node_type=self.node_type, resource_properties=self.constraints())
        return res


def create_lease(req: LeaseRequest, site: str, console: Console, dry_run: bool = False) -> LeaseInfo | None:
    """Create the lease (or report the live one of that name); Blazar refusals keep their reason."""
    import chi

    if req.count < 1:
        raise UsageError(f"--count must be at least 1, got {req.count}")
    start, end = req.window()
    existing = [lz for lz in find_leases(req.name) if lz.status in LIVE_LEASE + ("ERROR",)]
    if existing:
        lz = existing[0]
        if len(existing) > 1 or lz.status == "ERROR":
            ids = ", ".join(f"{x.id} ({x.status})" for x in existing)
            raise ServeSystemError(
                f"lease name {req.name!r} is already used at {site} by {ids}; delete it first "
                "(chi_scripts/lease.py delete) or pick another --name"
            )
        console.print(f"Lease {lz.name} already exists ({lz.status}, {lz.start:%H:%M}-{lz.end:%H:%M} UTC): reusing it")
        return lz
    reservations = req.reservations()
    start_s = start.strftime(BLAZAR_TIME) if start else "now"
    console.print(
        f"Lease {req.name}: {req.count} x {req.node_type} at {site}, {start_s} -> {end:%Y-%m-%d %H:%M} UTC"
        + (f", excluding {', '.join(req.exclude_nodes)}" if req.exclude_nodes else "")
    )
    if dry_run:
        console.print("[dry run] no lease created")
        return None
    from blazarclient.exception import BlazarClientException

    try:
        with api_errors(f"creating lease {req.name}"):
            created = chi.blazar().lease.create(
                name=req.name, start=start_s, end=end.strftime(BLAZAR_TIME), reservations=reservations, events=[]
            )
    except ServeSystemError as exc:
        cause = exc.__cause__
        if isinstance(cause, BlazarClientException):
            raise ServeSystemError(f"Blazar refused lease {req.name} at {site}: {_api_message(cause)}") from cause
        raise
    info = _lease_info(created)
    console.print(f"Created lease {info.name} ({info.id}), status {info.status}")
    return info


def delete_lease(name: str, site: str, console: Console, lease_id: str | None = None) -> list[str]:
    import chi

    targets = [lz for lz in find_leases(name) if lease_id in (None, lz.id)] if name else []
    if lease_id and not targets:
        targets = [refresh_lease(lease_id)]
    if len(targets) > 1 and lease_id is None:
        ids = ", ".join(f"{lz.id} ({lz.status})" for lz in targets)
        raise ServeSystemError(f"{len(targets)} leases are named {name!r} at {site}: {ids}; pass --id ID")
    removed = []
    for lz in targets:
        with api_errors(f"deleting lease {lz.name}"):
            chi.blazar().lease.delete(lz.id)
        removed.append(f"lease {lz.name} ({lz.id})")
        console.print(f"Deleted lease {lz.name} ({lz.id})")
    if not targets:
        console.print(f"No lease named {name} at {site}: nothing to delete")
    return removed


def wait_for_lease(
    lease: LeaseInfo,
    console: Console,
    *,
    timeout: float,
    poll: float,
    margin: timedelta,
    clock: Callable[[], float] = time.monotonic,
) -> LeaseInfo:
    """Wait while the lease is PENDING/STARTING; stop clearly on ERROR/TERMINATED or a lease too short."""
    deadline = clock() + timeout
    while lease.status in ("PENDING", "STARTING"):
        wait_min = max(0, int((lease.start - _utcnow()).total_seconds() // 60))
        console.print(
            f"Lease {lease.name} is {lease.status}; it starts at {lease.start:%Y-%m-%d %H:%M} UTC "
            f"(in {wait_min} min). Waiting..."
        )
        if clock() >= deadline:
            raise ServeSystemError(
                f"timed out after {int(timeout)} s waiting for lease {lease.name} (still {lease.status}, "
                f"starts {lease.start:%Y-%m-%d %H:%M} UTC); re-run later or raise --lease-timeout"
            )
        time.sleep(poll)
        lease = refresh_lease(lease.id)
    if lease.status != "ACTIVE":
        raise ServeSystemError(
            f"lease {lease.name} ({lease.id}) is {lease.status}, not ACTIVE; create a new one with "
            "chi_scripts/lease.py create"
        )
    left = lease.time_left()
    if left < margin:
        raise ServeSystemError(
            f"lease {lease.name} ends at {lease.end:%H:%M} UTC, in {int(left.total_seconds() // 60)} min, "
            f"less than the --margin of {int(margin.total_seconds() // 60)} min; extend it or make a new one"
        )
    return lease


# --- servers and floating IPs ----------------------------------------------------------------


@dataclass
class ServerInfo:
    id: str
    name: str
    status: str
    fault: str = ""
    floating_ip: str | None = None
    floating_ip_id: str | None = None


def list_servers(prefix: str) -> list[ServerInfo]:
    import chi

    with api_errors("listing servers"):
        found = []
        for s in chi.nova().servers.list():
            if _is_ours(s.name, prefix):
                fault = getattr(s, "fault", None) or {}
                found.append(ServerInfo(s.id, s.name, s.status, _one_line(fault.get("message", ""))))
    for s in found:
        fip = attached_floating_ip(s.id)
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
    return s.status, _one_line(fault.get("message", ""))


def ensure_floating_ip(server: ServerInfo, console: Console) -> None:
    """Reuse the floating IP attached to ``server``, else allocate a new one and attach it."""
    import chi
    from chi.network import PUBLIC_NETWORK, get_network_id
    from chi.server import associate_floating_ip

    fip = attached_floating_ip(server.id)
    if fip:
        server.floating_ip, server.floating_ip_id = fip["floating_ip_address"], fip["id"]
        return
    with api_errors(f"allocating a floating IP for {server.name} (quota or pool exhausted?)"):
        neutron = chi.neutron()
        new = neutron.create_floatingip({"floatingip": {"floating_network_id": get_network_id(PUBLIC_NETWORK)}})[
            "floatingip"
        ]
    try:
        with api_errors(f"attaching floating IP {new['floating_ip_address']} to {server.name}"):
            associate_floating_ip(server.id, floating_ip_address=new["floating_ip_address"])
    except ServeSystemError:
        with api_errors(f"releasing floating IP {new['floating_ip_address']}"):
            chi.neutron().delete_floatingip(new["id"])
        raise
    server.floating_ip, server.floating_ip_id = new["floating_ip_address"], new["id"]
    console.print(f"Attached new floating IP {server.floating_ip} to {server.name}")


def wait_for_tcp(host: str, port: int, timeout: float, poll: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=min(5.0, max(timeout, 0.1))):
                return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(poll, max(0.0, deadline - time.monotonic())) or 0.05)


# --- the shared last step of every provider ---------------------------------------------------


def finish_nodes(nodes: list[Node], inventory: Path, known_hosts: Path, console: Console) -> None:
    """Record host keys, write the inventory and print the summary (all providers use this)."""
    for node in nodes:
        lines = scan_host_keys(node.address, node.port)
        if not lines:
            console.print(
                f"[yellow]warning:[/] no SSH host key from {node.name} ({node.address}:{node.port}); "
                f"re-run launch once sshd answers, or Ansible will refuse the unknown host"
            )
        record_host_keys(known_hosts, node.address, node.port, lines)
    write_inventory(nodes, inventory, known_hosts)
    table = Table(title=f"Nodes ({inventory})")
    for col in ("name", "address", "port", "user", "GPUs", "provider"):
        table.add_column(col)
    for n in nodes:
        table.add_row(n.name, n.address, str(n.port), n.user, str(n.gpus), n.provider)
    console.print(table)
    console.print(f"Inventory: {inventory}   known hosts: {known_hosts}")


# --- launch --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LaunchOptions:
    lease_name: str
    prefix: str
    key_name: str
    key_path: str
    count: int = 1
    image: str = DEFAULT_IMAGE
    network: str = DEFAULT_NETWORK
    node_type: str | None = None  # None: from the lease's reservation
    replace_failed: bool = False
    dry_run: bool = False
    lease_timeout: float = 3600.0
    server_timeout: float = 1800.0
    ssh_timeout: float = 600.0
    ssh_port: int = 22
    poll: float = 15.0
    margin: timedelta = timedelta(minutes=30)


def _check_image_and_key(opts: LaunchOptions, site: str) -> None:
    from chi.image import get_image
    from chi.server import get_keypair

    with api_errors(f"looking up image {opts.image}"):
        try:
            get_image(opts.image)
        except Exception as exc:
            if type(exc).__name__ == "CHIValueError":
                raise ServeSystemError(f"unknown image {opts.image!r} at {site}: pass --image NAME") from exc
            raise
    with api_errors(f"looking up key pair {opts.key_name}"):
        kp = get_keypair(opts.key_name)
    if not kp.public_key:  # python-chi returns an empty Keypair instead of failing
        raise ServeSystemError(
            f"unknown key pair {opts.key_name!r} at {site}: upload your public key "
            "(Horizon > Key Pairs, or `openstack keypair create --public-key FILE NAME`) or pass --key-name"
        )


def launch(opts: LaunchOptions, site: str, console: Console) -> list[Node]:
    """Make ``opts.count`` SSH-reachable servers on the lease; idempotent. Returns their nodes."""
    import chi
    from chi.server import Server

    names = server_names(opts.prefix, opts.count)
    lease = get_lease(opts.lease_name, site)
    if opts.dry_run:
        if lease.status != "ACTIVE":
            console.print(f"[dry run] lease {lease.name} is {lease.status} (starts {lease.start:%H:%M} UTC): would wait")
    else:
        lease = wait_for_lease(
            lease, console, timeout=opts.lease_timeout, poll=opts.poll, margin=opts.margin
        )
    if not lease.reservation_id:
        raise ServeSystemError(f"lease {lease.name} ({lease.id}) has no node reservation; create a new one")
    node_type = opts.node_type or lease.node_type or DEFAULT_NODE_TYPE

    existing: dict[str, list[ServerInfo]] = {}
    for s in list_servers(opts.prefix):
        existing.setdefault(s.name, []).append(s)
    for name, same in existing.items():
        if len(same) > 1:
            raise ServeSystemError(
                f"{len(same)} servers are named {name}: {', '.join(s.id for s in same)}; "
                "remove the extra ones (chi_scripts/teardown.py or Horizon)"
            )
    extra = sorted(n for n in existing if n not in names)
    if extra:
        console.print(f"Note: servers beyond --count {opts.count} are left alone: {', '.join(extra)}")

    plan: list[tuple[str, str]] = []
    for name in names:
        cur = existing.get(name, [None])[0]
        if cur is None:
            plan.append((name, "create"))
        elif cur.status == "ERROR":
            plan.append((name, "replace" if opts.replace_failed else "failed"))
        else:
            plan.append((name, "reuse"))

    table = Table(title=f"Launch plan on lease {lease.name} ({lease.status}) at {site}")
    for col in ("server", "action", "status", "floating IP"):
        table.add_column(col)
    for name, action in plan:
        cur = existing.get(name, [None])[0]
        table.add_row(
            name,
            action,
            cur.status if cur else "-",
            (cur.floating_ip if cur and cur.floating_ip else ("would allocate" if action != "failed" else "-")),
        )
    console.print(table)
    failed = [existing[n][0] for n, a in plan if a == "failed"]
    if opts.dry_run:
        console.print("[dry run] nothing was changed")
        return []
    if failed:
        desc = "; ".join(f"{s.name} ({s.id}) {s.fault or 'no fault message'}" for s in failed)
        raise ServeSystemError(
            f"server in ERROR: {desc}; re-run with --replace-failed to delete and recreate it"
        )
    to_create = [n for n, a in plan if a in ("create", "replace")]
    if to_create:
        _check_image_and_key(opts, site)
    for name, action in plan:
        if action == "replace":
            old = existing[name][0]
            console.print(f"Deleting failed server {name} ({old.id})")
            _delete_server(old, console)
            _wait_gone(old.id, opts)

    servers: dict[str, ServerInfo] = {n: existing[n][0] for n, a in plan if a == "reuse"}
    for name in to_create:
        console.print(f"Creating server {name} ({opts.image}, key {opts.key_name}, reservation {lease.reservation_id})")
        with api_errors(f"creating server {name}"):
            Server(
                name,
                reservation_id=lease.reservation_id,
                image_name=opts.image,
                key_name=opts.key_name,
                network_name=opts.network,
            ).submit(wait_for_active=False, show=None, idempotent=False)
            # Server.submit returns nothing for a new server: look it up by name
            created = [s for s in chi.nova().servers.list() if s.name == name]
        if len(created) != 1:
            raise ServeSystemError(f"server {name} was requested but {len(created)} servers have that name")
        servers[name] = ServerInfo(created[0].id, name, created[0].status)

    _wait_active(list(servers.values()), opts, console)
    nodes = []
    for name in names:
        s = servers[name]
        ensure_floating_ip(s, console)
        assert s.floating_ip is not None
        console.print(f"Waiting for SSH on {s.name} ({s.floating_ip}:{opts.ssh_port})")
        if not wait_for_tcp(s.floating_ip, opts.ssh_port, opts.ssh_timeout, poll=min(5.0, opts.poll)):
            raise ServeSystemError(
                f"timed out after {int(opts.ssh_timeout)} s waiting for SSH on {s.name} "
                f"({s.floating_ip}:{opts.ssh_port}); bare-metal boots take ~10 min: re-run launch (it resumes)"
            )
        nodes.append(
            Node(
                name=s.name,
                address=s.floating_ip,
                user=NODE_USER,
                key_path=opts.key_path,
                port=opts.ssh_port,
                gpus=GPUS_BY_NODE_TYPE.get(node_type, 0),
                provider="chameleon",
                provider_ids={
                    "server_id": s.id,
                    "floating_ip_id": s.floating_ip_id or "",
                    "lease_id": lease.id,
                    "reservation_id": lease.reservation_id,
                    "site": site,
                },
                vars={"serve_node_type": node_type},
            )
        )
    return nodes


def _wait_active(servers: list[ServerInfo], opts: LaunchOptions, console: Console) -> None:
    deadline = time.monotonic() + opts.server_timeout
    pending = {s.id: s for s in servers}
    while True:
        for s in list(pending.values()):
            s.status, s.fault = _server_status(s.id)
            if s.status == "ACTIVE":
                del pending[s.id]
            elif s.status == "ERROR":
                raise ServeSystemError(
                    f"server {s.name} ({s.id}) went to ERROR: {s.fault or 'no fault message'}; "
                    "re-run with --replace-failed to recreate it"
                )
        if not pending:
            return
        names = ", ".join(f"{s.name}={s.status}" for s in pending.values())
        if time.monotonic() >= deadline:
            raise ServeSystemError(
                f"timed out after {int(opts.server_timeout)} s waiting for servers to be ACTIVE ({names}); "
                "re-run launch to keep waiting"
            )
        console.print(f"Waiting for servers to be ACTIVE (bare metal takes ~10 min): {names}")
        time.sleep(opts.poll)


def _wait_gone(server_id: str, opts: LaunchOptions) -> None:
    import chi
    from novaclient.exceptions import NotFound

    deadline = time.monotonic() + opts.server_timeout
    while time.monotonic() < deadline:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                chi.nova().servers.get(server_id)
        except NotFound:
            return
        time.sleep(opts.poll)
    raise ServeSystemError(f"timed out waiting for server {server_id} to be deleted")


def _delete_server(s: ServerInfo, console: Console) -> list[str]:
    import chi
    from neutronclient.common.exceptions import NotFound as NeutronNotFound
    from novaclient.exceptions import NotFound

    removed = []
    fip = attached_floating_ip(s.id)
    if fip:
        try:
            with api_errors(f"releasing floating IP {fip['floating_ip_address']}"):
                chi.neutron().delete_floatingip(fip["id"])
        except ServeSystemError as exc:
            if not isinstance(exc.__cause__, NeutronNotFound):
                raise
        removed.append(f"floating IP {fip['floating_ip_address']}")
        console.print(f"Released floating IP {fip['floating_ip_address']} of {s.name}")
    try:
        with api_errors(f"deleting server {s.name}"):
            chi.nova().servers.delete(s.id)
    except ServeSystemError as exc:
        if not isinstance(exc.__cause__, NotFound):
            raise
    removed.append(f"server {s.name} ({s.id})")
    console.print(f"Deleted server {s.name} ({s.id})")
    return removed


def teardown(prefix: str, site: str, console: Console, *, lease_name: str | None = None,
             dry_run: bool = False) -> list[str]:
    """Delete our servers (by prefix) and their floating IPs, and the lease if named; idempotent."""
    servers = list_servers(prefix)
    removed: list[str] = []
    for s in servers:
        if dry_run:
            console.print(f"[dry run] would delete server {s.name} ({s.id})"
                          + (f" and release {s.floating_ip}" if s.floating_ip else ""))
            continue
        removed += _delete_server(s, console)
    if not servers:
        console.print(f"No servers named {prefix} or {prefix}-N at {site}")
    if lease_name:
        if dry_run:
            for lz in find_leases(lease_name):
                console.print(f"[dry run] would delete lease {lz.name} ({lz.id}, {lz.status})")
        else:
            removed += delete_lease(lease_name, site, console)
    console.print(f"Removed {len(removed)} resource(s)" + (": " + ", ".join(removed) if removed else ""))
    return removed


# --- status --------------------------------------------------------------------------------------


def triton_ready_over_ssh(node: Node, known_hosts: Path, timeout: int = 10) -> str:
    """Triton readiness, asked on the node itself (Triton listens on the node's loopback only)."""
    if not Path(node.key_path).is_file() or not known_hosts.is_file():
        return "n/a"
    cmd = [
        "ssh", "-i", node.key_path, "-p", str(node.port), "-o", "BatchMode=yes",
        "-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=yes",
        "-o", f"ConnectTimeout={timeout}", f"{node.user}@{node.address}",
        "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/v2/health/ready",
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "n/a"
    if proc.returncode == 255:
        return "n/a"
    return "ready" if proc.stdout.strip() == "200" else "not ready"


def status(prefix: str, site: str, *, lease_name: str | None, ssh_port: int = 22, key_path: str = "",
           known_hosts: Path | None = None, check_triton: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"site": site, "lease": None, "servers": []}
    if lease_name:
        found = find_leases(lease_name)
        live = [lz for lz in found if lz.status in LIVE_LEASE] or found
        if len(live) > 1:
            out["lease"] = {"name": lease_name, "status": "DUPLICATE", "ids": [lz.id for lz in live]}
        elif live:
            out["lease"] = live[0].as_dict()
        else:
            out["lease"] = {"name": lease_name, "status": "NOT FOUND"}
    for s in list_servers(prefix):
        ssh = bool(s.floating_ip) and wait_for_tcp(s.floating_ip or "", ssh_port, timeout=2)
        triton = "n/a"
        if ssh and check_triton and known_hosts is not None and s.floating_ip:
            node = Node(s.name, s.floating_ip, NODE_USER, key_path or "", port=ssh_port)
            triton = triton_ready_over_ssh(node, known_hosts)
        out["servers"].append({
            "name": s.name, "id": s.id, "status": s.status, "floating_ip": s.floating_ip,
            "ssh": "up" if ssh else "down", "triton": triton,
        })
    return out


def print_status(st: dict[str, Any], console: Console) -> None:
    lz = st.get("lease")
    if lz:
        if "minutes_left" in lz:
            console.print(
                f"Lease {lz['name']} ({lz['id']}): {lz['status']}, {lz['start']} -> {lz['end']}, "
                f"{lz['minutes_left']} min left"
            )
        else:
            console.print(f"Lease {lz['name']}: {lz['status']}" + (f" {', '.join(lz['ids'])}" if lz.get("ids") else ""))
    table = Table(title=f"Servers at {st['site']}")
    for col in ("name", "status", "floating IP", "SSH", "Triton"):
        table.add_column(col)
    for s in st["servers"]:
        table.add_row(s["name"], s["status"], s["floating_ip"] or "-", s["ssh"], s["triton"])
    console.print(table)
