"""Issue 26, specs: the rules behind the bad-input cases, tested as rules (any string, any number,
any path), not as the corpus's particular files."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import yaml

from serve_system.experiment import plan as exp
from serve_system.experiment.spec.messages import SpecError
from serve_system.experiment.spec.models import MAX_LOAD, data_problems, expand_levels
from serve_system.experiment.spec.reader import load_spec
from serve_system.experiment.spec.sweeps import fill, name_problem
from serve_system.secretfiles import secret_reason
from serve_system.triton.pbtxt import parse_pbtxt
from serve_system.triton.problems import check, jinja_in

BASE = 'name: "m"\nplatform: "onnxruntime_onnx"\n'
TRITON = {"name": "t", "model": "m", "base_config_text": BASE, "load": {"levels": [1, 8]},
          "variants": [{"name": "a"}, {"name": "b", "config": {}}]}


def _write(folder: Path, data: object) -> Path:
    p = folder / "spec.yml"
    p.write_text(yaml.safe_dump(data, sort_keys=False) if not isinstance(data, str) else data)
    return p


@pytest.mark.parametrize("opener", ["{{", "{%", "{#"])
def test_every_jinja_opener_is_found_in_text_bytes_and_keys(opener: str) -> None:
    text = f"a {opener} b"
    for data in ({"d": text}, {"d": text.encode()}, {text: 1}, {"l": [[{"x": text}]]}):
        errs = data_problems(data, "f.yml")
        assert len(errs) == 1 and "holds a Jinja expression" in errs[0], (data, errs)
    assert data_problems({"d": "a } } {x} %} #}"}, "f.yml") == []  # no opener: inert text


def test_plain_data_rule_names_the_field() -> None:
    import datetime

    data = {"a": [1, float("nan")], "b": {"c": 10**30}, "d": b"plain", "e": datetime.date(2024, 1, 1),
            "f": {3: "x"}, "g": float("-inf"), "ok": [1, 2.5, True, None, "x", -(2**63)]}
    errs = data_problems(data, "f.yml")
    assert [e.split(":")[1].strip() for e in errs] == ["a[1]", "b.c", "d", "e", "f.3", "g"]


@pytest.mark.parametrize("value", ["2024-13-45", "!!int 0x", "!!bool maybe", "!!timestamp x", "1" * 5000,
                                   "!!float abc"])
def test_a_value_its_tag_cannot_make_is_one_yaml_line(tmp_path: Path, value: str) -> None:
    p = _write(tmp_path, f"name: t\nx: {value}\n")
    with pytest.raises(SpecError) as exc:
        load_spec(p)
    assert exc.value.lines[0].startswith(f"{p}:2:4: (file): not valid YAML: ")


def test_binary_jinja_in_a_spec_is_refused(tmp_path: Path) -> None:
    p = _write(tmp_path, yaml.safe_dump(TRITON) + "description: !!binary e3sgNyAqIDcgfX0=\n")
    with pytest.raises(SpecError) as exc:
        load_spec(p)
    assert exc.value.lines == [(f"{p}: description: a binary value decoding to '{{{{ 7 * 7 }}}}' holds a "
                                "Jinja expression ({{, {% or {#), which Ansible would evaluate: remove it")]


def test_protobuf_escapes_are_read_before_the_jinja_check(tmp_path: Path) -> None:
    for escaped in (r"\173\173 x \175\175", r"\x7b\x7b x", r"{\043 c #}", r"\173%"):
        text = BASE + f'parameters {{ key: "k" value {{ string_value: "{escaped}" }} }}\n'
        cfg = parse_pbtxt(text)
        assert [p.field for p in jinja_in(cfg)] == ["parameters.k.string_value"], escaped
        assert [p.field for p in check(cfg)][:1] == ["parameters.k.string_value"]
        p = _write(tmp_path, {**TRITON, "base_config_text": text})
        with pytest.raises(SpecError) as exc:
            exp.plan(load_spec(p), 0)
        shown = repr(cfg.parameters["k"].string_value)
        # the shared base says it once, under its own field
        assert exc.value.lines == [(f"{p}: base_config_text: parameters.k.string_value: {shown} holds a "
                                    "Jinja expression ({{, {% or {#) once its escapes are read, which "
                                    "Ansible would evaluate: remove it")]
    # an override's value meets the same rule once it is parsed
    p = _write(tmp_path, {**TRITON, "variants": [{"name": "a", "config": {"parameters": {
        "k": {"string_value": "\\173\\173"}}}}]})
    exp.plan(load_spec(p), 0)  # YAML's text holds a backslash, not a brace: nothing to refuse


def test_sweep_names_are_plain_substitutions() -> None:
    assert fill("i{n}_{x}_{{n}}_{n:>5}", {"n": 3}) == "i3_{x}_{3}_{n:>5}"
    assert name_problem("i{n}_d{d}", ["n", "d"]) is None
    assert "unknown parameter 'm'" in (name_problem("i{m}", ["n"]) or "")
    for bad in ("{n:>999999999999}", "{n!r}", "{n.__class__}", "{n[0]}", "{}", "{ n}"):
        assert "is not a plain placeholder" in (name_problem(f"v{bad}", ["n"]) or ""), bad


def test_sweep_values_meeting_as_jinja_are_refused(tmp_path: Path) -> None:
    spec = {**TRITON, "variants": None, "sweep": {
        "name": "v{n}", "grid": {"n": [1], "a": ["{"], "b": ["%"]},
        "config": {"parameters": {"p": {"string_value": "{a}{b} x"}}}}}
    p = _write(tmp_path, spec)
    with pytest.raises(SpecError) as exc:
        load_spec(p)
    assert exc.value.lines == [(f"{p}: sweep (generated 'v1'): config.parameters.p.string_value: '{{% x' "
                                "holds a Jinja expression ({{, {% or {#), which Ansible would evaluate: "
                                "remove it")]


def test_format_width_in_a_sweep_name_is_refused_without_formatting(tmp_path: Path) -> None:
    p = _write(tmp_path, {**TRITON, "variants": None, "sweep": {"name": "v{n:>99999999999999}",
                                                              "grid": {"n": [1, 2]}}})
    with pytest.raises(SpecError) as exc:
        load_spec(p)
    assert len(exc.value.lines) == 1 and "is not a plain placeholder" in exc.value.lines[0]


@pytest.mark.parametrize("levels", [[math.nan], [math.inf], [1e300], [10**400], [-(10**400)], [0], [True],
                                    "1:nan", "nan:8", "1:1e999", "8:1", "1:8:0", "1:8:-1", "1:8:inf",
                                    {"start": 1, "end": 8, "step": math.nan}, {"start": 1, "end": 1e300},
                                    {"start": 1e-9}, "1:1.000001:0.00000001", [1, 1.0], []])
def test_load_levels_are_finite_positive_bounded_and_never_empty(levels: object) -> None:
    with pytest.raises(ValueError):
        expand_levels(levels)


def test_load_levels_in_bounds_expand() -> None:
    assert expand_levels([1, MAX_LOAD]) == [1.0, float(MAX_LOAD)]
    assert expand_levels("0.5:2:0.5") == [0.5, 1.0, 1.5, 2.0]
    assert expand_levels({"start": 4}) == [4.0]


def _repo(tmp_path: Path) -> Path:
    (tmp_path / "ansible.cfg").write_text("")
    (tmp_path / "experiments").mkdir()
    return tmp_path


def test_secret_files_by_folder_name_and_content(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    files = {"inventory/hosts.yml": "x", "inventory/.rehearsal/id_ed25519": "x", "a/.ssh/config": "x",
             "data/id_rsa": "{}", "data/node.pem": "{}", "data/app-openrc.sh": "x",
             "data/k.json": "-----BEGIN RSA PRIVATE KEY-----\n",
             "data/i.json": "[all]\nn ansible_host=1.2.3.4\n",
             "data/o.json": "export OS_PASSWORD=x\n"}
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
        assert secret_reason(repo / rel, repo) is not None, rel
    (repo / "data/inputs.json").write_text('{"data": [{"x": [1, 2]}]}')
    assert secret_reason(repo / "data/inputs.json", repo) is None
    os.symlink(repo / "inventory/hosts.yml", repo / "data/link.json")
    assert "inventory/ folder" in (secret_reason(repo / "data/link.json", repo) or "")
    os.mkfifo(repo / "data/pipe.json")
    assert "not a regular file" in (secret_reason(repo / "data/pipe.json", repo) or "")


@pytest.mark.parametrize("field", ["perf", "variant"])
def test_a_spec_may_not_ship_a_key_nor_a_pipe(tmp_path: Path, field: str) -> None:
    repo = _repo(tmp_path)
    (repo / "inventory/.rehearsal").mkdir(parents=True)
    (repo / "inventory/.rehearsal/id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    os.mkfifo(repo / "experiments/pipe.json")
    for rel in ("../inventory/.rehearsal/id_ed25519", "inventory/.rehearsal/id_ed25519", "pipe.json"):
        spec = dict(TRITON)
        if field == "perf":
            spec["perf"] = {"input_data": rel}
        else:
            spec["variants"] = [{"name": "a", "perf": {"input_data": rel}}]
        p = repo / "experiments/spec.yml"
        p.write_text(yaml.safe_dump(spec))
        with pytest.raises(SpecError) as exc:
            exp.plan(load_spec(p), 0)  # never opens the pipe (it would hang)
        assert len(exc.value.lines) == 1
        assert "may not be read for a spec nor sent to a node" in exc.value.lines[0]
