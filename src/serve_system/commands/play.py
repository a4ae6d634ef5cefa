"""``serve-system plan SPEC --play -``: the ``experiment`` role's one plan call.

The role hands its inputs over as one JSON document (on stdin, or a file): its settings as the user
gave them, and per host of the play its GPU count, its lease end and what the role's one look at it
printed (:mod:`serve_system.experiment.nodelook`). This module checks the document, turns it into
``plan``'s own options (the role builds no command line) and plans the run in one process: first
every host together (the spec checked, the manifest written, a sharded run's shares dealt), then each
host on its own look and lease. A problem with the spec or the settings refuses the whole play (one
line each, exit 1); a host whose look or lease does not fit is refused alone: its entry in the answer
is ``{"refused": WHY}`` and the role fails that host with it, the others go on.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from .. import safeio
from ..experiment.spec.messages import SpecError, format_errors
from ..textsafe import dumps, echo

#: the largest document read (every host's look: a few KB each, at most 64 base configs of 1 MiB)
MAX_BYTES = 256 * 1024 * 1024


def _text(value: Any) -> Any:
    """A setting as the role renders it (a number, a bool or text) -> its text; None -> ''."""
    if value is None:
        return ""
    return str(value).lower() if isinstance(value, bool) else str(value) if isinstance(value, int | float) \
        else value


_Text = Annotated[str, BeforeValidator(_text)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RoleInputs(_Strict):
    """The ``experiment`` role's settings, named as in its ``defaults/main.yml`` without the prefix."""

    results_dir: _Text
    run_id: _Text
    serve_root: _Text = Field(description="the node's stack folder; its work/ is the client's work folder")
    client_work_dir: _Text
    client_container: _Text
    perf_timeout: _Text = ""
    ready_timeout: _Text = ""
    perf_memory_mb: _Text = ""
    metrics_interval: _Text = ""
    variants: list[_Text] | _Text = ""
    fastapi_image: _Text = ""
    shard: bool = False
    fresh: bool = False
    ignore_lease_end: bool = False
    fit_lease: bool = False
    report: bool = True


class HostInput(_Strict):
    gpus: int = Field(ge=0, le=999)
    lease_end: _Text = ""
    look: _Text = ""


class PlayInput(_Strict):
    inputs: RoleInputs
    hosts: dict[str, HostInput] = Field(min_length=1)


def read(source: str) -> PlayInput:
    """The document from ``source`` (``-``: stdin); refused in one line per problem."""
    where = "plan --play " + ("(stdin)" if source == "-" else source)
    text = (sys.stdin.read(MAX_BYTES + 1) if source == "-"
            else safeio.decode(safeio.read_bytes(source, kind="record", cap=MAX_BYTES), source))
    if len(text) > MAX_BYTES:
        raise SpecError([f"{where}: larger than {MAX_BYTES >> 20} MiB: give what the experiment role sends"])
    try:
        return PlayInput.model_validate(safeio.loads_json(text, where))
    except ValidationError as exc:
        raise SpecError(format_errors(exc, PlayInput, where)) from None


def options(i: RoleInputs) -> list[str]:
    """The role's settings as ``plan``'s options (every value after ``=``: none is read as an option)."""
    work = i.client_work_dir.rstrip("/")
    only = i.variants if isinstance(i.variants, str) else ",".join(i.variants)
    return [f"--results-dir={i.results_dir}", f"--run-id={i.run_id}", "--role",
            f"--node-work-root={i.client_work_dir}", f"--node-dir-root={i.serve_root.rstrip('/')}/work",
            f"--client-container={i.client_container}",
            f"--progress={work}/progress.json", f"--perf-timeout={i.perf_timeout}",
            f"--ready-timeout={i.ready_timeout}", f"--perf-memory-mb={i.perf_memory_mb}",
            f"--metrics-interval={i.metrics_interval}",
            *([f"--only={only}"] if only else []),
            *([f"--fastapi-image={i.fastapi_image}"] if i.fastapi_image else []),
            *(["--shard"] if i.shard else [])]


Plan = Callable[[argparse.Namespace], dict[str, Any] | None]


def run(args: argparse.Namespace, plan: Plan, parser: Callable[[], argparse.ArgumentParser]) -> int:
    """Plan the play (see the module); print the role's view with every host's calls, or refusal."""
    try:
        doc = read(args.play)
        base = ["plan", str(args.spec), *options(doc.inputs)]
        every = [f"--host={h}={x.gpus}" for h, x in doc.hosts.items()]
        view = plan(parser().parse_args([*base, *every, *(["--fresh"] if doc.inputs.fresh else [])]))
        assert view is not None  # --role: the view
    except SpecError as exc:
        for line in exc.lines:
            echo(line, file=sys.stderr)
        return 1
    lease = [*(["--ignore-lease-end"] if doc.inputs.ignore_lease_end else []),
             *(["--fit-lease"] if doc.inputs.fit_lease else [])]
    for host, x in doc.hosts.items():
        argv = [*base, f"--host={host}={x.gpus}", "--no-manifest", *view["shard_args"],
                f"--node-facts={host}={x.look}", *lease,
                *([f"--lease-end={x.lease_end}"] if x.lease_end else [])]
        try:
            own = plan(parser().parse_args(argv))
            assert own is not None
            view["hosts"][host] = own["hosts"][host]
        except SpecError as exc:
            view["hosts"][host] = {"refused": " ".join(exc.lines)}
    # serve-system's words that end the play: the hosts' records into the results, and the report
    view["finish"] = (["report", "--collect", "--partial", view["run_dir"]] if doc.inputs.report
                      else ["collect", "--run-dir", view["run_dir"]])
    print(dumps(view))
    return 0
