"""``serve-system plan SPEC --play -``: the experiment role's one plan call (its settings and every
host's look as one JSON document; every host planned in one process, a host that does not fit refused
alone)."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from test_experiment_cli import _dynbatch_in_repo  # type: ignore[import-not-found]

from serve_system.cli import main
from serve_system.experiment.spec.messages import SpecError
from serve_system.node import plans, records


def _inputs(tmp_path: Path, **given: Any) -> dict[str, Any]:
    return {"results_dir": str(tmp_path / "results"), "run_id": "r1", "serve_root": "/opt/serve-system",
            "client_work_dir": "/work", "client_container": "jupyter", "perf_timeout": "",
            "ready_timeout": 30, "perf_memory_mb": "", "metrics_interval": "", "variants": [],
            "fastapi_image": "", "shard": False, "fresh": "false", "ignore_lease_end": False,
            "fit_lease": False, **given}


def _look(config: bytes | None, *extra: str) -> str:
    body = "" if config is None else " " + base64.b64encode(config).decode()
    return "\n".join(["os=Ubuntu 24.04", "image=/jupyter=sha256:aa", "repository=yes",
                      f"config=food_classifier{body}", *extra]) + "\n"


def _play(monkeypatch: pytest.MonkeyPatch, spec: Path, doc: Any) -> int:
    text = doc if isinstance(doc, str) else json.dumps(doc)
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    return main(["plan", str(spec), "--play", "-"])


def test_one_call_plans_every_host_on_its_own_look_and_refuses_only_the_host_that_does_not_fit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _dynbatch_in_repo(tmp_path)
    repo_cfg = (spec.parents[2] / "model_repository" / "food_classifier" / "config.pbtxt").read_bytes()
    served = repo_cfg.replace(b"max_batch_size: 16", b"max_batch_size: 12", 1)
    hosts = {"a": {"gpus": 0, "lease_end": "", "look": _look(served, "config=other_model")},
             "b": {"gpus": "2", "lease_end": "", "look": _look(None)},  # its Triton serves no config
             "c": {"gpus": 0, "lease_end": "2000-01-01T00:00:00Z", "look": _look(repo_cfg)}}
    assert _play(monkeypatch, spec, {"inputs": _inputs(tmp_path), "hosts": hosts}) == 0
    view = json.loads(capsys.readouterr().out)
    run = tmp_path / "results" / "dynbatch" / "r1"
    assert view["run_dir"] == str(run.resolve()) and view["kind"] == "triton"
    a = view["hosts"]["a"]
    assert a["calls"] and a["node_dir"] == "/opt/serve-system/work/dynbatch/r1" and "refused" not in a
    assert a["calls"][0]["start"][:4] == ["docker", "exec", "--detach", "jupyter"]
    # every command line the role runs comes from here: decide's words, and the play's end
    assert a["decide"] == ["decide", str(run.resolve()), "--host", "a"]
    assert view["finish"] == ["report", "--collect", "--partial", str(run.resolve())]
    # a planned on the config its node serves, with its settings and facts kept in its plan
    plan = records.read(run / "a" / "plan.json", plans.HostPlan)
    assert "max_batch_size: 12" in next(v for v in plan.variants if v.name == "baseline").config_pbtxt
    assert plan.runner.ready_timeout == 30 and plan.runner.progress == "/work/progress.json"
    assert plan.facts["os"] == "Ubuntu 24.04" and plan.facts["images"] == {"jupyter": "sha256:aa"}
    assert (run / "a" / ".node_base" / "food_classifier" / "config.pbtxt").read_bytes() == served
    assert not list(run.rglob("other_model"))  # a model the spec does not name is never made a path
    # b: its node lacks the model; c: its lease ended long ago -- each refused alone, in its own words
    assert "the node has no regular file model_repository/food_classifier/config.pbtxt" \
        in view["hosts"]["b"]["refused"]
    assert "lease" in view["hosts"]["c"]["refused"] and set(view["hosts"]["c"]) == {"refused"}
    assert json.loads((run / "manifest.json").read_text())["hosts"] == ["a", "b", "c"]


def _weights(standin: bool, choice: str = "lab") -> str:
    record = {"weights": choice, "repository": "file:///c/serve-system-chi.git", "commit": "c" * 40,
              "files": [{"path": "models_staging/food_classifier/1/food11.pth", "sha256": "d" * 64, "size": 5,
                         "standin": standin, "extra": "dropped"}],
              "generated": {"blip/1/model.onnx": "e" * 64}}
    return "weights=" + base64.b64encode(json.dumps(record).encode()).decode()


def test_the_nodes_weights_go_into_the_provenance_and_unchosen_stand_ins_on_a_gpu_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The look's weights record (serve_stack's weights.json) is kept in the host's facts, which every level's
    provenance holds; a GPU host whose Triton serves generated weights nobody chose is refused alone, in one
    line; the same weights chosen (serve_stack_weights: standin) are planned."""
    spec = _dynbatch_in_repo(tmp_path)
    repo_cfg = (spec.parents[2] / "model_repository" / "food_classifier" / "config.pbtxt").read_bytes()
    standin = repo_cfg + b'parameters { key: "serve_system_weights" value { string_value: "stand-in: x" } }\n'
    chosen = standin + b'parameters { key: "serve_system_standin_chosen" value { string_value: "y" } }\n'
    hosts = {"a": {"gpus": 1, "look": _look(repo_cfg, _weights(False))},
             "b": {"gpus": 1, "look": _look(standin, _weights(True))},
             "c": {"gpus": 1, "look": _look(chosen, _weights(True, "standin"))},
             "d": {"gpus": 0, "look": _look(standin, _weights(True))}}
    assert _play(monkeypatch, spec, {"inputs": _inputs(tmp_path), "hosts": hosts}) == 0
    view = json.loads(capsys.readouterr().out)
    run = tmp_path / "results" / "dynbatch" / "r1"
    weights = records.read(run / "a" / "plan.json", plans.HostPlan).facts["weights"]
    assert weights == {"weights": "lab", "repository": "file:///c/serve-system-chi.git", "commit": "c" * 40,
                       "files": [{"path": "models_staging/food_classifier/1/food11.pth", "sha256": "d" * 64,
                                  "size": 5, "standin": False}],
                       "generated": {"blip/1/model.onnx": "e" * 64}}
    refused = view["hosts"]["b"]["refused"]
    assert "model food_classifier: the GPU node serves generated stand-in weights, which nobody" in refused
    assert "\n" not in refused and refused.count("nobody chose") == 1
    assert view["hosts"]["c"]["calls"] and view["hosts"]["d"]["calls"]
    bad_record = "weights=" + base64.b64encode(b'{"weights": 1}').decode()
    bad = {"a": {"gpus": 0, "look": _look(repo_cfg, bad_record)}}
    assert _play(monkeypatch, spec, {"inputs": _inputs(tmp_path), "hosts": bad}) == 0
    assert "weights=: not the record serve_stack writes" in json.loads(capsys.readouterr().out)["hosts"]["a"][
        "refused"]


def test_a_look_that_names_no_repository_plans_on_the_spec_and_an_empty_repository_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _dynbatch_in_repo(tmp_path)
    hosts = {"a": {"gpus": 0, "look": "os=x\n"}, "b": {"gpus": 0, "look": "os=x\nrepository=no\n"}}
    assert _play(monkeypatch, spec, {"inputs": _inputs(tmp_path), "hosts": hosts}) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["hosts"]["a"]["calls"] and "deploy the models with playbooks/site.yml first" \
        in view["hosts"]["b"]["refused"]
    doc = {"inputs": _inputs(tmp_path, report="false"), "hosts": {"a": hosts["a"]}}  # -e report=false
    assert _play(monkeypatch, spec, doc) == 0
    run = tmp_path / "results" / "dynbatch" / "r1"
    assert json.loads(capsys.readouterr().out)["finish"] == ["collect", "--run-dir", str(run.resolve())]


def test_fresh_empties_the_node_folder_in_the_hosts_put_and_the_controllers_copy_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """-e fresh=true: the controller's copy of the hosts' results is removed (once, by the play's first
    plan), and every host's put empties its folder of the run on the node (the per-host plans, which
    remove nothing, keep that); without it the put keeps what the node holds."""
    spec = _dynbatch_in_repo(tmp_path)
    hosts = {"a": {"gpus": 0, "look": "os=x\n"}, "b": {"gpus": 0, "look": "os=x\n"}}
    assert _play(monkeypatch, spec, {"inputs": _inputs(tmp_path), "hosts": hosts}) == 0
    kept = json.loads(capsys.readouterr().out)["hosts"]
    assert [kept[h]["put"][-1] for h in hosts] == ["/opt/serve-system/work/dynbatch/r1"] * 2
    earlier = tmp_path / "results" / "dynbatch" / "r1" / "a" / "earlier.txt"
    earlier.write_text("measured before")
    assert _play(monkeypatch, spec, {"inputs": _inputs(tmp_path, fresh="true"), "hosts": hosts}) == 0
    fresh = json.loads(capsys.readouterr().out)["hosts"]
    assert [fresh[h]["put"][-2:] for h in hosts] == [["/opt/serve-system/work/dynbatch/r1",
                                                            "--fresh"]] * 2
    assert not earlier.exists()


@pytest.mark.parametrize(("doc", "says"), [
    ("{not json", "plan --play (stdin):1:2: not JSON"),
    ({"inputs": {}, "hosts": {"a": {"gpus": 0}}}, "plan --play (stdin): inputs.results_dir: "),
    ("HOSTS", "plan --play (stdin): hosts.a.gpus: "),
    ("EXTRA", "plan --play (stdin): inputs.surprise: "),
    ("NOHOST", "plan --play (stdin): hosts: "),
    # a setting is named as the role's variable, not as an option: the document is read as data
    ("TIMEOUT", "plan --play (stdin): inputs.perf_timeout: '-5': give a positive number"),
    ("HOSTNAME", "plan --play (stdin): hosts: "),
])
def test_a_bad_document_is_refused_in_one_line_and_nothing_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        doc: Any, says: str) -> None:
    spec = _dynbatch_in_repo(tmp_path)
    good = {"gpus": 0, "look": _look(None)}
    doc = {"HOSTS": {"inputs": _inputs(tmp_path), "hosts": {"a": {"gpus": "many"}}},
           "EXTRA": {"inputs": _inputs(tmp_path, surprise=1), "hosts": {"a": good}},
           "NOHOST": {"inputs": _inputs(tmp_path), "hosts": {}},
           "TIMEOUT": {"inputs": _inputs(tmp_path, perf_timeout="-5"), "hosts": {"a": good}},
           "HOSTNAME": {"inputs": _inputs(tmp_path), "hosts": {"../x": good}}}.get(doc, doc) \
        if isinstance(doc, str) else doc
    assert _play(monkeypatch, spec, doc) == 1
    err = capsys.readouterr().err
    lines = err.strip().splitlines()  # one line per problem, each naming where it is
    assert says in lines[0] and "Traceback" not in err and all(" " in ln for ln in lines), err
    assert len(lines) == (5 if "results_dir" in says else 1), err
    assert not (tmp_path / "results").exists()


def test_the_document_is_planned_as_data_never_parsed_again_as_a_command_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line is parsed once (``main``); the play's settings and every host's look become one
    typed request each planning, not options for another parser."""
    import argparse

    spec = _dynbatch_in_repo(tmp_path)
    parsed: list[list[str] | None] = []
    real = argparse.ArgumentParser.parse_args

    def counted(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> Any:
        parsed.append(None if args is None else list(args))
        return real(self, args, namespace)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", counted)
    hosts = {"a": {"gpus": 0, "look": _look(None)}, "b": {"gpus": 1, "look": "os=x\n"}}
    inputs = _inputs(tmp_path, perf_timeout=12, ready_timeout="", variants="baseline")
    doc = {"inputs": inputs, "hosts": hosts}
    assert _play(monkeypatch, spec, doc) == 0
    assert parsed == [["plan", str(spec), "--play", "-"]]
    view = json.loads(capsys.readouterr().out)
    assert set(view["hosts"]) == {"a", "b"} and "refused" not in view["hosts"]["b"]
    plan = records.read(tmp_path / "results" / "dynbatch" / "r1" / "b" / "plan.json", plans.HostPlan)
    assert plan.runner.perf_timeout == 12
    assert plan.runner.ready_timeout == plans.RunnerSettings().ready_timeout
    assert plan.facts["os"] == "x"


def test_a_bad_spec_refuses_the_play_before_any_host_is_planned(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _dynbatch_in_repo(tmp_path)
    spec.write_text(spec.read_text().replace("max_batch_size", "max_batch_sizes", 1))
    doc = {"inputs": _inputs(tmp_path, variants="baseline,nope"), "hosts": {"a": {"gpus": 0, "look": ""}}}
    assert _play(monkeypatch, spec, doc) == 1
    err = capsys.readouterr().err
    assert err.startswith(str(spec)) and "Traceback" not in err
    assert not (tmp_path / "results").exists()


def test_the_bundle_travels_on_the_puts_stdin_and_a_large_one_is_copied(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The role puts the node bundle with one command (the plan's ``put``: python3 on the node, the
    bundle's bytes on its stdin, renamed into place, never written through a link); a bundle over
    runnercall.PUT_LIMIT has no put and the role copies it."""
    import subprocess

    from serve_system.experiment import runnercall

    spec = _dynbatch_in_repo(tmp_path)
    doc = {"inputs": _inputs(tmp_path), "hosts": {"a": {"gpus": 0, "look": ""}}}
    assert _play(monkeypatch, spec, doc) == 0
    view = json.loads(capsys.readouterr().out)["hosts"]["a"]
    put = view["put"]
    run = tmp_path / "results" / "dynbatch" / "r1"
    bundle = (run / "a" / ".node.pyz").read_bytes()
    # every path the role names comes with the view (the role spells none of them)
    assert view["bundle"] == str(run / "a" / ".node.pyz")
    assert view["fetched"] == str(run / "a" / ".fetch" / "results.tar.gz")
    assert view["archive"] == "/opt/serve-system/work/dynbatch/r1/results.tar.gz"
    assert put[:2] == ["python3", "-c"] and put[-1] == "/opt/serve-system/work/dynbatch/r1"
    node = tmp_path / "node" / "work"
    argv = [sys.executable, *put[1:-1], str(node)]
    proc = subprocess.run(argv, input=bundle, capture_output=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (node / ".node.pyz").read_bytes() == bundle and not (node / ".node.pyz.put").exists()
    # a link where the put writes is never written through
    outside = tmp_path / "outside"
    outside.write_text("keep")
    (node / ".node.pyz.put").symlink_to(outside)
    proc = subprocess.run(argv, input=b"ABC", capture_output=True, check=False, timeout=60)
    assert proc.returncode != 0 and outside.read_text() == "keep"
    assert (node / ".node.pyz").read_bytes() == bundle
    # a bundle over the limit: no put, the role copies it
    monkeypatch.setattr(runnercall, "PUT_LIMIT", len(bundle) - 1)
    assert _play(monkeypatch, spec, doc) == 0
    assert json.loads(capsys.readouterr().out)["hosts"]["a"]["put"] is None
    assert (run / "a" / ".node.pyz").is_file()


def test_one_typed_request_plans_the_run_and_answers_the_roles_typed_view(tmp_path: Path) -> None:
    """The planning use-case on its own: a typed request in (no options, no document), the role's typed
    view out, the same view the role reads as JSON."""
    from serve_system.experiment import planning, runnercall
    from serve_system.experiment.roleview import HostView, RoleView

    spec = _dynbatch_in_repo(tmp_path)
    req = planning.PlanRequest(
        spec=spec, results_dir=tmp_path / "results", run_id="r1", answer="role",
        hosts=(planning.HostRequest(name="a", gpus=0, look="os=x\n"),),
        targets=planning.TargetRequest(node_work_root="/work"),
        runner=planning.RunnerRequest(numbers={"perf_timeout": 60.0}, node_dir_root="/srv/work"))
    view = planning.plan_run(req)
    assert isinstance(view, RoleView) and view.shard_hosts == [] and view.finish == []
    host = view.hosts["a"]
    assert isinstance(host, HostView) and host.node_dir == "/srv/work/dynbatch/r1"
    assert isinstance(host.calls[0], runnercall.RunnerCall) and host.calls[0].todo > 0
    assert view.as_json()["hosts"]["a"]["calls"][0]["start"] == host.calls[0].start
    assert "finish" not in view.as_json() and view.as_json()["shard_args"] == []
    plan = records.read(tmp_path / "results" / "dynbatch" / "r1" / "a" / "plan.json", plans.HostPlan)
    assert plan.runner.perf_timeout == 60.0 and plan.facts["os"] == "x"
    # a lease the plan outlasts: refused with its reason, nothing planned for it
    late = planning.HostRequest(name="a", gpus=0, lease_end="2000-01-01T00:00:00Z")
    with pytest.raises(SpecError, match=r"lease: the plan needs about .* or pass -e ignore_lease_end=true$"):
        planning.plan_run(dataclasses.replace(req, hosts=(late,)))
    ignored = dataclasses.replace(req, hosts=(late,), lease=planning.LeasePolicy(ignore_end=True))
    assert isinstance(planning.plan_run(ignored), RoleView)
    # answer="plan": each host's plan, typed, as written to its plan.json (no JSON in between)
    written = planning.plan_run(dataclasses.replace(req, answer="plan"))
    assert isinstance(written, dict) and isinstance(written["a"], plans.HostPlan)
    assert written["a"] == records.read(tmp_path / "results" / "dynbatch" / "r1" / "a" / "plan.json",
                                      plans.HostPlan)


def test_a_fastapi_plan_on_a_gpu_node_with_unchosen_stand_in_weights_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The FastAPI endpoint serves the lab's files of the node's weights record: where those are a stand-in
    repository's on a GPU node, the host is refused in one line; stand-ins chosen, or no GPU, are planned."""
    spec = Path(__file__).resolve().parents[2] / "experiments" / "specs" / "fastapi.yml"
    hosts = {"a": {"gpus": 1, "look": "os=x\n" + _weights(True) + "\n"},
             "b": {"gpus": 1, "look": "os=x\n" + _weights(True, "standin") + "\n"},
             "c": {"gpus": 0, "look": "os=x\n" + _weights(True) + "\n"}}
    assert _play(monkeypatch, spec, {"inputs": _inputs(tmp_path), "hosts": hosts}) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["hosts"]["a"]["refused"] == (
        "a: the GPU node serves generated stand-in weights (models_staging/food_classifier/1/food11.pth of "
        "file:///c/serve-system-chi.git is one), which nobody chose: point serve_stack_lab_repo at the lab's "
        "repository, or choose stand-ins with -e serve_stack_weights=standin, then run playbooks/deploy.yml")
    assert view["hosts"]["b"]["calls"] and view["hosts"]["c"]["calls"]
