"""A runner call as one record: every command line the ``experiment`` role runs for one call of the
node-side runner (:mod:`.runner`), built here and nowhere else.

``serve-system plan --role`` answers a host's first calls with them, ``serve-system decide`` each
further one (:mod:`serve_system.results.adaptive`); the role runs ``start``, then each of ``follow``
(one per level still to measure: it prints that level's progress line), ``wait_end`` when no level was
left to report the end, ``explain`` (Triton's log on its stdin) after a refused load, and the host's
``restore`` at the end. Where the runner runs, its timeouts and its memory cap are the host plan's
:class:`~.records.RunnerSettings`: the runner reads them there, so no call carries them.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..node import records as rec


@dataclass
class RunnerCall:
    """One runner call on a host: the variants it measures and the command lines that run it."""

    variants: list[str]
    #: levels still to measure in it (one ``follow`` each)
    todo: int
    #: FastAPI: the runtime the endpoint is brought up with first; None: Triton
    runtime: str | None
    #: starts the runner in the client container, detached (its events go to its log on the node)
    start: list[str]
    #: ``start`` as one POSIX shell line: the role runs it without a module on the node (``raw``: a
    #: quarter of a second less a call, on the way between the controller and the next level)
    start_line: str
    #: on the node: waits for level 1, 2, ... of the call and prints its event
    follow: list[list[str]] = field(default_factory=list)
    #: on the node: waits for the call's end
    wait_end: list[str] = field(default_factory=list)
    #: in the client container: adds Triton's reasons (its log on stdin) to the refused loads' records
    explain: list[str] = field(default_factory=list)


def runner_argv(settings: rec.RunnerSettings, *, detach: bool = False) -> list[str]:
    """The runner in the client container (``docker exec``), on the host plan's ``plan.json``."""
    here = settings.client_dir.rstrip("/")
    return ["docker", "exec", "--detach" if detach else "-i", settings.container,
            "python3", f"{here}/.node.pyz", "--plan", f"{here}/plan.json"]


#: the most a node bundle may weigh to travel on a command's stdin (base64, in Ansible's module
#: arguments); a larger one (large input data) is copied
PUT_LIMIT = 8 * 1024 * 1024

#: on the node: writes the bundle from stdin (base64) into the folder argv[1] names, under a temporary
#: name renamed over ``.node.pyz`` (never through a link); with ``--fresh`` the folder (the run's own on
#: the node) is removed first, a link in its place refused
_PUT = """import base64, os, shutil, sys
folder = sys.argv[1]
data = base64.b64decode(sys.stdin.read())
if sys.argv[2:] == ["--fresh"] and os.path.lexists(folder):
    shutil.rmtree(folder)
os.makedirs(folder, exist_ok=True)
tmp = os.path.join(folder, ".node.pyz.put")
fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
with os.fdopen(fd, "wb") as out:
    out.write(data)
os.replace(tmp, os.path.join(folder, ".node.pyz"))
"""


def put_argv(settings: rec.RunnerSettings, fresh: bool = False) -> list[str]:
    """On the node (its python3): puts the node bundle, sent base64 on its stdin, in the run's node
    folder (one task, no transfer of its own); ``fresh``: what the folder held is removed first (the
    run measured afresh: ``-e fresh=true``)."""
    return ["python3", "-c", _PUT, (settings.node_dir or settings.client_dir).rstrip("/"),
            *(["--fresh"] if fresh else [])]


def restore_argv(settings: rec.RunnerSettings) -> list[str]:
    """Restores the models' committed configs, writes the host record and packs the records."""
    return [*runner_argv(settings), "--restore"]


def runner_call(settings: rec.RunnerSettings, variants: Sequence[str], repetitions: Sequence[int], *,
                token: str, todo: int, runtime: str | None = None, restore: bool = False,
                restore_past: float | None = None) -> RunnerCall:
    """The call measuring ``variants`` (in plan order; only ``repetitions`` of them when given), ``todo``
    levels, then restoring the baseline when ``restore``, or once the host's levels have taken
    ``restore_past`` minutes (``repetitions: auto``'s budget: the runner judges it on the node, so no
    ``decide`` and no restore call follow a call that spent it); ``settings``: the host plan's.
    ``token`` names its event log on the node (unique per call of a run)."""
    s = settings
    log = f".progress-{token}.log"
    picked = [f"--variant={n}" for n in variants]
    node = (s.node_dir or s.client_dir).rstrip("/")
    start = [*runner_argv(s, detach=True), *picked, *(f"--repetition={r}" for r in repetitions),
             *(["--restore"] if restore else []),
             *([f"--restore-past={restore_past!r}"] if restore_past is not None and not restore else []),
             "--log", log, "--stderr", f"{log}.err"]
    follow = ["python3", f"{node}/.node.pyz", "--follow", f"{node}/{log}",
              "--stderr", f"{node}/{log}.err", "--timeout", str(s.level_wait_s())]
    return RunnerCall(
        variants=list(variants), todo=todo, runtime=runtime, start=start, start_line=shlex.join(start),
        follow=[[*follow, "--seq", str(n)] for n in range(1, todo + 1)],
        wait_end=[*follow, "--seq", "0"],
        explain=[*runner_argv(s), "--triton-log", *picked])
