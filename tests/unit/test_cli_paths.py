"""Every path the command line takes declares what the command does with it, and no command writes into
a user's folder.

The whole parser is walked (every command and sub-command): an argument that names a path (typed
``Path``, or named like one: DIR, FILE, ``--out``, ``--dest``, ``*_dir``, ...) must be typed with
:class:`serve_system.ownedtree.PathArg`, which declares its use. Each argument declared as a folder the
tool writes into (:data:`~serve_system.ownedtree.OWNED` or :data:`~serve_system.ownedtree.RUN`) has a
command line below that aims it at a user's non-empty folder: the folder must survive byte for byte and
the command exit non-zero with one line on stderr. A new command's folder argument fails the first test
until it is declared, and the second until it has its command line here.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from treesnap import snapshot

from serve_system import ownedtree
from serve_system.cli import build_parser, main

REPO = Path(__file__).resolve().parents[2]

#: names that say an argument is a path (dest, option or metavar)
PATHLIKE = re.compile(r"(^|[_-])(dirs?|dest|out|output|folder|path|paths|file|root|inventory|csv|roster|"
                      r"openrc|spec|archive|known_hosts|before|after|play|source|tritonserver|image_file)"
                      r"($|[_-])", re.IGNORECASE)
PATH_METAVARS = re.compile(r"^(DIR|FILE|PATH|CSV|BIN|SPEC|ARCHIVE|RUN_DIR|NAME=DIR|.*\.json)$")
#: arguments named like a path that are not one (a name or a flag)
NOT_PATHS = {("plan", "--run-id"), ("launch", "--key-name"), ("status", "--key-name"),
             ("rebuild", "--key-name"), ("teardown", "--key-name")}


def walk(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Iterator[
        tuple[tuple[str, ...], argparse.Action]]:
    """(command path, argument) of every argument of every command, sub-commands included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, (*prefix, name))
        elif not isinstance(action, argparse._HelpAction | argparse._VersionAction):
            yield prefix, action


def name_of(action: argparse.Action) -> str:
    return action.option_strings[-1] if action.option_strings else action.dest


def looks_like_a_path(action: argparse.Action) -> bool:
    if action.nargs == 0:  # a flag
        return False
    names = [action.dest, *action.option_strings]
    metavar = action.metavar if isinstance(action.metavar, str) else ""
    return (action.type is Path or any(PATHLIKE.search(n.lstrip("-")) for n in names)
            or bool(PATH_METAVARS.match(metavar)))


ARGS = list(walk(build_parser()))


def test_the_walk_sees_every_command() -> None:
    commands = {p for p, _ in ARGS}
    for expected in [("fastapi", "context"), ("models", "render"), ("access",), ("plan",), ("report",),
                     ("compare",), ("collect",), ("decide",), ("lease", "extend"), ("launch",)]:
        assert expected in commands


def test_every_path_argument_declares_its_use() -> None:
    undeclared = [f"{' '.join(cmd)} {name_of(a)}" for cmd, a in ARGS
                  if looks_like_a_path(a) and (cmd[0], name_of(a)) not in NOT_PATHS
                  and ownedtree.path_use(a) is None]
    assert not undeclared, ("path arguments with no declared use (type=ownedtree.PathArg(...)): "
                            + ", ".join(undeclared))
    assert not [a for _, a in ARGS if a.type is Path], "a bare type=Path: declare its use with PathArg"


# ------------------------------------------------------------------ folders written: a user's survives

#: per folder the tool writes into: a command line aiming it at {dir} (a user's folder), and where
#: {dir} is under the test's folder; {tmp} is that folder, {repo} the repository
WRITERS: dict[tuple[tuple[str, ...], str], tuple[list[str], str]] = {
    (("fastapi", "context"), "dest"): (["fastapi", "context", "{dir}"], "mine"),
    (("models", "render"), "--dest"): (["models", "render", "--dest", "{dir}", "--model", "food_classifier",
                                        "--standin", "food_classifier",
                                        "--source", "{repo}/model_repository"], "mine"),
    (("access",), "--out"): (["access", "-i", "{tmp}/hosts.yml", "--out", "{dir}"], "mine"),
    (("compare",), "--out"): (["compare", "--class", "{tmp}/run", "--out", "{dir}"], "mine"),
    (("plan",), "--run-dir"): (["plan", "{repo}/experiments/specs/dynbatch.yml", "--run-dir", "{dir}",
                                "--host", "h=1", "--fresh", "--quiet"], "results/dynbatch/r1"),
    (("plan",), "--results-dir"): (["plan", "{repo}/experiments/specs/dynbatch.yml", "--results-dir",
                                    "{tmp}/results", "--run-id", "r1", "--host", "h=1", "--quiet"],
                                   "results/dynbatch/r1"),
    (("collect",), "--run-dir"): (["collect", "--run-dir", "{dir}"], "mine"),
    (("collect",), "--host-dir"): (["collect", "{tmp}/results.tar.gz", "--host-dir", "{dir}"], "mine"),
    (("decide",), "run_dir"): (["decide", "{dir}", "--host", "h"], "mine"),
    (("report",), "run_dir"): (["report", "{dir}", "--partial"], "mine"),
}
WRITTEN = [(cmd, name_of(a)) for cmd, a in ARGS if ownedtree.path_use(a) in (ownedtree.OWNED, ownedtree.RUN)]

INVENTORY = """all:
  children:
    serve_nodes:
      hosts:
        n1:
          ansible_host: 10.0.0.1
          serve_student: alice
"""


def test_every_folder_written_has_a_case_below() -> None:
    missing = [f"{' '.join(c)} {n}" for c, n in WRITTEN if (c, n) not in WRITERS]
    assert not missing, f"add a command line to WRITERS for: {', '.join(missing)}"
    assert len(WRITTEN) >= 10





@pytest.mark.parametrize(("cmd", "option"), WRITTEN, ids=[f"{' '.join(c)} {n}" for c, n in WRITTEN])
def test_a_users_folder_survives_byte_for_byte(cmd: tuple[str, ...], option: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    argv, where = WRITERS[(cmd, option)]
    (tmp_path / "hosts.yml").write_text(INVENTORY)
    user = tmp_path / where
    (user / "sub").mkdir(parents=True)
    (user / "notes.txt").write_text("my notes\n")
    (user / "sub" / "thesis.tex").write_text("\\documentclass{article}\n")
    (user / "h").mkdir()  # a folder named like a host of the run
    (user / "h" / "data.csv").write_text("1,2\n")
    before = snapshot(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = [a.format(dir=user, tmp=tmp_path, repo=REPO) for a in argv]
    rc = main(args)
    err = capsys.readouterr().err
    assert rc != 0, f"{args}: exit 0 on a user's folder"
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert str(user) in err or where in err, err  # the line names the folder
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("force", [False, True])
def test_force_writes_into_a_users_folder_and_replaces_only_its_own_files(tmp_path: Path, force: bool,
                                                                          capsys: pytest.CaptureFixture[str]
                                                                          ) -> None:
    ctx = tmp_path / "ctx"
    (ctx / "sub").mkdir(parents=True)
    (ctx / "notes.txt").write_text("mine")
    (ctx / "sub" / "thesis.tex").write_text("mine too")
    rc = main(["fastapi", "context", str(ctx), *(["--force"] if force else [])])
    capsys.readouterr()
    if not force:
        assert rc != 0 and sorted(os.listdir(ctx)) == ["notes.txt", "sub"]
        return
    assert rc == 0 and (ctx / "Containerfile").is_file()
    (ctx / "Containerfile").write_text("stale")
    assert main(["fastapi", "context", str(ctx)]) == 0  # the tool's folder now: no --force needed
    capsys.readouterr()
    assert (ctx / "notes.txt").read_text() == "mine"
    assert (ctx / "sub" / "thesis.tex").read_text() == "mine too"
    assert (ctx / "Containerfile").read_text() != "stale"


def test_the_walk_would_catch_a_new_undeclared_folder_argument() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers()
    new = sub.add_parser("new")
    new.add_argument("--cache-dir")
    new.add_argument("target", type=Path, metavar="DIR")
    new.add_argument("--json", action="store_true")
    found = {name_of(a): looks_like_a_path(a) and ownedtree.path_use(a) is None for _, a in walk(p)}
    assert found == {"--cache-dir": True, "target": True, "--json": False}
