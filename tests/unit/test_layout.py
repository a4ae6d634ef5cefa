"""README.md's layout table (section ``## Layout``) names the whole package, and only what exists.

The rule, for ``src/serve_system/`` and every package in it (a folder with ``__init__.py``):

* a package has a row of its own (first column: its path, e.g. ```src/serve_system/results/```),
  or is named ```NAME/``` in the row of the package above it;
* every module of a package (``NAME.py``; dunder modules such as ``__main__`` are the package's
  own) is named ```NAME``` in that package's row: its own row, else the row of the nearest package
  above it that has one (``experiment/spec/``'s modules are named in the ``experiment/`` row);
* in those rows a back-quoted lower-case name (```NAME``` or ```NAME/```) is a module, package or
  folder of the packages the row describes; other back-quoted text (``serve-system``,
  ``repetitions: auto``, ``compare --class``) is free;
* every path in the first column of the table exists.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOT = "src/serve_system/"
NAME = re.compile(r"[a-z_][a-z0-9_]*/?")


def _rows(readme: str) -> list[tuple[list[str], list[str]]]:
    """(back-quoted paths of the first column, back-quoted text of the second) per row of the table."""
    section = re.search(r"^## Layout\n(.*?)(?=^## |\Z)", readme, flags=re.MULTILINE | re.DOTALL)
    if section is None:
        return []
    rows = []
    for line in section.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) == 2 and cells[0] not in ("path", "---"):
            rows.append((re.findall(r"`([^`]+)`", cells[0]), re.findall(r"`([^`]+)`", cells[1])))
    return rows


def _packages(pkg: Path) -> list[Path]:
    """``pkg`` and every package below it (reached through packages), parents first."""
    out = [pkg]
    for child in sorted(p for p in pkg.iterdir() if (p / "__init__.py").is_file()):
        out.extend(_packages(child))
    return out


def layout_problems(readme: str, repo: Path) -> list[str]:
    """What the layout table of ``readme`` misses or names wrongly in ``repo``; empty when it is right."""
    rows = _rows(readme)
    if not rows:
        return ["README.md has no table under '## Layout'"]
    problems = [f"the layout names `{p}`, which does not exist" for paths, _ in rows for p in paths
                if not (repo / p).exists()]
    named = {p: set(names) for paths, names in rows for p in paths if p.startswith(ROOT)}

    def rel(d: Path) -> str:
        return d.relative_to(repo).as_posix() + "/"

    def owner(d: Path) -> str | None:  # the row that describes package d
        while rel(d) not in named and rel(d) != ROOT:
            d = d.parent
        return rel(d) if rel(d) in named else None

    covered: dict[str, list[Path]] = {}
    for d in _packages(repo / ROOT):
        row = owner(d)
        if row is None:
            return [*problems, f"the layout has no row for `{ROOT}`"]
        covered.setdefault(row, []).append(d)
        if rel(d) not in named and f"{d.name}/" not in named[row]:
            problems.append(f"package `{rel(d)}` has no row and is not named `{d.name}/` in the row `{row}`")
        modules = [m for m in sorted(d.glob("*.py")) if not m.stem.startswith("__")]
        problems += [f"module `{rel(d)}{m.name}` is not named `{m.stem}` in the row `{row}`"
                     for m in modules if m.stem not in named[row]]
    for row, names in named.items():
        for name in sorted(n for n in names if NAME.fullmatch(n)):
            stem = name.rstrip("/")
            if not any((d / stem).is_dir() or (name == stem and (d / f"{stem}.py").is_file())
                       for d in covered.get(row, [])):
                problems.append(f"the row `{row}` names `{name}`, which is no module, package or folder "
                                "there")
    return problems


def test_the_readme_layout_names_every_module_of_the_package_and_nothing_else() -> None:
    problems = layout_problems((REPO / "README.md").read_text(encoding="utf-8"), REPO)
    assert problems == [], "README.md ## Layout:\n" + "\n".join(problems)


def _tree(tmp: Path, files: list[str]) -> Path:
    for f in files:
        (tmp / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp / f).write_text("", encoding="utf-8")
    return tmp


TREE = ["src/serve_system/__init__.py", "src/serve_system/cli.py", "src/serve_system/kit/__init__.py",
        "src/serve_system/kit/__main__.py", "src/serve_system/kit/a.py",
        "src/serve_system/kit/sub/__init__.py", "src/serve_system/kit/sub/b.py",
        "src/serve_system/kit/recipe/Containerfile"]


def _readme(*rows: str) -> str:
    table = "| path | what |\n| --- | --- |\n" + "".join(f"{r}\n" for r in rows)
    return f"# x\n\n## Layout\n\n{table}\n## Next\n"


def test_a_complete_table_passes_and_each_gap_or_stale_name_is_one_problem(tmp_path: Path) -> None:
    repo = _tree(tmp_path, TREE)
    top = "| `src/serve_system/` | the `serve-system` CLI: `cli` |"
    kit = "| `src/serve_system/kit/` | `a` (`repetitions: auto`), `sub/` (`b`), recipes (`recipe/`) |"
    assert layout_problems(_readme(top, kit), repo) == []
    # a sub-package may have its own row instead of being named in its parent's
    assert layout_problems(_readme(top, kit.replace(", `sub/` (`b`)", ""),
                                   "| `src/serve_system/kit/sub/` | `b` |"), repo) == []

    assert layout_problems(_readme(top, kit.replace("`a` (`repetitions: auto`), ", "")), repo) == [
        "module `src/serve_system/kit/a.py` is not named `a` in the row `src/serve_system/kit/`"]
    assert layout_problems(_readme(top, kit.replace("`sub/` (`b`)", "sub")), repo) == [
        ("package `src/serve_system/kit/sub/` has no row and is not named `sub/` in the row "
         "`src/serve_system/kit/`"),
        "module `src/serve_system/kit/sub/b.py` is not named `b` in the row `src/serve_system/kit/`"]
    # a module that moved: named at the old place, missing at the new one
    (repo / "src/serve_system/cli.py").rename(repo / "src/serve_system/kit/cli.py")
    assert layout_problems(_readme(top, kit), repo) == [
        "module `src/serve_system/kit/cli.py` is not named `cli` in the row `src/serve_system/kit/`",
        "the row `src/serve_system/` names `cli`, which is no module, package or folder there"]


def test_a_row_for_a_folder_that_is_gone_or_no_table_at_all_is_a_problem(tmp_path: Path) -> None:
    repo = _tree(tmp_path, ["src/serve_system/__init__.py"])
    assert layout_problems(_readme("| `src/serve_system/` | the library |", "| `bench/` | scripts |"), repo) \
        == ["the layout names `bench/`, which does not exist"]
    assert layout_problems("# x\n\n## Usage\n", repo) == ["README.md has no table under '## Layout'"]
    assert layout_problems(_readme("| `tests/` | tests |"), _tree(tmp_path, ["tests/x.py"])) == [
        "the layout has no row for `src/serve_system/`"]
