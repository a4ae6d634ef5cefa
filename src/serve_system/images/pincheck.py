"""Inside an image build: did pip install only what the image's pin files name, at those versions?

The images a real node builds (the Triton GPU image, the FastAPI image, the lab's Flask app) install
their Python packages under a constraints file of exact versions (``scripts/lock-images.sh`` writes
them) plus, for PyTorch, files of hash-pinned wheel URLs. A constraints file only constrains what it
names: a package that some dependency pulls in and the file misses would still float. This check
closes that gap where the build runs, with the interpreter the image runs::

    python3 pincheck.py snapshot /tmp/before.json            # before pip install
    pip install -c constraints.txt -r requirements.txt ...
    python3 pincheck.py check /tmp/before.json constraints.txt [torch.txt ...]

``check`` fails the build (exit 1), one line per package, when a distribution that pip added or
changed is not pinned, or is pinned at another version. What the base image already had and pip left
alone is not the image's choice and is not checked.

Standard library only, Python 3.8+: it runs inside the images (Triton 24.10's Python is 3.10).
"""

from __future__ import annotations

import json
import re
import sys
from importlib import metadata
from urllib.parse import unquote, urlsplit

_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)")


def canonical(name: str) -> str:
    """PEP 503's normalized form: ``Typing_Extensions`` and ``typing-extensions`` are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed() -> dict[str, str]:
    """Canonical name -> version of every distribution this interpreter sees."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonical(name), dist.version)
    return found


def wheel_version(url: str) -> str:
    """The version in a wheel's file name (``torch-2.5.1%2Bcu124-cp310-...whl`` -> ``2.5.1+cu124``)."""
    filename = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    parts = filename.split("-")
    if not filename.endswith(".whl") or len(parts) < 5:
        raise ValueError(f"not a wheel URL: {url}")
    return parts[1]


def read_pins(text: str, source: str) -> dict[str, str]:
    """Canonical name -> exact version from a constraints or requirements file's text.

    Lines are ``name==version`` (an environment marker after ``;`` is allowed) or ``name @ URL`` of a
    wheel; comments and pip options are skipped. Anything else (a range, a bare name) is an error:
    such a line pins nothing."""
    pins: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-")):
            continue
        requirement = line.split(";", 1)[0].strip()
        match = _NAME.match(requirement)
        rest = requirement[match.end():].strip() if match else ""
        if match and rest.startswith("@"):
            version = wheel_version(rest[1:].strip())
        elif match and rest.startswith("==") and not any(c in rest[2:] for c in "*,<>!=~ "):
            version = rest[2:]
        else:
            raise ValueError(f"{source}:{number}: {raw.strip()!r} is not an exact pin "
                             "(name==version, or name @ the URL of a wheel)")
        pins[canonical(match.group(1))] = version
    return pins


def unpinned(before: dict[str, str], after: dict[str, str], pins: dict[str, str]) -> list[str]:
    """One line for each distribution pip added or changed that the pins do not name at its version."""
    problems = []
    for name, version in sorted(after.items()):
        if before.get(name) == version:
            continue
        pinned = pins.get(name)
        if pinned is None:
            problems.append(f"pincheck: {name} {version} was installed but no pin file names it: "
                            f"add {name}=={version} to the constraints (scripts/lock-images.sh)")
        elif pinned.lower() != version.lower():
            problems.append(f"pincheck: {name} {version} was installed but the pins say {pinned}: "
                            f"regenerate the constraints (scripts/lock-images.sh)")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "snapshot":
        with open(argv[1], "w", encoding="utf-8") as f:
            json.dump(installed(), f, sort_keys=True)
        return 0
    if len(argv) >= 3 and argv[0] == "check":
        with open(argv[1], encoding="utf-8") as f:
            before = json.load(f)
        pins: dict[str, str] = {}
        for path in argv[2:]:
            with open(path, encoding="utf-8") as f:
                pins.update(read_pins(f.read(), path))
        problems = unpinned(before, installed(), pins)
        for line in problems:
            print(line, file=sys.stderr)
        if not problems:
            print(f"pincheck: every package installed is pinned ({', '.join(argv[2:])})")
        return 1 if problems else 0
    print("usage: pincheck.py snapshot FILE | check FILE PINFILE...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
