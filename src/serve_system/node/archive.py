"""A host's records in one archive: packed on the node, checked and unpacked on the controller.

The node-side runner ends every call with :func:`pack` (``<host>/results.tar.gz``: the host's complete
records, see :mod:`.records` for their layout); the ``experiment`` role fetches it to
``<host>/.fetch/results.tar.gz`` (:data:`FETCHED`) in one transfer; :func:`collect_run` (``serve-system
collect``, ``report``, ``decide``) puts every fetched archive into the run's results under the run's
lock (:func:`run_lock`), each through :func:`unpack`, which treats the archive as hostile: only the
plan's members, plain files and folders, no links, sizes counted while decompressing (a bomb stops at
the budget), nothing lands unless all of it is good.

Standard library only, beside :mod:`.records` and :mod:`serve_system.safeio`: it is shipped to the
node in the runner's bundle (the package as it imports here: :mod:`.bundle`).
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import os
import shutil
import stat as st
import tarfile
import tempfile
import zlib
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

from .. import safeio
from . import plans
from . import records as rec

#: what one host's records travel as, from the node to the controller (one transfer)
ARCHIVE = "results.tar.gz"
#: where the role fetches a host's archive to, under the host's results folder
FETCHED = ".fetch/" + ARCHIVE
#: what to do about a host's plan.json that does not read
PLAN_FIX = "plan the run again (serve-system plan SPEC --run-dir RUN --host ...) before collecting"

#: the most bytes one member of a host's archive may hold, and all of them together, counted while
#: decompressing (a small archive that expands to gigabytes stops at the budget); the most members
MEMBER_BUDGET = 512 * safeio.MiB
TOTAL_BUDGET = 4096 * safeio.MiB
MAX_MEMBERS = 100_000


# ------------------------------------------------------------------------------------- the node

def pack(host_dir: str | Path, variants: list[str], dest: str | Path) -> None:
    """Write ``dest``: the host's complete records (each variant's files and complete levels, host.json).

    Levels without a complete record (interrupted) stay out: they are measured again. Written to a
    temporary name and renamed, so a reader never sees half an archive.
    """
    h, out = Path(host_dir), Path(dest)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    with tarfile.open(tmp, "w:gz", compresslevel=1) as tar:
        for v in variants:
            for p in sorted((h / v).iterdir()) if (h / v).is_dir() else []:
                if p.is_dir() and not rec.level_done(p):
                    continue
                tar.add(p, arcname=f"{v}/{p.name}")
        if (h / "host.json").is_file():
            tar.add(h / "host.json", arcname="host.json")
    os.replace(tmp, out)


# ------------------------------------------------------------------------------- the controller

class _Counted:
    """A gzip stream read through, counting the bytes it decompresses to (refused past ``budget``)."""

    def __init__(self, raw: Any, budget: int, where: str) -> None:
        self.gz = gzip.GzipFile(fileobj=raw, mode="rb")
        self.budget, self.where, self.total = budget, where, 0

    def read(self, n: int = -1) -> bytes:
        data = self.gz.read(n if n is not None and n >= 0 else 1024 * 1024)
        self.total += len(data)
        if self.total > self.budget:
            raise rec.RecordError(f"{self.where}: expands to more than {self.budget // safeio.MiB} MiB, the "
                                  "most a host's records may be: not an archive of the runner's pack")
        return data

    def drain(self) -> None:
        """Read to the end of the stream (past the tar's end: its CRC and length are checked)."""
        while self.read(1024 * 1024):
            pass


def planned_levels(plan: plans.HostPlan) -> dict[str, set[str]]:
    """variant name -> the ids of its planned levels (what a host's archive may hold)."""
    return {v.name: {lv.id for lv in v.levels} for v in plan.variants}


def unpack(archive: str | Path, host_dir: str | Path,
           variants: list[str] | dict[str, set[str]] | plans.HostPlan,
           *, member_budget: int | None = None, total_budget: int | None = None) -> int:
    """Put a host's archive (see :func:`pack`) into its results folder; the number of files.

    ``variants``: the host's plan (or its :func:`planned_levels`, or only its variant names). The archive
    is read as a stream before anything lands: every member must be planned (``host.json``, a planned
    variant's files, a planned level's files; no ``..``, no links, nothing deeper), a plain file or
    folder, within :data:`MEMBER_BUDGET` and all of them within :data:`TOTAL_BUDGET`, counted while
    decompressing; the whole gzip stream is read to its end (a CRC error is found). It is extracted into
    a temporary folder beside the host folder, then moved into place, each level's record last (an
    interrupted move never leaves a level that looks done but lacks its files: the resume rule), never
    through a link already in the host folder. A bad archive is one line (:class:`records.RecordError`) and
    nothing lands.
    """
    host = Path(host_dir)
    planned = _planned(variants)
    per_member = MEMBER_BUDGET if member_budget is None else member_budget
    budget = TOTAL_BUDGET if total_budget is None else total_budget
    if os.path.islink(host):
        raise rec.RecordError(f"{host}: is a link: a host's results go into a folder of the run, not through "
                              "a link")
    host.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{host.name}.unpack-", dir=host.parent))
    try:
        files = _extract(archive, tmp, planned, per_member, budget)
        _land(tmp, host, files)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return len(files)


def _planned(variants: list[str] | dict[str, set[str]] | plans.HostPlan) -> dict[str, set[str] | None]:
    """variant name -> its planned level ids (None: any level, only the variant's name is known)."""
    planned: dict[str, set[str] | None] = {}
    if isinstance(variants, plans.HostPlan):
        planned.update(planned_levels(variants))
    elif isinstance(variants, dict):
        planned.update(variants)
    else:
        planned.update(dict.fromkeys(variants))
    return planned


def _extract(archive: str | Path, tmp: Path, planned: dict[str, set[str] | None], per_member: int,
             budget: int) -> list[str]:
    """Read the whole archive as a stream into ``tmp``, every member checked first; the files' names.
    Any problem is one line (:class:`records.RecordError`)."""
    where = str(archive)
    files: list[str] = []
    try:
        with safeio.open_read(archive, kind="archive") as raw:
            stream = _Counted(raw, budget, where)
            with tarfile.open(fileobj=stream, mode="r|") as tar:  # type: ignore[call-overload]
                for n, m in enumerate(tar, 1):
                    if n > MAX_MEMBERS:
                        raise rec.RecordError(f"{where}: more than {MAX_MEMBERS} members: not the "
                                              "runner's pack")
                    _check_member(m, planned, where, per_member)
                    dest = tmp / m.name
                    if m.isdir():
                        dest.mkdir(parents=True, exist_ok=True)
                        continue
                    _extract_file(tar, m, dest, where)
                    files.append(m.name)
            stream.drain()
    except safeio.UnsafeFile as exc:
        raise rec.RecordError(str(exc)) from None
    except (gzip.BadGzipFile, tarfile.TarError, EOFError, zlib.error) as exc:
        raise rec.RecordError(f"{where}: not a readable archive of records: {exc}") from None
    except OSError as exc:
        raise rec.RecordError(f"{where}: cannot unpack into {tmp}: {exc.strerror or exc}") from None
    return files


def _extract_file(tar: tarfile.TarFile, m: tarfile.TarInfo, dest: Path, where: str) -> None:
    """Write one checked file member to ``dest`` (a new file), all of its bytes, with the node's time."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    src = tar.extractfile(m)
    got = 0
    with open(dest, "xb") as out:
        while src is not None and (chunk := src.read(1024 * 1024)):
            got += len(chunk)
            out.write(chunk)
    if got != m.size:
        raise rec.RecordError(f"{where}: {m.name}: ends early ({got} of {m.size} bytes): the "
                              "archive is cut short; fetch it again")
    os.utime(dest, (m.mtime, m.mtime))  # the node's time, as the runner wrote it


def _land(tmp: Path, host: Path, files: list[str]) -> None:
    """Move the extracted ``files`` from ``tmp`` into ``host``, each level's record last."""
    # every destination first: no link and nothing but folders on the way, so nothing lands half-way
    order = sorted(files, key=lambda name: (name.endswith("/level.json"), name))
    for name in order:
        _check_dest(host, name)
    for name in order:
        dest = host / name
        if _same_file(tmp / name, dest):  # landed before (a re-run's archive): left as it is
            continue
        for parent in reversed(dest.relative_to(host).parents):
            (host / parent).mkdir(exist_ok=True)
        os.replace(tmp / name, dest)


def _same_file(new: Path, old: Path) -> bool:
    """``old`` is a regular file (not a link) with ``new``'s content."""
    try:
        info = os.lstat(old)
        if not st.S_ISREG(info.st_mode) or info.st_size != new.stat().st_size:
            return False
        return new.read_bytes() == old.read_bytes()
    except OSError:
        return False


def _check_member(m: Any, planned: dict[str, set[str] | None], where: str, budget: int) -> None:
    parts = m.name.split("/")
    levels = planned.get(parts[0])
    ok = (m.isfile() or m.isdir()) and all(safeio.PLAIN_NAME.fullmatch(x) for x in parts) and (
        (parts == ["host.json"] and m.isfile())
        or (parts[0] in planned and (
            len(parts) == 1 and m.isdir()
            or len(parts) == 2 and (m.isfile() or levels is None or parts[1] in levels)
            or len(parts) == 3 and m.isfile() and (levels is None or parts[1] in levels))))
    if not ok:
        what = "a link" if m.issym() or m.islnk() else "not a file" if not (m.isfile() or m.isdir()) else \
            "not planned"
        raise rec.RecordError(f"{where}: {m.name}: not a record of this host's plan ({what}; variants: "
                              f"{', '.join(planned) or 'none'}): make the archive with the runner's pack")
    if m.isfile() and m.size > budget:
        raise rec.RecordError(f"{where}: {m.name}: {m.size} bytes, more than the {budget // safeio.MiB} MiB "
                              "one record file may be: not the runner's pack")


def _check_dest(host: Path, name: str) -> None:
    """``host/name`` can be written: no link, no file where a folder goes, no folder where the file goes."""
    cur = host
    parts = name.split("/")
    for i, part in enumerate([""] + parts):
        cur = cur / part if part else cur
        try:
            mode = os.lstat(cur).st_mode
        except FileNotFoundError:
            return
        last = i == len(parts)
        if st.S_ISLNK(mode):
            raise rec.RecordError(f"{cur}: is a link: the tool never writes through a link in a host's "
                                  "results; remove it and collect again")
        if last and st.S_ISDIR(mode) or not last and not st.S_ISDIR(mode):
            raise rec.RecordError(f"{cur}: is {'a folder' if st.S_ISDIR(mode) else 'not a folder'} where the "
                                  "archive has a file: move it away and collect again")


def collect_run(run_dir: str | Path, hosts: Collection[str] | None = None) -> list[tuple[str, int]]:
    """Put every host's fetched archive (``<host>/.fetch/results.tar.gz``) into the run's results
    (:func:`unpack`, checked against the host's plan), then remove it; (host, files) per archive.
    ``hosts``: only those hosts' archives (one host's decision reads only its own records).

    The first bad archive is refused (:class:`records.RecordError`) and stays where it is, for a look.

    Under a lock on the run folder itself (``flock`` on the directory; no file is written): the role
    asks ``decide`` of every host at once, and a sharded search's calls each collect every host's
    archive (the search is decided on all of them), so two calls would otherwise unpack one archive
    together and the second find it gone."""
    run = Path(run_dir)
    if not run.is_dir():
        return []
    out = []
    with run_lock(run):
        for archive in sorted(run.glob(f"*/{FETCHED}")):
            host_dir = archive.parent.parent
            if hosts is not None and host_dir.name not in hosts:
                continue
            plan = rec.read(host_dir / rec.PLAN_FILE, plans.HostPlan, fix=PLAN_FIX)
            out.append((host_dir.name, unpack(archive, host_dir, plan)))
            archive.unlink()
    return out


@contextlib.contextmanager
def run_lock(run_dir: str | Path) -> Iterator[None]:
    """Hold the run folder's lock (``flock`` on the folder itself: no file is written), for the
    controller's calls that change or read the run's records at once. Not re-entrant: one process
    takes it once at a time."""
    fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # the lock goes with it
