"""Imported by the rehearsal recipe's build-time check: the requirements list the build copied in is
there and names the packages the models import."""

from pathlib import Path


def check(path: str) -> None:
    names = {line.split("=")[0].split("<")[0].split(">")[0].strip().lower()
             for line in Path(path).read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.lstrip().startswith("#")}
    missing = {"numpy", "pillow"} - names
    if missing:
        raise SystemExit(f"{path} does not list {', '.join(sorted(missing))}")
