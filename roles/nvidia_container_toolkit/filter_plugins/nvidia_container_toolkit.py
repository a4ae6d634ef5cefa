"""Filters of role nvidia_container_toolkit (the logic is serve_system.gpuroute, the one place of it).

    {{ packages | nvidia_container_toolkit_preferences(version, repo_url) }}
        the apt preferences file pinning the toolkit's packages to ``version``
    {{ dpkg_query_lines | nvidia_container_toolkit_unmet(packages, version) }}
        the packages not installed (at ``version``; any version when it is empty)
    {{ packages | nvidia_container_toolkit_wanted(version) }}
        the packages to install: with a pin all of the toolkit's and ``packages``; without, ``packages``
    {{ packages | nvidia_container_toolkit_apt_names(version) }}
        ``name=version`` for the apt task (the names alone when no version is pinned)
    {{ apt_cache_policy_stdout | nvidia_container_toolkit_policy_problem(packages, version, repo_url, host) }}
        one line saying why NVIDIA's repository cannot give ``version``; empty when it can
    {{ ctk_stdout | nvidia_container_toolkit_route(cdi_stdout, docker_info_json, version, dpkg_query_lines) }}
        the GPU route's facts (``nvidia-ctk --version``, ``nvidia-ctk cdi list``, ``docker info``)
    {{ facts | nvidia_container_toolkit_route_line(host) }}
        those facts in one line
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from serve_system import gpuroute


def nvidia_container_toolkit_preferences(packages: Iterable[str], version: str, repo_url: str) -> str:
    return gpuroute.preferences(packages, version, repo_url)


def nvidia_container_toolkit_unmet(lines: Iterable[str], packages: Iterable[str], version: str) -> list[str]:
    return gpuroute.unmet(lines, packages, version)


def nvidia_container_toolkit_wanted(packages: Iterable[str], version: str) -> list[str]:
    return gpuroute.wanted(packages, version)


def nvidia_container_toolkit_apt_names(packages: Iterable[str], version: str) -> list[str]:
    return gpuroute.apt_names(packages, version)


def nvidia_container_toolkit_policy_problem(policy: str, packages: Iterable[str], version: str,
                                            repo_url: str, host: str) -> str:
    return gpuroute.policy_problem(policy, packages, version, repo_url, host)


def nvidia_container_toolkit_route(ctk_stdout: str, cdi_stdout: str, docker_info_json: str, version: str,
                                   dpkg_lines: Iterable[str]) -> dict[str, Any]:
    return gpuroute.route_facts(ctk_stdout, cdi_stdout, docker_info_json, version,
                                gpuroute.installed_versions(dpkg_lines))


def nvidia_container_toolkit_route_line(facts: Mapping[str, Any], host: str) -> str:
    return gpuroute.route_line(host, facts)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "nvidia_container_toolkit_preferences": nvidia_container_toolkit_preferences,
            "nvidia_container_toolkit_unmet": nvidia_container_toolkit_unmet,
            "nvidia_container_toolkit_wanted": nvidia_container_toolkit_wanted,
            "nvidia_container_toolkit_apt_names": nvidia_container_toolkit_apt_names,
            "nvidia_container_toolkit_policy_problem": nvidia_container_toolkit_policy_problem,
            "nvidia_container_toolkit_route": nvidia_container_toolkit_route,
            "nvidia_container_toolkit_route_line": nvidia_container_toolkit_route_line,
        }
