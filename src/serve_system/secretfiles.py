"""Files that must never leave the controller: private keys, credentials, inventories.

A spec names files the tool reads and ships to a node (``perf.input_data`` goes into the node bundle,
``base_config`` into the plan); ``plan --fastapi-image`` names one too. :func:`secret_reason` is the
one rule every such path passes, checked on the path as resolved (links followed), before the file is
read for anything else:

* a folder that keeps keys: any ``.ssh`` or ``.gnupg`` folder, the rehearsal's key folder
  (``.rehearsal``), and the repository's ``inventory/`` folder (nodes' keys ``*.key``, ``known_hosts``,
  ``hosts.yml``);
* a name that keys and credentials go by (``id_rsa``, ``id_ed25519.pub`` and the other ``id_*`` keys,
  ``*.key``, ``*.pem``, ``*.ppk``, ``*.p12``, ``*.pfx``, ``known_hosts``, ``authorized_keys``, OpenStack's
  ``*openrc*`` and ``clouds.yaml``);
* content that is one: a PEM or OpenSSH private key, a PuTTY key, an openrc's or clouds.yaml's
  OpenStack secrets, an Ansible inventory's connection variables (the first 64 KiB are read);
* anything that is not a regular file (a pipe would hang the bundle, a device would fill it).
"""

from __future__ import annotations

import re
import stat
from pathlib import Path

#: folders whose whole content is private
PRIVATE_FOLDERS = frozenset({".ssh", ".gnupg", ".rehearsal"})
#: the repository's folder of node keys, host keys and the inventory (``<repo>/inventory``)
INVENTORY_FOLDER = "inventory"
_SECRET_NAME = re.compile(
    r"(id_(rsa|dsa|ecdsa|ed25519)(_sk)?\b.*|.*\.(key|pem|ppk|p12|pfx)|known_hosts.*|authorized_keys.*"
    r"|.*openrc.*|clouds\.ya?ml|secure\.ya?ml)", re.IGNORECASE)
_SECRET_CONTENT = re.compile(
    rb"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----|PuTTY-User-Key-File|\bOS_PASSWORD\b|"
    rb"\bOS_APPLICATION_CREDENTIAL_SECRET\b|\bansible_ssh_private_key_file\b|\bansible_host\b|"
    rb"\bansible_password\b|\bapplication_credential_secret\b")
#: how much of a file is read to recognise a secret
SNIFF_BYTES = 64 * 1024


def secret_reason(path: Path, repo: Path | None = None) -> str | None:
    """Why ``path`` may not be read for a spec or shipped to a node (None: it may). ``repo``: the
    repository root, whose ``inventory/`` folder is private."""
    resolved = path.resolve()
    for part in resolved.parts[:-1]:
        if part in PRIVATE_FOLDERS:
            return f"it is inside a private folder ({part}: keys and credentials)"
    if repo is not None:
        private = repo.resolve() / INVENTORY_FOLDER
        if resolved == private or resolved.is_relative_to(private):
            return (f"it is inside the repository's {INVENTORY_FOLDER}/ folder (nodes' keys, host keys and "
                    "the inventory)")
    if resolved.name in PRIVATE_FOLDERS:
        return f"it is a private folder ({resolved.name}: keys and credentials)"
    if _SECRET_NAME.fullmatch(resolved.name):
        return f"its name {resolved.name!r} is a key's or a credential file's"
    try:
        mode = resolved.stat().st_mode
    except OSError:
        return None  # missing: its reader says so
    if stat.S_ISDIR(mode):
        return None  # its reader says a folder is not a file
    if not stat.S_ISREG(mode):
        return "it is not a regular file (a pipe, device or socket)"
    try:
        with resolved.open("rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError:
        return None  # unreadable: its reader says so
    found = _SECRET_CONTENT.search(head)
    if found:
        return f"it holds {found.group(0).decode('ascii', 'replace').strip('-')} (a key or credentials)"
    return None
