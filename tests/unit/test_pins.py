"""Nothing a real node builds or pulls floats (issue 49): no ``:latest``, every base image by tag and
digest, every git build context at a full commit, every pip install under a constraints file of exact
versions with PyTorch's wheels by sha256 and the build-time pin check after it.

The files are parsed, not grepped: Dockerfiles' FROM lines (ARG defaults resolved), their pip install
commands (options, -r/-c files resolved through the COPY lines to the recipe's own files), the
constraints and requirements files, and every role's defaults. The same checks run on planted copies
(a ``:latest``, a branch, a range) and must fail there, so they are not vacuous.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from serve_system.images import fastapi as fastapi_image
from serve_system.images import pincheck

ROOT = Path(__file__).resolve().parents[2]
ROLES = ROOT / "roles"
PINCHECK = ROOT / "src" / "serve_system" / "images" / "pincheck.py"
FASTAPI_RECIPE = ROOT / "src" / "serve_system" / "fastapi_app" / "image"
TRITON_RECIPE = ROLES / "serve_stack" / "files" / "triton_gpu"
GOURMETGRAM_RECIPE = ROLES / "serve_stack" / "files" / "gourmetgram"
#: the images a real node builds: every recipe under roles/ and the FastAPI image's
RECIPES = sorted([*ROLES.rglob("Dockerfile*"), *ROLES.rglob("Containerfile*"),
                  FASTAPI_RECIPE / "Containerfile"])
#: files the role (or `serve-system fastapi context`) puts beside a recipe: name in the context -> source
EXTRA_FILES: dict[Path, dict[str, Path]] = {
    TRITON_RECIPE: {"requirements.txt": ROOT / "model_repository" / "requirements.txt",
                    "pincheck.py": PINCHECK},
    GOURMETGRAM_RECIPE: {"pincheck.py": PINCHECK},
    FASTAPI_RECIPE: {"pincheck.py": PINCHECK},
}
#: base images of which no digest is on public record, and where that is said (searched: code, issues,
#: pages, docs; the first real build prints the digest it pulled, docs/real-node.md)
NO_DIGEST_ON_RECORD = {"nvcr.io/nvidia/tritonserver:24.10-py3": "docs/real-node.md, 'Pins'"}
#: recipes another branch of issue 49 pins; an entry must go once its file passes (see the last test)
PENDING = {Path("roles/serve_stack/files/jupyter/Dockerfile"):
           "the Jupyter image: pinned on branch `jupyter`"}
#: gourmetgram's requirements.txt at the commits the role's defaults pin (git show <commit>:requirements.txt
#: in teaching-on-testbeds/gourmetgram); a new commit in the defaults must be added here, read from there
GOURMETGRAM_REQUIREMENTS = {
    "b81481c94e5122e2c4f91e3b56902ce5832eba95": ["Flask", "numpy", "tritonclient[http]"],  # triton branch
    "dc15bfce2285521e9ef4b9820f51d98cc401365a": ["Flask", "numpy", "requests"],  # fastapi branch
}

#: requirements files that come with a source checked out at build time, not with the recipe
SOURCE_REQUIREMENTS = {GOURMETGRAM_RECIPE: {"app/requirements.txt": sorted(
    {line for lines in GOURMETGRAM_REQUIREMENTS.values() for line in lines})}}

_DIGEST = re.compile(r"^(?P<name>[^@\s]+?)(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
                     r"(?:@sha256:(?P<digest>[0-9a-f]{64}))?$")
_VALUE_OPTIONS = {"-i", "--index-url", "--extra-index-url", "-f", "--find-links", "-t", "--target", "--root",
                  "--prefix", "--platform", "--python-version", "--implementation", "--abi", "--report",
                  "--progress-bar", "--cache-dir", "--src", "--upgrade-strategy", "--trusted-host"}


# --- parsing -----------------------------------------------------------------------------------------


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, rest) of a Dockerfile, continuation lines joined, comments dropped."""
    out = []
    for line in re.sub(r"\\\n", " ", text).splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def arg_defaults(steps: list[tuple[str, str]], overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    args: dict[str, str] = {}
    for word, rest in steps:
        if word == "ARG":
            name, _, value = rest.partition("=")
            args[name.strip()] = value.strip().strip('"').strip("'")
    return {**args, **(overrides or {})}


def expand(text: str, args: Mapping[str, str]) -> str:
    """The shell expansions a recipe uses with its ARGs: ${X:+word}, ${X}, $X."""
    text = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), text)  # inner ones first
    text = re.sub(r"\$\{(\w+):\+([^}]*)\}", lambda m: m.group(2) if args.get(m.group(1)) else "", text)
    return re.sub(r"\$(\w+)", lambda m: args.get(m.group(1), m.group(0)), text)


def base_images(text: str, overrides: Mapping[str, str] | None = None) -> list[str]:
    """The images a recipe's FROM lines pull (earlier stages referenced by name are not pulls)."""
    steps = instructions(text)
    first_from = next(i for i, s in enumerate(steps) if s[0] == "FROM")
    args = arg_defaults(steps[:first_from], overrides)
    stages: set[str] = set()
    pulled = []
    for word, rest in steps:
        if word != "FROM":
            continue
        words = [w for w in rest.split() if not w.startswith("--platform")]
        ref = expand(words[0], args)
        if len(words) >= 3 and words[1].lower() == "as":
            stages.add(words[2])
        if ref not in stages and ref != "scratch":
            pulled.append(ref)
    return pulled


def image_problem(ref: str) -> str | None:
    m = _DIGEST.match(ref)
    if not m:
        return f"{ref}: not an image reference"
    if m.group("tag") in (None, "latest"):
        return f"{ref}: no version tag (a moving or missing tag)"
    if not m.group("digest") and f"{m.group('name')}:{m.group('tag')}" not in NO_DIGEST_ON_RECORD:
        return f"{ref}: no @sha256 digest (the tag can be pushed again)"
    return None


def copy_sources(steps: list[tuple[str, str]]) -> dict[str, str]:
    """Path in the image -> path in the build context, from the COPY lines."""
    found = {}
    for word, rest in steps:
        if word != "COPY":
            continue
        parts = [p for p in rest.split() if not p.startswith("--")]
        *sources, dest = parts
        for src in sources:
            found[dest.rstrip("/") + "/" + Path(src).name if dest.endswith("/") else dest] = src
    return found


def context_file(recipe: Path, in_context: str) -> Path:
    extra = EXTRA_FILES.get(recipe.parent, {})
    return extra[in_context] if in_context in extra else recipe.parent / in_context


def pip_installs(run: str) -> Iterator[str]:
    for command in re.split(r";|&&|\|\|", run):
        words = command.split()
        for i in range(len(words) - 1):
            if words[i].endswith("pip") and words[i + 1] == "install":
                yield " ".join(words[i + 2:])
                break


def requirement_lines(path: Path) -> list[str]:
    lines = [ln.split(" #", 1)[0].strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    return [ln for ln in lines if ln and not ln.startswith(("#", "-"))]


def requirement_problem(line: str, pins: Mapping[str, str], where: str) -> str | None:
    _, at, url = line.partition(" @ ")
    if at:
        if not re.search(r"#sha256=[0-9a-f]{64}$", url.strip()):
            return f"{where}: {line}: a wheel URL without #sha256="
        return None
    req = Requirement(line)
    pinned = pins.get(pincheck.canonical(req.name))
    if pinned is None:
        return f"{where}: {req.name} is not in the constraints"
    if not req.specifier.contains(pinned, prereleases=True):
        return f"{where}: the constraints pin {req.name}=={pinned}, outside {line}"
    return None


def pip_problems(recipe: Path, text: str, overrides: Mapping[str, str] | None = None) -> list[str]:
    """Every pip install of a recipe: under a constraints file of exact pins that covers each requirement
    (its -r files and its arguments, ARGs expanded), wheel URLs with a sha256, and the pin check after it."""
    steps = instructions(text)
    args = arg_defaults(steps, overrides)
    copies = copy_sources(steps)
    problems = []
    for word, run in steps:
        if word != "RUN":
            continue
        run = expand(run, args)
        installs = list(pip_installs(run))
        if installs and not re.search(r"pincheck\.py check ", run):
            problems.append(f"{recipe.name}: a RUN installs with pip but runs no pincheck.py check after it")
        for install in installs:
            tokens = shlex.split(install)
            constraints: list[str] = []
            requirement_files: list[str] = []
            named: list[str] = []
            i = 0
            while i < len(tokens):
                tok = tokens[i]
                if tok in ("-c", "--constraint", "-r", "--requirement"):
                    into = constraints if tok in ("-c", "--constraint") else requirement_files
                    into.append(tokens[i + 1])
                    i += 2
                    continue
                if tok in _VALUE_OPTIONS:
                    i += 2
                    continue
                if not tok.startswith("-"):
                    named.append(tok)
                i += 1
            where = f"{recipe.relative_to(ROOT)}: pip install {install}"
            if not constraints:
                problems.append(f"{where}: no constraints file (-c)")
                continue
            pins: dict[str, str] = {}
            for c in constraints:
                source = context_file(recipe, copies.get(c, c))
                try:
                    pins.update(pincheck.read_pins(source.read_text(encoding="utf-8"), str(source)))
                except (OSError, ValueError) as e:
                    problems.append(f"{where}: {e}")
            lines = list(named)
            for r in requirement_files:
                in_context = copies.get(r, r)
                from_source = SOURCE_REQUIREMENTS.get(recipe.parent, {}).get(in_context)
                lines += (from_source if from_source is not None
                          else requirement_lines(context_file(recipe, in_context)))
            problems += [p for p in (requirement_problem(ln, pins, where) for ln in lines) if p]
    return problems


def default_problems(path: Path, values: Mapping[str, object]) -> list[str]:
    """A role's defaults: no :latest, literal images by tag and digest, git contexts at full commits."""
    from importlib.util import module_from_spec, spec_from_file_location

    spec = spec_from_file_location("serve_stack_pins",
                                   ROLES / "serve_stack" / "filter_plugins" / "serve_stack_pins.py")
    assert spec and spec.loader
    plugin = module_from_spec(spec)
    spec.loader.exec_module(plugin)
    problems = []
    for name, value in values.items():
        for text in (v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str)):
            where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {name}"
            if re.search(r":latest\b", text):
                problems.append(f"{where}: {text}: a :latest")
            if name.endswith("_image") and text and "{{" not in text and (p := image_problem(text)):
                problems.append(f"{where}: {p}")
            # a repository variable X_repo may be pinned by its sibling X_commit (a full commit), as
            # serve_stack_lab_repo is by serve_stack_lab_commit
            sibling = values.get(re.sub(r"_repo$", "_commit", name)) if name.endswith("_repo") else None
            pinned = isinstance(sibling, str) and re.fullmatch(r"[0-9a-f]{40}", sibling) is not None
            if re.search(r"(\.git\b|github\.com/)", text) and "{{" not in text and not pinned:
                error = plugin.serve_stack_build_context(text)["error"] or (
                    "" if "#" in text else f"{text}: no #commit")
                if error:
                    problems.append(f"{where}: {error}")
    return problems


def latest_problems(path: Path, text: str) -> list[str]:
    return [f"{path}:{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), start=1)
            if re.search(r":latest\b", line) and not line.lstrip().startswith("#")]


def _pending(path: Path) -> bool:
    return path.relative_to(ROOT) in PENDING


# --- the repository -------------------------------------------------------------------------------


def test_there_are_recipes_to_check() -> None:
    built = [TRITON_RECIPE / "Dockerfile", GOURMETGRAM_RECIPE / "Dockerfile",
             FASTAPI_RECIPE / "Containerfile"]
    assert set(built) <= set(RECIPES)
    for recipe in built:  # the checks below see each one's pip install
        steps = instructions(recipe.read_text(encoding="utf-8"))
        runs = [expand(rest, arg_defaults(steps)) for word, rest in steps if word == "RUN"]
        assert [i for run in runs for i in pip_installs(run) if " -c " in f" {i}"], recipe


def test_no_latest_in_roles_or_the_recipes() -> None:
    files = [p for p in ROLES.rglob("*") if p.is_file() and p.suffix != ".md" and not _pending(p)
             and "__pycache__" not in p.parts] + [FASTAPI_RECIPE / "Containerfile"]
    found = [line for p in files
             for line in latest_problems(p.relative_to(ROOT), p.read_text(errors="replace"))]
    assert not found, "\n".join(found)


def test_every_base_image_has_a_version_tag_and_a_digest() -> None:
    found = []
    for recipe in RECIPES:
        if _pending(recipe):
            continue
        images = base_images(recipe.read_text(encoding="utf-8"))
        assert images, recipe
        found += [f"{recipe.relative_to(ROOT)}: {p}" for p in map(image_problem, images) if p]
    assert not found, "\n".join(found)


def test_every_pip_install_is_pinned_and_checked() -> None:
    found = []
    for recipe in RECIPES:
        if not _pending(recipe):
            found += pip_problems(recipe, recipe.read_text(encoding="utf-8"))
    # the FastAPI image as the rehearsal builds it (CPU onnxruntime, no torch)
    containerfile = FASTAPI_RECIPE / "Containerfile"
    found += pip_problems(containerfile, containerfile.read_text(encoding="utf-8"),
                          fastapi_image.REHEARSAL_ARGS)
    assert not found, "\n".join(found)


def test_every_constraints_file_holds_exact_pins_only() -> None:
    files = [*ROLES.rglob("constraints*.txt"), FASTAPI_RECIPE / "constraints.txt"]
    assert len(files) >= 3
    for path in files:
        pins = pincheck.read_pins(path.read_text(encoding="utf-8"), str(path))
        assert pins and "torch" not in pins, path  # torch: by URL and sha256, in torch*.txt


def test_every_roles_defaults_pin_images_and_git_contexts() -> None:
    found = []
    for path in sorted(ROLES.glob("*/defaults/main.yml")):
        found += default_problems(path, yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    assert not found, "\n".join(found)


def test_gourmetgram_at_the_pinned_commits_installs_only_pinned_packages() -> None:
    defaults = yaml.safe_load((ROLES / "serve_stack" / "defaults" / "main.yml").read_text(encoding="utf-8"))
    commits = {defaults[k].rpartition("#")[2] for k in ("serve_stack_flask_build_context",
                                                         "serve_stack_flask_fastapi_build_context")}
    assert commits <= set(GOURMETGRAM_REQUIREMENTS), "a new gourmetgram commit: add its requirements above"
    pins = pincheck.read_pins((GOURMETGRAM_RECIPE / "constraints.txt").read_text(encoding="utf-8"), "c")
    found = [p for c in commits for line in GOURMETGRAM_REQUIREMENTS[c]
             if (p := requirement_problem(line, pins, f"gourmetgram@{c[:12]}"))]
    assert not found, "\n".join(found)


def test_the_role_names_the_triton_base_its_dockerfile_pulls() -> None:
    """The role shows the digest of this base after a build (no digest of it is on public record)."""
    role_vars = yaml.safe_load((ROLES / "serve_stack" / "vars" / "main.yml").read_text(encoding="utf-8"))
    assert base_images((TRITON_RECIPE / "Dockerfile").read_text(encoding="utf-8")) == [
        role_vars["__serve_stack_triton_base"]]
    assert set(NO_DIGEST_ON_RECORD) <= {role_vars["__serve_stack_triton_base"]}


def test_the_fastapi_build_arguments_are_pinned_too() -> None:
    pins = pincheck.read_pins((FASTAPI_RECIPE / "constraints.txt").read_text(encoding="utf-8"), "constraints")
    steps = instructions((FASTAPI_RECIPE / "Containerfile").read_text(encoding="utf-8"))
    for args in (arg_defaults(steps), arg_defaults(steps, fastapi_image.REHEARSAL_ARGS)):
        assert requirement_problem(args["ONNXRUNTIME"], pins, "ONNXRUNTIME") is None
        if args["TORCH"]:
            assert all(requirement_problem(ln, pins, "TORCH") is None
                       for ln in requirement_lines(FASTAPI_RECIPE / args["TORCH"]))


# --- the checks fail where something floats ----------------------------------------------------------


def test_the_checks_fail_on_a_planted_latest_branch_range_and_missing_digest(tmp_path: Path) -> None:
    triton = (TRITON_RECIPE / "Dockerfile").read_text(encoding="utf-8")
    planted = triton.replace("tritonserver:24.10-py3", "tritonserver:latest")
    assert latest_problems(Path("Dockerfile"), planted)
    assert [image_problem(r) for r in base_images(planted)] == [
        "nvcr.io/nvidia/tritonserver:latest: no version tag (a moving or missing tag)"]
    assert image_problem("python:3.12-slim") == (
        "python:3.12-slim: no @sha256 digest (the tag can be pushed again)")
    assert image_problem("python@sha256:" + "0" * 64) is not None  # a digest without the version tag
    assert image_problem("python:3.12.12-slim-bookworm@sha256:" + "0" * 64) is None
    fastapi = (FASTAPI_RECIPE / "Containerfile").read_text(encoding="utf-8")
    assert base_images(fastapi, {"BASE_IMAGE": "python:3.12-slim"}) == ["python:3.12-slim"]
    # a pip install without constraints, a range the constraints miss, a URL without its hash
    recipe = TRITON_RECIPE / "Dockerfile"
    assert any("no constraints file" in p for p in pip_problems(
        recipe, triton.replace("-c /opt/serve-system/constraints.txt ", "")))
    assert any("pincheck.py check" in p for p in pip_problems(
        recipe, re.sub(r"python3 /opt/serve-system/pincheck.py check [^;]*;", "", triton)))
    assert requirement_problem("flask>=3", {"numpy": "1.26.4"}, "x") == "x: flask is not in the constraints"
    assert "outside" in str(requirement_problem("numpy<1.26", {"numpy": "1.26.4"}, "x"))
    assert "#sha256" in str(requirement_problem("torch @ https://h/torch-2.5.1-cp310-cp310-linux_x86_64.whl",
                                                {}, "x"))
    with pytest.raises(ValueError, match="not an exact pin"):
        pincheck.read_pins("numpy>=1.26\n", "constraints.txt")
    # defaults: a branch head, a bare git URL, an image without digest, a :latest
    planted_defaults = {
        "x_build_context": "https://github.com/teaching-on-testbeds/gourmetgram.git#triton",
        "y_build_context": "https://github.com/teaching-on-testbeds/gourmetgram.git",
        "z_image": "ubuntu:24.04",
        "w_image": "serve-system-flask:latest",
    }
    found = default_problems(tmp_path / "main.yml", planted_defaults)
    assert len(found) == 5, found  # w_image: both its :latest and its missing tag/digest
    assert any("#triton is not a full 40-hex commit" in p for p in found)
    assert any("y_build_context" in p and "no #commit" in p for p in found)


def test_pending_exceptions_are_still_needed() -> None:
    """Once the other branch's pins are merged, its file passes: drop its PENDING entry then."""
    for rel in PENDING:
        path = ROOT / rel
        text = path.read_text(encoding="utf-8")
        passes = (not latest_problems(rel, text) and not any(map(image_problem, base_images(text)))
                  and not pip_problems(path, text))
        assert not passes, f"{rel} is pinned now: remove it from PENDING in {Path(__file__).name}"


# --- pincheck, the check inside each build ----------------------------------------------------------


def test_pincheck_reads_pins_and_wheel_versions() -> None:
    text = ("# comment\n-c other.txt\nNumPy==1.26.4 ; python_version < '3.13'\n"
            "torch @ https://download.pytorch.org/whl/cu124/torch-2.5.1%2Bcu124-cp310-cp310-linux_x86_64.whl"
            "#sha256=" + "a" * 64 + "\n")
    assert pincheck.read_pins(text, "t") == {"numpy": "1.26.4", "torch": "2.5.1+cu124"}
    for bad in ("numpy", "numpy>=1", "numpy==1.*", "numpy==1,<2", "numpy @ https://h/numpy.tar.gz"):
        with pytest.raises(ValueError):
            pincheck.read_pins(bad + "\n", "t")
    # the repository's PyTorch files give the versions their wheels carry
    assert pincheck.read_pins((TRITON_RECIPE / "torch-pytorch-index.txt").read_text(), "t") == {
        "torch": "2.5.1+cu124", "torchvision": "0.20.1+cu124"}
    assert pincheck.read_pins((TRITON_RECIPE / "torch-pypi.txt").read_text(), "t") == {
        "torch": "2.5.1", "torchvision": "0.20.1"}


def test_pincheck_flags_what_pip_added_or_changed_unpinned() -> None:
    before = {"pip": "25.0", "numpy": "1.26.0"}
    after = {"pip": "25.0", "numpy": "1.26.4", "pillow": "11.1.0", "torch": "2.5.1+cu124"}
    pins = {"numpy": "1.26.4", "torch": "2.5.1+cu124"}
    assert pincheck.unpinned(before, after, pins) == [
        ("pincheck: pillow 11.1.0 was installed but no pin file names it: add pillow==11.1.0 to the "
         "constraints (scripts/lock-images.sh)")]
    assert pincheck.unpinned(before, after, {**pins, "pillow": "11.0.0"}) == [
        ("pincheck: pillow 11.1.0 was installed but the pins say 11.0.0: regenerate the constraints "
         "(scripts/lock-images.sh)")]
    assert pincheck.unpinned(before, after, {**pins, "pillow": "11.1.0"}) == []


def test_pincheck_on_this_interpreter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """snapshot then check on the real installed distributions: what differs from the snapshot must be
    pinned (here the snapshot is edited as if pip had just installed numpy)."""
    import json

    snap = tmp_path / "before.json"
    assert pincheck.main(["snapshot", str(snap)]) == 0
    state = json.loads(snap.read_text())
    assert state["numpy"] and state["pyyaml"]
    del state["numpy"]
    snap.write_text(json.dumps(state))
    pins = tmp_path / "constraints.txt"
    pins.write_text("pyyaml==0.0.1\n")
    assert pincheck.main(["check", str(snap), str(pins)]) == 1
    assert "pincheck: numpy " in capsys.readouterr().err
    pins.write_text(f"numpy=={pincheck.installed()['numpy']}\n")
    assert pincheck.main(["check", str(snap), str(pins)]) == 0
    assert "every package installed is pinned" in capsys.readouterr().out


# --- what a build context names (filter_plugins/serve_stack_pins.py) ------------------------------


def test_build_context_names_a_commit_a_directory_or_nothing() -> None:
    from importlib.util import module_from_spec, spec_from_file_location

    spec = spec_from_file_location("serve_stack_pins",
                                   ROLES / "serve_stack" / "filter_plugins" / "serve_stack_pins.py")
    assert spec and spec.loader
    plugin = module_from_spec(spec)
    spec.loader.exec_module(plugin)
    parse = plugin.serve_stack_build_context
    commit = "B81481C94E5122E2C4F91E3B56902CE5832EBA95"
    url = "https://github.com/teaching-on-testbeds/gourmetgram.git"
    assert parse(f"{url}#{commit}") == {"kind": "git", "url": url, "commit": commit.lower(), "error": ""}
    assert parse(f"git@github.com:t/g.git#{commit.lower()}")["commit"] == commit.lower()
    assert parse("") == {"kind": "none", "url": "", "commit": "", "error": ""}
    assert parse("../gourmetgram")["kind"] == "dir"
    branch = parse(f"{url}#triton")
    assert branch["kind"] == "git" and not branch["commit"]
    assert branch["error"] == (f"{url}#triton: #triton is not a full 40-hex commit, and a branch or tag "
                               f"moves; pin the commit (git ls-remote {url} triton) as {url}#<commit>")
    assert "no #commit" in parse(url)["error"] and f"git ls-remote {url} HEAD" in parse(url)["error"]
    assert parse(f"{url}#{commit[:12]}")["error"]  # a short commit can become ambiguous
