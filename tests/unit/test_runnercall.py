"""A runner call as one record: its command lines, built once, and the runner's settings travelling in the
host plan (the runner reads them there; its own options only override them)."""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path

import pytest

from serve_system.experiment import runnercall
from serve_system.experiment.roleview import write_bundle
from serve_system.experiment.runfolder import Targets
from serve_system.node import events, plans, records, runner


def _plan(tmp_path: Path, settings: plans.RunnerSettings) -> Path:
    lp = plans.LevelPlan(id="c1_r1", mode="concurrency", load=1, repetition=1, argv=["true"], retry_argv=[])
    variant = plans.VariantPlan(name="v", model="food", version="1", config_pbtxt="", load_body={},
                                  notes=[], levels=[lp], input_data=None, perf={})
    records.write(tmp_path / "plan.json", plans.HostPlan(
        host="n1", gpus=0, experiment="e", run_id="r", variants=[variant], models=["food"],
        endpoints=Targets().endpoints(), runner=settings))
    return tmp_path / "plan.json"


def _args(plan: Path, **given: object) -> argparse.Namespace:
    base: dict[str, object] = {"plan": str(plan), "triton": "", "metrics": "", "fastapi": "",
                               "triton_log": False, "log": "", "facts": "", "metrics_interval": None,
                               "ready_timeout": None, "perf_timeout": None, "perf_memory_mb": None,
                               "progress": None}
    return argparse.Namespace(**{**base, **given})


def test_the_runner_takes_its_settings_from_the_plan_unless_the_call_gives_one(tmp_path: Path) -> None:
    plan = _plan(tmp_path, plans.RunnerSettings(ready_timeout=7, perf_memory_mb=512,
                                                  progress=str(tmp_path / "p.json")))
    got = runner.Runner(_args(plan, perf_timeout=12.0)).settings
    assert (got.perf_timeout, got.ready_timeout, got.perf_memory_mb, got.metrics_interval, got.progress) == (
        12.0, 7, 512, plans.RunnerSettings().metrics_interval, str(tmp_path / "p.json"))
    # the runner's own options are made from the settings' fields: one each, none written again
    assert [f.name for f in plans.NUMBERS] == ["metrics_interval", "ready_timeout", "perf_timeout",
                                                 "perf_memory_mb"]
    given = runner.given_settings(_args(plan, metrics_interval=0.5))
    assert given == {"metrics_interval": 0.5}


def test_the_runner_records_the_facts_the_node_printed_as_the_plan_holds_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from test_experiment_cli import _dynbatch_in_repo  # type: ignore[import-not-found]

    from serve_system.cli import main

    spec = _dynbatch_in_repo(tmp_path)
    run = tmp_path / "results" / "dynbatch" / "r1"
    printed = ("os=Ubuntu 24.04.1 LTS\nimage=/jupyter=sha256:aa\nimage=/triton_server=sha256:bb {{ x }}\n"
               "cap=6.0\ncap=7.5\n")
    args = ["plan", str(spec), "--run-dir", str(run), "--host", "n=2", "--quiet"]
    assert main([*args, f"--node-facts=n={printed}"]) == 0
    plan = records.read(run / "n" / "plan.json", plans.HostPlan)
    assert plan.facts == {"host": "n", "os": "Ubuntu 24.04.1 LTS", "gpus": 2,
                          "gpu_compute_capability": ["6.0", "7.5"],
                          "images": {"jupyter": "sha256:aa", "triton_server": "sha256:bb {{ x }}"}}
    assert plan.compute_capability == 6.0  # the lowest, as --compute-capability gives it
    got = runner.Runner(_args(run / "n" / "plan.json"))
    assert got.facts["os"] == "Ubuntu 24.04.1 LTS" and got.facts["images"]["jupyter"] == "sha256:aa"
    # the call's own --facts win; facts that are no object are refused in one line
    assert runner.Runner(_args(run / "n" / "plan.json", facts='{"os": "given"}')).facts["os"] == "given"
    with pytest.raises(records.RecordError, match=r"^--facts: a JSON list, not an object"):
        runner.Runner(_args(run / "n" / "plan.json", facts="[1]"))
    # nothing printed (no os-release, no docker, no nvidia-smi): unknown, no caps
    assert main([*args, "--node-facts=n="]) == 0
    plan = records.read(run / "n" / "plan.json", plans.HostPlan)
    assert plan.facts["os"] == "unknown" and plan.compute_capability is None
    # a line of another form, or a cap that is none: refused in one line, nothing rewritten
    before = (run / "n" / "plan.json").read_bytes()
    capsys.readouterr()
    for bad, says in (("os=x\nrm -rf /",
                       "line 'rm -rf /': not os=..., image=/NAME=ID, cap=X.Y, gpu=NAME, repository="),
                      ("cap=NVIDIA-SMI has failed", "is not a compute capability")):
        assert main([*args, f"--node-facts=n={bad}"]) == 1
        err = capsys.readouterr().err
        assert says in err and len(err.splitlines()) == 1, err
    assert main([*args, "--node-facts=other=os=x"]) == 1
    assert "not one of the --host names" in capsys.readouterr().err
    assert (run / "n" / "plan.json").read_bytes() == before


def test_a_call_is_every_command_line_the_role_runs(tmp_path: Path) -> None:
    s = plans.RunnerSettings(container="client", client_dir="/work/e/r/", node_dir="/srv/work/e/r",
                               perf_timeout=10, ready_timeout=5)
    call = runnercall.runner_call(s, ["a", "b"], [4], token="T", todo=2)
    inside = ["client", "python3", "/work/e/r/.node.pyz", "--plan", "/work/e/r/plan.json"]
    assert call.start == ["docker", "exec", "--detach", *inside, "--variant=a", "--variant=b",
                          "--repetition=4", "--log", ".progress-T.log", "--stderr", ".progress-T.log.err"]
    follow = ["python3", "/srv/work/e/r/.node.pyz", "--follow", "/srv/work/e/r/.progress-T.log",
              "--stderr", "/srv/work/e/r/.progress-T.log.err", "--timeout", str(s.level_wait_s())]
    assert call.follow == [[*follow, "--seq", "1"], [*follow, "--seq", "2"]] and s.level_wait_s() == 40
    assert call.wait_end == [*follow, "--seq", "0"]
    assert call.explain == ["docker", "exec", "-i", *inside, "--triton-log", "--variant=a", "--variant=b"]
    assert runnercall.restore_argv(s) == ["docker", "exec", "-i", *inside, "--restore"]
    assert "--restore" in runnercall.runner_call(s, ["a"], [], token="U", todo=1, restore=True).start
    # repetitions: auto's budget travels with the call: the runner restores once the host has spent it
    spend = runnercall.runner_call(s, ["a"], [2], token="V", todo=1, restore_past=2.5).start
    assert "--restore-past=2.5" in spend and "--restore" not in spend
    assert "--restore-past=2.5" not in runnercall.runner_call(s, ["a"], [2], token="W", todo=1, restore=True,
                                                              restore_past=2.5).start


def test_the_bundle_runs_the_host_side_follow_of_a_call(tmp_path: Path) -> None:
    """The node bundle holds both halves: the runner (client container) and ``--follow`` (the node), and
    runs with the standard library alone (-I -S: no site-packages, no PYTHONPATH)."""
    plan = _plan(tmp_path, plans.RunnerSettings(node_dir=str(tmp_path), perf_timeout=1, ready_timeout=1))
    hplan = records.read(plan, plans.HostPlan)
    write_bundle(tmp_path, hplan, hplan.variants, None, within=tmp_path)
    call = runnercall.runner_call(hplan.runner, ["v"], [], token="T", todo=2)
    event = events.Event(kind=events.LEVEL, host="n1", text="n1 v c1_r1: ok (1/2, ETA 0:01)", variant="v",
                          level="c1_r1", seq=1, total=2, status="ok")
    (tmp_path / ".progress-T.log").write_text(json.dumps(records.to_json(event)) + "\n")
    proc = subprocess.run([sys.executable, "-I", "-S", *call.follow[0][1:]], capture_output=True, text=True,
                          check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == events.event_line(event) + "\n"
    # the call's end is not there yet, and no runner holds the lock: one line, exit 1
    proc = subprocess.run([sys.executable, "-I", "-S", *call.wait_end[1:-2], "--timeout", "0", "--seq", "0"],
                          capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 1 and proc.stdout == "" and "nor the end within 0 s" in proc.stderr


@pytest.mark.parametrize(("opt", "value", "says"), [
    ("--perf-timeout", "-3", "give a positive number"),
    ("--metrics-interval", "soon", "is not a number"),
    ("--client-container", "-it", "not a container name"),
    ("--progress", "progress.json", "give an absolute path"),
    ("--node-dir-root", "/srv/../etc", "give an absolute path"),
])
def test_a_bad_runner_setting_is_refused_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], opt: str, value: str, says: str) -> None:
    from test_experiment_cli import _dynbatch_in_repo  # type: ignore[import-not-found]

    from serve_system.cli import main

    spec = _dynbatch_in_repo(tmp_path)
    run = tmp_path / "results" / "dynbatch" / "r1"
    with pytest.raises(SystemExit) if opt in ("--perf-timeout", "--metrics-interval") else nullcontext():
        assert main(["plan", str(spec), "--run-dir", str(run), "--host", "n=0", "--role",
                     f"{opt}={value}"]) == 1
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and len(err.strip().splitlines()) <= 2
    assert not run.exists()



def test_the_host_is_planned_on_the_base_configs_its_look_printed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The role's one look at the node carries its base configs (base64, on the plan's stdin): the host is
    planned on them, they are kept in <host>/.node_base, and a missing, bad or oversized one is refused
    in one line with nothing written; a name the spec does not hold is never made a path."""
    import io

    from test_experiment_cli import _dynbatch_in_repo  # type: ignore[import-not-found]

    from serve_system.cli import main

    spec = _dynbatch_in_repo(tmp_path)
    repo_cfg = (spec.parents[2] / "model_repository" / "food_classifier" / "config.pbtxt").read_bytes()
    served = repo_cfg.replace(b"max_batch_size: 16", b"max_batch_size: 12", 1)
    assert served != repo_cfg
    run = tmp_path / "results" / "dynbatch" / "r1"
    args = ["plan", str(spec), "--run-dir", str(run), "--host", "n=0", "--quiet", "--node-facts=n=-"]

    def look(text: str) -> int:
        monkeypatch.setattr(sys, "stdin", io.StringIO(text))
        return main(args)

    b64 = base64.b64encode(served).decode()
    assert look(f"os=Ubuntu\nconfig=food_classifier {b64}\nconfig=../../escape {b64}\n") == 0
    assert (run / "n" / ".node_base" / "food_classifier" / "config.pbtxt").read_bytes() == served
    assert not (tmp_path / "results" / "escape").exists() and not list(run.rglob("escape"))
    plan = records.read(run / "n" / "plan.json", plans.HostPlan)
    assert plan.facts["os"] == "Ubuntu"
    baseline = next(v for v in plan.variants if v.name == "baseline")
    assert "max_batch_size: 12" in baseline.config_pbtxt  # the node's base, not the spec's file
    before = (run / "n" / "plan.json").read_bytes()
    capsys.readouterr()
    missing = "the node has no regular file model_repository/food_classifier/config.pbtxt of at most 1 MiB"
    for bad, says in (("config=food_classifier\n", missing),
                      ("config=food_classifier not*base64\n", "not base64"),
                      (f"config=food_classifier {base64.b64encode(b'x' * (1024 * 1024 + 1)).decode()}\n",
                       "larger than 1024 KiB")):
        assert look(bad) == 1
        err = capsys.readouterr().err
        assert says in err and len(err.splitlines()) == 1, err
    assert (run / "n" / "plan.json").read_bytes() == before


def test_the_put_writes_the_bundle_from_its_stdin_and_empties_the_folder_when_fresh(tmp_path: Path) -> None:
    """The put writes the bundle, its bytes on its stdin, into the node folder; with ``fresh``
    (``-e fresh=true``) the folder's earlier content is gone first, and a link in the folder's place is
    refused, its target untouched."""
    settings = plans.RunnerSettings(node_dir=str(tmp_path / "node dir; $(x)"), client_dir="/work/r 1")
    folder = tmp_path / "node dir; $(x)"
    folder.mkdir()
    (folder / "old.json").write_text("{}")
    bundle = b"PK\x03\x04 a bundle"

    def put(fresh: bool) -> subprocess.CompletedProcess[str]:
        argv = runnercall.put_argv(settings, fresh)
        return subprocess.run([sys.executable, *argv[1:]], input=bundle, capture_output=True, check=False)

    assert put(False).returncode == 0
    assert sorted(p.name for p in folder.iterdir()) == [".node.pyz", "old.json"]
    assert put(True).returncode == 0
    assert [p.name for p in folder.iterdir()] == [".node.pyz"]
    assert (folder / ".node.pyz").read_bytes() == bundle
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("mine")
    shutil.rmtree(folder)
    folder.symlink_to(elsewhere)
    assert put(True).returncode != 0
    assert [p.name for p in elsewhere.iterdir()] == ["keep.txt"]
