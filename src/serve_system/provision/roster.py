"""A class roster: one node per student, each student's key on their node only, access sheets.

The roster is a CSV file with the header ``student,ssh_public_key[,email]``. A student's node is
``<prefix>-<student>``; launch writes the student and their public key into the node's host
variables (``serve_student``, ``class_access_keys``), and the ``class_access`` role puts exactly
those keys on the node. A student dropped from the roster keeps their node in the inventory with
``class_access_keys: []`` until teardown, so the role removes their key.

Access sheets (:func:`write_sheets`) say how to reach the node: the SSH command and the tunnels to
Jupyter and the dashboards. They hold no secret and are written with mode 0600.
"""

from __future__ import annotations

import base64
import csv
import dataclasses
import io
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import safeio
from ..errors import UsageError
from .nodes import Node, atomic_write

STUDENT_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
KEY_TYPES = ("ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
             "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com")
COLUMNS = ("student", "ssh_public_key", "email")
#: tunnels on every sheet: (what, local port, port on the node's loopback, path to open)
TUNNELS = (("Jupyter", 8888, 8888, "/"), ("Triton metrics (Prometheus text)", 8002, 8002, "/metrics"))


@dataclass(frozen=True)
class Student:
    name: str
    key: str
    email: str = ""


def _check_key(path: Path, row: int, key: str) -> str:
    parts = key.split()
    where = f"{path}: row {row}, ssh_public_key"
    if len(parts) < 2 or parts[0] not in KEY_TYPES:
        raise UsageError(f"{where}: not an OpenSSH public key (want 'ssh-ed25519 AAAA... comment', "
                         "the content of the student's .pub file)")
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except ValueError:
        raise UsageError(f"{where}: the key's base64 part is damaged; "
                         "ask the student for their .pub file again") from None
    if not blob.startswith(len(parts[0]).to_bytes(4, "big") + parts[0].encode()):
        raise UsageError(f"{where}: the key's body does not match its type {parts[0]}; "
                         "ask for the .pub file again")
    return " ".join(parts[:2] + ([" ".join(parts[2:])] if len(parts) > 2 else []))


def read_roster(path: Path) -> list[Student]:
    """The students of ``path``; any problem is one line naming the file, row and field."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise UsageError(f"--roster {path}: file not found; "
                         "give a CSV with header student,ssh_public_key") from None
    except UnicodeDecodeError:
        raise UsageError(f"--roster {path}: not UTF-8 text; save the roster as a UTF-8 CSV") from None
    except OSError as exc:
        raise UsageError(f"--roster {path}: cannot read it ({exc.strerror})") from None
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:
        raise UsageError(f"{path}: not a valid CSV ({exc})") from None
    if not rows or [c.strip() for c in rows[0]][:2] != ["student", "ssh_public_key"]:
        raise UsageError(f"{path}: the first line must be the header student,ssh_public_key[,email]")
    header = [c.strip() for c in rows[0]]
    unknown = [c for c in header if c not in COLUMNS]
    if unknown:
        raise UsageError(f"{path}: unknown column {unknown[0]!r}; "
                         "the columns are student,ssh_public_key[,email]")
    students: list[Student] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in raw):
            continue
        if len(raw) != len(header):
            raise UsageError(f"{path}: row {i} has {len(raw)} fields, the header {len(header)}; quote values "
                             "that hold commas")
        rec = {h: c.strip() for h, c in zip(header, raw, strict=True)}
        name = rec["student"]
        if not STUDENT_RE.fullmatch(name):
            raise UsageError(f"{path}: row {i}, student {name!r}: use 1-32 lowercase letters, digits or '_', "
                             "starting with a letter (it becomes part of the node name)")
        if name in seen:
            raise UsageError(f"{path}: row {i}, student {name!r} is already on row {seen[name]}; "
                             "one row per student")
        seen[name] = i
        students.append(Student(name, _check_key(path, i, rec["ssh_public_key"]), rec.get("email", "")))
    if not students:
        raise UsageError(f"{path}: no students; add one row per student under the header")
    return students


def node_name(prefix: str, student: str) -> str:
    return f"{prefix}-{student}"


def roster_vars(prefix: str, students: Sequence[Student]) -> dict[str, dict[str, Any]]:
    """Host variables per node name for a roster launch."""
    return {node_name(prefix, s.name): {"serve_student": s.name, "class_access_keys": [s.key]}
            for s in students}


def dropped(previous: Sequence[Node], students: Sequence[Student]) -> list[Node]:
    """Nodes of the previous inventory whose student left the roster: kept, with no student key."""
    names = {s.name for s in students}
    out = []
    for n in previous:
        student = n.vars.get("serve_student") or n.vars.get("serve_student_dropped")
        if student and student not in names:
            hv = {k: v for k, v in n.vars.items() if k != "serve_student"}
            out.append(dataclasses.replace(
                n, vars={**hv, "serve_student_dropped": student, "class_access_keys": []}))
    return out


def sheet(node: Node) -> str:
    """The access sheet of a student's node (no secret in it)."""
    student = node.vars.get("serve_student", "?")
    target = f"{node.user}@{node.address}"
    port = "" if node.port == 22 else f" -p {node.port}"
    lines = [
        f"Your node for the serving lab: {node.name} (student {student})",
        "",
        "Log in (use the private key that matches the public key you sent):",
        f"  ssh -i ~/.ssh/YOUR_PRIVATE_KEY{port} {target}",
        "",
        "Tunnels (keep the command running, then open the address in your browser):",
    ]
    for what, local, remote, path in TUNNELS:
        lines += [f"  {what}: ssh -i ~/.ssh/YOUR_PRIVATE_KEY{port} -N -L {local}:127.0.0.1:{remote} {target}",
                  f"      then http://127.0.0.1:{local}{path}"]
    lines += ["", "Jupyter asks for a token: run `docker logs jupyter 2>&1 | grep token` on the node.", ""]
    return "\n".join(lines)


def write_sheets(nodes: Sequence[Node], out_dir: Path, repo_root: Path) -> list[Path]:
    """One ``<student>.txt`` per student node in ``out_dir`` (mode 0600; never under results/ or logs)."""
    resolved = out_dir.resolve()
    for forbidden in (repo_root / "results", repo_root / "logs"):
        if resolved == forbidden.resolve() or forbidden.resolve() in resolved.parents:
            raise UsageError(f"--out {out_dir}: access sheets never go under {forbidden.name}/ "
                             "(results and logs are shared); pick a private folder")
    if resolved.exists() and not resolved.is_dir():
        raise UsageError(f"--out {out_dir}: exists and is not a folder; pick a folder")
    students = [n for n in nodes if n.vars.get("serve_student")]
    if not students:
        raise UsageError("the inventory has no student nodes: launch with --roster first")
    for n in students:  # each becomes a file name in out_dir: a plain name, all checked before any is written
        try:
            safeio.plain_name(n.vars["serve_student"], f"the inventory: host {n.name}: serve_student",
                              "student")
        except safeio.UnsafeFile as exc:
            raise UsageError(str(exc)) from None
    resolved.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(resolved, 0o700)
    written = []
    for n in sorted(students, key=lambda n: n.name):
        path = resolved / f"{n.vars['serve_student']}.txt"
        atomic_write(path, sheet(n), mode=0o600)
        written.append(path)
    return written
