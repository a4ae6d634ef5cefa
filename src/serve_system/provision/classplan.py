"""A class larger than one lease: the roster split over sites and leases, the same way every time.

``--sites CHI@TACC,CHI@UC`` with a roster: each student goes to the site of their row's ``site``
column, else (in roster order) to the listed site with the fewest students so far (ties: the order of
``--sites``). At each site the students, in roster order, fill leases of at most the node type's
maximum (:data:`~.chameleon.leases.MAX_NODES_BY_NODE_TYPE`) one after the other; the leases are
named ``<lease>-<site>-<n>`` (``serve_system_ann-tacc-1``). A student appended to the roster changes
only the last lease of one site, so a class can grow between launches.

``lease create`` and ``launch`` compute the same split from the same roster and options; launch
records each node's site and lease in its host variables (``serve_site``, ``serve_lease``), and
``status``, ``rebuild`` and ``teardown`` read them back from the inventory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import UsageError
from .roster import Student, node_name


@dataclass(frozen=True)
class Placement:
    """One lease of the class: its site, its name, its students (in roster order)."""

    site: str
    lease: str
    students: tuple[Student, ...]

    def names(self, prefix: str) -> list[str]:
        return [node_name(prefix, s.name) for s in self.students]


def site_slug(site: str) -> str:
    """``CHI@TACC`` -> ``tacc`` (the part of a lease name that says its site)."""
    return site.split("@")[-1].lower()


def lease_name(base: str, site: str, n: int) -> str:
    return f"{base}-{site_slug(site)}-{n}"


def parse_sites(text: str) -> tuple[str, ...]:
    """``CHI@TACC,CHI@UC`` as a tuple of known GPU sites, each once."""
    from .chameleon.credentials import SITES

    out: list[str] = []
    for part in text.split(","):
        site = part.strip()
        if site not in SITES:
            raise UsageError(f"--sites {text!r}: {site!r} is not a Chameleon GPU site; "
                             f"use a comma-separated list of {', '.join(SITES)}")
        if site in out:
            raise UsageError(f"--sites {text!r}: {site} is listed twice; list each site once")
        out.append(site)
    return tuple(out)


def plan_class(students: Sequence[Student], sites: Sequence[str], base: str, node_type: str,
               source: str = "the roster") -> list[Placement]:
    """The class's leases, site by site in the order of ``sites``; :class:`UsageError` when a row names
    a site not in ``sites`` or the node type has no known maximum."""
    from .chameleon.leases import MAX_NODES_BY_NODE_TYPE

    if not sites:
        raise UsageError("--sites: name at least one site, e.g. CHI@TACC,CHI@UC")
    most = MAX_NODES_BY_NODE_TYPE.get(node_type)
    if most is None:
        raise UsageError(f"--node-type {node_type!r}: no known per-site maximum to split the class by; "
                         f"use one of {', '.join(MAX_NODES_BY_NODE_TYPE)}")
    per_site: dict[str, list[Student]] = {s: [] for s in sites}
    for st in students:
        if st.site:
            if st.site not in per_site:
                raise UsageError(f"{source}: student {st.name!r} has site {st.site}, not one of --sites "
                                 f"{','.join(sites)}; add it to --sites or change the row")
            per_site[st.site].append(st)
    for st in students:
        if not st.site:
            fewest = min(sites, key=lambda s: (len(per_site[s]), sites.index(s)))
            per_site[fewest].append(st)
    order = {st.name: i for i, st in enumerate(students)}
    out: list[Placement] = []
    for site in sites:
        mine = sorted(per_site[site], key=lambda st: order[st.name])
        for n, at in enumerate(range(0, len(mine), most), start=1):
            out.append(Placement(site, lease_name(base, site, n), tuple(mine[at:at + most])))
    return out


def plan_lines(placements: Sequence[Placement], prefix: str, node_type: str) -> list[str]:
    """The split as lines a dry run prints: one per lease, its site, count and nodes."""
    total = sum(len(p.students) for p in placements)
    lines = [f"Class of {total} over {len(placements)} lease(s) of {node_type}:"]
    for p in placements:
        names = p.names(prefix)
        lines.append(f"  {p.site} lease {p.lease}: {len(names)} node(s): {', '.join(names)}")
    return lines
