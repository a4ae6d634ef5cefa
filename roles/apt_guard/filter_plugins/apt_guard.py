"""Filters of role apt_guard (the logic is serve_system.aptsources, the one place of it).

    {{ owned_slurp_results | apt_guard_hosts(repositories, arch) }}
    {{ slurp_results | apt_guard_conflicts(repositories, owned_paths, arch) }}

``*slurp_results``: the ``results`` of ``ansible.builtin.slurp`` looped over files (``source`` and base64
``content`` each).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from serve_system.aptsources import guard, hosts, owned_uris, slurped


def apt_guard_hosts(owned: Iterable[Mapping[str, Any]], repositories: Iterable[str], arch: str) -> list[str]:
    """The host names a source file must name to define a guarded repository."""
    return hosts([*repositories, *owned_uris(slurped(owned), arch)])


def apt_guard_conflicts(results: Iterable[Mapping[str, Any]], repositories: Iterable[str],
                        owned: Iterable[str], arch: str) -> dict[str, list[Any]]:
    return guard(slurped(results), repositories, owned, arch)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"apt_guard_hosts": apt_guard_hosts, "apt_guard_conflicts": apt_guard_conflicts}
