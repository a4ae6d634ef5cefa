"""What the repository's code and documents cite exists in the repository (tests aside: they build
trees of their own).

* A dotted name ``serve_system.a.b`` names a module or package of ``src/serve_system/``, optionally
  followed by a name that module defines at its top level (a function, class, constant, import).
* A repository path with a file extension (``src/…``, ``roles/…``, ``model_repository/…``, …) is in
  the repository, or is one git ignores (what the tool generates: ``inventory/hosts.yml``, model
  weights), or has an upper-case placeholder segment (``chi_scripts/NAME.py``).
* A document cited by its name alone (``README.md``, ``PLATFORM.md``) is a file of the repository.
"""

from __future__ import annotations

import ast
import re
import subprocess
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CITING = ["src", "roles", "bench", "chi_scripts", "scripts", "docs", "playbooks", "model_repository",
          "experiments", "inventory", "README.md", ".ansible-lint", "pyproject.toml"]
DOTTED = re.compile(r"(?<![\w.])serve_system((?:\.[A-Za-z_]\w*)+)")
PATH = re.compile(r"(?<![\w./{$<-])((?:src|roles|tests|bench|docs|model_repository|scripts|chi_scripts|"
                  r"playbooks|experiments|inventory)/[\w./-]*\.\w+)\b")
DOCUMENT = re.compile(r"(?<![\w./-])[A-Z][A-Z_]+\.md\b")


def _tracked(*paths: str) -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z", "--", *paths], cwd=REPO, capture_output=True,
                            check=True).stdout.decode().split("\0")
    return [name for name in listed if name]


def _texts() -> list[tuple[str, str]]:
    out = []
    for name in _tracked(*CITING):
        try:
            out.append((name, (REPO / name).read_text(encoding="utf-8")))
        except (UnicodeDecodeError, FileNotFoundError):  # binary, or deleted in the work tree
            continue
    return out


@cache
def _top_level_names(module: Path) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return frozenset(names)


def resolves(dotted: str, src: Path) -> bool:
    """Whether ``serve_system.<dotted>`` is a module of ``src`` or a top-level name of one."""
    here = src / "serve_system"
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if (here / part / "__init__.py").is_file():
            here = here / part
            continue
        module = here / f"{part}.py"
        if module.is_file():
            return i + 1 == len(parts) or parts[i + 1] in _top_level_names(module) \
                or parts[i + 1].startswith("__")
        # a name the package's __init__ defines (or a module attribute such as __file__)
        return part in _top_level_names(here / "__init__.py") or part.startswith("__")
    return True


def test_every_dotted_serve_system_name_in_code_and_documents_exists() -> None:
    stale = [f"{name}:{n}: serve_system{m.group(1)}"
             for name, text in _texts() for n, line in enumerate(text.splitlines(), 1)
             for m in DOTTED.finditer(line) if not resolves(m.group(1).lstrip("."), REPO / "src")]
    assert stale == [], "names of modules that are not (or no longer) there:\n" + "\n".join(stale)


def _ignored(paths: set[str]) -> set[str]:
    """The paths git ignores (as a file, or as a folder's content)."""
    asked = sorted(paths | {f"{p}/x" for p in paths})
    said = subprocess.run(["git", "check-ignore", "--stdin"], cwd=REPO, input="\n".join(asked) + "\n",
                          capture_output=True, text=True, check=False).stdout.split()
    return {p.removesuffix("/x") for p in said}


def test_every_repository_file_cited_in_code_and_documents_exists() -> None:
    cited = [(f"{name}:{n}", p) for name, text in _texts() for n, line in enumerate(text.splitlines(), 1)
             for p in PATH.findall(line)
             if not (REPO / p).exists() and not any(s.split(".")[0].isupper() for s in p.split("/"))]
    generated = _ignored({p for _, p in cited})
    missing = [f"{where}: {p}" for where, p in cited if p not in generated]
    assert missing == [], "files cited that the repository does not hold:\n" + "\n".join(missing)


def test_resolves_names_modules_and_their_top_level_names_only(tmp_path: Path) -> None:
    pkg = tmp_path / "serve_system" / "kit"
    pkg.mkdir(parents=True)
    (tmp_path / "serve_system" / "__init__.py").write_text("VERSION = 1\n", encoding="utf-8")
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "records.py").write_text("from x import y as HostPlan\nclass Event:\n    pass\nLIMIT: int = 3\n",
                                    encoding="utf-8")
    for ok in ("kit", "kit.records", "kit.records.Event", "kit.records.HostPlan", "kit.records.LIMIT",
               "kit.records.Event.to_json", "VERSION", "__file__"):
        assert resolves(ok, tmp_path), ok
    for stale in ("records", "records.HostPlan", "kit.nodes", "kit.records.Node", "kit.spec.Perf"):
        assert not resolves(stale, tmp_path), stale


def test_every_document_cited_by_name_is_in_the_repository() -> None:
    held = {Path(name).name for name in _tracked()}
    missing = [f"{name}:{n}: {doc}" for name, text in _texts() for n, line in enumerate(text.splitlines(), 1)
               for doc in DOCUMENT.findall(line) if doc not in held]
    assert missing == [], "documents cited that the repository does not hold:\n" + "\n".join(missing)
