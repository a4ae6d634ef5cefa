"""The experiment's records (round trip, one-line refusals), the resume rule, the runner's caps, the lease
guard."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from serve_system.experiment.manifest import Manifest
from serve_system.experiment.plan import estimate_seconds, lease_problem
from serve_system.experiment.runfolder import Targets
from serve_system.node import archive, events, follow, nodeproc, plans, records, resume, runner


def _level(**kw: object) -> records.LevelRecord:
    base: dict[str, object] = {
        "variant": "baseline", "level": "c8_r1", "mode": "concurrency", "load": 8.0, "repetition": 1,
        "status": "ok", "start": 100.0, "end": 112.5, "batch_size": 1,
        "attempts": [records.Attempt(argv=["perf_analyzer", "-m", "m"], rc=0, start=100.0, end=105.0,
                                  reason=None, max_rss_mb=41.5),
                  records.Attempt(argv=["perf_analyzer", "-m", "m", "--measurement-interval", "10000"], rc=0,
                                  start=105.0, end=112.5,
                                  reason="unstable measurement: retried with a longer window")],
        "provenance": {"git_commit": "abc", "config_sha256": "f00", "images": {"triton_server": "sha256:1"}}}
    base.update(kw)
    return records.LevelRecord(**base)  # type: ignore[arg-type]


def test_records_round_trip(tmp_path: Path) -> None:
    lv = _level()
    records.write(tmp_path / "level.json", lv)
    assert records.read(tmp_path / "level.json", records.LevelRecord) == lv
    plan = plans.HostPlan(host="n1", gpus=0, experiment="e", run_id="r", kind="triton", models=["m"],
                            variants=[
        plans.VariantPlan(name="v", model="m", version="1", config_pbtxt="name: 'm'",
                            load_body={"parameters": {}},
                            notes=[], input_data=None, perf={"batch_size": 1}, levels=[
                                plans.LevelPlan(id="c1_r1", mode="concurrency", load=1.0, repetition=1,
                                                  argv=["perf_analyzer"],
                                                  retry_argv=[["perf_analyzer", "-x"]])])])
    records.write(tmp_path / "plan.json", plan)
    back = records.read(tmp_path / "plan.json", plans.HostPlan)
    assert back == plan and back.variants[0].todo == 1
    prog = records.Progress(experiment="e", run_id="r", variant="v", level="c1_r1", levels_done=1,
                            levels_total=3, state="running", updated=time.time())
    records.write(tmp_path / "progress.json", prog)
    assert set(json.loads((tmp_path / "progress.json").read_text())) == {
        "experiment", "run_id", "variant", "level", "levels_done", "levels_total", "state", "updated"}


def _search_plan(**kw: object) -> plans.SearchPlan:
    goal = plans.ObjectiveRecord(name="best", metric="throughput", goal="max", at_load=8.0,
                                   constraints={"p95_us": plans.BoundRecord(max=5000.0)})
    base: dict[str, object] = {
        "strategy": "optuna", "objective": goal, "smallest_effect": 0.05, "calls": 3,
        "candidates": [plans.SearchCandidate("first"), plans.SearchCandidate(
            "i4_d100", {"count": 4, "delay": 0.5, "on": True, "kind": "gpu", "none": None})],
        "rungs": [plans.SearchRung([1, 2], 1250)], "budget": plans.SearchBudgetRecord(runs=40)}
    base.update(kw)
    return plans.SearchPlan(**base)  # type: ignore[arg-type]


def test_a_search_plan_round_trips_and_an_older_one_reads(tmp_path: Path) -> None:
    """A host plan's search is read back typed (a candidate's grid values keep their JSON types), is
    written with plan.json's keys in their order (``shard`` and ``share`` null where not sharded), and
    one written before (no shard or share, bounds without ``min``) reads with their defaults."""
    shard = plans.SearchShard("first", ["a", "b"], {"a": ["i4_d100"], "b": []})
    sharded = _search_plan(shard=shard, share=2)
    for search in (_search_plan(), sharded):
        plan = plans.HostPlan(host="n1", gpus=0, experiment="e", run_id="r", variants=[], search=search)
        records.write(tmp_path / "plan.json", plan)
        back = records.read(tmp_path / "plan.json", plans.HostPlan)
        assert back == plan and back.search is not None
        params = back.search.candidates[1].params
        assert [type(v) for v in params.values()] == [int, float, bool, str, type(None)]
    written = json.loads((tmp_path / "plan.json").read_text())["search"]
    assert list(written) == ["strategy", "objective", "smallest_effect", "candidates", "rungs", "budget",
                             "seed", "startup", "batch", "calls", "timed", "shard", "share"]
    old = {k: v for k, v in written.items() if k not in ("shard", "share")}
    old["objective"]["constraints"] = {"p95_us": {"max": 5000.0}}
    assert records.from_json(old, plans.SearchPlan, "plan.json") == _search_plan()
    old["rungs"][0]["window_ms"] = "long"
    with pytest.raises(records.RecordError, match=r"^plan.json: rungs\[0\].window_ms: expected a whole"):
        records.from_json(old, plans.SearchPlan, "plan.json")


def test_the_adaptive_plan_and_the_shard_records_round_trip_and_older_ones_read(tmp_path: Path) -> None:
    """``repetitions: auto`` and a sharded run's records are read back typed, are written with their keys
    in plan.json's and manifest.json's order (the manifest's shard without a host's candidates, ``only``
    null without ``-e variants``), and ones written before (no ``only``, no ``rule``) read with their
    defaults."""
    shard = plans.HostShard(reference="base", hosts=["n1", "n2"], assignment={"n1": ["a"], "n2": ["b"]},
                              rule="dealt", candidates=["a"])
    plan = plans.HostPlan(host="n1", gpus=0, experiment="e", run_id="r", variants=[], shard=shard,
                            adaptive=plans.AdaptivePlan(start=3, max=5, minutes=2.5, only=["a"]))
    records.write(tmp_path / "plan.json", plan)
    assert records.read(tmp_path / "plan.json", plans.HostPlan) == plan
    written = json.loads((tmp_path / "plan.json").read_text())
    assert list(written["adaptive"]) == ["start", "max", "minutes", "only"]
    assert list(written["shard"]) == ["reference", "hosts", "assignment", "rule", "candidates"]
    man = Manifest(experiment="e", shard=plans.ShardRecord(reference="base", hosts=["n1"],
                                                                     assignment={"n1": ["a"]}, rule="dealt"))
    records.write(tmp_path / "manifest.json", man)
    # (a manifest naming no objectives reads with the default ones: the spec's rule)
    assert dataclasses.replace(records.read(tmp_path / "manifest.json", Manifest), objectives=[]) == man
    assert list(json.loads((tmp_path / "manifest.json").read_text())["shard"]) == [
        "reference", "hosts", "assignment", "rule"]
    old = {"start": 3, "max": 4, "minutes": None}
    assert records.from_json(old, plans.AdaptivePlan, "plan.json") == plans.AdaptivePlan(start=3, max=4)
    old_shard = {"reference": "base", "hosts": ["n1"], "assignment": {"n1": []}}
    assert records.from_json(old_shard, plans.ShardRecord, "manifest.json").rule == ""
    with pytest.raises(records.RecordError, match=r"^plan.json: adaptive.start: expected a whole number"):
        records.from_json({**written, "adaptive": {**old, "start": "3"}}, plans.HostPlan, "plan.json")
    with pytest.raises(records.RecordError, match=r"^plan.json: shard.assignment.n1: expected a list"):
        records.from_json({**written, "shard": {**old_shard, "assignment": {"n1": "a"}}}, plans.HostPlan,
                          "plan.json")


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d.pop("end"), "end: missing"),
    (lambda d: d.update(load="eight"), "load: expected a number"),
    (lambda d: d["attempts"][1].update(argv="perf_analyzer"), "attempts[1].argv: expected a list"),
    (lambda d: d.update(repetition=True), "repetition: expected a whole number"),
])
def test_a_malformed_record_is_refused_in_one_line(tmp_path: Path, edit,
                                                   field: str) -> None:  # type: ignore[no-untyped-def]
    data = records.to_json(_level())
    edit(data)
    path = tmp_path / "level.json"
    path.write_text(json.dumps(data))
    with pytest.raises(records.RecordError) as err:
        records.read(path, records.LevelRecord)
    msg = str(err.value)
    assert msg == f"{path}: {field}" or msg.startswith(f"{path}: {field}")
    assert "\n" not in msg
    path.write_bytes(b"\xff{")
    with pytest.raises(records.RecordError, match=f"^{path}:1: not UTF-8 text"):
        records.read(path, records.LevelRecord)


def test_the_resume_rule(tmp_path: Path) -> None:
    host = tmp_path / "n1"
    done = host / "v" / "c1_r1"
    interrupted = host / "v" / "c8_r1"  # raw files but no record: measured again
    broken = host / "w" / "c1_r1"
    failed = host / "w" / "c8_r1"  # a failed level keeps its reason and counts as done
    for d in (done, interrupted, broken, failed):
        d.mkdir(parents=True)
    records.write(done / "level.json", _level())
    (interrupted / "perf.csv").write_text("Concurrency,Inferences/Second\n8,10\n")
    (broken / "level.json").write_text('{"end": 1.0}')
    records.write(failed / "level.json", _level(status="failed", error="killed by the runner: memory cap"))
    assert records.level_done(done) and records.level_done(failed)
    assert not records.level_done(interrupted) and not records.level_done(broken)
    assert records.done_levels(host) == {("v", "c1_r1"), ("w", "c8_r1")}
    assert records.done_levels(tmp_path / "nowhere") == set()


def test_runner_caps_memory_and_time(tmp_path: Path) -> None:
    hog = [sys.executable, "-c",
           "import time\nx=[]\nwhile True:\n x.append(bytearray(20_000_000)); time.sleep(0.05)"]
    attempt, _ = nodeproc.run_capped(hog, tmp_path, memory_mb=200, timeout_s=60)
    assert attempt.reason is not None and attempt.reason.startswith("killed by the runner: memory cap 200 MB")
    assert attempt.max_rss_mb is not None and attempt.max_rss_mb > 150 and attempt.end - attempt.start < 30
    slow = [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"]
    attempt, out = nodeproc.run_capped(slow, tmp_path, memory_mb=500, timeout_s=1)
    assert attempt.reason == "killed by the runner: time cap 1 s reached" and "started" in out
    ok, out = nodeproc.run_capped([sys.executable, "-c", "print('fine')"], tmp_path, memory_mb=500,
                                timeout_s=30)
    assert ok.rc == 0 and ok.reason is None and out.strip() == "fine"
    killed, _ = nodeproc.run_capped([sys.executable, "-c",
                                   "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"],
                                  tmp_path, memory_mb=500, timeout_s=30)
    assert killed.rc == -9 and killed.reason is not None and "SIGKILL" in killed.reason


def test_runner_sees_the_measuring_command_exit_as_it_exits() -> None:
    """A level ends when its command does: the exit signal (a pidfd) is quiet while the command runs and
    readable once it has exited, and the command is still there to reap (its exit status and rusage)."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    exited = nodeproc._exit_signal(proc.pid)
    assert exited is not None  # Linux 5.3+ (every node and this machine): a pidfd
    try:
        assert select.select([exited], [], [], 0)[0] == []
        assert nodeproc._reap(proc) is None
        assert proc.stdin is not None
        proc.stdin.close()  # the command ends
        assert select.select([exited], [], [], 30)[0] == [exited]
        reaped = nodeproc._reap(proc, block=True)
        assert reaped is not None and proc.returncode == 0
    finally:
        os.close(exited)
        if proc.returncode is None:
            proc.kill()
            proc.wait()


def test_runner_records_the_exact_peak_rss(tmp_path: Path) -> None:
    """The kernel's peak (wait4) of a short-lived spike the 0.2 s sampling cannot see, and of a killed hog."""
    spike = [sys.executable, "-c", "x = bytearray(300_000_000)"]
    attempt, _ = nodeproc.run_capped(spike, tmp_path, memory_mb=2000, timeout_s=60)
    assert attempt.rc == 0 and attempt.peak_rss_bytes is not None
    assert 300_000_000 <= attempt.peak_rss_bytes < 1_000_000_000, attempt.peak_rss_bytes
    hog = [sys.executable, "-c",
           "import time\nx=[]\nwhile True:\n x.append(bytearray(20_000_000)); time.sleep(0.05)"]
    killed, _ = nodeproc.run_capped(hog, tmp_path, memory_mb=200, timeout_s=60)
    assert killed.reason is not None and killed.reason.startswith("killed by the runner: memory cap")
    assert killed.peak_rss_bytes is not None and killed.peak_rss_bytes > 200 * 1024 * 1024
    level = _level(attempts=[attempt, killed])
    assert records.client_peak_rss(level.attempts) == max(attempt.peak_rss_bytes, killed.peak_rss_bytes)
    assert records.client_peak_rss([records.Attempt(argv=[], rc=None, start=0, end=0)]) is None


FIXTURES = Path(__file__).parent / "fixtures" / "perf260"


def test_a_run_that_exits_0_having_measured_nothing_is_named_with_its_own_error(tmp_path: Path) -> None:
    """perf_analyzer 2.60 exits 0 when every request failed (seen on a GPU node: the Python backend's stub
    died), writing no CSV: the runner must not call that level ok."""
    text = (FIXTURES / "stub_not_healthy_c8.stdout").read_text()
    csv = tmp_path / "perf.csv"
    argv = ["perf_analyzer", "-m", "food_classifier", "-f", str(csv)]
    why = nodeproc.nothing_measured(argv, 0, text)
    assert why == ("perf_analyzer measured nothing: its requests failed: "
                   "Stub process 'food_classifier_0_2' is not healthy.")
    assert runner.STUB_DEAD.search(text)
    csv.write_text("Concurrency,Inferences/Second\n")  # the header alone: still nothing measured
    assert nodeproc.nothing_measured(argv, 0, text) == why
    csv.write_text("Concurrency,Inferences/Second\n8,190.5\n")  # a result row: measured
    assert nodeproc.nothing_measured(argv, 0, text) is None
    # a non-zero exit is reported by its status; a run not asked for a CSV is not judged by it
    assert nodeproc.nothing_measured(argv, 1, text) is None
    assert nodeproc.nothing_measured(["perf_analyzer", "-m", "m"], 0, text) is None
    # no request error printed: perf_analyzer's unstable line, else the missing row
    csv.unlink()
    unstable = (FIXTURES / "unstable_count_windows.txt").read_text()
    assert nodeproc.nothing_measured(argv, 0, unstable).startswith(  # type: ignore[union-attr]
        "perf_analyzer measured nothing: Failed to obtain stable measurement")
    assert (nodeproc.nothing_measured(argv, 0, "")
            == "perf_analyzer measured nothing: no result row in its CSV")


def test_a_load_whose_stub_died_is_unavailable_not_refused() -> None:
    """Seen on a GPU node: Triton answered a load with its stub's death, which is no verdict on the
    configuration (a search would otherwise say Triton refused it)."""
    dead = ("HTTP 400: load failed for model 'food_classifier': version 1 is at UNAVAILABLE state: "
            "Internal: Stub process 'food_classifier_0_0' is not healthy.;")
    assert runner.failed_load_status(records.TRITON, True, dead) == records.UNAVAILABLE
    refused = "HTTP 400: echo_local: parameter echo_local_refuse=yes: refusing to load"
    assert runner.failed_load_status(records.TRITON, True, refused) == records.REFUSED
    gone = "URLError: connection refused"
    assert runner.failed_load_status(records.TRITON, False, gone) == records.UNAVAILABLE
    assert runner.failed_load_status(records.FASTAPI, True, "HTTP 503") == records.UNAVAILABLE


def test_lease_guard() -> None:
    now = 1_800_000_000.0  # 2027-01-15T08:00:00Z
    assert lease_problem("2027-01-15T09:00:00Z", 1800, now) is None
    why = lease_problem("2027-01-15T08:20:00Z", 1800, now)
    assert why is not None and why.end is not None and why.finish == now + 1800
    text = str(why)
    assert "08:30:00Z" in text and "08:20:00Z" in text and text.endswith("or pass -e ignore_lease_end=true")
    # a search is offered a smaller budget too, in the same sentence
    assert str(lease_problem("2027-01-15T08:20:00Z", 1800, now, search=True)).endswith(
        "measure fewer variants (-e variants=...), pass -e fit_lease=true (a smaller search budget), or -e "
        "ignore_lease_end=true")
    assert "not an ISO 8601 time" in str(lease_problem("tomorrow", 10, now))


def test_estimate_counts_pending_levels_only() -> None:
    lv = plans.LevelPlan(id="c1_r1", mode="concurrency", load=1.0, repetition=1, argv=[], retry_argv=[[]])
    v = plans.VariantPlan(name="v", model="m", version="1", config_pbtxt="", load_body={}, notes=[],
                            input_data=None, perf={"measurement_interval_ms": 2000}, levels=[lv])
    one = estimate_seconds([v])
    assert one > 6
    lv.done = True
    assert estimate_seconds([v]) == 0


def _refused_run(tmp_path: Path) -> Path:
    """A host's node folder after a runner call: two variants of one model refused at different times."""
    lp = plans.LevelPlan(id="c1_r1", mode="concurrency", load=1, repetition=1, argv=["true"], retry_argv=[])
    variants = [plans.VariantPlan(name=n, model="food", version="1", config_pbtxt="", load_body={},
                                    notes=[],
                                    levels=[lp], input_data=None, perf={})
                for n in ("first", "second", "fine")]
    plan = plans.HostPlan(host="n1", gpus=0, experiment="e", run_id="r", variants=variants, models=["food"],
                            endpoints=Targets().endpoints())
    records.write(tmp_path / "plan.json", plan)
    for name, t0 in (("first", 1795338000.0), ("second", 1795338100.0)):
        records.write(tmp_path / name / "variant.json", records.VariantRecord(
            name=name, model="food", version="1", status="refused", error="HTTP 400: failed to load 'food'",
            load_started=t0, switch_seconds=1.5))
    records.write(tmp_path / "fine" / "variant.json",
                  records.VariantRecord(name="fine", model="food", version="1",
                                                                           status="measured"))
    # measured under this plan: its setting (and its configuration's hash) the plan's, as the runner records
    records.write(tmp_path / "fine" / "c1_r1" / "level.json", _level(
        variant="fine", level="c1_r1", provenance={"config_sha256": resume.config_sha256(variants[2])},
        setting=resume.level_setting(variants[2], lp)))
    (tmp_path / "fine" / "c8_r1").mkdir()  # an interrupted level: no record, not brought home
    return tmp_path / "plan.json"


def test_runner_gives_each_refused_load_its_own_reason_from_triton_log(tmp_path: Path) -> None:
    plan = _refused_run(tmp_path)
    # `docker logs --timestamps`: each refusal's lines were written while its own load was under way
    lines = [
        "2026-11-22T09:00:00.200000000Z I1122 09:00:00.2 1 model_lifecycle.cc:473] loading: food:1",
        ("2026-11-22T09:00:01.000000000Z E1122 09:00:01.0 1 model_lifecycle.cc:654] failed to load 'food': "
         "first reason"),
        ("2026-11-22T09:01:40.500000000Z E1122 09:01:40.5 1 model_lifecycle.cc:654] failed to load 'food': "
         "second reason"),
        ("2026-11-22T09:10:00.000000000Z E1122 09:10:00.0 1 model_lifecycle.cc:654] failed to load 'food': "
         "later"),
    ]
    log = "\n".join(lines)
    proc = subprocess.run([sys.executable, "-m", "serve_system.node.runner", "--plan", str(plan),
                           "--triton-log", "--progress", str(tmp_path / "progress.json")],
                          input=log, capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    first = records.read(tmp_path / "first" / "variant.json", records.VariantRecord)
    second = records.read(tmp_path / "second" / "variant.json", records.VariantRecord)
    assert (first.error or "").endswith("failed to load 'food': first reason")
    assert (second.error or "").endswith("failed to load 'food': second reason")
    said, other = events.read_events(proc.stdout)
    assert other == []
    assert [(e.kind, e.variant, e.status, e.error) for e in said] == [
        ("variant", "first", "refused", first.error), ("variant", "second", "refused", second.error)]
    assert said[0].text == f"n1 first: refused: {first.error}"
    # the records come home as one archive: complete levels only
    import tarfile

    with tarfile.open(tmp_path / "results.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"first/variant.json", "second/variant.json", "fine/variant.json",
            "fine/c1_r1/level.json"} <= names
    assert not any(n.startswith("fine/c8_r1") for n in names)


def test_runner_refuses_an_unknown_variant_in_one_line(tmp_path: Path) -> None:
    plan = _refused_run(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "serve_system.node.runner", "--plan", str(plan),
                           "--variant", "fine",
                           "--variant", "nope", "--progress", str(tmp_path / "progress.json")],
                          capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr == f"{plan}: variants: no variant named 'nope': give one of first, second, fine\n"
    assert not (tmp_path / "results.tar.gz").exists()


def test_host_archive_round_trip_and_refusals(tmp_path: Path) -> None:
    """pack on the node, unpack on the controller: complete levels only, every member checked first."""
    import io
    import tarfile

    node = tmp_path / "node"
    _refused_run(node)
    records.write(node / "host.json", records.HostRecord(host="n1", end="2026-11-22T10:00:00Z",
                                                         baseline_restored=True))
    (node / "fine" / "c1_r1" / "perf.csv").write_text("Concurrency,Inferences/Second\n1,10\n")
    packed = tmp_path / archive.ARCHIVE
    archive.pack(node, ["first", "second", "fine"], packed)
    with tarfile.open(packed) as tar:
        order = tar.getnames()
    ctl = tmp_path / "ctl"
    assert archive.unpack(packed, ctl, ["first", "second", "fine"]) == 6
    assert records.done_levels(ctl) == {("fine", "c1_r1")} and not (ctl / "fine" / "c8_r1").exists()
    assert (ctl / "fine" / "c1_r1" / "perf.csv").read_text() == (
        node / "fine" / "c1_r1" / "perf.csv").read_text()
    assert records.read(ctl / "host.json", records.HostRecord).baseline_restored
    assert order.index("fine/c1_r1/level.json") < order.index("fine/c1_r1/perf.csv")  # packed in folder order

    def bad(name: str, kind: bytes = tarfile.REGTYPE) -> Path:
        path = tmp_path / f"bad{abs(hash(name))}.tar.gz"
        with tarfile.open(path, "w:gz") as tar:
            tar.add(node / "fine", arcname="fine")
            info = tarfile.TarInfo(name)
            info.type, info.size = kind, 0
            if kind == tarfile.SYMTYPE:
                info.linkname = "/etc"
            tar.addfile(info, io.BytesIO(b""))
        return path

    for name, kind, why in (("../evil.json", tarfile.REGTYPE, "../evil.json: not a record"),
                            ("fine/../../x", tarfile.REGTYPE, "fine/../../x: not a record"),
                            ("other/variant.json", tarfile.REGTYPE, "other/variant.json: not a record"),
                            ("fine/link", tarfile.SYMTYPE, "fine/link: not a record")):
        dest = tmp_path / "refused"
        with pytest.raises(records.RecordError, match=why):
            archive.unpack(bad(name, kind), dest, ["first", "second", "fine"])
        assert not dest.exists()  # nothing written
    (tmp_path / "torn.tar.gz").write_bytes(packed.read_bytes()[:40])
    with pytest.raises(records.RecordError, match="not a readable archive of records"):
        archive.unpack(tmp_path / "torn.tar.gz", tmp_path / "refused", ["fine"])
    # the role fetches each host's archive to <host>/.fetch/; collect_run puts every one in, then drops it
    run = tmp_path / "run"
    for host in ("n1", "n2"):
        (run / host / ".fetch").mkdir(parents=True)
        shutil.copyfile(node / "plan.json", run / host / "plan.json")
        shutil.copyfile(packed, run / host / archive.FETCHED)
    assert archive.collect_run(run) == [("n1", 6), ("n2", 6)]
    assert records.done_levels(run / "n2") == {("fine", "c1_r1")} and not (
        run / "n1" / archive.FETCHED).exists()
    assert archive.collect_run(run) == []  # nothing fetched since: nothing to do
    # the role asks decide of every host at once, and each call collects every archive: under the
    # run folder's lock each archive goes in once, and no call finds one gone under it
    hosts = [f"h{i:02d}" for i in range(12)]
    for host in hosts:
        (run / host / ".fetch").mkdir(parents=True)
        shutil.copyfile(node / "plan.json", run / host / "plan.json")
        shutil.copyfile(packed, run / host / archive.FETCHED)
    with concurrent.futures.ProcessPoolExecutor(4) as pool:
        calls = list(pool.map(archive.collect_run, [run] * 4))
    assert sorted(h for call in calls for h, _ in call) == hosts  # no call failed; each archive once
    assert all(records.done_levels(run / h) == {("fine", "c1_r1")} for h in hosts)
    assert not list(run.iterdir()) or all(p.is_dir() for p in run.iterdir())  # the lock wrote no file


# ------------------------------------------------------------------------------- the runner's events

def _event(**kw: object) -> str:
    base: dict[str, object] = {"kind": "level", "host": "n1", "text": "t"}
    return events.event_line(events.Event(**{**base, **kw}))  # type: ignore[arg-type]


def test_events_round_trip_and_summary_for_the_role() -> None:
    out = "\n".join([
        _event(kind="waiting", text="waiting for an earlier runner"),
        _event(variant="a", level="c1_r1", seq=1, total=2, status="ok", text="n1 a c1_r1 1/2: ok; ETA x"),
        _event(kind="variant", variant="bad", status="refused", error="HTTP 400",
               text="n1 bad: refused: HTTP 400"),
        "a stray line (kept, not guessed at)",
        _event(variant="a", level="c8_r1", seq=2, total=2, status="failed", error="killed",
               text="n1 a c8_r1 2/2"),
        _event(kind="variant", variant="a", status="measured", measured=2, text="n1 a: 2 level(s) measured"),
        _event(kind="end", status="ok", measured=2, host_record=True, restored=True, text="n1: 2 level(s)"),
    ])
    explained = _event(kind="variant", variant="bad", status="refused", error="HTTP 400 | triton log: why",
                       text="n1 bad: refused: HTTP 400 | triton log: why")
    got = events.summarize_events(out, explained)
    assert got == {
        "levels": ["n1 a c1_r1 1/2: ok; ETA x", "n1 a c8_r1 2/2"],
        "variants": ["n1 bad: refused: HTTP 400 | triton log: why", "n1 a: 2 level(s) measured"],
        "refused": True, "host_record": True, "end": "n1: 2 level(s)",
        "report": ["n1 bad: refused: HTTP 400 | triton log: why", "n1 a: 2 level(s) measured",
                   "n1: 2 level(s)"],
        "other": ["a stray line (kept, not guessed at)"],
    }
    # a call that ended without a host record (no --restore, or the runner failed): the role restores
    assert events.summarize_events(_event(kind="end", status="failed", text="x"))["host_record"] is False
    assert events.summarize_events("")["end"] == ""


def test_events_refuse_a_line_that_is_not_an_event() -> None:
    with pytest.raises(records.RecordError, match=r"line 2: kind: missing"):
        events.read_events(_event() + '\n{"host": "n1", "text": "no kind"}\n')
    with pytest.raises(records.RecordError, match=r"line 1: not a JSON event"):
        events.read_events("{not json")


def test_follow_waits_for_the_level_or_the_end(tmp_path: Path) -> None:
    log = tmp_path / "call.log"
    log.write_text(_event(seq=1, total=3, text="first") + "\n" + _event(seq=2, total=3, text="second") + "\n")
    cmd = [sys.executable, "-m", "serve_system.node.follow", "--follow", str(log), "--timeout", "5"]
    got = subprocess.run([*cmd, "--seq", "2"], capture_output=True, text=True, check=False, timeout=60)
    # the call's events up to level 2: the role prints the last level and reads the whole call
    assert got.returncode == 0 and [e.text for e in events.read_events(got.stdout)[0]] == ["first", "second"]
    # level 3 never comes, the call ends: the end event is the answer
    with log.open("a") as f:
        f.write(_event(kind="end", status="failed", text="the runner failed") + "\n")
    got = subprocess.run([*cmd, "--seq", "3"], capture_output=True, text=True, check=False, timeout=60)
    assert got.returncode == 0 and events.summarize_events(got.stdout)["end"] == "the runner failed"
    # the call's last level: its answer waits for the end, which follows at once
    log.write_text(_event(seq=1, total=1, text="only") + "\n")
    late = subprocess.Popen([*cmd, "--seq", "1"], stdout=subprocess.PIPE, text=True)
    time.sleep(1.0)
    assert late.poll() is None
    with log.open("a") as f:
        f.write(_event(kind="end", status="ok", host_record=True, text="done") + "\n")
    out, _ = late.communicate(timeout=30)
    assert late.returncode == 0 and events.summarize_events(out)["host_record"] is True


def test_follow_says_when_the_runner_is_gone(tmp_path: Path) -> None:
    import fcntl

    log = tmp_path / "call.log"
    log.write_text(_event(seq=1, total=3, text="first") + "\n" + '{"kind": "le')  # a half-written line
    (tmp_path / "call.err").write_text(
        "Traceback (most recent call last):\nOSError: [Errno 28] No space left\n")
    with open(tmp_path / ".runner.lock", "w") as lock:  # a runner holds the lock: it is alive
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert follow.runner_alive(tmp_path / ".runner.lock")
        assert follow.follow(log, 2, 0.5) == 1  # nothing within the time: one line, exit 1
    # no runner holds it, no end event: gone (after 5 s of silence), with what it said on stderr
    started = time.time()
    proc = subprocess.run([sys.executable, "-m", "serve_system.node.follow", "--follow", str(log),
                           "--seq", "2", "--stderr", str(tmp_path / "call.err"), "--timeout", "60"],
                          capture_output=True, text=True, check=False, timeout=90)
    assert proc.returncode == 1 and time.time() - started < 30
    assert proc.stderr == (f"{log}: the runner is gone without its end event; it said: OSError: [Errno 28] "
                           f"No space left: see its log and {tmp_path / 'call.err'}\n")


def test_a_plan_without_endpoints_is_refused_in_one_line(tmp_path: Path) -> None:
    plan = _refused_run(tmp_path)
    doc = json.loads(plan.read_text())
    del doc["endpoints"]
    plan.write_text(json.dumps(doc))
    proc = subprocess.run([sys.executable, "-m", "serve_system.node.runner", "--plan", str(plan),
                           "--variant", "fine", "--progress", str(tmp_path / "progress.json")],
                          capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (f"{plan}: endpoints.triton: missing: plan the run again with serve-system plan, "
                           "or give --triton\n")


def test_measured_minutes_sum_every_level_record_and_nothing_else(tmp_path: Path) -> None:
    """The budget's minutes (decide on the controller, the runner on the node): every readable level
    record's end - start; hidden folders, links and unreadable records are not counted."""
    host = tmp_path / "h"

    def level(variant: str, lid: str, start: float, end: float) -> Path:
        d = host / variant / lid
        d.mkdir(parents=True)
        records.write(d / "level.json", records.LevelRecord(
            variant=variant, level=lid, mode="concurrency", load=1, repetition=1, status="ok",
            start=start, end=end, attempts=[]))
        return d

    assert records.measured_minutes(host) == 0.0  # no folder yet
    level("a", "c1_r1", 100.0, 130.0)
    level("a", "c8_r1", 200.0, 245.0)
    level("b", "c1_r1", 300.0, 315.0)
    level(".fetch", "c1_r1", 0.0, 6000.0)  # hidden: not a variant
    (host / "b" / "c8_r1").mkdir()  # an interrupted level: no record
    (host / "b" / "bad").mkdir()
    (host / "b" / "bad" / "level.json").write_text("{not json")
    (host / "linked").symlink_to(host / "a")  # a link is never followed
    assert records.measured_minutes(host) == pytest.approx((30 + 45 + 15) / 60)
