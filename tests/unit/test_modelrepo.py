from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from serve_system import labrepo
from serve_system.errors import ServeSystemError
from serve_system.labrepo import LabWeights
from serve_system.modelrepo import CHOSEN_PARAM, SHIM, render
from serve_system.standin import is_standin
from serve_system.triton.pbtxt import load_pbtxt as parse_config

REPO = Path(__file__).resolve().parents[2] / "model_repository"
MODELS = ["food_classifier", "food_classifier_onnx"]


def test_committed_configs_are_the_labs() -> None:
    py = parse_config(REPO / "food_classifier" / "config.pbtxt")
    assert (py.backend, py.max_batch_size) == ("python", 16)
    assert [(i.name, i.dims) for i in py.input] == [("INPUT_IMAGE", [1])]
    assert [o.name for o in py.output] == ["FOOD_LABEL", "PROBABILITY"]
    onnx = parse_config(REPO / "food_classifier_onnx" / "config.pbtxt")
    assert onnx.backend == "onnxruntime"
    assert [(i.name, list(i.dims)) for i in onnx.input] == [("input", [3, 224, 224])]
    assert [(o.name, list(o.dims)) for o in onnx.output] == [("output", [11])]


def test_render_for_a_cpu_rehearsal_node(tmp_path: Path) -> None:
    changed, rows = render(REPO, tmp_path, models=MODELS, gpus=0, onnx_serving="python_shim", standin=MODELS)
    assert changed
    onnx = parse_config(tmp_path / "food_classifier_onnx" / "config.pbtxt")
    assert onnx.backend == "python"
    assert "serve_system_served_by" in onnx.parameters
    assert (tmp_path / "food_classifier_onnx" / "1" / "model.py").read_bytes() == SHIM.read_bytes()
    for name in MODELS:
        cfg = parse_config(tmp_path / name / "config.pbtxt")
        assert [g.kind for g in cfg.instance_group] == [cfg.instance_group[0].KIND_CPU]
        assert list(cfg.instance_group[0].gpus) == []
        assert cfg.parameters["serve_system_instances"].string_value == \
            "instance_group[0]: KIND_GPU x1 -> KIND_CPU x1 (host has no GPU)"  # the move is recorded
        assert is_standin(tmp_path / name / "1" / "model.onnx")
        assert "stand-in" in cfg.parameters["serve_system_weights"].string_value
    table = {r.model: r for r in rows}
    assert "shim" in table["food_classifier_onnx"].served_by
    assert table["food_classifier"].served_by == "Triton Python backend"
    assert json.loads((tmp_path / "models.json").read_text())[0]["model"] == "food_classifier"
    # the same render again changes nothing; the model table is stable
    assert render(REPO, tmp_path, models=MODELS, gpus=0, onnx_serving="python_shim",
                  standin=MODELS)[0] is False


def _lab(standin: bool = False) -> LabWeights:
    """The lab's weights as the node's check answers them (sha256 of each file's path, for the test)."""
    files = {f.path: {"sha256": hashlib.sha256(f.path.encode()).hexdigest(), "size": 9, "standin": standin}
             for f in (*labrepo.WEIGHTS, labrepo.CPU_FALLBACK)}
    return LabWeights.from_json(json.dumps({"repository": "https://github.com/teaching-on-testbeds/"
                                            "serve-system-chi.git", "commit": "0" * 40, "files": files}))


def test_render_for_a_gpu_node_keeps_the_lab_config(tmp_path: Path) -> None:
    _, rows = render(REPO, tmp_path, models=MODELS, gpus=2, onnx_serving="onnxruntime", standin=[],
                     lab=_lab())
    onnx = parse_config(tmp_path / "food_classifier_onnx" / "config.pbtxt")
    assert onnx.backend == "onnxruntime"
    assert onnx.instance_group[0].kind == onnx.instance_group[0].KIND_GPU
    assert list(onnx.instance_group[0].gpus) == [0]
    assert not (tmp_path / "food_classifier_onnx" / "1" / "model.py").exists()
    assert not (tmp_path / "food_classifier_onnx" / "1" / "model.onnx").exists()  # copied on the node
    # the lab's weights, named with their sha256 and the repository's commit; torch on the GPU
    sha = hashlib.sha256(b"models_staging/food_classifier_onnx/1/model.onnx").hexdigest()
    weights = onnx.parameters["serve_system_weights"].string_value
    assert weights == ("lab: 1/model.onnx <- models_staging/food_classifier_onnx/1/model.onnx "
                       f"(sha256 {sha[:12]}) at teaching-on-testbeds/serve-system-chi@000000000000")
    assert onnx.parameters["serve_system_weights_sha256"].string_value == f"model.onnx={sha}"
    py = parse_config(tmp_path / "food_classifier" / "config.pbtxt")
    assert py.parameters["serve_system_engine"].string_value == "pytorch"
    assert "1/food11.pth <- models_staging/food_classifier/1/food11.pth" in py.parameters[
        "serve_system_weights"].string_value
    assert "model.onnx" not in py.parameters["serve_system_weights_sha256"].string_value  # torch only
    assert {r.model: r.weights for r in rows}["food_classifier_onnx"] == weights
    assert "serve_system_engine" not in onnx.parameters


def test_a_node_without_gpus_serves_the_labs_onnx_export_where_torch_is_missing(tmp_path: Path) -> None:
    render(REPO, tmp_path, models=MODELS, gpus=0, onnx_serving="python_shim", standin=[], lab=_lab())
    py = parse_config(tmp_path / "food_classifier" / "config.pbtxt")
    assert "serve_system_engine" not in py.parameters  # auto: food11.pth with torch, else model.onnx
    assert py.parameters["serve_system_weights_sha256"].string_value.split(", ")[1].startswith("model.onnx=")
    assert not (tmp_path / "food_classifier" / "1" / "model.onnx").exists()  # the node's copy, not ours


def test_the_rehearsals_lab_repository_is_a_stand_in_everywhere(tmp_path: Path) -> None:
    _, rows = render(REPO, tmp_path, models=MODELS, gpus=0, onnx_serving="python_shim", standin=[],
                     lab=_lab(standin=True))
    for row in rows:
        assert row.weights.startswith("stand-in: generated stand-in model")
        assert ("from the rehearsal stand-in of the lab repository teaching-on-testbeds/serve-system-chi@0000"
                in row.weights)
        cfg = parse_config(tmp_path / row.model / "config.pbtxt")
        assert cfg.parameters["serve_system_weights"].string_value == row.weights
        assert CHOSEN_PARAM not in cfg.parameters  # not chosen: a GPU node's plan refuses it


def test_chosen_stand_ins_say_so_and_the_labs_models_need_weights(tmp_path: Path) -> None:
    render(REPO, tmp_path, models=MODELS, gpus=1, onnx_serving="onnxruntime", standin=MODELS,
           standin_chosen=True)
    for name in MODELS:
        cfg = parse_config(tmp_path / name / "config.pbtxt")
        assert cfg.parameters[CHOSEN_PARAM].string_value == "serve_stack_weights=standin"
        assert "serve_system_engine" not in cfg.parameters  # the stand-in is ONNX: model.py's auto engine
    with pytest.raises(ServeSystemError, match="food_classifier' is one of the lab's: give the lab's"):
        render(REPO, tmp_path / "none", models=MODELS, gpus=1, onnx_serving="onnxruntime", standin=[])


def test_weights_of_a_lab_model_in_the_source_folder_are_refused(tmp_path: Path) -> None:
    import shutil

    src = tmp_path / "src"
    shutil.copytree(REPO / "food_classifier_onnx", src / "food_classifier_onnx")
    (src / "food_classifier_onnx" / "1").mkdir()
    (src / "food_classifier_onnx" / "1" / "model.onnx").write_bytes(b"mine")
    with pytest.raises(ServeSystemError, match="1/model.onnx: food_classifier_onnx's weights come from the "
                                               "lab's repository .*: remove this file"):
        render(src, tmp_path / "out", models=["food_classifier_onnx"], gpus=0, onnx_serving="onnxruntime",
               standin=[], lab=_lab())


def test_cli_takes_the_labs_weights_as_json_and_refuses_a_bad_document(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from serve_system.cli import main

    doc = {"repository": "file:///x/serve-system-chi.git", "commit": "a" * 40,
           "files": {"models_staging/food_classifier_onnx/1/model.onnx": {"sha256": "b" * 64, "size": 3,
                                                                         "standin": False}}}
    argv = ["models", "render", "--source", str(REPO), "--dest", str(tmp_path / "o"), "--model",
            "food_classifier_onnx", "--gpus", "1", "--json", "--lab-weights"]
    assert main([*argv, json.dumps(doc)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["models"][0]["weights"].startswith(
        "lab: 1/model.onnx <- models_staging/food_classifier_onnx/1/model.onnx (sha256 bbbbbbbbbbbb) at "
        "x/serve-system-chi@aaaa")
    doc["commit"] = "main"
    assert main([*argv, json.dumps(doc)]) == 2
    assert "--lab-weights: commit 'main': give a full commit" in capsys.readouterr().err


def test_render_removes_stale_files_and_reports_it(tmp_path: Path) -> None:
    render(REPO, tmp_path, models=MODELS, gpus=0, onnx_serving="python_shim", standin=MODELS)
    changed, _ = render(REPO, tmp_path, models=MODELS, gpus=0, onnx_serving="onnxruntime", standin=MODELS)
    assert changed
    assert not (tmp_path / "food_classifier_onnx" / "1" / "model.py").exists()


def test_render_rejects_unknown_models_and_modes(tmp_path: Path) -> None:
    with pytest.raises(ServeSystemError, match="nope"):
        render(REPO, tmp_path, models=["nope"], gpus=0, onnx_serving="onnxruntime", standin=[])
    with pytest.raises(ServeSystemError, match="onnx_serving"):
        render(REPO, tmp_path, models=MODELS, gpus=0, onnx_serving="tensorrt", standin=[])


def test_bad_config_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "src" / "m"
    bad.mkdir(parents=True)
    (bad / "config.pbtxt").write_text('name: "m"\nbackend: "python"\nmax_batchsize: 4\n')
    with pytest.raises(ServeSystemError, match=r"m/config.pbtxt:3:1: max_batchsize is not a field of model "
                                               r"config \(did you mean \"max_batch_size\"\?"):
        render(tmp_path / "src", tmp_path / "out", models=["m"], gpus=0, onnx_serving="onnxruntime",
               standin=[])


def test_cli_render_prints_json_for_the_role(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from serve_system.cli import main

    argv = ["models", "render", "--source", str(REPO), "--dest", str(tmp_path), "--model", "food_classifier",
            "--gpus", "0", "--onnx-serving", "python_shim", "--standin", "food_classifier", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["changed"] is True
    assert out["files"] == ["food_classifier/1/model.onnx", "food_classifier/1/model.py",
                            "food_classifier/config.pbtxt", "models.json"]
    assert sorted(out["sha256"]) == out["files"]
    assert out["sha256"]["models.json"] == hashlib.sha256((tmp_path / "models.json").read_bytes()).hexdigest()
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["changed"] is False


def test_cli_error_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from serve_system.cli import main

    rc = main(["models", "render", "--source", str(tmp_path), "--dest", str(tmp_path / "o"), "--model", "x"])
    assert rc == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("serve-system: error: ") and "config.pbtxt not found" in err and "\n" not in err


EXTRA = ["blip", "onnx-mnist-cpu", "bertQA-onnx"]


def test_extra_models_get_their_own_standins_unless_weights_are_given(tmp_path: Path) -> None:
    import shutil

    src = tmp_path / "src"
    for name in EXTRA:
        shutil.copytree(REPO / name, src / name)
    (src / "blip" / "1").mkdir()
    (src / "blip" / "1" / "model.onnx").write_bytes(b"the user's own export")
    _, rows = render(src, tmp_path / "out", models=EXTRA, gpus=0, onnx_serving="python_shim",
                     standin=[], standin_unless_given=EXTRA)
    table = {r.model: r for r in rows}
    assert (tmp_path / "out" / "blip" / "1" / "model.onnx").read_bytes() == b"the user's own export"
    assert table["blip"].weights == "1/model.onnx (from the source repository)"
    assert "serve_system_weights" not in parse_config(tmp_path / "out" / "blip" / "config.pbtxt").parameters
    for name in ("onnx-mnist-cpu", "bertQA-onnx"):
        assert is_standin(tmp_path / "out" / name / "1" / "model.onnx")
        assert table[name].weights.startswith("stand-in: ")
        cfg = parse_config(tmp_path / "out" / name / "config.pbtxt")
        assert cfg.parameters["serve_system_weights"].string_value.startswith("stand-in")
        assert cfg.backend == "python" and not cfg.platform
        assert all(g.kind == g.KIND_CPU for g in cfg.instance_group)
    assert table["bertQA-onnx"].instances == "1xCPU"  # the course's KIND_GPU instance, on a CPU node


def test_a_model_without_weights_or_standin_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ServeSystemError, match="blip.*no weights.*stand-in"):
        render(REPO, tmp_path, models=["blip"], gpus=0, onnx_serving="python_shim", standin=[])


def test_render_removes_only_its_own_files_and_refuses_a_users_folder(tmp_path: Path) -> None:
    dest = tmp_path / "staging"
    render(REPO, dest, models=MODELS, gpus=0, onnx_serving="python_shim", standin=MODELS)
    (dest / "my_notes.txt").write_text("the user's")  # put there by the user, after the render
    render(REPO, dest, models=MODELS[:1], gpus=0, onnx_serving="python_shim", standin=MODELS[:1])
    assert (dest / "my_notes.txt").read_text() == "the user's"  # stays
    assert not (dest / MODELS[1]).exists()  # the model no longer deployed: the tool's own files, gone
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    with pytest.raises(ServeSystemError, match="not empty and not made by serve-system"):
        render(REPO, mine, models=MODELS, gpus=0, onnx_serving="python_shim", standin=MODELS)
    assert [p.name for p in mine.iterdir()] == ["thesis.tex"]
    with pytest.raises(ServeSystemError, match="'../x' cannot be a file name"):
        render(REPO, tmp_path / "new", models=["../x"], gpus=0, onnx_serving="python_shim", standin=[])
