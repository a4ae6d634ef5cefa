"""A class roster: one node per student, each student's key on their node only, access sheets.

The roster is a CSV file with the header ``student,ssh_public_key[,email][,site]`` (``site``: the
Chameleon site of the student's node, for a class over several sites: :mod:`.classplan`). A student's
node is ``<prefix>-<student>``; launch writes the student and their public key into the node's host
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
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import safeio
from ..errors import UsageError
from .nodes import Node

STUDENT_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
KEY_TYPES = ("ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
             "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com")
COLUMNS = ("student", "ssh_public_key", "email", "site")
#: the largest roster read (a class of hundreds is a few hundred KiB)
MAX_ROSTER_BYTES = 4 << 20
#: the most bad rows one error names (every one of them is counted)
MAX_BAD_ROWS = 25
#: tunnels on every sheet: (what, local port, port on the node's loopback, path to open)
TUNNELS = (("Jupyter", 8888, 8888, "/"), ("Triton metrics (Prometheus text)", 8002, 8002, "/metrics"))


@dataclass(frozen=True)
class Student:
    name: str
    key: str
    email: str = ""
    #: the site the roster's ``site`` column names ("": the split chooses, :mod:`.classplan`)
    site: str = ""


#: what follows the type in a public key's body (RFC 4253, 5656, 8709; OpenSSH's PROTOCOL.u2f): each
#: field a length-prefixed string ("s") or multiple-precision integer ("m"); the body ends with them
_KEY_FIELDS = {"ssh-ed25519": "s", "ssh-rsa": "mm", "ecdsa-sha2-nistp256": "ss", "ecdsa-sha2-nistp384": "ss",
               "ecdsa-sha2-nistp521": "ss", "sk-ssh-ed25519@openssh.com": "ss",
               "sk-ecdsa-sha2-nistp256@openssh.com": "sss"}
#: the smallest RSA modulus OpenSSH accepts, in bits
MIN_RSA_BITS = 1024


def _key_body_problem(kind: str, blob: bytes) -> str | None:
    """Why a public key's decoded body is not a whole key of ``kind`` (None: it is): every field
    present at its length (a truncated key is not), nothing after them, ed25519's 32 bytes."""
    fields: list[bytes] = []
    at = 0
    for _ in "s" + _KEY_FIELDS[kind]:
        if at + 4 > len(blob):
            return "the key is cut short (a field is missing)"
        size = int.from_bytes(blob[at:at + 4], "big")
        if at + 4 + size > len(blob):
            return "the key is cut short (a field is longer than what is left)"
        fields.append(blob[at + 4:at + 4 + size])
        at += 4 + size
    if at != len(blob):
        return f"{len(blob) - at} byte(s) follow the key"
    if fields[0] != kind.encode():
        return f"the key's body does not match its type {kind}"
    if kind in ("ssh-ed25519", "sk-ssh-ed25519@openssh.com") and len(fields[1]) != 32:
        return f"an ed25519 key is 32 bytes, this one {len(fields[1])}"
    if kind == "ssh-rsa" and int.from_bytes(fields[2], "big").bit_length() < MIN_RSA_BITS:
        return f"an RSA key of under {MIN_RSA_BITS} bits (OpenSSH refuses it)"
    return None


def _check_key(path: Path, row: int, key: str) -> str:
    """The row's public key, normalised to ``type body [comment]``; :class:`UsageError` naming the file,
    row and field when it is not one whole OpenSSH public key."""
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
    problem = _key_body_problem(parts[0], blob)
    if problem is not None:
        raise UsageError(f"{where}: {problem}: not a whole {parts[0]} key; ask the student for their .pub "
                         "file again")
    return " ".join(parts[:2] + ([" ".join(parts[2:])] if len(parts) > 2 else []))


def read_roster(path: Path) -> list[Student]:
    """The students of ``path``; any problem is one line naming the file, row and field."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):  # a pipe would hang the read, a device fill memory
            raise UsageError(f"--roster {path}: not a regular file; give the roster CSV itself")
        if info.st_size > MAX_ROSTER_BYTES:
            raise UsageError(f"--roster {path}: larger than {MAX_ROSTER_BYTES // 1024} KiB; a roster is one "
                             "short row per student")
        text = path.read_bytes()[:MAX_ROSTER_BYTES + 1].decode("utf-8-sig")
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
        raise UsageError(f"{path}: the first line must be the header student,ssh_public_key[,email][,site]")
    header = [c.strip() for c in rows[0]]
    unknown = [c for c in header if c not in COLUMNS]
    if unknown:
        raise UsageError(f"{path}: unknown column {unknown[0]!r}; "
                         "the columns are student,ssh_public_key[,email][,site]")
    students: list[Student] = []
    seen: dict[str, int] = {}
    keys: dict[str, int] = {}  # a key's body -> its student's index
    bad: list[str] = []  # every bad row, said at once: one fix round, not one per row
    for i, raw in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in raw):
            continue
        try:
            student = _row(path, i, header, raw, seen, keys, students)
        except UsageError as exc:
            bad.append(str(exc).removeprefix(f"{path}: "))
            continue
        keys[student.key.split()[1]] = len(students)
        students.append(student)
    if len(bad) == 1:
        raise UsageError(f"{path}: {bad[0]}")
    if bad:
        more = f" | and {len(bad) - MAX_BAD_ROWS} more bad row(s)" if len(bad) > MAX_BAD_ROWS else ""
        raise UsageError(f"{path}: {len(bad)} bad rows, each to fix: " + " | ".join(bad[:MAX_BAD_ROWS])
                         + more)
    if not students:
        raise UsageError(f"{path}: no students; add one row per student under the header")
    return students


def _row(path: Path, i: int, header: list[str], raw: list[str], seen: dict[str, int], keys: dict[str, int],
         students: list[Student]) -> Student:
    """Row ``i`` of the roster as a student; :class:`UsageError` naming the row and field. ``seen`` (a
    student's row) gets this row's student; ``keys`` and ``students``: the good rows before it."""
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
    key = _check_key(path, i, rec["ssh_public_key"])
    body = key.split()[1]
    if body in keys:
        other = students[keys[body]]
        raise UsageError(f"{path}: row {i}, ssh_public_key: the same key as student {other.name!r} "
                         f"(row {seen[other.name]}): each student sends their own key (their node is "
                         "theirs alone)")
    site = rec.get("site", "")
    if site:
        from .chameleon.credentials import SITES

        if site not in SITES:
            raise UsageError(f"{path}: row {i}, site {site!r}: not a Chameleon GPU site; use one of "
                             f"{', '.join(SITES)} or leave it empty")
    return Student(name, key, rec.get("email", ""), site)


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


def write_sheets(nodes: Sequence[Node], out_dir: Path, repo_root: Path, *, force: bool = False,
                 source: str | Path = "the inventory") -> list[Path]:
    """One ``<student>.txt`` per student node in ``out_dir`` (mode 0600; never under results/ or logs), a
    folder the tool owns (:class:`~serve_system.ownedtree.OwnedFolder`: a user's non-empty folder is
    refused unless ``force``, and then only the tool's own sheets are replaced). ``source``: the
    inventory file, named by every error about its nodes."""
    from ..ownedtree import OwnedFolder

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
            safeio.plain_name(n.vars["serve_student"], f"{source}: host {n.name}: serve_student",
                              "student")
        except safeio.UnsafeFile as exc:
            raise UsageError(str(exc)) from None
    try:
        folder = OwnedFolder(out_dir, force=force, option="--out")
    except safeio.UnsafeFile as exc:
        raise UsageError(str(exc)) from None
    os.chmod(folder.dir, 0o700)
    written = []
    for n in sorted(students, key=lambda n: n.name):
        name = f"{n.vars['serve_student']}.txt"
        with folder.open(name, mode=0o600) as fh:
            fh.write(sheet(n))
        written.append(folder.path(name))
    return written
