"""An inventory launch has not written yet, said as the fix: "run launch first".

``ansible.cfg`` names ``inventory/hosts.yml`` (what launch writes) as the inventory; before the first
launch it does not exist, and Ansible's own words are "Completely failed to parse inventory source", after
which nothing can run. This plugin takes only a source named ``hosts.yml`` that does not exist, where an
unparsed source is an error (``any_unparsed_is_failed``, as ansible.cfg sets it; ansible-lint turns it
off for its syntax checks, and this plugin then takes nothing), and ends the command with one line that
says what to do. Every inventory that exists is left to Ansible's own plugins (yaml, ini, ...).
"""

from __future__ import annotations

import os
from typing import Any

from ansible import constants as C
from ansible.plugins.inventory import BaseInventoryPlugin
from ansible.utils.display import Display

DOCUMENTATION = r"""
name: serve_system_missing
short_description: Say "run launch first" for an inventory launch has not written yet
description:
  - Takes only an inventory source named hosts.yml that does not exist, where an unparsed source is an
    error (any_unparsed_is_failed); it ends the command with one line that says to run launch first, or
    to give -i PATH. Every other source is left to the other inventory plugins.
"""

#: ansible-playbook's exit status for an inventory it cannot use (its "Completely failed to parse")
EXIT = 1


class InventoryModule(BaseInventoryPlugin):  # type: ignore[misc]
    NAME = "serve_system_missing"

    def verify_file(self, path: str) -> bool:
        return (bool(C.INVENTORY_ANY_UNPARSED_IS_FAILED) and os.path.basename(path) == "hosts.yml"
                and not os.path.lexists(path))

    def parse(self, inventory: Any, loader: Any, path: str, cache: bool = True) -> None:
        # said once, as the command's only error: Ansible would list this plugin's failure as a
        # multi-line warning and then end with its own words anyway
        Display().error(f"{path}: no inventory yet: run launch first (python chi_scripts/launch.py, or "
                        "serve-system launch: it writes inventory/hosts.yml), or give one with -i PATH")
        raise SystemExit(EXIT)
