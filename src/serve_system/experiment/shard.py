"""One sweep spread over every node of a lease: which host measures which candidate.

A sharded run measures each candidate (every variant but the reference) on exactly one host and the
reference on every host, so the report can tell node differences (the same reference, measured on
each node) from configuration differences (candidates against their own node's reference).

:func:`assign` is a pure function of the candidates' names and estimated costs and the host names:

- hosts in name order;
- candidates from the most expensive (estimated seconds) down, each dealt to the host with the least
  estimated time so far (ties: the fewer candidates, then the first name): with equal costs this is
  round-robin; with unequal ones the hosts end close to each other (the longest-processing-time
  rule). Candidates of equal cost come in an order shuffled from ``seed`` (the experiment's name, a
  hash: no randomness), so a grid's inner factor does not line up with the nodes (dealing
  ``i1, i2, i1, i2`` in spec order over two nodes would put every ``i2`` on the second node);
- the reference on every host, first.

The same variants and hosts always give the same assignment, so a re-run of a run id resumes the
same shards; a plan over other hosts than the run folder's is refused (:func:`check_same_hosts`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..node.plans import HostShard, SearchShard, ShardRecord
from .spec.messages import SpecError

#: how the report names the rule; kept in the plan's and the manifest's shard record
RULE = ("candidates dealt to hosts by estimated time (longest first, each to the least loaded host; "
        "equal times: round-robin over hosts in name order, candidates in an order fixed by the experiment's "
        "name); the reference on every host")


@dataclass(frozen=True)
class Shard:
    """A sweep's assignment: the reference (on every host) and each host's candidates."""

    reference: str
    #: host -> its candidates (the reference not included), hosts in name order
    assignment: dict[str, list[str]]

    @property
    def hosts(self) -> list[str]:
        return list(self.assignment)

    def variants_of(self, host: str) -> list[str]:
        """What ``host`` measures: the reference, then its candidates."""
        return [self.reference, *self.assignment[host]]

    def host_of(self, candidate: str) -> str | None:
        return next((h for h, cs in self.assignment.items() if candidate in cs), None)

    def record(self) -> ShardRecord:
        """The shard as the manifest keeps it."""
        return ShardRecord(reference=self.reference, hosts=self.hosts,
                           assignment={h: list(cs) for h, cs in self.assignment.items()}, rule=RULE)

    def host_record(self, host: str) -> HostShard:
        """The shard as ``host``'s plan.json keeps it: the manifest's record and the host's candidates."""
        return HostShard(**vars(self.record()), candidates=list(self.assignment[host]))


def assign(variants: Sequence[str], hosts: Sequence[str], reference: str,
           costs: Mapping[str, float] | None = None, seed: str = "") -> Shard:
    """Deal ``variants`` (spec order) but ``reference`` over ``hosts``; ``costs``: estimated seconds per
    variant (missing: 1); ``seed`` orders candidates of equal cost. Raises ValueError on an empty host
    list or an unknown reference."""
    if not hosts:
        raise ValueError("no hosts to shard over")
    if reference not in variants:
        raise ValueError(f"reference {reference!r} is not one of the variants")
    order = sorted(set(hosts))
    cost = {v: float((costs or {}).get(v, 1.0)) for v in variants}
    candidates = [v for v in variants if v != reference]
    def tie(c: str) -> str:
        return hashlib.sha256(f"{seed}/{c}".encode()).hexdigest()

    ranked = sorted(range(len(candidates)),
                    key=lambda i: (-round(cost[candidates[i]], 6), tie(candidates[i])))
    assignment: dict[str, list[str]] = {h: [] for h in order}
    load = dict.fromkeys(order, 0.0)
    for i in ranked:
        c = candidates[i]
        host = min(order, key=lambda h: (round(load[h], 6), len(assignment[h]), order.index(h)))
        assignment[host].append(c)
        load[host] += cost[c]
    # each host's candidates in the spec's order (the run's order is the plan's own shuffle)
    pos = {v: i for i, v in enumerate(variants)}
    return Shard(reference, {h: sorted(cs, key=pos.__getitem__) for h, cs in assignment.items()})


def reference_of(setting: str, variants: Sequence[str]) -> str:
    """The reference a spec's ``shard.reference`` names: a variant, or ``first`` (the first variant)."""
    return variants[0] if setting == "first" else setting


def from_record(data: SearchShard | None) -> Shard | None:
    """A shard record (plan.json's, manifest.json's, a search's; checked field by field as it was read) as
    a :class:`Shard`; None when there is none."""
    if data is None:
        return None
    return Shard(data.reference, {h: list(cs) for h, cs in data.assignment.items()})


def check_same_hosts(earlier: SearchShard | None, shard: Shard, where: str) -> None:
    """Refuse a plan that would deal the run's candidates over other hosts than its earlier plan did
    (a candidate would then be measured twice, or its first host's results orphaned)."""
    old = from_record(earlier)
    if old is None or (old.hosts == shard.hosts and old.reference == shard.reference):
        return
    raise SpecError([(f"{where}: shard: this run was sharded over {', '.join(old.hosts)} (reference "
                     f"{old.reference!r}), this plan over {', '.join(shard.hosts)} (reference "
                     f"{shard.reference!r}): run it on the same hosts, or start a new run id "
                     "(-e run_id=...)")])
