"""A runner call as one record: every command line the ``experiment`` role runs for one call of the
node-side runner (:mod:`.runner`), built here and nowhere else.

``serve-system plan --role`` answers a host's first calls with them, ``serve-system decide`` each
further one (:mod:`serve_system.results.adaptive`); the role runs ``start``, then each of ``follow``
(one per level still to measure: it prints that level's progress line), ``wait_end`` when no level was
left to report the end, ``explain`` (Triton's log on its stdin) after a refused load, and the host's
``restore`` at the end. Where the runner runs, its timeouts and its memory cap are the host plan's
:class:`~.plans.RunnerSettings`: the runner reads them there, so no call carries them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..node import bundle, plans
from ..node.archive import ARCHIVE


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
    #: on the node: waits for level 1, 2, ... of the call and prints its event
    follow: list[list[str]] = field(default_factory=list)
    #: on the node: waits for the call's end
    wait_end: list[str] = field(default_factory=list)
    #: in the client container: adds Triton's reasons (its log on stdin) to the refused loads' records
    explain: list[str] = field(default_factory=list)


def runner_argv(settings: plans.RunnerSettings, *, detach: bool = False) -> list[str]:
    """The runner in the client container (``docker exec``), on the host plan's ``plan.json``."""
    here = settings.client_dir.rstrip("/")
    return ["docker", "exec", "--detach" if detach else "-i", settings.container,
            "python3", f"{here}/{bundle.NAME}", "--plan", f"{here}/plan.json"]


#: the most a node bundle may weigh to travel on a command's stdin; a larger one (large input data) is
#: copied
PUT_LIMIT = 8 * 1024 * 1024
#: the most a host's records archive may weigh to come home on a command's output (base64); a larger one
#: is fetched (the role's second way, a transfer of its own)
FETCH_LIMIT = 64 * 1024 * 1024
#: :func:`fetch_argv`'s exit status for an archive over :data:`FETCH_LIMIT`
FETCH_TOO_LARGE = 3

#: on the node: writes the bundle from stdin into the folder argv[2] names, under a temporary name
#: renamed over the bundle's name argv[1] (never through a link); with ``--fresh`` the folder (the run's
#: own on the node) is removed first, a link in its place refused
_PUT = """import os, shutil, sys
name, folder = sys.argv[1:3]
data = sys.stdin.buffer.read()
if sys.argv[3:] == ["--fresh"] and os.path.lexists(folder):
    shutil.rmtree(folder)
os.makedirs(folder, exist_ok=True)
tmp = os.path.join(folder, name + ".put")
fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
with os.fdopen(fd, "wb") as out:
    out.write(data)
os.replace(tmp, os.path.join(folder, name))
"""


#: on the node: prints the regular file argv[1] names (never through a link) in base64, or exits with
#: FETCH_TOO_LARGE when it weighs more than argv[2] bytes
_SEND = """import base64, os, stat, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NOFOLLOW)
st = os.fstat(fd)
if not stat.S_ISREG(st.st_mode):
    sys.exit(sys.argv[1] + ": not a regular file")
if st.st_size > int(sys.argv[2]):
    sys.exit(TOO_LARGE)
with os.fdopen(fd, "rb") as f:
    sys.stdout.write(base64.b64encode(f.read()).decode())
""".replace("TOO_LARGE", str(FETCH_TOO_LARGE))


def _node_dir(settings: plans.RunnerSettings) -> str:
    return (settings.node_dir or settings.client_dir).rstrip("/")


def put_argv(settings: plans.RunnerSettings, fresh: bool = False) -> list[str]:
    """On the node (its python3): puts the node bundle, sent on its stdin, in the run's node folder (one
    task, no transfer of its own); ``fresh``: what the folder held is removed first (the run measured
    afresh: ``-e fresh=true``)."""
    return ["python3", "-c", _PUT, bundle.NAME, _node_dir(settings), *(["--fresh"] if fresh else [])]


def fetch_argv(settings: plans.RunnerSettings) -> list[str]:
    """On the node (its python3): prints the host's records archive in base64 (the role writes it home
    in the same task, no transfer of its own); exits :data:`FETCH_TOO_LARGE` for one over
    :data:`FETCH_LIMIT` (the role fetches that one)."""
    return ["python3", "-c", _SEND, archive_path(settings), str(FETCH_LIMIT)]


def archive_path(settings: plans.RunnerSettings) -> str:
    """The host's records archive on the node (the runner packs it at the end of every call)."""
    return f"{_node_dir(settings)}/{ARCHIVE}"


def restore_argv(settings: plans.RunnerSettings) -> list[str]:
    """Restores the models' committed configs, writes the host record and packs the records."""
    return [*runner_argv(settings), "--restore"]


def runner_call(settings: plans.RunnerSettings, variants: Sequence[str], repetitions: Sequence[int], *,
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
    node = _node_dir(s)
    start = [*runner_argv(s, detach=True), *picked, *(f"--repetition={r}" for r in repetitions),
             *(["--restore"] if restore else []),
             *([f"--restore-past={restore_past!r}"] if restore_past is not None and not restore else []),
             "--log", log, "--stderr", f"{log}.err"]
    follow = ["python3", f"{node}/{bundle.NAME}", "--follow", f"{node}/{log}",
              "--stderr", f"{node}/{log}.err", "--timeout", str(s.level_wait_s())]
    return RunnerCall(
        variants=list(variants), todo=todo, runtime=runtime, start=start,
        follow=[[*follow, "--seq", str(n)] for n in range(1, todo + 1)],
        wait_end=[*follow, "--seq", "0"],
        explain=[*runner_argv(s), "--triton-log", *picked])
