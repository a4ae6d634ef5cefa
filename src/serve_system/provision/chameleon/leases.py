"""Blazar leases through python-chi: find, create, extend, delete, wait.

Leases are found by name among *all* leases (duplicate names are an error listing the ids), and
Blazar refusals are shown with Blazar's own reason (python-chi logs it and raises "Unable to make
lease"). ``Lease.wait`` returns on ERROR without raising: we poll and check statuses ourselves.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ...errors import ServeSystemError, UsageError
from ..base import Progress
from .credentials import api_errors, api_message

DEFAULT_NODE_TYPE = "gpu_p100"
DEFAULT_DURATION = timedelta(hours=2, minutes=50)
BLAZAR_TIME = "%Y-%m-%d %H:%M"
LIVE_LEASE = ("PENDING", "STARTING", "ACTIVE", "UPDATING")
#: node names as Chameleon spells them (c11-13, P3-GPU-009, ...)
NODE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
#: GPUs per node type (Chameleon's hardware catalog)
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
#: how many nodes of a type a site has at most (Chameleon's hardware catalog, rounded up): a lease
#: asking for more can never be granted, so it is refused before Blazar is asked
MAX_NODES_BY_NODE_TYPE: dict[str, int] = {
    "gpu_p100": 16,
    "gpu_p100_nvlink": 4,
    "gpu_v100": 8,
    "gpu_v100_nvlink": 4,
    "gpu_rtx_6000": 16,
    "gpu_a100_pcie": 8,
    "gpu_a100_nvlink": 4,
    "gpu_mi100": 4,
    "gpu_k80": 4,
    "gpu_m40": 4,
}


def default_lease_name(user: str) -> str:
    return f"serve_system_{user}"


def _utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


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

    def end_iso(self) -> str:
        """The end as ISO 8601 UTC (``serve_lease_end`` in the inventory)."""
        return self.end.strftime("%Y-%m-%dT%H:%M:%SZ")

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "status": self.status,
            "start": self.start.strftime("%Y-%m-%d %H:%M UTC"),
            "end": self.end.strftime("%Y-%m-%d %H:%M UTC"),
            "end_iso": self.end_iso(),
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

    def check(self) -> None:
        """Refuse what Blazar could never grant, before any network call."""
        if self.count < 1:
            raise UsageError(f"--count must be at least 1, got {self.count}")
        most = MAX_NODES_BY_NODE_TYPE.get(self.node_type)
        if most is None:
            raise UsageError(
                f"--node-type {self.node_type!r} is not a GPU node type: use one of "
                + ", ".join(sorted(MAX_NODES_BY_NODE_TYPE))
            )
        if self.count > most:
            raise UsageError(
                f"--count {self.count}: a site has at most {most} {self.node_type} nodes; "
                f"ask for {most} or fewer, or split the class over several leases and sites: lease create "
                "--roster class.csv --sites CHI@TACC,CHI@UC (docs/class.md)"
            )
        for name in self.exclude_nodes:
            if not NODE_NAME_RE.fullmatch(name):
                raise UsageError(
                    f"--exclude-node {name!r} is not a node name (like c11-13); separate names with "
                    "commas or repeat the option"
                )
        self.window()

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
        add_node_reservation(res, count=self.count, node_type=self.node_type,
                             resource_properties=self.constraints())
        return res


def create_lease(req: LeaseRequest, site: str, progress: Progress, dry_run: bool = False) -> LeaseInfo | None:
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
        progress.note(f"Lease {lz.name} already exists ({lz.status}, {lz.start:%H:%M}-{lz.end:%H:%M} UTC): "
                      "reusing it")
        return lz
    reservations = req.reservations()
    start_s = start.strftime(BLAZAR_TIME) if start else "now"
    progress.note(
        f"Lease {req.name}: {req.count} x {req.node_type} at {site}, {start_s} -> {end:%Y-%m-%d %H:%M} UTC"
        + (f", excluding {', '.join(req.exclude_nodes)}" if req.exclude_nodes else "")
    )
    if dry_run:
        progress.note("[dry run] no lease created")
        return None
    from blazarclient.exception import BlazarClientException

    try:
        with api_errors(f"creating lease {req.name}"):
            created = chi.blazar().lease.create(
                name=req.name, start=start_s, end=end.strftime(BLAZAR_TIME), reservations=reservations,
                events=[],
            )
    except ServeSystemError as exc:
        cause = exc.__cause__
        if isinstance(cause, BlazarClientException):
            raise ServeSystemError(f"Blazar refused lease {req.name} at {site}: "
                                   f"{api_message(cause)}") from cause
        raise
    info = _lease_info(created)
    progress.note(f"Created lease {info.name} ({info.id}), status {info.status}")
    return info


def delete_lease(name: str, site: str, progress: Progress, lease_id: str | None = None) -> list[str]:
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
        progress.note(f"Deleted lease {lz.name} ({lz.id})")
    if not targets:
        progress.note(f"No lease named {name} at {site}: nothing to delete")
    return removed


def wait_for_lease(
    lease: LeaseInfo,
    progress: Progress,
    *,
    timeout: float,
    poll: float,
    margin: timedelta,
    clock: Callable[[], float] = time.monotonic,
) -> LeaseInfo:
    """Wait while the lease is PENDING/STARTING; stop clearly on ERROR/TERMINATED or a lease too short."""
    deadline = clock() + timeout
    began = clock()
    total = max(1, int((lease.start - _utcnow()).total_seconds()))
    while lease.status in ("PENDING", "STARTING"):
        progress.step(
            "lease", f"lease {lease.name} {lease.status}, starts {lease.start:%Y-%m-%d %H:%M} UTC",
            min(total, int(clock() - began)), total,
        )
        if clock() >= deadline:
            raise ServeSystemError(
                f"timed out after {int(timeout)} s waiting for lease {lease.name} (still {lease.status}, "
                f"starts {lease.start:%Y-%m-%d %H:%M} UTC); re-run later or raise --lease-timeout"
            )
        time.sleep(poll)
        lease = refresh_lease(lease.id)
    progress.step("lease", f"lease {lease.name} {lease.status}", total, total)
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




def extend_lease(name: str, site: str, by: timedelta, progress: Progress) -> LeaseInfo:
    """Move the live lease's end by ``by`` (Blazar's lease update); Blazar's refusal keeps its reason."""
    import chi
    from blazarclient.exception import BlazarClientException

    lease = get_lease(name, site)
    if lease.status not in LIVE_LEASE:
        raise ServeSystemError(f"lease {name} ({lease.id}) is {lease.status}: "
                               "only a live lease can be extended")
    minutes = int(by.total_seconds() // 60)
    try:
        with api_errors(f"extending lease {name}"):
            chi.blazar().lease.update(lease.id, prolong_for=f"{minutes}m")
    except ServeSystemError as exc:
        if isinstance(exc.__cause__, BlazarClientException):
            raise ServeSystemError(
                f"Blazar refused to extend lease {name} at {site}: {api_message(exc.__cause__)}"
            ) from exc.__cause__
        raise
    new = refresh_lease(lease.id)
    progress.note(f"Lease {new.name} ({new.id}) now ends at {new.end:%Y-%m-%d %H:%M} UTC "
                  f"(was {lease.end:%H:%M}), {int(new.time_left().total_seconds() // 60)} min left")
    return new
