"""The CLI fuzzer: hypothesis drives every command's parser and entry point with hostile argument values.

Each example is one command line, run in-process (``serve_system.cli.main``) in a fresh folder of its
own holding a user's files, a folder, a named pipe, links out of it and a loop of links. The values
are what a user could type by mistake or on purpose: huge, negative, zero and non-finite numbers, far
past and future dates, control characters, paths that climb (``../..``), links, very long strings.

The property, for every command: it exits 0, or non-zero with exactly one line on stderr and no
traceback (argparse's usage errors too; ``validate`` and ``plan``, whose contract is one line per
problem of the files they check: every line names its file); no file that was there before is changed or
removed unless the command line names it; nothing new appears outside the command's own folder and the
paths the command line names. Commands that would reach Chameleon get no credentials (every ``OS_*``
variable removed), so they must stop at their input checks; any connection beyond loopback, and any
start of ssh, podman, docker, Ansible or Triton, fails the example (a :class:`Forbidden`, not caught by
the tool). Each example runs under an alarm (a hang fails it).

Budget: ``SERVE_SYSTEM_CLI_FUZZ_EXAMPLES`` examples per command (default: :data:`CI_EXAMPLES`, the
whole module well under 90 s in CI), the seed :mod:`fuzzseed`'s (``SERVE_SYSTEM_FUZZ_SEED``: fixed in
CI, ``random`` for a hunt, a number to replay). A longer run by hand::

    SERVE_SYSTEM_CLI_FUZZ_EXAMPLES=3000 SERVE_SYSTEM_FUZZ_SEED=random \\
        pytest tests/unit/test_fuzz_cli.py -q -p no:cacheprovider -s

A crash it finds is fixed in the tool and kept as an ``@example`` below or a case in tests/bad_input.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from fuzzseed import SEED
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from treesnap import snapshot

from serve_system import argtypes, ownedtree
from serve_system.cli import build_parser, main

REPO = Path(__file__).resolve().parents[2]
#: examples per command in CI (about 25 commands: the module stays well under 90 s on 2 cores)
CI_EXAMPLES = 12
EXAMPLES = int(os.environ.get("SERVE_SYSTEM_CLI_FUZZ_EXAMPLES") or CI_EXAMPLES)
#: seconds one example may run before it counts as a hang
HANG_S = float(os.environ.get("SERVE_SYSTEM_CLI_FUZZ_DEADLINE") or 30)
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])
OUTCOMES: Counter[str] = Counter()

#: commands whose work is not a check of their input (building images, serving until Ctrl-C, timing
#: models, SSH to the nodes of an inventory: doctor's default, inventory/hosts.yml, may be a real one):
#: only their parser is fuzzed
PARSE_ONLY = {("rehearsal", "images"), ("rehearsal", "upstream-repo"), ("models", "standins"), ("doctor",)}
#: options never generated, with why: --provider local starts podman; --with-triton starts a tritonserver;
#: --configure runs ansible-playbook; --watch repeats until Ctrl-C
NEVER = {"--provider", "--with-triton", "--configure", "--watch", "--help", "--version"}
#: commands whose contract is one line per problem (of the files they check): each line names its file
PER_PROBLEM = {"validate", "plan"}
#: programs no fuzzed command may start
FORBIDDEN_PROGRAMS = {"ssh", "ssh-keyscan", "scp", "podman", "docker", "ansible-playbook", "ansible",
                      "tritonserver", "perf_analyzer", "openstack", "curl", "wget"}


class Forbidden(BaseException):  # BaseException: no `except Exception` of the tool hides it
    """A fuzzed command tried to reach the network or start a program it must not."""


class Hang(BaseException):
    """A fuzzed command ran past its alarm (not a TimeoutError: the CLI reports an OSError in one line)."""


# ------------------------------------------------------------------------------------------ values

HUGE = "9" * 400
NUMBERS = st.one_of(
    st.sampled_from(["0", "-0", "-1", "1", "-99999", "1e999", "-1e999", "nan", "NaN", "inf", "-inf",
                     "Infinity", "1e308", "-1e308", "1e-320", HUGE, "-" + HUGE, "4294967297",
                     "18446744073709551617", "65536", "0x10", "1_000", "\u0661\u0662", "\uff11\uff12",
                     "+5", "5.5", "-5.5", "", " ", "1h", "99999999h", "0m", "-1h", "2h50m", "1e3m",
                     "9" * 30 + "h"]),
    st.integers(-(10**40), 10**40).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
ZONES = st.sampled_from([None, UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-14))])
DATES = st.one_of(
    st.sampled_from(["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "0001-01-01 00:00",
                     "9999-12-31 23:59", "1970-01-01T00:00:00Z", "2026-13-01T00:00", "2026-02-30 25:61",
                     "-1", "now", "2026-11-27T21:00:00+99:00", "2026-11-27T21:00:00+23:59",
                     "1969-12-31T23:59:59Z", "2038-01-19T03:14:08Z"]),
    st.builds(lambda d, z, sep: (d.replace(tzinfo=z) if z else d).isoformat(sep=sep),
              st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)), ZONES,
              st.sampled_from(["T", " "])),
)
CONTROL = st.sampled_from(["\n", "\r", "\t", "\x1b[31m", "\x00", "\x7f", "\u202e", "\x85", "\u2028"])
TEXT = st.one_of(
    st.sampled_from(["", "-", "--", "=", "h", "h=1", "h=-1", "h=" + HUGE, "h=0", "=1", "h=h=1",
                     "{{ 7 * 7 }}", "{% raw %}", "../..", "..", "/", "x" * 5000, "a,b,,", "h=6.0,x",
                     "h=-", "node-1=2", "food_classifier", "baseline", "%s%n", "$(id)", "`id`"]),
    st.text(max_size=40),
    st.builds(lambda a, c, b: a + c + b, st.text(max_size=8), CONTROL, st.text(max_size=8)),
)
#: paths relative to the example's folder (its working directory); see make_tree
PATHS = st.one_of(
    st.sampled_from(["mine", "mine/notes.txt", "mine/sub", "notes.txt", "empty", "new", "new/deeper",
                     "fifo", "link_out", "link_out/x", "link_file", "loop", "loop/x", "..", "../..",
                     "../outside", "../outside/secret.txt", "../outside/new", "run", "run/h",
                     "run/summary.json", "run/h/plan.json", "results", "x" * 300, "a/" * 2100,
                     ".", "./", "notes.txt/x", "spec.yml", "broken.yml", "binary.bin", "-",
                     "hosts.yml", "empty.txt", "new.json", "out.md", "out.csv",
                     str(REPO / "experiments" / "specs" / "dynbatch.yml"),
                     str(REPO / "model_repository")]),
    st.builds(lambda a, c: a + c, st.sampled_from(["new", "mine/", "x"]), CONTROL),
    st.text(max_size=20),
)


def strategy_for(action: argparse.Action) -> st.SearchStrategy[str]:
    """Hostile values for one argument, by what it declares (its type, choices or name)."""
    t = action.type
    name = (action.option_strings[-1] if action.option_strings else action.dest).lower()
    if action.choices is not None:
        return st.one_of(st.sampled_from([str(c) for c in action.choices]), TEXT)
    if isinstance(t, ownedtree.PathArg) or "dir" in name:
        return st.one_of(PATHS, PATHS, TEXT)
    if "lease" in name and "end" in name or getattr(t, "__name__", "") == "_utc":
        return st.one_of(DATES, DATES, TEXT)
    if isinstance(t, argtypes.Whole | argtypes.Number) or t in (int, float) or t is not None:
        return st.one_of(NUMBERS, NUMBERS, TEXT)
    return st.one_of(TEXT, PATHS, NUMBERS)


def command_lines(cmd: tuple[str, ...], parser: argparse.ArgumentParser) -> st.SearchStrategy[list[str]]:
    """Command lines of ``cmd``: each optional argument present or not, every positional given."""
    parts = []
    for a in parser._actions:
        if isinstance(a, argparse._HelpAction | argparse._SubParsersAction) or set(a.option_strings) & NEVER:
            continue
        if not a.option_strings:  # a positional
            many = a.nargs in ("+", "*")
            count = st.integers(1 if a.nargs != "*" else 0, 3 if many else 1)
            optional = a.nargs == "?"
            parts.append(st.tuples(st.booleans() if optional else st.just(True),
                                   count.flatmap(lambda n, a=a: st.lists(strategy_for(a), min_size=n,
                                                                         max_size=n)))
                         .map(lambda x: x[1] if x[0] else []))
            continue
        opt = a.option_strings[-1]
        if a.nargs == 0:
            parts.append(st.booleans().map(lambda on, opt=opt: [opt] if on else []))
        else:
            reps = st.integers(1, 2) if isinstance(a, argparse._AppendAction) else st.just(1)
            parts.append(st.tuples(st.booleans() | st.just(a.required),
                                   reps.flatmap(lambda n, a=a: st.lists(strategy_for(a), min_size=n,
                                                                        max_size=n)))
                         .map(lambda x, opt=opt: [f"{opt}={v}" for v in x[1]] if x[0] else []))
    return st.tuples(*parts).map(lambda ps: [*cmd, *[v for p in ps for v in p]])


def commands() -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    out = []

    def walk(p: argparse.ArgumentParser, prefix: tuple[str, ...]) -> None:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs and prefix:
            out.append((prefix, p))
        for s in subs:
            for name, sp in s.choices.items():
                walk(sp, (*prefix, name))

    walk(build_parser(), ())
    return out


COMMANDS = commands()

# ------------------------------------------------------------------------------------------ harness

SUMMARY = ('{"rows": [{"experiment": "x", "run_id": "r", "host": "h", "variant": "v", "mode": "concurrency", '
           '"load": 1, "throughput": 10.5, "p50_us": 100, "p95_us": 200, "p99_us": 300, "errors": 0}]}\n')
INVENTORY = ("all:\n  children:\n    serve_nodes:\n      hosts:\n        n1:\n"
             "          ansible_host: 10.0.0.1\n          serve_student: alice\n")


def make_tree(root: Path) -> Path:
    """The example's folder: ``outside/`` (a user's files beside it) and ``work/`` (the working directory)."""
    (root / "outside" / "dir").mkdir(parents=True)
    (root / "outside" / "secret.txt").write_text("secret\n")
    (root / "outside" / "dir" / "deep.txt").write_text("deep\n")
    w = root / "work"
    (w / "mine" / "sub").mkdir(parents=True)
    (w / "mine" / "notes.txt").write_text("my notes\n")
    (w / "mine" / "sub" / "thesis.tex").write_text("\\documentclass{article}\n")
    (w / "notes.txt").write_text("notes\n")
    (w / "empty").mkdir()
    (w / "empty.txt").write_text("")
    (w / "binary.bin").write_bytes(bytes(range(256)))
    (w / "broken.yml").write_text("name: [\n")
    (w / "spec.yml").write_bytes((REPO / "experiments" / "specs" / "dynbatch.yml").read_bytes())
    (w / "hosts.yml").write_text(INVENTORY)
    (w / "run" / "h").mkdir(parents=True)
    (w / "run" / "summary.json").write_text(SUMMARY)
    (w / "run" / "h" / "plan.json").write_text("{}\n")
    os.mkfifo(w / "fifo")
    os.symlink("../outside", w / "link_out")
    os.symlink("../outside/secret.txt", w / "link_file")
    os.symlink("loop", w / "loop")
    return w





def named(argv: list[str], cwd: Path) -> list[Path]:
    """Every path the command line names (a value, or the DIR of NAME=DIR), made absolute (not resolved:
    a link named is itself named, and so is what it leads to)."""
    out = []
    for arg in argv:
        value = arg.partition("=")[2] if arg.startswith("--") else arg
        for v in {value, value.partition("=")[2]}:
            if v and "\x00" not in v:
                p = Path(os.path.normpath(cwd / v))
                out.append(p)
                with contextlib.suppress(OSError, RuntimeError):
                    out.append(p.resolve())
    return out


def under(p: Path, roots: list[Path]) -> bool:
    return any(p == r or r in p.parents for r in roots)


@contextlib.contextmanager
def guarded(seconds: float) -> Iterator[None]:
    """No connection beyond loopback, no forbidden program, no hang."""
    real_connect, real_gai, real_popen = socket.socket.connect, socket.getaddrinfo, subprocess.Popen.__init__

    def loopback(host: Any) -> bool:
        try:
            return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
        except ValueError:
            return str(host) in ("localhost", "")

    def connect(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6) and not loopback(address[0]):
            raise Forbidden(f"a connection to {address}")
        return real_connect(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is not None and not loopback(host):
            raise Forbidden(f"a name lookup of {host!r}")
        return real_gai(host, *args, **kwargs)

    def popen(self: subprocess.Popen[Any], args: Any, *a: Any, **kw: Any) -> None:
        first = args if isinstance(args, str | bytes | os.PathLike) else (args[0] if args else "")
        if os.path.basename(os.fsdecode(first)).split()[0] in FORBIDDEN_PROGRAMS:
            raise Forbidden(f"started {args!r}")
        real_popen(self, args, *a, **kw)

    def alarm(*_: Any) -> None:
        raise Hang(f"hung for {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.getaddrinfo = getaddrinfo  # type: ignore[assignment]
    subprocess.Popen.__init__ = popen  # type: ignore[method-assign]
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        socket.socket.connect = real_connect  # type: ignore[method-assign]
        socket.getaddrinfo = real_gai
        subprocess.Popen.__init__ = real_popen  # type: ignore[method-assign]


@pytest.fixture
def no_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No OS_* credentials, a home and caches of the test's own."""
    for key in list(os.environ):
        if key.startswith(("OS_", "SERVE_SYSTEM_OPENRC")):
            monkeypatch.delenv(key)
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("USER", "fuzz")
    return tmp_path


def run_one(argv: list[str], *, parse_only: bool) -> int:
    """One example: the property of the module's docstring; its exit status."""
    with tempfile.TemporaryDirectory(prefix="cli-fuzz-") as tmp:
        work = make_tree(Path(tmp))
        before = snapshot(Path(tmp))
        out, err = io.StringIO(), io.StringIO()
        old_cwd, old_stdin = os.getcwd(), sys.stdin
        os.chdir(work)
        sys.stdin = io.StringIO("")
        try:
            with guarded(HANG_S), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    if parse_only:
                        build_parser().parse_args(argv)
                        rc = 0
                    else:
                        rc = main(argv)
                except SystemExit as exc:  # argparse: a usage error (2)
                    rc = exc.code if isinstance(exc.code, int) else 1
        finally:
            os.chdir(old_cwd)
            sys.stdin = old_stdin
        lines = err.getvalue().splitlines()
        OUTCOMES[f"{argv[0]}: exit {rc}"] += 1
        assert "Traceback" not in err.getvalue(), f"{argv!r}: a traceback:\n{err.getvalue()}"
        if rc != 0 and argv[0] in PER_PROBLEM and len(lines) > 1:
            files = [a for a in argv[1:] if not a.startswith("-")]
            assert all(line.startswith(tuple(files)) for line in lines), \
                f"{argv!r}: a problem line that names no file: {lines[:5]}"
        elif rc != 0:
            assert len(lines) == 1, f"{argv!r}: exit {rc} with {len(lines)} stderr lines: {lines[:5]}"
        after = snapshot(Path(tmp))
        names = named(argv, work)
        for rel, was in before.items():
            if after.get(rel) != was and not under(Path(tmp) / rel, names):
                raise AssertionError(f"{argv!r}: {rel} {'removed' if rel not in after else 'changed'}")
        for rel in set(after) - set(before):
            p = Path(tmp) / rel
            assert under(p, [work, *names]), f"{argv!r}: wrote {rel}, outside its folder"
    return rc


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    print(f"\nCLI fuzz seed {SEED}, {EXAMPLES} examples per command: {sum(OUTCOMES.values())} run; "
          + ", ".join(f"{k}: {v}" for k, v in sorted(OUTCOMES.items())))


@pytest.mark.parametrize(("cmd", "parser"), COMMANDS, ids=[" ".join(c) for c, _ in COMMANDS])
def test_every_command_line_exits_cleanly(cmd: tuple[str, ...], parser: argparse.ArgumentParser,
                                          no_credentials: Path) -> None:
    @seed(SEED)
    @FUZZ
    @given(command_lines(cmd, parser))
    def check(argv: list[str]) -> None:
        run_one(argv, parse_only=cmd in PARSE_ONLY)

    check()


# ------------------------------------------------------------------- the cases issue 38 named, kept

@pytest.mark.parametrize("argv", [
    ["plan", "spec.yml", "--run-dir", "results/dynbatch/r1", "--host", "h=1",
     "--lease-end=0001-01-01T00:00:00+14:00"],
    ["plan", "spec.yml", "--run-dir", "results/dynbatch/r1", "--host", "h=1",
     "--lease-end=9999-12-31T23:59:59-14:00"],
    ["models", "render", "--dest", "new", "--model", "food_classifier", "--gpus=-1"],
    ["models", "render", "--dest", "new", "--model", "food_classifier", "--gpus=" + HUGE],
    ["fastapi", "context", "mine"],
    ["compare", "run", "--load=nan"],
    ["inventory", "-i", "fifo"],
    ["lease", "create", "--start=0001-01-01 00:00", "--dry-run"],
    ["status", "--times=" + HUGE],
    ["lease", "extend", "--by=18446744073709551617"],  # found by the fuzzer: OverflowError in timedelta
    ["compare", "loop"],  # found by the fuzzer: RuntimeError (a loop of links) where the path was resolved
    ["compare", "mine", "-\r"],  # found by the fuzzer: argparse's line quoted a carriage return
    ["schema", "--output=--"],  # found by the fuzzer: argparse handed the option [] (AttributeError)
    ["lease", "create", "--end=9999-12-31T23:59", "--dry-run"],
    ["launch", "--count=99999", "--dry-run"],
    ["status", "--poll=1e300"],
])
def test_the_known_cases_are_refused_in_one_line(argv: list[str], no_credentials: Path) -> None:
    assert run_one(argv, parse_only=False) != 0
