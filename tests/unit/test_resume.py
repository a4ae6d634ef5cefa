"""Resuming a run id never mixes configurations (issue 50): a level is reused only when its configuration,
load and perf settings are the plan's; otherwise it is set aside (never deleted) and measured again, and
the plan says which levels and why.

The levels are real: the raw files (perf_analyzer's stdout and CSV, Triton's statistics, the metrics
samples) and the level records of the recorded rehearsal run ``fixtures/rehearsal/dynbatch_run.tar.xz``,
put where the runner puts them, each record with the setting the runner records
(:func:`serve_system.node.resume.level_setting` of the plan it ran)."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest
from test_experiment_cli import _dynbatch_in_repo  # type: ignore[import-not-found]

from serve_system.cli import main
from serve_system.node import archive, plans, records, resume

FIX = Path(__file__).parent / "fixtures"
RECORDED = FIX / "rehearsal" / "dynbatch_run.tar.xz"
FIXTURE_HOST = "node-serve-system-root"
LEVELS = ("c1_r1", "c8_r1", "c16_r1")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recorded rehearsal run, unpacked once."""
    out = tmp_path_factory.mktemp("recorded")
    with tarfile.open(RECORDED) as tar:
        tar.extractall(out, filter="data")
    return out


def _plan(spec: Path, run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[plans.HostPlan, list[str]]:
    """``serve-system plan`` for node-1 (no GPU): its plan as written, and what it said on stderr."""
    capsys.readouterr()
    assert main(["plan", str(spec), "--run-dir", str(run), "--host", "node-1=0", "--quiet"]) == 0
    err = capsys.readouterr().err.splitlines()
    return records.read(run / "node-1" / records.PLAN_FILE, plans.HostPlan), err


def _record(recorded: Path, hplan: plans.HostPlan, host_dir: Path, variant: str, level: str) -> Path:
    """Level ``level`` of ``variant`` as the runner leaves it: the recorded run's raw files, and its record
    with the command the plan gave, the plan's configuration hash and the setting it was measured under."""
    v = next(x for x in hplan.variants if x.name == variant)
    lv = next(x for x in v.levels if x.id == level)
    src = recorded / FIXTURE_HOST / variant / level
    ldir = host_dir / variant / level
    shutil.copytree(src, ldir)
    lrec = records.read(src / records.LEVEL_FILE, records.LevelRecord)
    lrec.attempts = lrec.attempts[:1]
    lrec.attempts[0].argv = list(lv.argv)
    lrec.provenance["config_sha256"] = resume.config_sha256(v)
    lrec.setting = resume.level_setting(v, lv)
    records.write(ldir / records.LEVEL_FILE, lrec)
    vrec = records.VariantRecord(name=variant, model=v.model, version=v.version, status=records.MEASURED,
                                 config_sha256=resume.config_sha256(v))
    records.write(host_dir / variant / records.VARIANT_FILE, vrec)
    return ldir


def _edit(spec: Path, old: str, new: str) -> None:
    text = spec.read_text()
    assert old in text
    spec.write_text(text.replace(old, new, 1))


def _report_rows(run: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    capsys.readouterr()
    assert main(["report", "--partial", str(run)]) == 0, capsys.readouterr().err
    return list(json.loads((run / "summary.json").read_text())["rows"])


def test_an_edited_variant_is_measured_again_its_old_levels_set_aside_and_no_report_mixes_them(
        tmp_path: Path, recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = _dynbatch_in_repo(tmp_path)
    run = tmp_path / "results" / "dynbatch" / "r1"
    first, said = _plan(spec, run, capsys)
    assert not said and first.measured_again == []
    host = run / "node-1"
    for variant in ("baseline", "dynbatch"):
        for level in LEVELS:
            _record(recorded, first, host, variant, level)
    # the same plan again: every recorded level is reused, nothing is said
    again, said = _plan(spec, run, capsys)
    done = {(v.name, lv.id) for v in again.variants for lv in v.levels if lv.done}
    assert done == {(v, lv) for v in ("baseline", "dynbatch") for lv in LEVELS} and not said
    old_dynbatch = {lv: (host / "dynbatch" / lv / records.LEVEL_FILE).read_bytes() for lv in LEVELS}
    before = {str(r["variant"]): r["throughput"] for r in _report_rows(run, capsys)
              if r["load"] == 8 and r["repetition"] == 1}

    # the user edits the variant's queue delay and plans the same run id
    _edit(spec, "max_queue_delay_microseconds: 100", "max_queue_delay_microseconds: 500")
    edited, said = _plan(spec, run, capsys)
    todo = {(v.name, lv.id) for v in edited.variants for lv in v.levels if not lv.done}
    assert {("dynbatch", lv) for lv in LEVELS} <= todo
    assert not {("baseline", lv) for lv in LEVELS} & todo  # baseline's configuration did not change
    # the plan names each level measured again, and why: one line each
    why = "measured again: configuration changed (max_queue_delay_microseconds: 100 -> 500)"
    assert edited.measured_again == [f"dynbatch {lv}: {why}" for lv in sorted(LEVELS)]
    assert [ln for ln in said if "measured again" in ln] == [
        f"{spec}: node-1: dynbatch {lv}: {why} (the old measurement is kept in node-1/<variant>/.superseded/)"
        for lv in sorted(LEVELS)]
    # the old measurement is moved aside, never deleted: every file, the old config and why
    aside = list((host / "dynbatch" / resume.SUPERSEDED).iterdir())
    assert len(aside) == 1
    for lv in LEVELS:
        assert (aside[0] / lv / records.LEVEL_FILE).read_bytes() == old_dynbatch[lv]
        assert (aside[0] / lv / records.PERF_STDOUT_FILE).is_file()
        assert not (host / "dynbatch" / lv).exists()
    assert "max_queue_delay_microseconds: 100\n" in (aside[0] / records.CONFIG_FILE).read_text()
    assert "max_queue_delay_microseconds: 500\n" in (host / "dynbatch" / records.CONFIG_FILE).read_text()
    note = json.loads((aside[0] / resume.NOTE_FILE).read_text())
    assert note["why"]["c8_r1"] == why.removeprefix("measured again: ")
    assert records.VARIANT_FILE in note["moved"]

    # the report (partial: the edited variant is still to measure) holds no level of the old configuration
    rows = _report_rows(run, capsys)
    assert {str(r["variant"]) for r in rows if r["load"] is not None} == {"baseline"}
    assert "dynbatch/c8_r1" in (run / "report.md").read_text()  # listed as missing, not reported
    # measured again under the new configuration: reported, and the old numbers are nowhere in it
    for lv in LEVELS:
        _record(recorded, edited, host, "dynbatch", lv)
    rows = _report_rows(run, capsys)
    new = {str(r["variant"]): r["throughput"] for r in rows if r["load"] == 8 and r["repetition"] == 1}
    assert set(new) == {"baseline", "dynbatch"} and new["baseline"] == before["baseline"]
    config = resume.config_sha256(next(v for v in edited.variants if v.name == "dynbatch"))
    for lv in LEVELS:
        lrec = records.read(host / "dynbatch" / lv / records.LEVEL_FILE, records.LevelRecord)
        assert lrec.setting is not None and lrec.setting.config_sha256 == config

    # a level of the old configuration put back by hand: the report refuses to mix the two
    shutil.rmtree(host / "dynbatch" / "c8_r1")
    shutil.copytree(aside[0] / "c8_r1", host / "dynbatch" / "c8_r1")
    capsys.readouterr()
    assert main(["report", "--partial", str(run)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "node-1/dynbatch/c8_r1 (configuration changed" in err[0]
    assert "a report never mixes two configurations; plan the run again" in err[0]


def test_changed_perf_settings_measure_every_level_again_naming_the_option(
        tmp_path: Path, recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = _dynbatch_in_repo(tmp_path)
    run = tmp_path / "results" / "dynbatch" / "r1"
    first, _ = _plan(spec, run, capsys)
    host = run / "node-1"
    _record(recorded, first, host, "baseline", "c8_r1")
    _edit(spec, "measurement_interval_ms: 1500", "measurement_interval_ms: 3000")
    edited, _ = _plan(spec, run, capsys)
    assert edited.measured_again == [
        "baseline c8_r1: measured again: perf settings changed (--measurement-interval 1500 -> 3000)"]
    assert not next(lv for v in edited.variants if v.name == "baseline" for lv in v.levels
                    if lv.id == "c8_r1").done
    # the configuration did not change: the variant's record stays, only the level is set aside
    assert (host / "baseline" / records.VARIANT_FILE).is_file()
    (aside,) = (host / "baseline" / resume.SUPERSEDED).iterdir()
    assert sorted(p.name for p in aside.iterdir()) == ["c8_r1", resume.NOTE_FILE]


def test_the_node_copy_of_a_changed_level_is_set_aside_and_never_packed(
        tmp_path: Path, recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The node keeps its copy of the run between plays: the runner settles it by the same rule before it
    measures, so the archive it packs never brings a level of the old configuration home."""
    spec = _dynbatch_in_repo(tmp_path)
    run = tmp_path / "results" / "dynbatch" / "r1"
    first, _ = _plan(spec, run, capsys)
    node = tmp_path / "node"  # the node's folder of the run
    for lv in LEVELS:
        _record(recorded, first, node, "dynbatch", lv)
    _record(recorded, first, node, "baseline", "c8_r1")
    _edit(spec, "max_queue_delay_microseconds: 100", "max_queue_delay_microseconds: 500")
    edited, _ = _plan(spec, run, capsys)
    moved = resume.settle(node, edited.variants)
    assert sorted((s.variant, s.level) for s in moved) == [("dynbatch", lv) for lv in sorted(LEVELS)]
    archive.pack(node, [v.name for v in edited.variants], tmp_path / "results.tar.gz")
    with tarfile.open(tmp_path / "results.tar.gz") as tar:
        names = tar.getnames()
    assert "baseline/c8_r1/level.json" in names
    assert not [n for n in names if n.startswith("dynbatch/c") or resume.SUPERSEDED in n]
    assert "dynbatch/variant.json" not in names  # the old configuration's record went aside with it
    # settled once: a second look moves nothing
    assert resume.settle(node, edited.variants) == []


def test_a_run_recorded_before_the_hashes_resumes_on_its_configuration(
        tmp_path: Path, recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The recorded rehearsal run's levels carry no setting, only their configuration's hash: they are
    reported as they are, and one whose configuration the plan changed is measured again."""
    run = tmp_path / "results" / "dynbatch" / "r1"
    shutil.copytree(recorded, run)
    host = run / FIXTURE_HOST
    hplan = records.read(host / records.PLAN_FILE, plans.HostPlan)
    done, stale = resume.check_host(host, hplan.variants)
    measured = {(p.parent.parent.name, p.parent.name) for p in host.glob("*/*/level.json")}
    assert not stale and done == measured and len(done) == 24  # 2 variants x 3 loads x 4 repetitions
    dyn = next(v for v in hplan.variants if v.name == "dynbatch")
    dyn.config_pbtxt = dyn.config_pbtxt.replace("max_queue_delay_microseconds: 100",
                                                "max_queue_delay_microseconds: 500")
    assert "500" in dyn.config_pbtxt
    moved = resume.settle(host, hplan.variants, within=run)
    assert {s.level for s in moved} == {lid for v, lid in measured if v == "dynbatch"}
    assert all(s.variant == "dynbatch" and s.why.startswith("configuration changed (max_queue_delay"
                                                            "_microseconds: 100 -> 500)") for s in moved)
    assert not list((host / "dynbatch").glob("c*"))


def test_the_runner_settles_the_nodes_copy_before_anything_else_and_packs_only_the_plans_levels(
        tmp_path: Path, recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The runner itself (its command line, as the role calls it on the node): a level of the node's copy
    measured under the earlier plan is set aside first, said on stderr, and left out of the archive."""
    import subprocess
    import sys

    spec = _dynbatch_in_repo(tmp_path)
    run = tmp_path / "results" / "dynbatch" / "r1"
    first, _ = _plan(spec, run, capsys)
    node = tmp_path / "node"
    _record(recorded, first, node, "dynbatch", "c8_r1")
    _record(recorded, first, node, "baseline", "c8_r1")
    _edit(spec, "max_queue_delay_microseconds: 100", "max_queue_delay_microseconds: 500")
    _plan(spec, run, capsys)
    shutil.copy(run / "node-1" / records.PLAN_FILE, node / records.PLAN_FILE)  # the put of the new plan
    proc = subprocess.run([sys.executable, "-m", "serve_system.node.runner",
                           "--plan", str(node / "plan.json"), "--triton-log",
                           "--progress", str(tmp_path / "progress.json")],
                          input="", capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # (the node keeps no config.pbtxt to say which lines changed: the controller's plan said it)
    assert proc.stderr.splitlines() == ["node-1 dynbatch c8_r1: measured again: configuration changed"]
    assert not (node / "dynbatch" / "c8_r1").exists()
    (aside,) = (node / "dynbatch" / resume.SUPERSEDED).iterdir()
    assert (aside / "c8_r1" / records.LEVEL_FILE).is_file() and (aside / records.VARIANT_FILE).is_file()
    with tarfile.open(node / archive.ARCHIVE) as tar:
        names = tar.getnames()
    assert "baseline/c8_r1/level.json" in names and not [n for n in names if n.startswith("dynbatch/")]
