"""The one read path, the one write path and the one archive path (serve_system.safeio, archive.unpack)
against links, named pipes, devices, huge and corrupt inputs."""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
import tarfile
from pathlib import Path

import pytest

from serve_system import safeio
from serve_system.node import archive, plans, records
from serve_system.results import tree

# ------------------------------------------------------------------------------------------- reading


def test_a_regular_file_reads(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('\ufeff{"n": 1, "x": [1.5, "s"]}')
    assert safeio.read_json(tmp_path / "a.json", within=tmp_path) == {"n": 1, "x": [1.5, "s"]}


def test_a_named_pipe_is_refused_without_opening_it(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p.json")  # opening it to read would wait for a writer forever
    with pytest.raises(safeio.UnsafeFile, match=r"p\.json: is a named pipe, not a regular file"):
        safeio.read_json(tmp_path / "p.json")


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_a_link_to_a_device_is_refused(tmp_path: Path, device: str) -> None:
    (tmp_path / "d.json").symlink_to(device)
    with pytest.raises(safeio.UnsafeFile, match="a link out of"):
        safeio.read_bytes(tmp_path / "d.json", within=tmp_path)
    with pytest.raises(safeio.UnsafeFile, match="is a device"):  # no folder to stay in: still no device
        safeio.read_bytes(tmp_path / "d.json")


def test_links_stay_inside_their_folder(tmp_path: Path) -> None:
    (tmp_path / "run" / "sub").mkdir(parents=True)
    (tmp_path / "run" / "real.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("outside")
    (tmp_path / "run" / "sub" / "in.txt").symlink_to("../real.txt")
    (tmp_path / "run" / "out.txt").symlink_to(tmp_path / "secret.txt")
    (tmp_path / "run" / "loop").symlink_to("loop")
    assert safeio.read_text(tmp_path / "run" / "sub" / "in.txt", within=tmp_path / "run") == "inside"
    with pytest.raises(safeio.UnsafeFile, match=r"out\.txt: a link out of .*replace the link"):
        safeio.read_text(tmp_path / "run" / "out.txt", within=tmp_path / "run")
    with pytest.raises(safeio.UnsafeFile, match="cannot resolve"):
        safeio.read_text(tmp_path / "run" / "loop", within=tmp_path / "run")
    with pytest.raises(safeio.MissingFile, match="no such file"):
        safeio.read_text(tmp_path / "run" / "none.txt")


def test_a_file_over_its_cap_is_refused_before_it_is_read(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 1001)
    with pytest.raises(safeio.UnsafeFile, match="1001 bytes, more than the 1000 bytes"):
        safeio.read_bytes(tmp_path / "big", cap=1000)
    assert len(safeio.read_bytes(tmp_path / "big", cap=1001)) == 1001


def test_text_in_another_encoding_is_one_line_naming_file_line_and_byte(tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_bytes("ok\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(safeio.UnsafeFile) as err:
        safeio.read_text(tmp_path / "t.txt")
    assert str(err.value) == (f"{tmp_path / 't.txt'}:2: not UTF-8 text (byte 0xe9 at offset 6): "
                              "save it as UTF-8")


@pytest.mark.parametrize(("text", "why"), [
    ('{"a": NaN}', "NaN is not a number JSON allows"),
    ('{"a": -Infinity}', "-Infinity is not a number JSON allows"),
    ('{"a": 1e999}', "out of range"),
    ('{"a": ' + "1" * 31 + "}", "an integer of 31 digits"),
    ('{"a": -' + "1" * 5000 + "}", "an integer of 5000 digits"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"a": 1', "not JSON"),
])
def test_json_numbers_are_finite_and_bounded(tmp_path: Path, text: str, why: str) -> None:
    (tmp_path / "x.json").write_text(text)
    with pytest.raises(safeio.UnsafeFile, match=why) as err:
        safeio.read_json(tmp_path / "x.json", fix="write it again")
    assert "\n" not in str(err.value) and str(err.value).endswith("; write it again")
    assert safeio.loads_json('{"a": ' + "9" * 30 + "}", "x") == {"a": int("9" * 30)}


@pytest.mark.parametrize(("text", "why"), [
    ("a: !!binary aGVsbG8=", "the tag !!binary is not plain data"),
    ("a: !!python/object:os.system {}", "the tag !!python/object:os.system is not plain data"),
    ("a: !custom 1", "the tag !custom is not plain data"),
    ("a: !!set {x: null}", "the tag !!set is not plain data"),
    ("a: 2026-11-26", "the tag !!timestamp is not plain data"),
    ("a: .nan", "not a finite number"),
    ("a: -.inf", "not a finite number"),
    ("a: 1.0e+999", "not a finite number"),
    ("a: " + "1" * 40, "an integer of 40 digits"),
    ("a: &x [*x]", "an alias that contains itself"),
    ("a: [1", "not valid YAML"),
])
def test_yaml_is_plain_data_only(tmp_path: Path, text: str, why: str) -> None:
    (tmp_path / "s.yml").write_text(text)
    with pytest.raises(safeio.UnsafeFile, match=why) as err:
        safeio.read_yaml(tmp_path / "s.yml")
    assert str(err.value).startswith(str(tmp_path / "s.yml")) and "\n" not in str(err.value)


def test_yaml_plain_data_reads_with_shared_aliases() -> None:
    assert safeio.loads_yaml("a: &x {b: [1, 2.5, true, null, !!str 3]}\nc: *x\n", "s") == {
        "a": {"b": [1, 2.5, True, None, "3"]}, "c": {"b": [1, 2.5, True, None, "3"]}}
    assert safeio.loads_yaml("", "s") is None


@pytest.mark.parametrize("name", ["..", ".", "", "a/b", "../x", "/etc", ".hidden", "a\nb", "a b", "x" * 201,
                                  "\u00e9t\u00e9", "a\x00"])
def test_names_that_become_paths_are_plain(name: str) -> None:
    with pytest.raises(safeio.UnsafeFile, match="cannot be a file name"):
        safeio.plain_name(name, "inventory.yml: host n1", "student")


# ------------------------------------------------------------------------------------------- writing


def test_a_write_replaces_a_link_and_never_follows_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "report.md").symlink_to(victim)
    safeio.write_text(tmp_path / "out" / "report.md", "new", within=tmp_path / "out")
    assert victim.read_text() == "precious"
    assert not (tmp_path / "out" / "report.md").is_symlink()
    assert (tmp_path / "out" / "report.md").read_text() == "new"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["report.md"]  # no temporary left


def test_a_write_through_a_linked_folder_out_of_its_root_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "plots").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(safeio.UnsafeFile, match=r"plots: a link out of .*remove the link"):
        safeio.write_bytes(tmp_path / "run" / "plots" / "a.png", b"png", within=tmp_path / "run")
    assert not any((tmp_path / "elsewhere").iterdir())
    with pytest.raises(safeio.UnsafeFile, match="outside"):
        safeio.write_text(tmp_path / "x.txt", "x", within=tmp_path / "run")


def test_a_failed_write_leaves_the_old_file(tmp_path: Path) -> None:
    (tmp_path / "f.csv").write_text("old")
    with pytest.raises(RuntimeError), safeio.open_write(tmp_path / "f.csv") as fh:
        fh.write("half")
        raise RuntimeError("interrupted")
    assert (tmp_path / "f.csv").read_text() == "old" and len(list(tmp_path.iterdir())) == 1


def test_written_files_get_the_umasks_mode(tmp_path: Path) -> None:
    safeio.write_text(tmp_path / "a.txt", "x")
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o666 & ~safeio.UMASK
    with safeio.open_write(tmp_path / "s.txt", mode=0o600) as fh:
        fh.write("secret")
    assert (tmp_path / "s.txt").stat().st_mode & 0o777 == 0o600


# ------------------------------------------------------------------------------------------ the archive


def _plan() -> plans.HostPlan:
    lv = plans.LevelPlan(id="c1_r1", mode="concurrency", load=1, repetition=1, argv=[], retry_argv=[])
    v = plans.VariantPlan(name="v", model="m", version="1", config_pbtxt="", load_body={}, notes=[],
                            levels=[lv], input_data=None, perf={})
    return plans.HostPlan(host="n1", gpus=0, experiment="e", run_id="r1", variants=[v])


def _archive(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


LEVEL = json.dumps({"variant": "v", "level": "c1_r1", "mode": "concurrency", "load": 1, "repetition": 1,
                    "status": "ok", "start": 1, "end": 2, "attempts": []}).encode()


def test_a_good_archive_lands_with_each_level_record_last(tmp_path: Path) -> None:
    a = _archive(tmp_path / "a.tar.gz", {"v/c1_r1/level.json": LEVEL, "v/c1_r1/perf.stdout": b"out",
                                         "v/variant.json": b"{}", "host.json": b"{}"})
    assert archive.unpack(a, tmp_path / "n1", _plan()) == 4
    assert (tmp_path / "n1" / "v" / "c1_r1" / "perf.stdout").read_bytes() == b"out"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tar.gz", "n1"]  # the temporary folder is gone


def test_a_re_runs_archive_leaves_what_landed_before_untouched(tmp_path: Path) -> None:
    """The same run id again: the node packs every record again; a level that landed is not rewritten
    (its record keeps its time: the resume rule reads it as it was), a changed or new file lands."""
    members = {"v/c1_r1/level.json": LEVEL, "v/variant.json": b"{}", "host.json": b"{}"}
    archive.unpack(_archive(tmp_path / "a.tar.gz", members), tmp_path / "n1", _plan())
    level = tmp_path / "n1" / "v" / "c1_r1" / "level.json"
    os.utime(level, (1_000_000, 1_000_000))
    before = level.stat().st_mtime_ns
    again = _archive(tmp_path / "b.tar.gz", {**members, "host.json": b'{"again": 1}'})
    archive.unpack(again, tmp_path / "n1", _plan())
    assert level.stat().st_mtime_ns == before
    assert (tmp_path / "n1" / "host.json").read_bytes() == b'{"again": 1}'


def test_a_bomb_stops_at_the_budget_and_nothing_lands(tmp_path: Path) -> None:
    a = _archive(tmp_path / "bomb.tar.gz", {"v/c1_r1/perf.stdout": b"\0" * (8 * 2**20)})
    assert a.stat().st_size < 64 * 1024
    with pytest.raises(records.RecordError, match="expands to more than 1 MiB"):
        archive.unpack(a, tmp_path / "n1", _plan(), member_budget=16 * 2**20, total_budget=2**20)
    with pytest.raises(records.RecordError, match=r"perf\.stdout: 8388608 bytes, more than the 4 MiB"):
        archive.unpack(a, tmp_path / "n1", _plan(), member_budget=4 * 2**20)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bomb.tar.gz"]


def test_a_crc_error_after_the_last_member_is_found(tmp_path: Path) -> None:
    good = _archive(tmp_path / "g.tar.gz", {"v/variant.json": b"{}"}).read_bytes()
    bad = good[:-8] + bytes(b ^ 0xFF for b in good[-8:-4]) + good[-4:]
    (tmp_path / "bad.tar.gz").write_bytes(bad)
    with tarfile.open(tmp_path / "bad.tar.gz") as tar:  # tarfile alone reads every member of it
        assert tar.getnames() == ["v/variant.json"]
    with pytest.raises(records.RecordError, match="not a readable archive of records: CRC check failed"):
        archive.unpack(tmp_path / "bad.tar.gz", tmp_path / "n1", _plan())
    assert not (tmp_path / "n1").exists()
    (tmp_path / "trailing.tar.gz").write_bytes(good + gzip.compress(b"\0" * 1024) + b"junk")
    with pytest.raises(records.RecordError, match="not a readable archive"):
        archive.unpack(tmp_path / "trailing.tar.gz", tmp_path / "n1", _plan())


def test_an_unplanned_level_and_odd_members_are_refused(tmp_path: Path) -> None:
    for name in ("v/c9_r1/level.json", "w/variant.json", "v/c1_r1/deep/x", "v/.hidden", "host.json/x"):
        a = _archive(tmp_path / "a.tar.gz", {name: b"{}"})
        with pytest.raises(records.RecordError, match=f"{name}: not a record of this host's plan"):
            archive.unpack(a, tmp_path / "n1", _plan())
    assert not (tmp_path / "n1").exists()


def test_links_in_the_host_folder_are_never_followed(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "n1").mkdir()
    (tmp_path / "n1" / "v").symlink_to(tmp_path / "elsewhere")
    a = _archive(tmp_path / "a.tar.gz", {"v/variant.json": b"{}", "host.json": b"{}"})
    with pytest.raises(records.RecordError, match=r"n1/v: is a link"):
        archive.unpack(a, tmp_path / "n1", _plan())
    assert not any((tmp_path / "elsewhere").iterdir()) and not (tmp_path / "n1" / "host.json").exists()
    (tmp_path / "n1" / "v").unlink()
    (tmp_path / "n1" / "v").mkdir()
    (tmp_path / "n1" / "v" / "variant.json").symlink_to(tmp_path / "elsewhere" / "victim")
    with pytest.raises(records.RecordError, match=r"n1/v/variant\.json: is a link"):  # at a file's place too
        archive.unpack(a, tmp_path / "n1", _plan())
    assert not (tmp_path / "elsewhere" / "victim").exists() and not (tmp_path / "n1" / "host.json").exists()


# ------------------------------------------------------------------------------ the run folder's contract


def _level_dir(tmp_path: Path) -> Path:
    ldir = tmp_path / "e" / "r1" / "n1" / "v" / "c1_r1"
    ldir.mkdir(parents=True)
    (ldir / "level.json").write_bytes(LEVEL)
    (ldir / "perf.stdout").write_text("Concurrency: 1, throughput: 10 infer/sec, latency 100 usec\n")
    return ldir


@pytest.mark.parametrize(("name", "content", "why"), [
    ("stats_after.json", '{"model_stats": [{"name": "m", "inference_count": "\u00b2"}]}', "is not a counter"),
    ("stats_after.json", '{"model_stats": [{"name": "m", "inference_count": "many"}]}', "is not a counter"),
    ("stats_after.json", '{"model_stats": [{"name": "m", "inference_count": ' + "9" * 99 + "}]}",
     "99 digits"),
    ("stats_after.json", "[1]", "no 'model_stats' list"),
    ("bench.json", '{"phases": "x"}', "phases: not a list"),
])
def test_a_raw_file_that_is_not_the_runners_puts_its_level_under_not_measured(
        tmp_path: Path, name: str, content: str, why: str) -> None:
    ldir = _level_dir(tmp_path)
    (ldir / name).write_text(content)
    (row,) = tree.collect(ldir.parents[2])
    assert row["status"] == "failed" and str(ldir / name) in row["error"] and why in row["error"]


def test_raw_files_that_are_pipes_or_devices_are_not_read(tmp_path: Path) -> None:
    ldir = _level_dir(tmp_path)
    os.mkfifo(ldir / "metrics.jsonl")
    (row,) = tree.collect(ldir.parents[2])
    assert row["status"] == "failed" and "metrics.jsonl: is a named pipe" in row["error"]
    (ldir / "metrics.jsonl").unlink()
    (ldir / "perf.csv").symlink_to("/dev/zero")
    (row,) = tree.collect(ldir.parents[2])
    assert row["status"] == "failed" and "perf.csv: a link out of" in row["error"]


def test_hostile_numbers_in_perf_output_and_metrics_are_skipped_not_crashed_on(tmp_path: Path) -> None:
    ldir = _level_dir(tmp_path)
    (ldir / "perf.stdout").write_text(
        "Batch size: \u0661\nConcurrency: 1, throughput: 10 infer/sec, latency 100 usec\n"
        "  p95 latency: 1.2.3 usec\n  Avg latency: " + "9" * 400 + " usec\n"
        "Concurrency: 1e999, throughput: 1 infer/sec, latency 1 usec\n")
    (ldir / "metrics.jsonl").write_text('{"t": "x", "text": "a"}\n{"t": NaN, "text": ""}\n'
                                        '{"t": 1, "text": 5}\n'
                                        '{"t": 2, "text": "nv_gpu_utilization{gpu=\\"0\\"} NaN\\n"}\n[\n')
    (row,) = tree.collect(ldir.parents[2])
    assert row["status"] == "ok" and row["throughput"] == 10 and row["p95_us"] is None
    assert row["gpu_util"] is None


def test_the_report_never_writes_through_a_link_in_the_run_folder(tmp_path: Path) -> None:
    from report_trees import lab_run

    from serve_system.results.report import write_report

    run = lab_run(tmp_path / "lab" / "r1")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "victim.csv").write_text("precious")
    (run / "plots").symlink_to(elsewhere)
    with pytest.raises(safeio.UnsafeFile, match=r"plots: a link out of"):
        write_report(run)
    assert not any(elsewhere.iterdir()) and not (run / "report.md").exists()
    (run / "plots").unlink()
    (run / "summary.csv").symlink_to(tmp_path / "victim.csv")
    write_report(run)
    assert (tmp_path / "victim.csv").read_text() == "precious"
    assert not (run / "summary.csv").is_symlink()
    assert (run / "summary.csv").read_text().startswith("experiment,")
    assert any((run / "plots").iterdir())


@pytest.mark.parametrize("student", ["../escaped", "/tmp/abs", "a/b", "..", "bob\n"])
def test_an_access_sheet_name_from_the_inventory_is_a_plain_name(tmp_path: Path, student: str) -> None:
    from serve_system.errors import UsageError
    from serve_system.provision.nodes import Node
    from serve_system.provision.roster import write_sheets

    nodes = [Node(name="n1", address="10.0.0.1", user="cc", key_path="k", vars={"serve_student": "alice"}),
             Node(name="n2", address="10.0.0.2", user="cc", key_path="k", vars={"serve_student": student})]
    out = tmp_path / "deep" / "sheets"
    with pytest.raises(UsageError, match="host n2: serve_student.*cannot be a file name"):
        write_sheets(nodes, out, tmp_path / "repo")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == []  # nothing written


def test_a_pipe_or_device_is_never_replaced_by_a_write(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "out.md")
    with pytest.raises(safeio.UnsafeFile, match=r"out\.md: is a named pipe: the tool writes only regular"):
        safeio.write_text(tmp_path / "out.md", "x")
    assert stat.S_ISFIFO(os.lstat(tmp_path / "out.md").st_mode)
    assert sorted(os.listdir(tmp_path)) == ["out.md"]  # no temporary file left
