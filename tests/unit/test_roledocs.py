"""Role variables are documented once: each role's meta/argument_specs.yml, its defaults/main.yml and its
README's variable table agree (serve_system.roledocs), and the defaults pass the role's own argument check."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from serve_system import roledocs
from serve_system.roledocs import BEGIN, COMMAND, END, Role

REPO = Path(__file__).resolve().parents[2]
ROLES = roledocs.roles(REPO / "roles")


def test_every_role_of_the_repository_is_checked() -> None:
    assert roledocs.ROLES == REPO / "roles"
    with_tasks = sorted(p.parents[1].name for p in (REPO / "roles").glob("*/tasks/main.yml"))
    assert sorted(r.name for r in ROLES) == with_tasks
    assert {"docker", "serve_stack", "experiment"} <= {r.name for r in ROLES}


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r.name)
def test_spec_and_defaults_agree(role: Role) -> None:
    problems = roledocs.spec_problems(role)
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r.name)
def test_readme_table_is_what_the_spec_generates(role: Role) -> None:
    reason = roledocs.stale(role)
    assert reason is None, f"{reason}; regenerate it with: PYTHONPATH=src {COMMAND}"
    readme = role.readme.read_text(encoding="utf-8")
    block = readme[readme.index(BEGIN):readme.index(END)]
    assert [line.split("`")[1] for line in block.splitlines() if line.startswith("| `")] == list(role.options)


def _argument_check(role: Role) -> tuple[list[str], dict[str, object], dict[str, object]]:
    """What Ansible checks when the role starts (types, choices, sub-options), on every default that is not a
    template (those are checked on their rendered value at run time): (errors, given, validated)."""
    literal = {k: v for k, v in role.defaults.items() if not (isinstance(v, str) and "{{" in v)}
    given = {**literal, **{k: "x" for k, o in role.options.items() if o.get("required")}}
    spec = {k: o for k, o in role.options.items() if k in given}
    result = ArgumentSpecValidator(spec).validate(given, validate_role_argument_spec=True)
    return list(result.error_messages), given, dict(result.validated_parameters)


@pytest.mark.parametrize("role", ROLES, ids=lambda r: r.name)
def test_literal_defaults_pass_the_roles_own_argument_check(role: Role) -> None:
    errors, given, validated = _argument_check(role)
    assert errors == []
    assert validated == given
    assert len(given) >= len(role.defaults) / 3  # most defaults are literal: the check is not empty


def test_the_argument_check_sees_a_default_of_the_wrong_type(tmp_path: Path) -> None:
    role = _role(tmp_path, {"demo_n": _opt("soon", "int"), "demo_m": _opt("c", choices=["a", "b"])},
                 {"demo_n": "soon", "demo_m": "c"})
    errors, _, _ = _argument_check(role)
    assert len(errors) == 2 and "demo_n" in errors[0] and "demo_m" in errors[1], errors


def _role(tmp: Path, spec: dict[str, object], defaults: dict[str, object], readme: str | None = None) -> Role:
    path = tmp / "roles" / "demo"
    (path / "meta").mkdir(parents=True)
    (path / "defaults").mkdir()
    specs = {"argument_specs": {"main": {"options": spec}}}
    (path / "meta" / "argument_specs.yml").write_text(yaml.safe_dump(specs, sort_keys=False))
    (path / "defaults" / "main.yml").write_text(yaml.safe_dump(defaults, sort_keys=False))
    fresh = f"# demo\n\nProse.\n\n{BEGIN}\n{END}\n\nMore.\n"
    (path / "README.md").write_text(readme if readme is not None else fresh)
    return roledocs.read_role(path)


def _opt(default: object, kind: str = "str", **more: object) -> dict[str, object]:
    return {"type": kind, "default": default, "description": "What it is.", **more}


def test_variables_on_one_side_only_are_named(tmp_path: Path) -> None:
    role = _role(tmp_path, {"demo_a": _opt("x"), "demo_b": _opt("y")}, {"demo_a": "x", "demo_c": 1})
    assert roledocs.spec_problems(role) == [
        ("roles/demo: demo_b is in meta/argument_specs.yml but not in defaults/main.yml "
         "(give it a value there, or mark it required: true)"),
        "roles/demo: demo_c is in defaults/main.yml but not in meta/argument_specs.yml (options of main)",
    ]


def test_a_default_of_another_value_or_type_is_named(tmp_path: Path) -> None:
    role = _role(tmp_path, {"demo_on": _opt(True, "bool"), "demo_n": _opt(3600, "int"),
                            "demo_t": _opt("{{ a | default(1) }}"), "demo_l": _opt(["a"], "list")},
                 {"demo_on": 1, "demo_n": 3600, "demo_t": "{{ a | default(2) }}", "demo_l": ["a", "b"]})
    assert roledocs.spec_problems(role) == [
        'roles/demo: the default of demo_on is true in meta/argument_specs.yml but 1 in defaults/main.yml',
        ('roles/demo: the default of demo_t is "{{ a | default(1) }}" in meta/argument_specs.yml but '
         '"{{ a | default(2) }}" in defaults/main.yml'),
        ('roles/demo: the default of demo_l is ["a"] in meta/argument_specs.yml but ["a", "b"] in '
         'defaults/main.yml'),
    ]


def test_a_default_missing_from_the_spec_or_a_description_missing_is_named(tmp_path: Path) -> None:
    role = _role(tmp_path, {"demo_a": {"type": "str", "description": "A."},
                            "demo_b": {"type": "int", "default": 1}}, {"demo_a": "x", "demo_b": 1})
    assert roledocs.spec_problems(role) == [
        'roles/demo: demo_a has no default in meta/argument_specs.yml; defaults/main.yml says "x"',
        "roles/demo: demo_b has no description in meta/argument_specs.yml",
    ]
    undocumented = _role(tmp_path / "required", {"demo_r": {"type": "str", "required": True}}, {})
    problems = roledocs.spec_problems(undocumented)
    assert problems == ["roles/demo: demo_r has no description in meta/argument_specs.yml"]


def test_a_required_variable_has_no_default_anywhere(tmp_path: Path) -> None:
    required = {"type": "path", "required": True, "description": "The spec."}
    ok = _role(tmp_path / "ok", {"demo_spec": required}, {})
    assert roledocs.spec_problems(ok) == []
    bad = _role(tmp_path / "bad", {"demo_spec": {"type": "path", "required": True, "default": "",
                                                 "description": "The spec."}}, {"demo_spec": ""})
    assert roledocs.spec_problems(bad) == [
        "roles/demo: demo_spec is required, so meta/argument_specs.yml gives it no default",
        ("roles/demo: demo_spec is required, so defaults/main.yml must not set it (a value there satisfies "
         "the requirement)"),
    ]


def test_the_table_is_written_between_the_markers_only(tmp_path: Path) -> None:
    spec = {
        "demo_mode": _opt("a", choices=["a", "b"]),
        "demo_url": _opt("{{ x | default('y') }}/z", description="URL of <name>/gpg."),
        "demo_items": {"type": "list", "elements": "dict", "default": [], "description": "Items.",
                       "options": {"name": {"type": "str", "required": True, "description": "Its name."},
                                   "on": {"type": "bool", "default": False, "description": "Whether."}}},
        "demo_spec": {"type": "path", "required": True, "description": "The spec."},
        "demo_empty": _opt(""),
    }
    role = _role(tmp_path, spec, {"demo_mode": "a", "demo_url": "{{ x | default('y') }}/z", "demo_items": [],
                                  "demo_empty": ""})
    assert roledocs.stale(role) == "roles/demo/README.md: the variable table is out of date"
    assert roledocs.write(role) is True
    assert roledocs.stale(role) is None
    assert roledocs.write(role) is False
    assert role.readme.read_text() == "\n".join([
        "# demo", "", "Prose.", "", BEGIN, "",
        "| variable | type | default | meaning |",
        "| --- | --- | --- | --- |",
        "| `demo_mode` | str (a, b) | `a` | What it is. |",
        "| `demo_url` | str | `{{ x \\| default('y') }}/z` | URL of \\<name>/gpg. |",
        ("| `demo_items` | list of dict | `[]` | Items. Each item: `name` (str, required): Its name; "
         "`on` (bool, default `false`): Whether. |"),
        "| `demo_spec` | path | required | The spec. |",
        '| `demo_empty` | str | `""` | What it is. |',
        "", END, "", "More.", "",
    ])


def test_a_readme_without_markers_is_reported_then_given_its_section(tmp_path: Path) -> None:
    role = _role(tmp_path, {"demo_a": _opt("x"), "demo_t": _opt("true")}, {"demo_a": "x", "demo_t": "true"},
                 readme="# demo\n\nProse.\n")
    assert roledocs.stale(role) == f"roles/demo/README.md has no variable table ({BEGIN} ... {END})"
    assert roledocs.write(role) is True
    assert roledocs.stale(role) is None
    lines = ["# demo", "", "Prose.", "", "## Variables", "", BEGIN, "",
             "| variable | type | default | meaning |", "| --- | --- | --- | --- |",
             "| `demo_a` | str | `x` | What it is. |",
             '| `demo_t` | str | `"true"` | What it is. |',  # a string that reads as a bool in YAML is quoted
             "", END, ""]
    assert role.readme.read_text() == "\n".join(lines)
    role.readme.unlink()
    assert roledocs.write(role) is True
    assert role.readme.read_text().startswith(f"# Role `demo`\n\n## Variables\n\n{BEGIN}\n")


def test_the_command_checks_then_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    role = _role(tmp_path, {"demo_a": _opt("x")}, {"demo_a": "x"})
    roles_dir = str(tmp_path / "roles")
    assert roledocs.main(["--check", "--roles", roles_dir]) == 1
    assert capsys.readouterr().err.splitlines() == ["roles/demo/README.md: the variable table is out of date",
                                                    f"regenerate with: {COMMAND}"]
    assert roledocs.main(["--write", "--roles", roles_dir]) == 0
    assert capsys.readouterr().out == "wrote roles/demo/README.md\n"
    assert "| `demo_a` | str | `x` | What it is. |" in role.readme.read_text()
    assert roledocs.main(["--check", "--roles", roles_dir]) == 0
    (role.path / "defaults" / "main.yml").write_text("demo_a: y\n")
    assert roledocs.main(["--check", "--roles", roles_dir]) == 1
    assert "the default of demo_a" in capsys.readouterr().err
