"""One read path and one write path for every file a user or a node hands the tool.

Reading (:func:`read_bytes`, :func:`read_text`, :func:`read_json`, :func:`read_yaml`):

- regular files only: a named pipe, a device, a socket or a folder is refused *without opening it*
  (``stat`` first; then the file is opened with ``O_NOFOLLOW | O_NONBLOCK`` and its descriptor checked
  again, so a file swapped for a pipe in between is refused too, never waited on);
- a link is resolved and must stay inside the folder it was given in (``within``);
- at most ``cap`` bytes are read (``cap + 1`` to tell a larger file), per kind of file (:data:`CAPS`);
- text is decoded with one line naming the file, its encoding, line and offset;
- JSON and YAML numbers are finite and bounded (no NaN or Infinity, integers of at most
  :data:`MAX_INT_DIGITS` digits, nothing beyond :data:`MAX_MAGNITUDE`; a typed reader checks each
  field's range with :func:`check_number`, naming the field), YAML tags are plain data only (no
  ``!!binary``, ``!!python/*`` or
  custom tags), and a YAML alias may not contain itself.

Writing (:func:`write_bytes`, :func:`write_text`, :func:`open_write`, :func:`make_dirs`): every file goes
to a temporary name in its target folder and is renamed over the target (a link there is replaced,
never written through); the target's resolved folder must stay inside the folder it was given in.
Folders the tool fills and keeps in step (a list of its own files, a user's files never touched) are
:mod:`serve_system.ownedtree`'s, built on these.

Every error is :class:`UnsafeFile` (a :class:`ServeSystemError`): one line naming the file, and the
field where there is one. Standard library only (YAML imported where read): it travels to the node
beside the runner.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from .errors import ServeSystemError


class UnsafeFile(ServeSystemError, ValueError):
    """A file the tool will not read or write as it is; the message is one line naming the file."""


class MissingFile(UnsafeFile):
    """The file does not exist (callers for which absent is fine catch this one)."""


MiB = 2**20
#: the most bytes read of each kind of file (a larger one is refused, never read whole)
CAPS: dict[str, int] = {
    "record": 16 * MiB,      # level.json, variant.json, host.json, manifest.json
    "plan": 64 * MiB,        # plan.json (every level's argv)
    "stats": 64 * MiB,       # Triton's statistics JSON
    "metrics": 256 * MiB,    # sampled :8002/metrics, JSON lines
    "output": 64 * MiB,      # perf_analyzer's stdout and CSV, a client's output
    "config": 4 * MiB,       # config.pbtxt, a load body
    "spec": 4 * MiB,         # a spec, an inventory, a roster, an openrc
    "text": 64 * MiB,
    "archive": 1024 * MiB,   # a host's records archive, compressed (its contents have budgets of their own)
    "bundle": 16 * 1024 * MiB,  # a file the node bundle carries (input data, a FastAPI image)
}
#: the longest integer (digits) JSON or YAML may hold; Python's own limit is 4300 and such numbers
#: only come from a broken or hostile file
MAX_INT_DIGITS = 30
#: the largest magnitude of any number JSON or YAML may hold (as large as :data:`MAX_INT_DIGITS` allows):
#: nothing the tool measures comes near it, and arithmetic on such numbers stays finite
MAX_MAGNITUDE = 1e30
#: a name from data that becomes a path: one plain component
PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+@-]{0,199}")


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _resolve(path: Path, where: str) -> Path:
    try:
        return path.resolve(strict=True)
    except FileNotFoundError:
        raise MissingFile(f"{where}: cannot read: no such file") from None
    except (OSError, RuntimeError) as exc:  # a loop of links, a component that is not a folder
        raise UnsafeFile(f"{where}: cannot resolve: {getattr(exc, 'strerror', None) or exc}") from None


def check_within(path: str | Path, within: str | Path | None, what: str = "file") -> Path:
    """``path`` resolved (links followed); :class:`UnsafeFile` when it leaves ``within`` (resolved)."""
    p = Path(path)
    real = _resolve(p, str(p))
    if within is not None:
        root = Path(within).resolve()
        if not _inside(real, root):
            raise UnsafeFile(f"{p}: a link out of {within} (to {real}): a {what} must stay inside it; "
                             "replace the link by the file itself")
    return real


def _open_checked(p: Path, kind: str, within: str | Path | None, limit: int) -> tuple[int, int]:
    """A descriptor of the regular file ``p`` (checked before and after opening) and its size."""
    real = check_within(p, within, kind)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        raise MissingFile(f"{p}: cannot read: no such file") from None
    except OSError as exc:
        raise UnsafeFile(f"{p}: cannot read: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFile(f"{p}: is {_kind_of(st.st_mode)}, not a regular file: give a file")
    if st.st_size > limit:
        raise UnsafeFile(f"{p}: {st.st_size} bytes, more than the {_size(limit)} a {kind} file may be")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        raise UnsafeFile(f"{p}: cannot read: {exc.strerror}") from None
    try:
        again = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise UnsafeFile(f"{p}: cannot read: {exc.strerror}") from None
    if not stat.S_ISREG(again.st_mode) or (again.st_dev, again.st_ino) != (st.st_dev, st.st_ino):
        os.close(fd)
        raise UnsafeFile(f"{p}: changed while it was opened (now {_kind_of(again.st_mode)}): give a file")
    return fd, again.st_size


@contextlib.contextmanager
def open_read(path: str | Path, *, kind: str = "text", within: str | Path | None = None,
              cap: int | None = None) -> Iterator[IO[bytes]]:
    """A binary file object of a regular file (checked as :func:`read_bytes` does), for streaming;
    the reader counts what it takes out of it."""
    p = Path(path)
    fd, _ = _open_checked(p, kind, within, CAPS[kind] if cap is None else cap)
    with os.fdopen(fd, "rb") as fh:
        yield fh


def read_bytes(path: str | Path, *, kind: str = "text", within: str | Path | None = None,
               cap: int | None = None) -> bytes:
    """A regular file's bytes (see the module's rules); ``kind`` picks the cap of :data:`CAPS`."""
    p = Path(path)
    limit = CAPS[kind] if cap is None else cap
    fd, _ = _open_checked(p, kind, within, limit)
    chunks: list[bytes] = []
    got = 0
    try:
        while got <= limit:
            chunk = os.read(fd, min(MiB, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as exc:
        raise UnsafeFile(f"{p}: cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if got > limit:
        raise UnsafeFile(f"{p}: more than the {_size(limit)} a {kind} file may be")
    return b"".join(chunks)


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB else f"{n} bytes"


def decode(raw: bytes, where: str | Path, encoding: str = "utf-8") -> str:
    """Text from bytes (a UTF-8 BOM dropped); one line naming the file, encoding, line and offset."""
    try:
        return raw.decode(encoding).removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise UnsafeFile(f"{where}:{line}: not {encoding.upper()} text (byte 0x{raw[exc.start]:02x} at "
                         "offset "
                         f"{exc.start}): save it as {encoding.upper()}") from None


def read_text(path: str | Path, *, kind: str = "text", within: str | Path | None = None,
              encoding: str = "utf-8", cap: int | None = None) -> str:
    """A regular file's text (:func:`read_bytes`, then :func:`decode`)."""
    return decode(read_bytes(path, kind=kind, within=within, cap=cap), path, encoding)


# ------------------------------------------------------------------------------------------ JSON

def _bounded_int(text: str) -> int:
    digits = text.lstrip("-")
    if len(digits) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(digits)} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not abs(value) <= MAX_MAGNITUDE:
        raise ValueError(f"the number {text[:40]} is out of range (at most {MAX_MAGNITUDE:g} in magnitude)")
    return value


def check_number(value: Any, where: str | Path, field: str, *, low: float = -MAX_MAGNITUDE,
                 high: float = MAX_MAGNITUDE, whole: bool = False, fix: str = "") -> int | float:
    """``value`` as read from a file: a number (not a bool; ``whole``: an integer) from ``low`` to ``high``;
    :class:`UnsafeFile` naming the file and the field otherwise (``fix`` ends the line)."""
    end = f"; {fix}" if fix else ""
    if isinstance(value, bool) or not isinstance(value, int | float) or (whole and isinstance(value, float)):
        kind = "a whole number" if whole else "a number"
        raise UnsafeFile(f"{where}: {field}: must be {kind}, found {str(value)[:40]!r}{end}")
    if not low <= value <= high:  # exact for any int, however long
        shown = (f"{value:.3g}" if isinstance(value, float) or value.bit_length() < 1000
                 else f"an integer of {value.bit_length()} bits")
        raise UnsafeFile(f"{where}: {field}: {shown} is out of range ({low:g} to {high:g}){end}")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def loads_json(text: str, where: str | Path) -> Any:
    """JSON with finite, bounded numbers; one line naming ``where`` (and line and column) otherwise."""
    try:
        return json.loads(text, parse_int=_bounded_int, parse_float=_finite_float,
                          parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise UnsafeFile(f"{where}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    except RecursionError:
        raise UnsafeFile(f"{where}: not usable JSON: nested too deeply") from None
    except ValueError as exc:
        field = _number_field(text)
        raise UnsafeFile(f"{where}: {field + ': ' if field else 'not usable JSON: '}{exc}") from None


def _key(at: str, key: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9_-]{1,60}", key):
        return f"{at}.{key}" if at else key
    return f"{at}[{key[:60]!r}]"


class _BadNumber:
    """Where a number out of range stood (:func:`_number_field`'s second reading)."""


def _number_field(text: str) -> str:
    """The field (``rows[0].load``) of the first number out of range in ``text``, read again with such
    numbers marked; "" when it cannot be told."""
    def mark(check: Callable[[str], Any]) -> Callable[[str], Any]:
        def parse(s: str) -> Any:
            try:
                return check(s)
            except ValueError:
                return _BadNumber()
        return parse

    try:
        doc = json.loads(text, parse_int=mark(_bounded_int), parse_float=mark(_finite_float),
                         parse_constant=lambda _s: _BadNumber())
    except (ValueError, RecursionError):
        return ""
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        node, at = stack.pop()
        if isinstance(node, _BadNumber):
            return at or "-"
        if isinstance(node, dict):
            stack += [(v, _key(at, k)) for k, v in reversed(node.items())]
        elif isinstance(node, list):
            stack += [(v, f"{at}[{i}]") for i, v in reversed(list(enumerate(node)))]
    return ""


def read_json(path: str | Path, *, kind: str = "record", within: str | Path | None = None,
              cap: int | None = None, fix: str = "") -> Any:
    """A JSON file's data (:func:`read_text`, then :func:`loads_json`); ``fix`` ends every error line."""
    with _fixed(fix):
        return loads_json(read_text(path, kind=kind, within=within, cap=cap), path)


@contextlib.contextmanager
def _fixed(fix: str) -> Iterator[None]:
    """Errors of the block with ``; fix`` at the end of their line."""
    try:
        yield
    except UnsafeFile as exc:
        if not fix:
            raise
        raise type(exc)(f"{exc}; {fix}") from None


# ------------------------------------------------------------------------------------------ YAML

#: the YAML tags that are plain data
PLAIN_TAGS = frozenset(f"tag:yaml.org,2002:{t}"
                       for t in ("str", "int", "float", "bool", "null", "seq", "map"))


def loads_yaml(text: str, where: str | Path) -> Any:
    """YAML of plain data: every tag one of :data:`PLAIN_TAGS`, numbers finite and bounded, no alias
    that contains itself; one line naming ``where`` (and line) otherwise."""
    import yaml

    loader = None
    try:
        loader = yaml.SafeLoader(text)  # it already refuses control characters
        node = loader.get_single_node()
        if node is None:
            return None
        _check_yaml(node, where, set(), set())
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f":{mark.line + 1}" if mark is not None else ""
        raise UnsafeFile(f"{where}{at}: not valid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UnsafeFile(f"{where}: not valid YAML: {first}") from None
    except RecursionError:
        raise UnsafeFile(f"{where}: YAML nested too deeply") from None
    except (ValueError, TypeError, OverflowError) as exc:  # an explicit !!int or !!float of something else
        raise UnsafeFile(f"{where}: not valid YAML: {exc}") from None
    finally:
        if loader is not None:
            loader.dispose()


def _check_yaml(node: Any, where: str | Path, seen: set[int], stack: set[int]) -> None:
    import yaml

    line = node.start_mark.line + 1
    if node.tag not in PLAIN_TAGS:
        tag = node.tag.replace("tag:yaml.org,2002:", "!!")
        raise UnsafeFile(f"{where}:{line}: the tag {tag} is not plain "
                         "data (strings, numbers, booleans, lists, mappings): remove it")
    if id(node) in stack:
        raise UnsafeFile(f"{where}:{line}: an alias that contains itself: remove it")
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.ScalarNode):
        if node.tag.endswith(":int"):
            digits = node.value.lstrip("+-").replace("_", "")
            if len(digits) > MAX_INT_DIGITS:
                raise UnsafeFile(f"{where}:{line}: an integer of {len(digits)} digits (at most "
                                 f"{MAX_INT_DIGITS})")
        elif node.tag.endswith(":float"):
            low = node.value.lower().lstrip("+-")
            if low in (".inf", ".nan") or low.replace("_", "") in ("inf", "nan") or not _finite(node.value):
                raise UnsafeFile(f"{where}:{line}: {node.value} is not a finite number")
        return
    stack.add(id(node))
    children = node.value if isinstance(node, yaml.SequenceNode) else [x for kv in node.value for x in kv]
    for child in children:
        _check_yaml(child, where, seen, stack)
    stack.discard(id(node))


def _finite(text: str) -> bool:
    try:
        return abs(float(text.replace("_", ""))) <= MAX_MAGNITUDE
    except ValueError:
        return True  # YAML's own forms (sexagesimal, ...): the loader says what it makes of them


def read_yaml(path: str | Path, *, kind: str = "spec", within: str | Path | None = None,
              cap: int | None = None, fix: str = "") -> Any:
    """A YAML file's plain data (:func:`read_text`, then :func:`loads_yaml`); ``fix`` ends every error."""
    with _fixed(fix):
        return loads_yaml(read_text(path, kind=kind, within=within, cap=cap), path)


# ------------------------------------------------------------------------------------------ names

def plain_name(value: Any, where: str, what: str = "name") -> str:
    """``value`` as one plain path component (letters, digits, ``._+@-``, not starting with a dot);
    :class:`UnsafeFile` naming ``where`` otherwise (``..``, ``/``, control characters, empty)."""
    if not isinstance(value, str) or not PLAIN_NAME.fullmatch(value):
        raise UnsafeFile(f"{where}: {what} {value!r} cannot be a file name: use letters, digits and "
                         ". _ + @ - "
                         "(not starting with a dot, no / or ..)")
    return value


# ------------------------------------------------------------------------------------------ writing

def _target(path: str | Path, within: str | Path | None) -> Path:
    """The path to write, checked: its folder exists (made inside ``within``) and stays inside it, and
    the target itself is not a folder."""
    p = Path(path)
    root = Path(within) if within is not None else p.parent
    make_dirs(p.parent, root)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return p
    except OSError as exc:
        raise UnsafeFile(f"{p}: cannot write: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UnsafeFile(f"{p}: is a folder: move it away to write this file")
    if not stat.S_ISREG(st.st_mode) and not stat.S_ISLNK(st.st_mode):  # never renamed over a device
        raise UnsafeFile(f"{p}: is {_kind_of(st.st_mode)}: the tool writes only regular files; give "
                         "another file name")
    return p


def make_dirs(folder: str | Path, within: str | Path) -> Path:
    """``folder`` and the folders above it up to ``within``, made where missing; :class:`UnsafeFile`
    when one of them is a link out of ``within`` or not a folder."""
    f, root = Path(folder), Path(within)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UnsafeFile(f"{root}: is not a folder: give a folder") from None
    except OSError as exc:
        raise UnsafeFile(f"{root}: cannot make the folder: {exc.strerror}") from None
    real_root = root.resolve()
    try:
        rel = f.relative_to(root)
    except ValueError:
        rel = None
    if rel is None or ".." in rel.parts:
        raise UnsafeFile(f"{f}: outside {root}, the folder it belongs in")
    cur = root
    for part in rel.parts:
        cur = cur / part
        try:
            os.mkdir(cur)
        except FileExistsError:
            pass
        except OSError as exc:
            raise UnsafeFile(f"{cur}: cannot make the folder: {exc.strerror}") from None
        real = cur.resolve()
        if not _inside(real, real_root):
            raise UnsafeFile(f"{cur}: a link out of {root} (to {real}): the tool writes only inside it; "
                             "remove the link")
        if not real.is_dir():
            raise UnsafeFile(f"{cur}: is not a folder: move it away")
    return f


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


#: the process's umask when it started: files are written with the mode a plain open() would give them
UMASK = _umask()


@contextlib.contextmanager
def open_write(path: str | Path, *, within: str | Path | None = None, binary: bool = False,
               newline: str | None = None, mode: int | None = None) -> Iterator[IO[Any]]:
    """A file object writing to a temporary name beside ``path``, renamed over it when the block ends
    (removed if it fails): a reader never sees half a file, a link at ``path`` is replaced, not followed.
    ``mode``: the file's permissions (default: what ``open`` gives under the umask)."""
    p = _target(path, within)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~UMASK if mode is None else mode)
        with (os.fdopen(fd, "wb") if binary else
              os.fdopen(fd, "w", encoding="utf-8", newline=newline)) as fh:
            yield fh
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_bytes(path: str | Path, data: bytes, *, within: str | Path | None = None) -> Path:
    """Write ``data`` to ``path`` (:func:`open_write`)."""
    with open_write(path, within=within, binary=True) as fh:
        fh.write(data)
    return Path(path)


def write_text(path: str | Path, text: str, *, within: str | Path | None = None) -> Path:
    """Write UTF-8 ``text`` to ``path`` (:func:`open_write`)."""
    return write_bytes(path, text.encode("utf-8"), within=within)


def write_json(path: str | Path, data: Any, *, within: str | Path | None = None,
               default: Callable[[Any], Any] | None = None) -> Path:
    """Write ``data`` as indented JSON (:func:`write_text`)."""
    return write_text(path, json.dumps(data, indent=1, default=default) + "\n", within=within)
