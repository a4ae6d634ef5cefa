"""Filter of role docker: which apt source files define Docker's repository already.

    {{ slurp_results | docker_same_repository(url, arch, own_file) }}

``slurp_results``: the ``results`` of ``ansible.builtin.slurp`` looped over the candidate files
(``source`` and base64 ``content`` each). Returns ``{"whole": [paths], "mixed": [{"path", "lines"}]}``
(see ``serve_system.aptsources.same_repository``, the one place of that logic).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from serve_system.aptsources import same_repository, slurped


def docker_same_repository(results: Iterable[Mapping[str, Any]], uri: str, arch: str,
                           own: str) -> dict[str, list[Any]]:
    return same_repository(slurped(results), uri, arch, own)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"docker_same_repository": docker_same_repository}
