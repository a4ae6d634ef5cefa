"""``serve-system plan SPEC --play -``: the ``experiment`` role's one plan call.

The role hands its inputs over as one JSON document (on stdin, or a file): its settings as the user
gave them, and per host of the play its GPU count, its lease end and what the role's one look at it
printed (:mod:`serve_system.experiment.nodelook`). This module checks the document and turns it into
one typed :class:`~serve_system.experiment.planning.PlanRequest` (no command line: the role builds none
and nothing here is parsed again), then plans the run in one process: first every host together (the
spec checked, the manifest written, a sharded run's shares dealt), then each host on its own look and
lease. A problem with the spec or the settings refuses the whole play (one line each, exit 1); a host
whose look or lease does not fit is refused alone: its entry in the answer is ``{"refused": WHY}`` and
the role fails that host with it, the others go on.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from .. import ownedtree, safeio
from ..experiment import planning
from ..experiment.roleview import RoleView
from ..experiment.spec.messages import SpecError, format_errors
from ..experiment.spec.models import check_name
from ..node.plans import NUMBERS
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

    @field_validator("hosts")
    @classmethod
    def _plain_names(cls, hosts: dict[str, HostInput]) -> dict[str, HostInput]:
        for name in hosts:  # each names its folder in the run, and an Ansible host
            check_name(name, "host name")
        return hosts


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


def request(spec: Path, i: RoleInputs, where: str) -> planning.PlanRequest:
    """The role's settings as the request of the play's first planning (every host together, none
    looked at yet); a bad setting is refused in one line naming it (:class:`SpecError`)."""
    def path(check: ownedtree.PathArg, name: str, value: str) -> Any:
        try:
            return check(value)
        except argparse.ArgumentTypeError as exc:
            raise SpecError([f"{where}: inputs.{name}: {exc}"]) from None

    numbers: dict[str, float] = {}
    for f in NUMBERS:  # the runner's number settings, named as their role variables
        try:
            value = planning.number_setting(getattr(i, f.name))
        except ValueError as exc:
            raise SpecError([f"{where}: inputs.{f.name}: {exc}"]) from None
        if value is not None:
            numbers[f.name] = value
    work = path(ownedtree.NODE_PATH, "client_work_dir", i.client_work_dir)
    serve_root = path(ownedtree.NODE_PATH, "serve_root", i.serve_root)
    only = i.variants if isinstance(i.variants, str) else ",".join(i.variants)
    return planning.PlanRequest(
        spec=spec, results_dir=path(ownedtree.RUN_DIR, "results_dir", i.results_dir), run_id=i.run_id,
        targets=planning.TargetRequest(
            node_work_root=work,
            fastapi_image=path(ownedtree.INPUT_PATH, "fastapi_image", i.fastapi_image) if i.fastapi_image
            else None),
        runner=planning.RunnerRequest(numbers=numbers, progress=f"{work.rstrip('/')}/progress.json",
                                      client_container=i.client_container,
                                      node_dir_root=f"{serve_root.rstrip('/')}/work"),
        only=(only,) if only else (), shard=i.shard, fresh=i.fresh, empty_node_dirs=i.fresh, answer="role",
        host_files=False,  # each host's folder is written by its own planning, on its look
        lease=planning.LeasePolicy(ignore_end=i.ignore_lease_end, fit=i.fit_lease))


def run(spec: Path, source: str) -> int:
    """Plan the play (see the module); print the role's view with every host's calls, or refusal."""
    try:
        doc = read(source)
        where = "plan --play " + ("(stdin)" if source == "-" else source)
        every = request(spec, doc.inputs, where)
        hosts = tuple(planning.HostRequest(name=h, gpus=x.gpus) for h, x in doc.hosts.items())
        view = planning.plan_run(dataclasses.replace(every, hosts=hosts))
        assert isinstance(view, RoleView)  # answer="role": the view
    except SpecError as exc:
        for line in exc.lines:
            echo(line, file=sys.stderr)
        return 1
    # each host on its own look and lease; a sharded run's plan deals the candidates over every host
    own = dataclasses.replace(every, fresh=False, manifest=False, shard_hosts=tuple(view.shard_hosts),
                              host_files=True)
    for host, x in doc.hosts.items():
        try:
            one = planning.HostRequest(name=host, gpus=x.gpus, look=x.look, lease_end=x.lease_end)
            answer = planning.plan_run(dataclasses.replace(own, hosts=(one,)))
            assert isinstance(answer, RoleView)
            view.hosts[host] = answer.hosts[host]
        except SpecError as exc:
            view.hosts[host] = " ".join(exc.lines)
    # serve-system's words that end the play: the hosts' records into the results, and the report
    view.finish = (["report", "--collect", "--partial", view.run_dir] if doc.inputs.report
                   else ["collect", "--run-dir", view.run_dir])
    print(dumps(view.as_json()))
    return 0
