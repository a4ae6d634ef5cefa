"""The roles' variable tables, generated from their ``meta/argument_specs.yml``.

A role's ``meta/argument_specs.yml`` is the one place its variables are documented (description,
type, choices, default); ``defaults/main.yml`` holds the values Ansible uses, and its README shows a
table of them, written by this module between two marker lines so the prose around it stays
hand-written::

    python -m serve_system.roledocs --write   # rewrite every role's table
    python -m serve_system.roledocs --check   # exit 1 naming each README whose table is stale

The spec of the entry point ``main`` is the one documented. ``spec_problems`` says where a role's
spec and its defaults disagree: a variable in one but not the other, or a default of another value.
A variable the spec marks ``required: true`` has no default anywhere (Ansible refuses a spec giving
both, and a value in defaults/main.yml would satisfy the requirement): it must be given by the play.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROLES = Path(__file__).resolve().parents[2] / "roles"
COMMAND = "python -m serve_system.roledocs --write"
BEGIN = f"<!-- BEGIN variables (generated from meta/argument_specs.yml: {COMMAND}) -->"
END = "<!-- END variables -->"
ENTRY_POINT = "main"


@dataclass(frozen=True)
class Role:
    """One role's documented variables (``options`` of its spec's entry point ``main``, in order)."""

    name: str
    path: Path
    options: dict[str, dict[str, Any]]
    defaults: dict[str, Any]

    @property
    def readme(self) -> Path:
        return self.path / "README.md"


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None


def read_role(path: Path) -> Role:
    """The role at ``path``: its spec's options of ``main`` and its defaults (empty when missing)."""
    specs = (_load(path / "meta" / "argument_specs.yml") or {}).get("argument_specs") or {}
    options = (specs.get(ENTRY_POINT) or {}).get("options") or {}
    defaults = _load(path / "defaults" / "main.yml") or {}
    return Role(path.name, path, dict(options), dict(defaults))


def roles(root: Path = ROLES) -> list[Role]:
    """Every role under ``root`` with variables (a ``meta/argument_specs.yml`` or a ``defaults/main.yml``),
    by name."""
    found = {p.parents[1] for pattern in ("*/meta/argument_specs.yml", "*/defaults/main.yml")
             for p in root.glob(pattern)}
    return [read_role(p) for p in sorted(found)]


def _same(a: Any, b: Any) -> bool:
    """Equal as YAML values: type included (``true`` is not ``1``), recursively."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def spec_problems(role: Role) -> list[str]:
    """Where the spec and defaults/main.yml of ``role`` disagree, one sentence each; empty when they agree."""
    where = f"roles/{role.name}"
    problems = []
    for name, option in role.options.items():
        if not _text(option.get("description")):
            problems.append(f"{where}: {name} has no description in meta/argument_specs.yml")
        if option.get("required"):
            if "default" in option:
                problems.append(f"{where}: {name} is required, so meta/argument_specs.yml gives it no "
                                "default")
            if name in role.defaults:
                problems.append(f"{where}: {name} is required, so defaults/main.yml must not set it (a value "
                                "there satisfies the requirement)")
            continue
        if name not in role.defaults:
            problems.append(f"{where}: {name} is in meta/argument_specs.yml but not in defaults/main.yml "
                            "(give it a value there, or mark it required: true)")
        elif "default" not in option:
            problems.append(f"{where}: {name} has no default in meta/argument_specs.yml; defaults/main.yml "
                            f"says {_yaml(role.defaults[name])}")
        elif not _same(option["default"], role.defaults[name]):
            problems.append(f"{where}: the default of {name} is {_yaml(option['default'])} in "
                            f"meta/argument_specs.yml but {_yaml(role.defaults[name])} in defaults/main.yml")
    problems += [f"{where}: {name} is in defaults/main.yml but not in meta/argument_specs.yml "
                 f"(options of {ENTRY_POINT})" for name in role.defaults if name not in role.options]
    return problems


def _yaml(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _text(value: Any) -> str:
    """A description (a string or a list of paragraphs) as one line."""
    parts = value if isinstance(value, list) else [value]
    return " ".join(" ".join(str(p).split()) for p in parts if p is not None)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _code(text: str) -> str:
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return _cell(f"{fence}{pad}{text}{pad}{fence}")


def _type(option: dict[str, Any]) -> str:
    kind = str(option.get("type", "str"))
    if kind == "list" and option.get("elements"):
        kind = f"list of {option['elements']}"
    if option.get("choices"):
        kind += " (" + ", ".join(str(c) for c in option["choices"]) + ")"
    return kind


def _reads_as_other(text: str) -> bool:
    """Whether YAML reads ``text`` written bare as something else than this string (``true``, ``3600``)."""
    try:
        return yaml.safe_load(text) != text
    except yaml.YAMLError:
        return False  # a template such as "{{ x }}": no YAML scalar, shown as it is


def _default(option: dict[str, Any]) -> str:
    if option.get("required"):
        return "required"
    value = option.get("default")
    if isinstance(value, str) and value and value.strip() == value and not _reads_as_other(value):
        return _code(" ".join(value.split()))
    return _code(_yaml(value))


def _prose(text: str) -> str:
    """Text for a table cell outside code: ``<name>`` would read as an HTML tag, so its ``<`` is escaped."""
    return _cell(text.replace("<", "\\<"))


def _meaning(option: dict[str, Any]) -> str:
    text = _prose(_text(option.get("description")))
    subs = option.get("options") or {}
    if subs:
        items = "; ".join(
            f"`{k}` ({_type(v)}{', required' if v.get('required') else ''}"
            f"{'' if v.get('required') or 'default' not in v else ', default ' + _default(v)}): "
            f"{_prose(_text(v.get('description')).rstrip('.'))}" for k, v in subs.items())
        text += f" Each item: {items}."
    return text


def table(role: Role) -> str:
    """The README's generated block for ``role``: markers, one sentence, the table."""
    lines = [
        BEGIN,
        "",
        "| variable | type | default | meaning |",
        "| --- | --- | --- | --- |",
        *(f"| `{name}` | {_cell(_type(o))} | {_default(o)} | {_meaning(o)} |"
          for name, o in role.options.items()),
        "",
        END,
    ]
    return "\n".join(lines)


def _readme(role: Role) -> str:
    return role.readme.read_text(encoding="utf-8") if role.readme.is_file() else ""


def rendered(role: Role, readme: str) -> str:
    """``readme`` with its block between the markers replaced by the table of ``role``; a README without
    the block (a new role) gets it in a ``## Variables`` section at its end."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        head = readme.rstrip("\n") + "\n\n" if readme.strip() else f"# Role `{role.name}`\n\n"
        return f"{head}## Variables\n\n{table(role)}\n"
    return readme[:start] + table(role) + readme[end + len(END):]


def stale(role: Role) -> str | None:
    """Why the README's table of ``role`` is not what the generator writes now; None when it is."""
    readme = _readme(role)
    if BEGIN not in readme:
        return f"roles/{role.name}/README.md has no variable table ({BEGIN} ... {END})"
    return None if rendered(role, readme) == readme else \
        f"roles/{role.name}/README.md: the variable table is out of date"


def write(role: Role) -> bool:
    """Rewrite the table of ``role``'s README (creating the README or its section if missing); True when it
    changed."""
    readme = _readme(role)
    want = rendered(role, readme)
    if want != readme:
        role.readme.write_text(want, encoding="utf-8")
    return want != readme


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m serve_system.roledocs",
        description="Write (or check) each role's README variable table from its meta/argument_specs.yml.")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite the tables that are out of date")
    mode.add_argument("--check", action="store_true", help="exit 1 when a table is out of date")
    parser.add_argument("--roles", type=Path, default=ROLES, help="the roles folder (default: %(default)s)")
    args = parser.parse_args(argv)
    found = roles(args.roles)
    problems = [p for r in found for p in spec_problems(r)]
    if args.write:
        for role in found:
            if write(role):
                print(f"wrote roles/{role.name}/README.md")
    else:
        out_of_date = [s for s in map(stale, found) if s]
        problems += [*out_of_date, f"regenerate with: {COMMAND}"] if out_of_date else []
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
