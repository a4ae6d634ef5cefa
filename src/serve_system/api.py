"""The lab's steps as Python functions: the notebook's face of the command line.

Each function runs the command it is named after through the command line's own parser and handler
(:mod:`serve_system.commands`): keyword arguments are the command's long options (``key_name="k"`` is
``--key-name k``, ``True`` a flag, a list a repeated option, ``None`` the command's default), so the
defaults, checks and messages are those of ``serve-system`` and ``chi_scripts/*.py``, never a second
copy. ``notebooks/serve_system_lab.ipynb`` is written with these:

    api.lease_create(count=1)                    # python chi_scripts/lease.py create --count 1
    api.launch(key_name="me-jupyter")            # python chi_scripts/launch.py --key-name me-jupyter
    api.configure()                              # ansible-playbook ... playbooks/site.yml
    run = api.experiment("dynbatch")             # ansible-playbook ... experiments/dynbatch.yml
    api.report(run)                              # serve-system report results/dynbatch/<run-id>
    api.teardown(delete_lease=True)              # python chi_scripts/teardown.py --delete-lease

A refused option or a failed step raises :class:`~serve_system.errors.ServeSystemError` with the
command's own one-line message (a notebook's "Run all" stops at the step that failed).
"""

from __future__ import annotations

import argparse
import contextlib
import io
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .errors import ServeSystemError, UsageError

Option = str | int | float | bool | Path | Sequence[str] | None


def argv(positional: Sequence[object] = (), **options: Option) -> list[str]:
    """The command line of ``options``: ``name=value`` is ``--name value`` (``_`` written ``-``), ``True``
    the bare flag, a list or tuple the option once per item; ``None`` and ``False`` leave it out."""
    out = [str(p) for p in positional]
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            out.append(flag)
        elif isinstance(value, list | tuple):
            for item in value:
                out += [flag, str(item)]
        else:
            out += [flag, str(value)]
    return out


def _parse(parser: argparse.ArgumentParser, args: list[str], what: str) -> argparse.Namespace:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return parser.parse_args(args)
    except SystemExit:
        said = err.getvalue().strip() or "refused"
        raise UsageError(f"{what}: {said.removeprefix(f'{parser.prog}: error: ')}") from None


def _handle(args: argparse.Namespace) -> int:
    from .cli import library_output

    func: Callable[[argparse.Namespace], int | None] = args.func
    with library_output(verbose=bool(getattr(args, "verbose", False))):
        return int(func(args) or 0)


def _chi(command: str, *positional: object, **options: Option) -> int:
    """``chi_scripts/<command>.py`` (:data:`serve_system.commands.provision.SCRIPT_COMMANDS`), in-process."""
    from .cli import OneLineParser
    from .commands.provision import SCRIPT_COMMANDS

    help_text, build = SCRIPT_COMMANDS[command]
    parser = OneLineParser(prog=f"{command}.py", description=help_text)
    build(parser)
    return _handle(_parse(parser, argv(positional, **options), f"{command}.py"))


def _serve_system(command: str, *positional: object, **options: Option) -> int:
    """``serve-system <command>`` (one of :data:`serve_system.cli.COMMANDS`), in-process."""
    from .cli import build_parser

    parser = build_parser(only=command)
    return _handle(_parse(parser, [command, *argv(positional, **options)], f"serve-system {command}"))


# --- 1. lease (Chameleon) ---------------------------------------------------------------------------


def lease_create(**options: Option) -> int:
    """``chi_scripts/lease.py create``: reserve the nodes (``count``, ``duration="2h50m"``, ``site``, ...)."""
    return _chi("lease", "create", **options)


def lease_show(**options: Option) -> int:
    """``chi_scripts/lease.py show``: the lease's status, times and reservation."""
    return _chi("lease", "show", **options)


def lease_extend(**options: Option) -> int:
    """``chi_scripts/lease.py extend``: move the lease's end later (``by="1h"``)."""
    return _chi("lease", "extend", **options)


def lease_delete(**options: Option) -> int:
    """``chi_scripts/lease.py delete``."""
    return _chi("lease", "delete", **options)


# --- 2. launch, status, teardown ---------------------------------------------------------------------


def launch(**options: Option) -> int:
    """``chi_scripts/launch.py``: servers, floating IPs, host keys pinned, the inventory written."""
    return _chi("launch", **options)


def status(**options: Option) -> int:
    """``chi_scripts/status.py``: the board, every node probed; 0 when all are healthy, else 1."""
    return _chi("status", **options)


def teardown(**options: Option) -> int:
    """``chi_scripts/teardown.py``: the servers and their floating IPs (``delete_lease=True``: the lease)."""
    return _chi("teardown", **options)


# --- 3. configure --------------------------------------------------------------------------------------


def configure(inventory: str | Path | None = None, limit: str | None = None) -> None:
    """``playbooks/site.yml`` on the inventory's nodes (``limit``: some of them), as ``launch --configure``
    runs it; a failed play raises."""
    from .commands import chiargs
    from .commands.provision import site_yml
    from .provision.nodes import read_inventory

    inv = Path(inventory) if inventory else chiargs.DEFAULT_INVENTORY
    site_yml(inv, read_inventory(inv), chiargs.console(), limit=limit)


# --- 4. experiment ------------------------------------------------------------------------------------


def validate(*paths: str | Path, **options: Option) -> int:
    """``serve-system validate PATH ...``: a spec (or model configuration) checked before any node is."""
    return _serve_system("validate", *paths, **options)


def experiment(name: str = "dynbatch", inventory: str | Path | None = None, *, spec: str | Path | None = None,
               run_id: str | None = None, results_dir: str | Path | None = None,
               limit: str | None = None) -> Path:
    """``ansible-playbook -i INVENTORY experiments/NAME.yml`` (``spec``: another spec file than
    ``experiments/specs/NAME.yml``; ``run_id``: default today's date, as the role's); returns the run
    folder ``results/<spec name>/<run-id>``. A failed play raises."""
    from .commands import chiargs
    from .experiment.spec.reader import load_spec
    from .playbook import run_playbook

    playbook = chiargs.REPO_ROOT / "experiments" / f"{name}.yml"
    if not playbook.is_file():
        known = sorted(p.stem for p in playbook.parent.glob("*.yml"))
        raise UsageError(f"experiment {name!r}: no {playbook}; one of {', '.join(known)}")
    spec_path = Path(spec).resolve() if spec else chiargs.REPO_ROOT / "experiments" / "specs" / f"{name}.yml"
    spec_name = load_spec(spec_path).name  # a broken spec is one line here, before any node is touched
    run_id = run_id or datetime.now(UTC).strftime("%Y%m%d")
    results = Path(results_dir).resolve() if results_dir else chiargs.REPO_ROOT / "results"
    extravars: dict[str, Any] = {"run_id": run_id, "experiment_results_dir": str(results)}
    if spec:
        extravars["experiment_spec"] = str(spec_path)
    inv = Path(inventory) if inventory else chiargs.DEFAULT_INVENTORY
    rc = run_playbook(playbook, inv, extravars=extravars, limit=limit, console=chiargs.console())
    if rc != 0:
        raise ServeSystemError(f"experiments/{name}.yml failed (rc={rc}); fix the error above and run "
                               f"it again with the same run_id ({run_id}): measured levels are kept")
    return results / spec_name / run_id


# --- 5. report ------------------------------------------------------------------------------------------


def report(run_dir: str | Path, **options: Option) -> Path:
    """``serve-system report RUN_DIR``: summary files, plots and report.md; returns report.md's path."""
    _serve_system("report", run_dir, **options)
    return Path(run_dir) / "report.md"
