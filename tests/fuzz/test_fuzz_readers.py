"""The fuzzer: every reader of a file a user or a node hands the tool, every write path and collect's
archive path, fed hostile inputs by hypothesis.

The property is the same everywhere: each example either succeeds or raises the one user-facing error
(:class:`ServeSystemError`) whose message is one line naming the file; never another exception (a
traceback), never a hang (each example runs under an alarm), never a write outside its folder.

Generators cover the classes of issue 26: links in and out of the folder, named pipes, links to
/dev/zero, folders where files go, huge integers, NaN and Infinity, strings where numbers belong,
digits ``str.isdigit`` accepts and ``int`` refuses, YAML tags that are not plain data and recursive
aliases, gzip bombs, corrupt and truncated gzip streams, unplanned and odd archive members, links
already in a host folder. Every crash found is kept below as an ``@example`` (a regression case).
The budget is conftest.py's profile; bench/fuzz.py runs it for longer.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import signal
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from serve_system import ownedtree, safeio
from serve_system.errors import ServeSystemError
from serve_system.experiment import perf
from serve_system.node import archive, plans, records
from serve_system.results import stats, tree

# ------------------------------------------------------------------------------------------ harness


@contextlib.contextmanager
def no_hang(seconds: float = 10.0) -> Iterator[None]:
    """Fail the example (TimeoutError, not a user-facing error) if it runs longer than ``seconds``."""
    def alarm(*_: Any) -> None:
        raise TimeoutError(f"hung for {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` (links and pipes as themselves, never followed or opened)."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_fifo():
                out[rel] = "fifo"
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def outcome(call: Callable[[], Any], names: Path | str) -> Any:
    """``call()``, or its user-facing error checked: one line naming a file under ``names``."""
    try:
        with no_hang():
            return call()
    except ServeSystemError as exc:
        msg = str(exc)
        assert "\n" not in msg, msg
        assert str(names) in msg, f"the error names no file under {names}: {msg}"
        return exc


#: what a file of a run folder can be, beside a regular file
KINDS = ("file", "file", "file", "fifo", "devzero", "link_out", "link_in", "dir", "dangling", "loop")


def make(folder: Path, name: str, kind: str, content: bytes) -> Path:
    """``folder/name`` as ``kind`` (see :data:`KINDS`), holding ``content`` where it holds any."""
    p = folder / name
    p.parent.mkdir(parents=True, exist_ok=True)
    if kind == "file":
        p.write_bytes(content)
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "devzero":
        p.symlink_to("/dev/zero")
    elif kind == "link_out":
        outside = folder.parent / f"outside-{name.replace('/', '_')}"
        outside.write_bytes(content)
        p.symlink_to(outside)
    elif kind == "link_in":
        real = p.with_name(f"real-{p.name}")
        real.write_bytes(content)
        p.symlink_to(real.name)
    elif kind == "dir":
        p.mkdir()
    elif kind == "dangling":
        p.symlink_to(folder / "nowhere")
    elif kind == "loop":
        p.symlink_to(p.name)
    return p


# ------------------------------------------------------------------------------------------ generators

#: digits ``str.isdigit`` accepts that ``int`` refuses or reads as another number, and number-like text
ODD_DIGITS = ("\u00b2", "\u0661\u0662", "\uff18", "\u2460", "1_000", "0x10", "1e5", " 7", "-0", "")
#: JSON number tokens no reader can hold
ODD_TOKENS = ("NaN", "Infinity", "-Infinity", "1e999", "-1e999", "9" * 400, "-" + "9" * 5000, "1.5e-400")

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**40), 10**40),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12), st.sampled_from(ODD_DIGITS))
values = st.recursive(scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c,
                                                                                   max_size=4), max_leaves=12)


def to_json(value: Any, token: str | None) -> bytes:
    """``value`` as JSON (NaN and Infinity as Python writes them), one number replaced by ``token``."""
    text = json.dumps(value, allow_nan=True)
    if token is not None:
        for i, ch in enumerate(text):
            if ch.isdigit() and (i == 0 or not text[i - 1].isalnum()):
                j = i
                while j < len(text) and (text[j].isdigit() or text[j] in ".eE+-"):
                    j += 1
                text = text[:i] + token + text[j:]
                break
    return text.encode()


json_bytes = st.one_of(
    st.builds(to_json, values, st.none() | st.sampled_from(ODD_TOKENS)),
    st.binary(max_size=64),
    st.sampled_from([b"\xff\xfe{", b"[" * 5000, b'{"a": 1', "\ufeff{}".encode(), "{}".encode("utf-16")]))

LEVEL: dict[str, Any] = {"variant": "v", "level": "c1_r1", "mode": "concurrency", "load": 1, "repetition": 1,
                         "status": "ok", "start": 1.0, "end": 2.0, "batch_size": 1,
                         "attempts": [{"argv": ["perf_analyzer"], "rc": 0, "start": 1.0, "end": 2.0}]}


@st.composite
def mutated(draw: st.DrawFn, good: dict[str, Any]) -> bytes:
    """``good`` with some fields replaced by hostile values (or dropped), as JSON text."""
    doc = json.loads(json.dumps(good))
    for key in draw(st.lists(st.sampled_from(sorted(good)), max_size=3)):
        if draw(st.booleans()):
            doc[key] = draw(values)
        else:
            doc.pop(key, None)
    return to_json(doc, draw(st.none() | st.sampled_from(ODD_TOKENS)))


counter = st.one_of(st.integers(-5, 10**35), st.sampled_from(ODD_DIGITS), st.text(max_size=4), st.none(),
                    st.floats(allow_nan=True))
stats_doc = st.fixed_dictionaries({"model_stats": st.lists(st.fixed_dictionaries(
    {"name": st.sampled_from(["m", "", 5]), "version": st.sampled_from(["1", 1, None]),
     "inference_count": counter, "execution_count": counter},
    optional={"inference_stats": st.dictionaries(st.sampled_from(["success", "queue", "compute_infer", "x"]),
                                                 st.fixed_dictionaries({"count": counter, "ns": counter})
                                                 | values, max_size=3),
              "batch_stats": st.lists(st.fixed_dictionaries({"batch_size": counter},
                                                            optional={"compute_infer": st.fixed_dictionaries(
                                                                {"count": counter}) | values}), max_size=3)}),
    max_size=3)}) | values

number_text = st.one_of(st.integers(0, 10**6).map(str), st.sampled_from(ODD_DIGITS + ODD_TOKENS + (
    "1.2.3", ".", "nan", "inf", "1e999", "\u0661", "12")),
    st.floats(allow_nan=True, allow_infinity=True).map(repr))
perf_line = st.one_of(
    st.builds("Concurrency: {}, throughput: {} infer/sec, latency {} usec".format, number_text, number_text,
              number_text),
    st.builds("Request Rate: {}, throughput: {} infer/sec, latency {} usec".format, number_text, number_text,
              number_text),
    st.builds("Request concurrency: {}".format, number_text),
    st.builds("  Batch size: {}".format, number_text),
    st.builds("  Pass [{}] throughput: {} infer/sec. p{} latency: {} usec (std {} usec)".format, number_text,
              number_text, number_text, number_text, number_text),
    st.builds("    Throughput: {} infer/sec".format, number_text),
    st.builds("    Avg latency: {} usec".format, number_text),
    st.builds("    p{} latency: {} usec".format, number_text, number_text),
    st.builds(("    Avg request latency: {} usec (overhead {} usec + queue {} usec + "
               "compute infer {} usec)").format, number_text, number_text, number_text, number_text),
    st.just("Inferences/Second vs. Client p95 Batch Latency"),
    st.builds("Failed to obtain stable measurement within 10 measurement windows for concurrency {}. "
              "Please try to increase the --measurement-interval.".format, number_text),
    st.text(max_size=30))
csv_text = st.builds(lambda header, rows: "\n".join([header] + [",".join(r) for r in rows]),
                     st.sampled_from(["Concurrency,Inferences/Second,p95 latency,Avg latency",
                                      "Request Rate,Inferences/Second,Server Queue", "x,y"]),
                     st.lists(st.lists(number_text, max_size=5), max_size=4))
metrics_line = st.one_of(
    st.builds(lambda t, text: json.dumps({"t": t, "text": text}, allow_nan=True), scalars,
              st.sampled_from(['nv_gpu_utilization{gpu_uuid="G"} 0.5\n', "nv_gpu_utilization NaN\n",
                               'nv_cpu_utilization 1e999\n', "# TYPE x gauge\nx{a=\"\\\"} 1\n", "garbage{"])
              | st.text(max_size=20)),
    st.text(max_size=30))

yaml_piece = st.sampled_from([
    "a: ", "b:\n  - ", "- ", "!!binary aGk=", "!!python/object:os.system {}", "!x 1", "!!str 3",
    "!!set {a: null}", "&a ", "*a", "[*a]", ".nan", "-.inf", "1.0e+999", "1" * 40, "2026-11-26", "{{ x }}",
    "'\\u0000'", "\n", "{", "}", "[", "]", ": ", "? ", "%YAML 1.1\n---\n", "!!int 0x1F", "0o17", "1_000",
    "<<: *a", "!!float nan"])


# ----------------------------------------------------------------------------------------- the readers


@given(kind=st.sampled_from(KINDS), content=json_bytes, cap=st.sampled_from([16, 4096, None]))
@example(kind="devzero", content=b"{}", cap=None)  # MemoryError: a config or perf output linked to /dev/zero
@example(kind="fifo", content=b"{}", cap=None)  # hung forever on a named pipe
@example(kind="file", content=b'{"load": NaN}', cap=None)
def test_read_json(kind: str, content: bytes, cap: int | None) -> None:
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d) / "run"
        folder.mkdir()
        path = make(folder, "x.json", kind, content)
        before = snapshot(Path(d))
        outcome(lambda: safeio.read_json(path, within=folder, cap=cap), path)
        assert snapshot(Path(d)) == before


@given(st.lists(yaml_piece | st.text(max_size=8), max_size=12).map("".join))
@example("a: !!binary e3sgeCB9fQ==")  # Jinja hidden in a !!binary value
@example("a: &x [*x]")
@example("\x1f")  # found by the fuzzer: a control character raised from the loader's constructor
@example("!!float nana: ")  # found by the fuzzer: an explicit tag on a value it cannot hold (ValueError)
@example("!!int 0x1F- ")  # found by the fuzzer
def test_loads_yaml(text: str) -> None:
    result = outcome(lambda: safeio.loads_yaml(text, "spec.yml"), "spec.yml")
    if not isinstance(result, ServeSystemError):  # plain data only: JSON can hold it, numbers finite
        json.dumps(result, allow_nan=False, default=str)


@given(kind=st.sampled_from(KINDS), content=mutated(LEVEL))
@example(kind="file", content=json.dumps({**LEVEL, "load": "8"}).encode())
@example(kind="file", content=json.dumps({**LEVEL, "repetition": int("9" * 300)}).encode())
def test_level_record(kind: str, content: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        ldir = Path(d) / "n1" / "v" / "c1_r1"
        ldir.mkdir(parents=True)
        path = make(ldir, "level.json", kind, content)
        outcome(lambda: records.read(path, records.LevelRecord), path)
        outcome(lambda: tree.read_level(path), path)
        outcome(lambda: records.level_done(ldir), path)


@given(kind=st.sampled_from(KINDS), doc=stats_doc, token=st.none() | st.sampled_from(ODD_TOKENS))
@example(kind="file", doc={"model_stats": [{"name": "m", "inference_count": "\u00b2"}]}, token=None)
def test_stats_snapshot(kind: str, doc: Any, token: str | None) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = make(Path(d), "after.json", kind, to_json(doc, token))
        snap = outcome(lambda: stats.load_snapshot(path, within=d), path)
        if not isinstance(snap, ServeSystemError):  # a checked snapshot computes
            for delta in stats.delta(None, snap):
                delta.to_json()


@given(kind=st.sampled_from(KINDS), lines=st.lists(metrics_line, max_size=6))
def test_metrics_samples(kind: str, lines: list[str]) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = make(Path(d), "metrics.jsonl", kind, "\n".join(lines).encode())
        samples = outcome(lambda: stats.read_samples(path, within=d), path)
        if isinstance(samples, list):
            for f in (stats.mean_gpu_util, stats.busiest_gpu_util, stats.max_gpu_mem, stats.mean_cpu_util):
                f(samples)


@given(lines=st.lists(perf_line, max_size=10), csv=csv_text)
@example(lines=["  p95 latency: 1.2.3 usec", "Concurrency: 1e999, throughput: 1 infer/sec, latency 1 usec",
                "  Batch size: \u0661"], csv="Concurrency,Inferences/Second\nnan,inf")
@example(lines=[], csv="Concurrency,Inferences/Second\n1,\"2\r3")  # found by the fuzzer: csv.Error
@example(lines=["Concurrency: 0, throughput: 0 infer/sec, latency 0 usec",
                "  Pass [0] throughput: 0 infer/sec. p0 latency: 0 usec (std 0 usec)",
                "  Pass [0] throughput: 2.6815615859885194e+154 infer/sec. p0 latency: 0 usec (std 0 usec)"],
         csv="x,y")  # found by the fuzzer (seed 1951736659): the windows' spread overflowed when squared
def test_perf_output(lines: list[str], csv: str) -> None:
    with no_hang():
        levels = perf.combine(perf.parse_csv(csv, 1), perf.parse_stdout("\n".join(lines)))
        for lv in levels:
            perf.window_cv(lv)
            json.dumps(lv.to_json(), allow_nan=True)


RAW = ("perf.stdout", "perf.csv", "stats_before.json", "stats_after.json", "metrics.jsonl", "bench.json",
       "config.pbtxt", "variant.json", "manifest.json", "plan.json")


raw_content = st.one_of(json_bytes, st.lists(perf_line, max_size=4).map(lambda ls: "\n".join(ls).encode()),
                        stats_doc.map(lambda x: to_json(x, None)))


@given(files=st.lists(st.tuples(st.sampled_from(RAW), st.sampled_from(KINDS), raw_content), max_size=4),
       level=mutated(LEVEL))
def test_report_reader(files: list[tuple[str, str, bytes]], level: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        run = Path(d) / "e" / "r1"
        ldir = run / "n1" / "v" / "c1_r1"
        ldir.mkdir(parents=True)
        (ldir / "level.json").write_bytes(level)
        for name, kind, content in files:
            folder = run if name == "manifest.json" else run / "n1" if name == "plan.json" else \
                run / "n1" / "v" if name in ("variant.json", "config.pbtxt") else ldir
            if not os.path.lexists(folder / name):
                make(folder, name, kind, content)
        before = snapshot(Path(d))
        rows = outcome(lambda: tree.collect(run), run)
        if isinstance(rows, list):
            json.dumps(rows, default=str)
        outcome(lambda: tree.variant_setups(run), run)
        outcome(lambda: tree.utilisation_series(run), run)
        assert snapshot(Path(d)) == before


# --------------------------------------------------------------------------------------- the archive


def _plan() -> plans.HostPlan:
    lv = plans.LevelPlan(id="c1_r1", mode="concurrency", load=1, repetition=1, argv=[], retry_argv=[])
    v = plans.VariantPlan(name="v", model="m", version="1", config_pbtxt="", load_body={}, notes=[],
                            levels=[lv], input_data=None, perf={})
    return plans.HostPlan(host="n1", gpus=0, experiment="e", run_id="r1", variants=[v])


MEMBER_NAMES = ("host.json", "v", "v/variant.json", "v/c1_r1", "v/c1_r1/level.json", "v/c1_r1/perf.stdout",
                "v/c9_r1/level.json", "w/variant.json", "../escape", "/abs", "v/../../x", "v/c1_r1/deep/x",
                "v/.hidden", "host.json/x", "v//x", "v/c1_r1/perf.stdout")
MEMBER_TYPES = (tarfile.REGTYPE, tarfile.REGTYPE, tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE,
                tarfile.LNKTYPE, tarfile.FIFOTYPE, tarfile.CHRTYPE)
member = st.tuples(st.sampled_from(MEMBER_NAMES), st.sampled_from(MEMBER_TYPES),
                   st.one_of(st.binary(max_size=32), st.integers(0, 3 * 2**20).map(lambda n: b"\0" * n)))


def build(members: list[tuple[str, bytes, bytes]], damage: str, at: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.GNU_FORMAT) as tar:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                info.linkname = "/etc/passwd" if at % 2 else "v/variant.json"
            if kind == tarfile.REGTYPE:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    raw = buf.getvalue()
    if damage == "truncate":
        return raw[: at % max(len(raw), 1)]
    if damage == "flip":
        i = at % len(raw)
        return raw[:i] + bytes([raw[i] ^ 0x5A]) + raw[i + 1:]
    if damage == "crc":
        return raw[:-8] + bytes(b ^ 0xFF for b in raw[-8:-4]) + raw[-4:]
    if damage == "trailing":
        return raw + b"garbage"
    return raw


HOST_STATE = ("empty", "none", "link_v_out", "link_file_out", "file_where_folder", "folder_where_file")


DAMAGE = ("none", "none", "truncate", "flip", "crc", "trailing")


@given(members=st.lists(member, max_size=5), damage=st.sampled_from(DAMAGE),
       at=st.integers(0, 10**6), state=st.sampled_from(HOST_STATE), archive_kind=st.sampled_from(KINDS))
@example(members=[("v/c1_r1/perf.stdout", tarfile.REGTYPE, b"\0" * (3 * 2**20))], damage="none", at=0,
         state="empty", archive_kind="file")  # a bomb: stopped at the budget, nothing landed
@example(members=[("v/variant.json", tarfile.REGTYPE, b"{}")], damage="crc", at=0, state="empty",
         archive_kind="file")  # a CRC error after the last member: accepted before
@example(members=[("v/c9_r1/level.json", tarfile.REGTYPE, b"{}")], damage="none", at=0, state="empty",
         archive_kind="file")  # a level the plan never had
@example(members=[("v/variant.json", tarfile.REGTYPE, b"{}")], damage="none", at=0, state="link_v_out",
         archive_kind="file")  # written through a link already in the host folder
def test_collect_archive(members: list[tuple[str, bytes, bytes]], damage: str, at: int, state: str,
                         archive_kind: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        outside = root / "outside"
        outside.mkdir()
        (outside / "victim").write_text("precious")
        run = root / "run"
        host = run / "n1"
        if state != "none":
            host.mkdir(parents=True)
        if state == "link_v_out":
            (host / "v").symlink_to(outside)
        elif state == "link_file_out":
            (host / "v").mkdir()
            (host / "v" / "variant.json").symlink_to(outside / "victim")
        elif state == "file_where_folder":
            (host / "v").write_text("a file")
        elif state == "folder_where_file":
            (host / "host.json").mkdir()
        packed = make(root, "results.tar.gz", archive_kind, build(members, damage, at))
        outside_before, host_before = snapshot(outside), snapshot(run) if run.exists() else {}
        result = outcome(lambda: archive.unpack(packed, host, _plan(), member_budget=2**20,
                                                total_budget=2 * 2**20), root)
        assert snapshot(outside) == outside_before  # never written through a link
        if isinstance(result, ServeSystemError):  # refused: nothing landed
            assert (snapshot(run) if run.exists() else {}) == host_before
        else:  # what it wrote is inside the host folder (a link the user had there stays as it was)
            for p in host.rglob("*"):
                assert p.is_symlink() or p.resolve().is_relative_to(host.resolve())
        assert [p.name for p in run.iterdir() if ".unpack-" in p.name] == [] if run.exists() else True


# --------------------------------------------------------------------------------------- the write path

names = st.one_of(st.sampled_from(["a.md", "plots/p.png", "../x", "/abs", "a/../../x", ".marker", "x\ny", "",
                                   "plots", "deep/er/f.csv", "link", "linkdir/f"]), st.text(max_size=10))


@given(writes=st.lists(st.tuples(names, st.binary(max_size=16)), max_size=5),
       user=st.lists(st.sampled_from(["notes.txt", "plots/mine.png", "link", "linkdir", "sub/x"]), max_size=3,
                     unique=True),
       force=st.booleans(), marker=st.sampled_from(["none", "good", "bad", "escaping"]))
def test_owned_folder(writes: list[tuple[str, bytes]], user: list[str], force: bool, marker: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        outside = root / "outside"
        outside.mkdir()
        (outside / "victim").write_text("precious")
        out = root / "out"
        out.mkdir()
        for u in user:
            if u == "link":
                (out / "link").symlink_to(outside / "victim")
            elif u == "linkdir":
                (out / "linkdir").symlink_to(outside)
            else:
                (out / u).parent.mkdir(parents=True, exist_ok=True)
                (out / u).write_text("the user's")
        if marker != "none":
            lists = {"good": '["a.md"]', "bad": "{", "escaping": '["../outside/victim"]'}
            (out / ownedtree.MARKER).write_text(lists[marker])
        users = {k: v for k, v in snapshot(out).items() if k != ownedtree.MARKER}
        outside_before = snapshot(outside)

        wrote: set[str] = set()

        def fill() -> None:
            folder = ownedtree.OwnedFolder(out, force=force)
            folder.clear()
            for name, data in writes:
                wrote.add(name)
                folder.write_bytes(name, data)

        outcome(fill, out)
        assert snapshot(outside) == outside_before
        after = snapshot(out)
        for k, v in users.items():  # a user's file is never removed or changed, unless the tool wrote it
            assert k in wrote or after.get(k) == v, k
