"""What the Chameleon command families share: ``serve-system lease`` (:mod:`.lease`) and ``launch |
status | rebuild | teardown | access`` (:mod:`.provision`).

The repository's default inventory, the user's name in defaults, the argument types both use, the
site and credential options (``--site``, ``--openrc``, ``-v``, ``--lease``), the Chameleon session
they open, and rich progress bars on stderr. Both families import this module (``chiargs.connect``);
it imports neither.
"""

from __future__ import annotations

import argparse
import getpass
import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

from rich.console import Console

from .. import ownedtree
from ..errors import ServeSystemError
from ..textsafe import clean, markup


def _checkout() -> Path:
    """The checkout whose playbooks/ and inventory/ the commands use: the one this package's sources are
    in (run in place, or ``pip install -e .``), else the nearest folder holding ansible.cfg at or above the
    current one (a ``pip install .`` puts a copy of the package in site-packages, away from any
    checkout), else the current folder."""
    here = Path(__file__).resolve().parents[3]
    if (here / "ansible.cfg").is_file():
        return here
    cwd = Path.cwd()
    return next((d for d in (cwd, *cwd.parents) if (d / "ansible.cfg").is_file()), cwd)


REPO_ROOT = _checkout()
DEFAULT_INVENTORY = REPO_ROOT / "inventory" / "hosts.yml"


def user() -> str:
    return os.environ.get("USER") or getpass.getuser()


# --- argument types ------------------------------------------------------------------------------


#: the largest count a count option takes (nodes, board rounds, seconds of a probe)
MAX_COUNT = 10_000
#: the longest duration a duration option takes (a Chameleon lease is days long at most)
MAX_DURATION = timedelta(days=31)


def positive(text: str) -> int:
    t = text.strip()
    if not (t.isascii() and t.lstrip("+-").isdigit()) or len(t) > 30:
        raise argparse.ArgumentTypeError(f"not a number: {text[:40]!r}")
    value = int(t)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    if value > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_COUNT}, got {value}")
    return value


#: a duration: hours, minutes and seconds, each with its unit, in that order (``2h50m``, ``90s``)
_DURATION = re.compile(r"(?:([0-9]{1,6})h)?(?:([0-9]{1,8})m)?(?:([0-9]{1,9})s)?")


def duration(text: str) -> timedelta:
    """``2h50m``, ``170m``, ``2h``, ``90s``: numbers with their units (h, m, s). A bare number is refused
    with the fix (it once meant minutes silently)."""
    t = "".join(text.split()).lower()  # "2h 50m" as "2h50m"
    if t.isascii() and t.isdigit() and len(t) <= 9:
        raise argparse.ArgumentTypeError(f"{t!r} has no unit: give {t}m for minutes, {t}h for hours or {t}s "
                                         "for seconds")
    m = _DURATION.fullmatch(t) if t.isascii() else None
    if not m or not any(m.groups()):
        raise argparse.ArgumentTypeError(f"not a duration like 2h50m, 170m or 90s: {text[:40]!r}")
    td = timedelta(hours=int(m.group(1) or 0), minutes=int(m.group(2) or 0), seconds=int(m.group(3) or 0))
    if td <= timedelta(0):
        raise argparse.ArgumentTypeError(f"duration must be positive: {text!r}")
    if td > MAX_DURATION:
        raise argparse.ArgumentTypeError(f"duration {text.strip()!r} is longer than {MAX_DURATION.days} "
                                         "days: give hours and minutes, e.g. 2h50m")
    return td


# --- progress ------------------------------------------------------------------------------------


class RichProgress:
    """Progress bars on stderr (started on the first step), notes on stdout."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._bars: Any = None
        self._tasks: dict[str, Any] = {}

    def step(self, task: str, description: str, completed: int, total: int | None) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        if self._bars is None:
            self._bars = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), console=Console(stderr=True, highlight=False),
                                  transient=True)
            self._bars.start()
        description = markup(description)  # a server's name or status is data, not markup
        if task not in self._tasks:
            self._tasks[task] = self._bars.add_task(description, total=total)
        self._bars.update(self._tasks[task], description=description, completed=completed, total=total)

    def note(self, message: Any) -> None:
        # plain text as it is ("[dry run]" is not rich markup); tables and other renderables as they are
        self.console.print(clean(message) if isinstance(message, str) else message,
                           markup=not isinstance(message, str))

    def close(self) -> None:
        if self._bars is not None:
            self._bars.stop()
            self._bars = None


# --- shared options ------------------------------------------------------------------------------


def site_args(p: argparse.ArgumentParser, *, lease: bool = True) -> None:
    from ..provision.chameleon.credentials import DEFAULT_SITE, SITES

    g = p.add_argument_group("Chameleon (--provider chameleon)")
    g.add_argument("--site", default=DEFAULT_SITE,
                   help=f"Chameleon site (default %(default)s; one of {', '.join(SITES)})")
    g.add_argument("--openrc", type=_openrc, action="append", default=[], metavar="[SITE=]FILE",
                   help="read OS_* credentials from this openrc file (parsed, never executed); "
                        "SITE=FILE: for that site only (an application credential is per site: a class "
                        "over two sites gives --openrc CHI@TACC=tacc.sh --openrc CHI@UC=uc.sh); "
                        "default: the environment")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also show the OpenStack libraries' own log messages and warnings on stderr")
    if lease:
        from ..provision.chameleon.leases import default_lease_name

        g.add_argument("--lease", default=default_lease_name(user()), metavar="NAME",
                       help="lease name (default %(default)s)")


class _OpenrcArg(ownedtree.PathArg):
    """``FILE`` or ``SITE=FILE`` (a site's own credentials) as (site or "", path): a file only read."""

    def __init__(self) -> None:
        super().__init__(ownedtree.INPUT)

    def __call__(self, value: str) -> tuple[str, Path]:
        from ..provision.chameleon.credentials import SITES

        site, sep, rest = value.partition("=")
        if sep and site.startswith("CHI@"):
            if site not in SITES:
                raise argparse.ArgumentTypeError(f"{site!r} is not a Chameleon GPU site: use one of "
                                                 f"{', '.join(SITES)}=FILE")
            return site, super().__call__(rest)
        return "", super().__call__(value)


_openrc = _OpenrcArg()


def check_site(args: argparse.Namespace) -> None:
    from ..provision.chameleon import credentials

    credentials.check_site(args.site)


def connect(args: argparse.Namespace, site: str | None = None) -> str:
    """Open the python-chi session at ``site`` (default ``--site``) with the environment's credentials,
    then those of every ``--openrc FILE``, then those of ``--openrc SITE=FILE`` for this site."""
    from ..provision.chameleon.credentials import Site, check_site, parse_openrc, resolve_credentials

    site = site or args.site
    check_site(site)
    env = dict(os.environ)
    given = getattr(args, "openrc", None) or []
    if isinstance(given, str | Path):  # one file, as a caller of this function may still pass
        given = [("", Path(given))]
    files = [f for s, f in given if not s] + [f for s, f in given if s == site]
    for path in files:
        env.update(parse_openrc(path, os.environ))
    try:
        creds = resolve_credentials(env)
    except ServeSystemError as exc:
        if files:  # the files were read: say which, since what they lack is the problem
            raise ServeSystemError(f"--openrc {', '.join(map(str, files))} (with the environment) for "
                                   f"{site}: {exc}") from None
        raise
    return Site.connect(creds, site).name


def console() -> Console:
    return Console(highlight=False, soft_wrap=True)
