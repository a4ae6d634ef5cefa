"""Issue 38's rules, one at a time: argument values in range (argtypes, PathArg, --lease-end), numbers
read from files in range and named by their field (safeio, records), run folders the tool's own."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from serve_system import ownedtree, safeio
from serve_system.argtypes import Number, Whole
from serve_system.experiment.plan import lease_end_time, lease_problem
from serve_system.node import plans, records


@pytest.mark.parametrize("text", ["-1", "65", "9" * 400, "nan", "1.5", "", "0x10", "\u0661", "1e3"])
def test_a_whole_number_out_of_range_or_not_one_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="0 to 64"):
        Whole(0, 64)(text)


def test_a_whole_number_in_range_is_kept() -> None:
    assert Whole(0, 64)("0") == 0 and Whole(0, 64)(" 64 ") == 64 and Whole(-3, 3)("-3") == -3


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e999", "0", "-1", "101", "x", "1" * 100])
def test_a_number_must_be_finite_and_in_range(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="more than 0 to 100"):
        Number(0, 100, open_low=True)(text)
    assert Number(0, 100, open_low=True)("0.5") == 0.5


@pytest.mark.parametrize("value", ["a\nb", "x\x00", "\x1b[31m", "x" * 300, "a/" * 2100, ""])
def test_a_path_argument_with_control_characters_or_too_long_is_refused(value: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        ownedtree.OWNED_DIR(value)
    assert ownedtree.NODE_PATH("") == ""  # a text option left empty: not given
    assert ownedtree.INPUT_PATH("a\x1bb.yml") == Path("a\x1bb.yml")  # a file to read: any name, shown escaped
    with pytest.raises(argparse.ArgumentTypeError):
        ownedtree.INPUT_PATH("a\x00b")
    assert ownedtree.OWNED_DIR("results/x") == Path("results/x")


@pytest.mark.parametrize("text", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00",
                                  "1969-12-31T23:59Z", "soon", "2026-13-01T00:00"])
def test_a_lease_end_out_of_range_is_no_lease_end(text: str) -> None:
    with pytest.raises(ValueError, match="between 1970 and 9998"):
        lease_end_time(text)
    assert "between 1970 and 9998" in str(lease_problem(text, 60, 0))


def test_a_lease_end_without_a_zone_is_utc() -> None:
    assert lease_end_time("2026-11-22T18:50:00").isoformat() == "2026-11-22T18:50:00+00:00"
    assert lease_end_time("2026-11-22T18:50:00+02:00").hour == 16


@pytest.mark.parametrize(("doc", "field", "why"), [
    ('{"rows": [{"load": 1}, {"load": ' + "9" * 31 + "}]}", "rows[1].load", "31 digits"),
    ('{"a": {"b c": [1e31]}}', "a['b c'][0]", "out of range"),
    ("[1, NaN]", "[1]", "NaN is not a number JSON allows"),
    ('{"x": -1e999}', "x", "out of range"),
])
def test_json_names_the_field_of_a_number_out_of_range(doc: str, field: str, why: str) -> None:
    with pytest.raises(safeio.UnsafeFile) as err:
        safeio.loads_json(doc, "f.json")
    assert str(err.value).startswith(f"f.json: {field}: ") and why in str(err.value)


def test_check_number_names_file_and_field() -> None:
    assert safeio.check_number(5, "f.json", "x", low=0) == 5
    for bad, why in ((-1, "-1 is out of range"), (10**400, "an integer of 1329 bits"),
                     (True, "must be a number"), ("8", "must be a number"), (1.5e31, "out of range")):
        with pytest.raises(safeio.UnsafeFile, match=f"^f.json: rows\\[0\\].x: .*{why}"):
            safeio.check_number(bad, "f.json", "rows[0].x", low=0)


def test_a_record_number_beyond_range_is_refused_by_field(tmp_path: Path) -> None:
    """However the data came (here a record built from memory, not read from JSON)."""
    plan = {"host": "n1", "gpus": 10**31, "experiment": "e", "run_id": "r", "variants": []}
    with pytest.raises(records.RecordError, match=r"^where: gpus: .*out of range"):
        records.from_json(plan, plans.HostPlan, "where")
    (tmp_path / "plan.json").write_text(json.dumps({**plan, "gpus": 1, "warmup_requests": 1e300}))
    with pytest.raises(records.RecordError, match=r"plan.json: warmup_requests: .*out of range"):
        records.read(tmp_path / "plan.json", plans.HostPlan)


def test_a_run_folder_is_one_plan_made(tmp_path: Path) -> None:
    run = tmp_path / "r1"
    assert ownedtree.check_run_folder(run, "--run-dir", new_ok=True) == run  # new
    (run / "h" / "empty").mkdir(parents=True)
    assert ownedtree.check_run_folder(run, "--run-dir", new_ok=True) == run  # only folders: nothing to lose
    (run / "notes.txt").write_text("mine")
    with pytest.raises(safeio.UnsafeFile, match="--run-dir .*r1: not a run folder made by serve-system plan"):
        ownedtree.check_run_folder(run, "--run-dir", new_ok=True)
    (run / "h" / "plan.json").write_text("{}")
    assert ownedtree.check_run_folder(run, "--run-dir") == run
    with pytest.raises(safeio.UnsafeFile, match="no such run folder"):
        ownedtree.check_run_folder(tmp_path / "none", "RUN_DIR")


def test_a_folder_that_cannot_be_listed_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the CLI fuzzer: ``report /`` walked into /proc and ended in a PermissionError."""
    from serve_system.errors import ServeSystemError
    from serve_system.results import tree

    def denied(self: Path) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "iterdir", denied)
    with pytest.raises(ServeSystemError, match=r"cannot list the folder \(Permission denied\)"):
        tree.subdirs(tmp_path)
