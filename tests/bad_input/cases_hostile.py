"""Hostile files in a run folder and in a node's archive (issue 26): links out of their folder, named
pipes, links to devices, numbers no reader can hold, archives that are corrupt, oversized or unplanned,
links already in the host folder, names that would become paths outside their folder.

Each is refused in one line naming the file (safeio's read path, the typed run records, the archive
path); nothing under the case's folder is written, changed or deleted (``test_corpus``).
"""

from __future__ import annotations

import io
import json
import tarfile

from .corpus import BadInput

RUN = "results/demo/r1"
LEVEL_DIR = f"{RUN}/n1/v/c1_r1"
LEVEL = {"variant": "v", "level": "c1_r1", "mode": "concurrency", "load": 1.0, "repetition": 1,
         "status": "ok", "start": 1.0, "end": 2.0,
         "attempts": [{"argv": ["perf_analyzer"], "rc": 0, "start": 1.0, "end": 2.0}]}
VARIANT = {"name": "v", "model": "m", "version": "1", "status": "measured"}
MANIFEST = json.dumps({"experiment": "demo", "run_id": "r1"})
#: a host's plan with one variant ``v`` and one level ``c1_r1``
PLAN = json.dumps({"host": "n1", "gpus": 0, "experiment": "demo", "run_id": "r1", "variants": [
    {"name": "v", "model": "m", "version": "1", "config_pbtxt": "", "load_body": {}, "notes": [],
     "input_data": None, "perf": {}, "levels": [{"id": "c1_r1", "mode": "concurrency", "load": 1,
                                                 "repetition": 1, "argv": [], "retry_argv": []}]}]})


def _run(**over: str | bytes) -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {f"{RUN}/manifest.json": MANIFEST, f"{RUN}/n1/v/variant.json":
                                     json.dumps(VARIANT), f"{LEVEL_DIR}/level.json": json.dumps(LEVEL)}
    files.update(over)
    return {k: v for k, v in files.items() if v != b"-"}


def _report(case: str, files: dict[str, str | bytes], *expect: str, links: dict[str, str] | None = None,
            fifos: tuple[str, ...] = ()) -> BadInput:
    return BadInput(id=f"hostile-report-{case}", argv=("serve-system", "report", "{tmp}/" + RUN), files=files,
                    expect=expect, links=links or {}, fifos=fifos, timeout=60)


def _tar(members: list[tuple[str, bytes]], *, kind: bytes = tarfile.REGTYPE,
         claim: int | None = None) -> bytes:
    """A gzip tar of ``members``; ``claim``: the last member's header says this size (its data absent)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for i, (name, data) in enumerate(members):
            info = tarfile.TarInfo(name)
            info.type = kind if i == len(members) - 1 else tarfile.REGTYPE
            if info.type == tarfile.LNKTYPE:
                info.linkname = "v/variant.json"
            else:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if info.type == tarfile.REGTYPE else None)
    raw = buf.getvalue()
    if claim is not None:  # a header that claims a huge member: rewrite its size field and checksum
        plain = bytearray(_gunzip(raw))
        off = _last_header(plain)
        plain[off + 124:off + 136] = f"{claim:011o}\0".encode()
        plain[off + 148:off + 156] = b" " * 8
        plain[off + 148:off + 156] = f"{sum(plain[off:off + 512]):06o}\0 ".encode()
        raw = _gzip(bytes(plain[:off + 512]))
    return raw


def _gunzip(raw: bytes) -> bytes:
    import gzip

    return gzip.decompress(raw)


def _gzip(raw: bytes) -> bytes:
    import gzip

    return gzip.compress(raw)


def _last_header(plain: bytearray) -> int:
    off, last = 0, 0
    while off + 512 <= len(plain) and any(plain[off:off + 512]):
        last = off
        size = int(plain[off + 124:off + 135].decode().strip("\0 ") or "0", 8)
        off += 512 + (size + 511) // 512 * 512
    return last


GOOD = _tar([("v/variant.json", json.dumps(VARIANT).encode()),
             ("v/c1_r1/level.json", json.dumps(LEVEL).encode())])


def _corrupt_crc(raw: bytes) -> bytes:
    """The same archive with its gzip CRC wrong (every tar member still reads)."""
    return raw[:-8] + bytes(b ^ 0xFF for b in raw[-8:-4]) + raw[-4:]


def _collect(case: str, archive: bytes | None, *expect: str, links: dict[str, str] | None = None,
             fifos: tuple[str, ...] = (), extra: dict[str, str | bytes] | None = None) -> BadInput:
    files: dict[str, str | bytes] = {f"{RUN}/n1/plan.json": PLAN, **(extra or {})}
    if archive is not None:
        files["results.tar.gz"] = archive
    files = {k: v for k, v in files.items() if v != b"-"}  # "-": a link or a pipe takes its place
    return BadInput(id=f"hostile-collect-{case}",
                    argv=("serve-system", "collect", "{tmp}/results.tar.gz", "--host-dir",
                          "{tmp}/" + RUN + "/n1"),
                    files=files, expect=expect, links=links or {}, fifos=fifos, timeout=60)


def _stats(case: str, after: str | None, *expect: str, fifos: tuple[str, ...] = (),
           links: dict[str, str] | None = None) -> BadInput:
    good = {"model_stats": [{"name": "m", "version": "1", "inference_count": 10, "execution_count": 4}]}
    files: dict[str, str | bytes] = {"before.json": json.dumps(good)}
    if after is not None:
        files["after.json"] = after
    return BadInput(id=f"hostile-stats-{case}", argv=("serve-system", "stats", "{tmp}/before.json",
                                                      "{tmp}/after.json"),
                    files=files, expect=expect, fifos=fifos, links=links or {}, timeout=60)


def _counter(value: str) -> str:
    return ('{"model_stats": [{"name": "m", "version": "1", "inference_count": ' + value
            + ', "execution_count": 4}]}')


CASES: list[BadInput] = [
    # -- the run folder: records that are not regular files inside their folder ------------------------
    _report("level-is-a-pipe", _run(**{f"{LEVEL_DIR}/level.json": b"-"}),
            f"{{tmp}}/{LEVEL_DIR}/level.json", "is a named pipe", fifos=(f"{LEVEL_DIR}/level.json",)),
    _report("level-links-to-dev-zero", _run(**{f"{LEVEL_DIR}/level.json": b"-"}),
            f"{{tmp}}/{LEVEL_DIR}/level.json", "a link out of",
            links={f"{LEVEL_DIR}/level.json": "/dev/zero"}),
    _report("level-links-out-of-the-run", {**_run(**{f"{LEVEL_DIR}/level.json": b"-"}),
                                           "outside.json": json.dumps(LEVEL)},
            f"{{tmp}}/{LEVEL_DIR}/level.json", "a link out of", "replace the link by the file itself",
            links={f"{LEVEL_DIR}/level.json": "{tmp}/outside.json"}),
    _report("manifest-is-a-pipe", _run(**{f"{RUN}/manifest.json": b"-"}),
            f"{{tmp}}/{RUN}/manifest.json", "is a named pipe", fifos=(f"{RUN}/manifest.json",)),
    _report("variant-links-to-dev-zero", _run(**{f"{RUN}/n1/v/variant.json": b"-"}),
            f"{{tmp}}/{RUN}/n1/v/variant.json", "a link out of",
            links={f"{RUN}/n1/v/variant.json": "/dev/zero"}),
    # -- numbers no reader can hold ----------------------------------------------------------------------
    _report("level-load-overflows", _run(**{f"{LEVEL_DIR}/level.json": json.dumps(LEVEL).replace(
        '"load": 1.0', '"load": 1e999')}), f"{{tmp}}/{LEVEL_DIR}/level.json", "out of range",
        "re-run the experiment"),
    _report("level-repetition-400-digits", _run(**{f"{LEVEL_DIR}/level.json": json.dumps(LEVEL).replace(
        '"repetition": 1', '"repetition": ' + "9" * 400)}), f"{{tmp}}/{LEVEL_DIR}/level.json", "400 digits"),
    _report("manifest-infinity", _run(**{f"{RUN}/manifest.json": '{"experiment": "demo", "x": Infinity}'}),
            f"{{tmp}}/{RUN}/manifest.json", "Infinity is not a number JSON allows", "restore it"),
    _report("manifest-hosts-a-string", _run(**{f"{RUN}/manifest.json": json.dumps(
        {"experiment": "demo", "hosts": "n1"})}), f"{{tmp}}/{RUN}/manifest.json", "hosts: expected a list"),
    _report("level-start-a-string",
            _run(**{f"{LEVEL_DIR}/level.json": json.dumps({**LEVEL, "start": "now"})}),
            f"{{tmp}}/{LEVEL_DIR}/level.json", "start: expected a number"),
    # -- a node's archive --------------------------------------------------------------------------------
    _collect("unplanned-level", _tar([("v/c9_r1/level.json", json.dumps(LEVEL).encode())]),
             "{tmp}/results.tar.gz: v/c9_r1/level.json: not a record of this host's plan", "not planned"),
    _collect("corrupt-gzip-crc", _corrupt_crc(GOOD), "{tmp}/results.tar.gz: not a readable archive"),
    _collect("truncated", GOOD[: len(GOOD) // 2], "{tmp}/results.tar.gz: not a readable archive"),
    _collect("member-claims-gigabytes", _tar([("v/variant.json", b"{}"), ("v/c1_r1/perf.stdout", b"x")],
                                             claim=3 * 2**30),
             "{tmp}/results.tar.gz: v/c1_r1/perf.stdout", "more than the 512 MiB"),
    _collect("hard-link-member", _tar([("v/variant.json", b"{}"), ("v/c1_r1/x", b"")], kind=tarfile.LNKTYPE),
             "{tmp}/results.tar.gz: v/c1_r1/x: not a record of this host's plan (a link"),
    _collect("archive-is-a-pipe", None, "{tmp}/results.tar.gz", "is a named pipe", fifos=("results.tar.gz",)),
    _collect("archive-links-to-dev-zero", None, "{tmp}/results.tar.gz", "not a regular file",
             links={"results.tar.gz": "/dev/zero"}),
    _collect("link-in-the-host-folder", GOOD, f"{{tmp}}/{RUN}/n1/v: is a link", "remove it",
             links={f"{RUN}/n1/v": "{tmp}/elsewhere"}, extra={"elsewhere/keep.txt": "mine"}),
    _collect("plan-links-to-dev-zero", GOOD, f"{{tmp}}/{RUN}/n1/plan.json", "a link out of",
             links={f"{RUN}/n1/plan.json": "/dev/zero"}, extra={f"{RUN}/n1/plan.json": b"-"}),
    # -- Triton's statistics ------------------------------------------------------------------------------
    _stats("counter-superscript-digit", _counter('"\u00b2"'), "{tmp}/after.json",
           "model_stats[0].inference_count", "is not a counter"),
    _stats("counter-arabic-digits", _counter('"\u0661\u0662"'), "{tmp}/after.json", "is not a counter"),
    _stats("counter-500-digits", _counter("9" * 500), "{tmp}/after.json", "500 digits"),
    _stats("after-is-a-pipe", None, "{tmp}/after.json", "is a named pipe", fifos=("after.json",)),
    _stats("after-links-to-dev-zero", None, "{tmp}/after.json", "not a regular file",
           links={"after.json": "/dev/zero"}),
    # -- names from data that become paths ------------------------------------------------------------------
    BadInput(id="hostile-models-render-name-escapes",
             argv=("serve-system", "models", "render", "--source", "{repo}/model_repository", "--dest",
                   "{tmp}/staging", "--model", "../../escaped"),
             expect=("--model", "'../../escaped'", "cannot be a file name"), timeout=60),
]
