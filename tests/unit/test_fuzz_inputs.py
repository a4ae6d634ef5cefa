"""Property-based tests (hypothesis) of the readers of what users hand the tool: experiment specs
(``validate`` and ``plan``), class rosters and openrc files.

Every generated input either succeeds (and then what it yields is safe: no Jinja reaches the plan,
every number is finite, every key whole and every student's own) or is refused by one line that
names the file; anything else (a traceback, a second line) fails the test. The generators aim at
the classes of issue 26: Jinja in any string, behind ``!!binary`` or protobuf escapes, format
specifications in sweep names, non-finite and huge numbers, YAML tags, damaged or shared keys,
encodings and control characters.

Budget: ``SERVE_SYSTEM_FUZZ_EXAMPLES`` examples per reader (default 60: the three take well under
a minute in CI); the seed is printed and ``SERVE_SYSTEM_FUZZ_SEED`` replays it. A longer run:
``SERVE_SYSTEM_FUZZ_EXAMPLES=5000 pytest tests/unit/test_fuzz_inputs.py -s``. A crash it finds is
kept as a case in ``tests/bad_input/``.
"""

from __future__ import annotations

import base64
import codecs
import math
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fuzzseed import EXAMPLES, SEED
from hypothesis import HealthCheck, example, given, seed, settings
from hypothesis import strategies as st

from serve_system.commands.validate import problems
from serve_system.errors import ServeSystemError
from serve_system.experiment import plan as exp
from serve_system.experiment.spec.models import JINJA_RE, TritonSpec
from serve_system.experiment.spec.reader import load_spec
from serve_system.node import records as rec
from serve_system.provision.chameleon.credentials import parse_openrc
from serve_system.provision.roster import read_roster
from serve_system.textsafe import clean

FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
#: how each reader ended, per outcome (printed once the module's tests ran, with -s)
OUTCOMES: Counter[str] = Counter()


@pytest.fixture(scope="module", autouse=True)
def _report_outcomes() -> Iterator[None]:
    yield
    print(f"\nfuzz seed {SEED}: " + ", ".join(f"{k}: {v}" for k, v in sorted(OUTCOMES.items())))

# ------------------------------------------------------------------------------------ generators

JINJA = st.sampled_from(["{{ 7 * 7 }}", "{% raw %}", "{# c #}", "{{lookup('pipe','id')}}", "x{{y", "{%-"])
ESCAPED_JINJA = st.sampled_from([r"\173\173 x \175\175", r"\x7b\x7b x", r"\173%", r"{\043", r"\x7b#"])
FORMAT_SPECS = st.sampled_from(["{n:>99999999999}", "{n!r}", "{n.__class__}", "{n[0]}", "{}", "{0}",
                                "{n:{n}}", "{n:,}", "{{n}}", "{n", "n}", "{n}"])
WEIRD_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)


def _scalar_yaml() -> st.SearchStrategy[str]:
    """A YAML scalar as text: hostile numbers, tags, Jinja, escapes, control characters."""
    text = st.one_of(JINJA, WEIRD_TEXT,
                     st.sampled_from(["a\x1b[2J", "a\r\nb", "[red]x[/]", "=cmd|' /C calc'!A0"]))
    return st.one_of(
        st.sampled_from([".nan", ".inf", "-.inf", "1.0e+300", "-1", "0", "1e999", "2024-13-45", "2024-01-01",
                         "!!float abc", "!!int 0x", "!!bool maybe", "!!timestamp x", "!!set {a, b}",
                         "!!omap [a: 1]", "!!python/object:os.system x", "!custom x", "!!str 12", "~", "null",
                         "true", "'{n}'", "0x7fffffffffffffffffff", "!!binary 'e3sgNyAqIDcgfX0='"]),
        st.integers(min_value=19, max_value=4400).map(lambda k: "1" + "0" * k),
        text.map(lambda s: yaml.safe_dump(s, default_style='"').strip().removesuffix("\n...")),
        st.binary(max_size=20).map(lambda b: f"!!binary '{base64.b64encode(b).decode()}'"),
        JINJA.map(lambda s: f"!!binary '{base64.b64encode(s.encode()).decode()}'"),
    )


BASE = ('name: "m"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
        'input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "y" data_type: TYPE_FP32 dims: [ 2 ] } ]\ninstance_group [ { kind: KIND_CPU } ]\n')


def _indent(text: str) -> str:
    return "".join(f"  {line}\n" for line in text.splitlines())


@st.composite
def hostile_specs(draw: st.DrawFn) -> str:
    """A Triton spec as YAML text, valid but for a few hostile fields."""
    value = _scalar_yaml()
    base = BASE
    if draw(st.integers(0, 3)) == 0:
        base += f'parameters {{ key: "k" value {{ string_value: "{draw(ESCAPED_JINJA)}" }} }}\n'
    def hostile(bad: st.SearchStrategy[str], good: str) -> str:  # a quarter of the fields hostile
        return draw(bad) if draw(st.integers(0, 3)) == 0 else good

    levels = st.one_of(
        st.lists(st.one_of(value, st.floats().map(repr), st.integers(-10, 10**30).map(str)), max_size=4)
        .map(lambda xs: "[" + ", ".join(x.replace("nan", ".nan").replace("inf", ".inf") for x in xs) + "]"),
        st.tuples(st.sampled_from(["1", "0", "nan", "1e999", "-3", "0.0001"]),
                  st.sampled_from(["8", "nan", "inf", "0", "1e300"]),
                  st.sampled_from(["1", "0", "nan", "-1", "inf", "0.0000001"]))
        .map(lambda t: "'" + ":".join(t) + "'"))
    fields = {
        "description": hostile(value, "plain"),
        "levels": hostile(levels, "[1, 8]"),
        "name_pattern": hostile(st.one_of(FORMAT_SPECS, JINJA), "{n}"),
        "grid": hostile(st.lists(value, min_size=1, max_size=3).map(", ".join), "1, 2"),
        "config": hostile(value, "plain"),
        "at_load": hostile(value, "8"),
        "key": hostile(value, "plain_key"),
    }
    return (f"name: t\nmodel: m\nbase_config_text: |\n{_indent(base)}"
            f"description: {fields['description']}\n"
            f"load: {{mode: concurrency, levels: {fields['levels']}}}\n"
            "variants:\n  - name: base\n"
            f"    config: {{parameters: {{{fields['key']}: {{string_value: {fields['config']}}}}}}}\n"
            f"sweep:\n  name: 'v{fields['name_pattern']}'\n  grid: {{n: [{fields['grid']}]}}\n"
            f"objectives:\n  - {{metric: throughput, at_load: {fields['at_load']}}}\n"
            "perf: {batch_size: 1}\n")


def _finite(obj: Any) -> bool:
    if isinstance(obj, float):
        return math.isfinite(obj)
    if isinstance(obj, dict):
        return all(_finite(v) for v in obj.values())
    if isinstance(obj, list):
        return all(_finite(v) for v in obj)
    return True


def _strings(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in [str(k), *_strings(v)]]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


def _one_line_naming(lines: list[str], path: Path) -> None:
    assert lines, "refused without a reason"
    for line in lines:
        assert line.startswith(str(path)), line
        assert "\n" not in line and "Traceback" not in line, line


# ------------------------------------------------------------------------------------ specs

#: what the fuzzer found, kept (a key holding a line break split the error line)
FOUND_SPECS = [("name: t\nmodel: m\nload: {levels: [1]}\nvariants: [{name: a, config: {parameters: "
               "{\"a\\r\\nb\": {string_value: .nan}}}}]\n")]


@seed(SEED)
@FUZZ
@example(text=FOUND_SPECS[0])
@given(text=hostile_specs())
def test_spec_reader_refuses_in_lines_naming_the_file_or_plans_safely(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spec.yml"
        path.write_text(text, encoding="utf-8")
        lines = problems(path, 0)  # what `serve-system validate` runs: any other exception fails here
        if lines:
            OUTCOMES["spec refused"] += 1
            _one_line_naming(lines, path)
            return
        OUTCOMES["spec planned"] += 1
        spec = load_spec(path)
        assert isinstance(spec, TritonSpec)
        plans = [rec.to_json(v) for v in exp.plan(spec, 0)]
        for s in _strings(plans) + _strings(spec.data):
            assert not JINJA_RE.search(s), s
        assert _finite(plans) and _finite(spec.data)


# ------------------------------------------------------------------------------------ rosters

def _key(kind: str, body: bytes) -> bytes:
    parts = ([kind.encode(), body] if kind == "ssh-ed25519"
             else [kind.encode(), b"\x01\x00\x01", b"\x00" + body * 8])  # RSA: e, a 2048-bit n
    return b"".join(len(p).to_bytes(4, "big") + p for p in parts)


@st.composite
def roster_rows(draw: st.DrawFn) -> tuple[str, str, str]:
    name = draw(st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)) if draw(st.integers(0, 5)) else draw(
        st.one_of(WEIRD_TEXT, st.sampled_from(["alice\n", "Bob", "a-b", "x" * 40, "=cmd", "[red]", ""])))
    kind = draw(st.sampled_from(["ssh-ed25519", "ssh-rsa"]))
    blob = _key(kind, draw(st.binary(min_size=32, max_size=32)))
    damage = draw(st.sampled_from(["none"] * 12 + ["cut", "extend", "type", "text", "shared"]))
    if damage == "cut":
        blob = blob[: draw(st.integers(0, len(blob) - 1))]
    elif damage == "extend":
        blob += draw(st.binary(min_size=1, max_size=8))
    elif damage == "type":
        kind = draw(st.sampled_from(["ssh-dss", "ecdsa-sha2-nistp256", "ssh-ed25519"]))
    key = f"{kind} {base64.b64encode(blob).decode()} {draw(WEIRD_TEXT)}"
    if damage == "text":
        key = draw(st.one_of(WEIRD_TEXT, JINJA, st.just("-----BEGIN OPENSSH PRIVATE KEY-----")))
    if damage == "shared":
        key = "SHARED"
    return name, key, draw(st.one_of(st.just("a@example.org"), st.just(""), WEIRD_TEXT))


@st.composite
def rosters(draw: st.DrawFn) -> bytes:
    header = draw(st.sampled_from(["student,ssh_public_key,email"] * 6 + [
        "student,ssh_public_key", "name,key", "student,ssh_public_key,phone", ""]))
    rows = draw(st.lists(roster_rows(), min_size=0, max_size=6))
    shared = _key("ssh-ed25519", b"s" * 32)
    shared_key = f"ssh-ed25519 {base64.b64encode(shared).decode()}"
    lines = [header] + [",".join(f'"{c}"' if draw(st.booleans()) else c
                                 for c in (n, shared_key if k == "SHARED" else k, e))
                        for n, k, e in rows]
    text = "\n".join(lines) + "\n"
    encoding = draw(st.sampled_from(["utf-8"] * 6 + ["utf-8-sig", "utf-16", "latin-1"]))
    try:
        return text.encode(encoding)
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


@seed(SEED)
@FUZZ
@given(content=rosters())
def test_roster_reader_refuses_in_one_line_naming_the_file(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "class.csv"
        path.write_bytes(content)
        try:
            students = read_roster(path)
        except ServeSystemError as exc:
            OUTCOMES["roster refused"] += 1
            _one_line_naming([str(exc).removeprefix("--roster ")], path)
            return
        OUTCOMES["roster read"] += 1
        assert students and len({s.name for s in students}) == len(students)
        assert len({s.key.split()[1] for s in students}) == len(students)  # each student's own key


# ------------------------------------------------------------------------------------ openrc

@st.composite
def openrcs(draw: st.DrawFn) -> bytes:
    names = st.sampled_from(["OS_AUTH_URL", "OS_PROJECT_NAME", "OS_USERNAME", "OS_PASSWORD", "OS_REGION_NAME",
                             "OS_APPLICATION_CREDENTIAL_ID", "OS_APPLICATION_CREDENTIAL_SECRET"])
    values = st.one_of(WEIRD_TEXT, JINJA, st.sampled_from([
        "'a b'", '"$OS_USERNAME-x"', "${OS_NOPE}", "'unclosed", "a\x1b[2Jb", "é", "$(id)", "`id`", "a;b",
        "\\"]))
    lines = draw(st.lists(st.one_of(
        st.tuples(st.sampled_from(["export ", "", "  export "]), names, values)
        .map(lambda t: f"{t[0]}{t[1]}={t[2]}"),
        st.sampled_from(["#!/usr/bin/env bash", "# Projet été", 'echo "Please enter your password: "',
                         "read -sr OS_PASSWORD_INPUT", "unset OS_TENANT_ID"]),
        WEIRD_TEXT), max_size=8))
    text = "\n".join(lines) + "\n"
    encoding = draw(st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32", "latin-1",
                                     "cp1252"]))
    try:
        raw = text.encode(encoding)
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        bom = draw(st.sampled_from([b"", codecs.BOM_UTF16_LE, codecs.BOM_UTF8]))
        raw = bom + raw + draw(st.binary(max_size=4))
    return raw


@seed(SEED)
@FUZZ
@given(content=openrcs())
def test_openrc_reader_refuses_in_one_line_naming_the_file(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "openrc.sh"
        path.write_bytes(content)
        try:
            found = parse_openrc(path, {})
        except ServeSystemError as exc:
            OUTCOMES["openrc refused"] += 1
            assert str(exc).startswith(f"--openrc {path}: ") and "\n" not in str(exc), str(exc)
            return
        OUTCOMES["openrc read"] += 1
        for name, value in found.items():
            assert name.startswith("OS_") and isinstance(value, str)
            assert clean(value) == value, (name, value)  # nothing a terminal would act on
            assert not any("\udc80" <= c <= "\udcff" for c in value), (name, value)
