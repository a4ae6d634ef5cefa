"""Everything wrong with a configuration, for a host: Triton's refusals (:mod:`.rules`), Jinja that
Ansible would evaluate, and what the host cannot run (:mod:`.host`); per file as ``path: field: rule``
lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..textsafe import JINJA_RE
from . import host
from .backends import model_files
from .pbtxt import ConfigError, ModelConfig, Problem, load_pbtxt, to_dict
from .rules import advice, triton_rules


def check_file(path: str | Path, host_gpus: int | None = None) -> list[str]:
    """Every problem of one config.pbtxt as ``path: field: rule`` lines (empty: Triton would accept it).

    A file named ``config.pbtxt`` is taken as a model folder's: its name must match the folder's,
    and a missing backend may come from the version folders' files, as Triton fills it in.
    """
    p = Path(path)
    try:
        cfg = load_pbtxt(p)
    except ConfigError as exc:
        return [str(exc)]
    folder, files = model_files(p)
    return [f"{p}: {prob}" for prob in check(cfg, host_gpus, folder, files.backend, files.known,
                                             files.python_autocompletes)]



def advice_file(path: str | Path) -> list[str]:
    """Notes on a config.pbtxt (``path: field: note`` lines): what Triton accepts but probably does not
    do what was meant, and what only the server decides; none if unparsable."""
    try:
        cfg = load_pbtxt(path)
    except ConfigError:
        return []
    folder, files = model_files(Path(path))
    return [f"{path}: {note}" for note in advice(cfg, folder, files)]


def check(cfg: ModelConfig, host_gpus: int | None = None, folder: str | None = None,
          files_backend: str | None = None, files_known: bool = False,
          python_autocomplete: bool = False, compute_capability: float | None = None) -> list[Problem]:
    """What Triton would refuse in ``cfg``, and what a host with ``host_gpus`` GPUs (the lowest
    ``compute_capability`` among them, where known) cannot run."""
    problems = jinja_in(cfg) + triton_rules(cfg, folder, files_backend, files_known, python_autocomplete)
    if host_gpus is None:
        return problems
    return problems + host.host_problems(cfg, host_gpus, folder, compute_capability)


def jinja_in(cfg: ModelConfig) -> list[Problem]:
    """Every string of the configuration (map keys too) that holds a Jinja delimiter once protobuf's
    escapes are read (``"\\173\\173"`` is ``{{``): the plan, its manifest and the load body carry these
    strings to Ansible, which would evaluate them."""
    out = []

    def walk(obj: Any, field: str) -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                at = f"{field}.{k}" if field else str(k)
                if JINJA_RE.search(str(k)):
                    out.append(Problem(field or "(config)", f"key {str(k)[:60]!r} holds a Jinja expression "
                                       "({{, {% or {#) Ansible would evaluate: remove it"))
                walk(v, at)
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                walk(v, f"{field}[{i}]")
        elif isinstance(obj, str) and JINJA_RE.search(obj):
            out.append(Problem(field, f"{obj[:60]!r} holds a Jinja expression ({{{{, {{% or {{#) once its "
                                      "escapes are read, which Ansible would evaluate: remove it"))

    walk(to_dict(cfg), "")
    return out
