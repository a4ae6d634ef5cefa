"""Chameleon credentials, OpenStack error translation and the site session (python-chi).

* Credentials come from the environment or from an openrc file that is *parsed*, never executed.
  They are handed to python-chi with ``chi.reset()`` + ``chi.set()`` (python-chi only reads
  ``OS_*`` variables at import time), and application credentials are never given a project scope.
* The site is checked offline against :data:`SITES` first, then against the resource API's list,
  and chosen with ``chi.use_site()`` (``choose_site()`` only prints outside Jupyter).
* Every OpenStack/python-chi exception becomes one :class:`ServeSystemError` line (:func:`api_errors`).
"""

from __future__ import annotations

import codecs
import contextlib
import io
import re
import shlex
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ServeSystemError, UsageError
from ...textsafe import clean

#: the Chameleon bare-metal sites with GPU nodes the lab runs on
SITES = ("CHI@TACC", "CHI@UC")
DEFAULT_SITE = "CHI@TACC"

_CRED_HELP = (
    "source your Chameleon openrc, pass --openrc FILE, or export OS_APPLICATION_CREDENTIAL_ID "
    "and OS_APPLICATION_CREDENTIAL_SECRET of an unscoped application credential"
)


# --- credentials -------------------------------------------------------------------------------

_EXPORT_RE = re.compile(r"^\s*(?:export\s+)?(OS_[A-Z0-9_]+)=(.*)$")


def parse_openrc(path: Path, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``OS_*`` assignments of an openrc file, read as data (the file is never executed).

    ``$VAR`` / ``${VAR}`` references are resolved from earlier assignments and ``env``; a value
    that stays unresolved (the password prompt of Chameleon's openrc) is left out, so it can come
    from the environment instead.
    """
    text = read_openrc_text(path)
    known: dict[str, str] = dict(env or {})
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        m = _EXPORT_RE.match(line)
        if not m:
            continue
        name, raw = m.groups()
        if any("\udc80" <= c <= "\udcff" for c in raw):
            raise UsageError(f"--openrc {path}: line {number} ({name}): its value is not UTF-8 text (another "
                             "editor's encoding), and a credential is never guessed: save the file as UTF-8")
        try:
            parts = shlex.split(raw, comments=True)
        except ValueError as exc:
            raise UsageError(f"--openrc {path}: cannot parse the value of {name} ({exc})") from exc
        value = parts[0] if parts else ""
        unresolved = False

        def sub(mm: re.Match[str]) -> str:
            nonlocal unresolved
            ref = mm.group(1) or mm.group(2)
            if ref in known:
                return known[ref]
            unresolved = True
            return ""

        if not raw.lstrip().startswith("'"):
            value = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", sub, value)
        if unresolved or not value:
            continue
        if clean(value) != value:  # the value itself, or what a $reference brought into it
            raise UsageError(f"--openrc {path}: line {number} ({name}): a control character in the value: "
                             "write the value as plain text")
        known[name] = value
        out[name] = value
    return out


#: the largest openrc read (Chameleon's is about 2 KiB)
MAX_OPENRC_BYTES = 256 * 1024
#: byte order marks an editor may write first, and the text encodings they name (UTF-32's first:
#: its little-endian mark begins with UTF-16's)
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def read_openrc_text(path: Path) -> str:
    """An openrc file's text, decoded by one rule; anything else is one :class:`UsageError` line.

    * A byte order mark names the encoding: UTF-8, UTF-16 or UTF-32 (as Windows editors and
      PowerShell's ``>`` save files); the whole file must decode in it.
    * Without a mark the file is UTF-8. A file that is not (Latin-1 or cp1252 from an old editor) is
      read with each byte that is not UTF-8 kept apart (``surrogateescape``): lines the parser skips
      (comments, ``echo``) may hold them, but an ``OS_*`` assignment whose value holds one is refused by
      :func:`parse_openrc`, naming the line: a credential is never guessed from an ambiguous byte.
    * NUL bytes without a mark (UTF-16 saved without one) cannot be read unambiguously: refused.
    * Only a regular file of at most :data:`MAX_OPENRC_BYTES` is read (a pipe would hang).
    """
    where = f"--openrc {path}"
    try:
        info = path.stat()
        if stat.S_ISDIR(info.st_mode):
            raise UsageError(f"{where}: is a folder; give the openrc file (Chameleon: Identity > "
                             "Application Credentials, or the project's openrc download)")
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{where}: not a regular file; give the openrc file itself")
        if info.st_size > MAX_OPENRC_BYTES:
            raise UsageError(f"{where}: larger than {MAX_OPENRC_BYTES // 1024} KiB; an openrc is a few "
                             "export lines")
        with path.open("rb") as fh:
            raw = fh.read(MAX_OPENRC_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"{where}: cannot read it ({exc.strerror})") from None
    for bom, encoding in _BOMS:
        if raw.startswith(bom):
            try:
                return raw.decode(encoding).removeprefix("\ufeff")
            except UnicodeDecodeError as exc:
                name = encoding.upper().removesuffix("-SIG")
                raise UsageError(f"{where}: starts with a {name} byte order mark but byte {exc.start} does "
                                 "not decode: save the file as UTF-8") from None
    if b"\0" in raw:
        raise UsageError(f"{where}: holds NUL bytes without a byte order mark (UTF-16 saved without one, "
                         "or not text): save the file as UTF-8")
    return raw.decode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class Credentials:
    """What python-chi needs to authenticate (never printed, never written anywhere)."""

    auth_type: str
    options: dict[str, str] = field(repr=False)
    project: str | None = None

    def describe(self) -> str:
        kind = {
            "v3applicationcredential": "application credential",
            "v3password": "password",
            "v3token": "token",
        }[self.auth_type]
        return f"{kind}" + (f", project {self.project}" if self.project else "")


def resolve_credentials(env: Mapping[str, str]) -> Credentials:
    """Pick the authentication method from ``OS_*`` variables; one clear error when incomplete."""

    def get(name: str) -> str:
        return (env.get(name) or "").strip()

    if get("OS_APPLICATION_CREDENTIAL_ID") or get("OS_APPLICATION_CREDENTIAL_SECRET"):
        missing = [n for n in ("OS_APPLICATION_CREDENTIAL_ID", "OS_APPLICATION_CREDENTIAL_SECRET")
                   if not get(n)]
        if missing:
            raise ServeSystemError(f"missing OpenStack credentials: {', '.join(missing)}; {_CRED_HELP}")
        # Application credentials carry their project; giving them a scope makes Keystone refuse.
        return Credentials(
            "v3applicationcredential",
            {
                "application_credential_id": get("OS_APPLICATION_CREDENTIAL_ID"),
                "application_credential_secret": get("OS_APPLICATION_CREDENTIAL_SECRET"),
            },
        )
    project = get("OS_PROJECT_NAME") or get("OS_PROJECT_ID") or None
    scope = {"project_name": get("OS_PROJECT_NAME")} if get("OS_PROJECT_NAME") else {}
    if get("OS_PROJECT_ID"):
        scope = {"project_id": get("OS_PROJECT_ID")}
    if get("OS_TOKEN"):
        if not project:
            raise ServeSystemError("missing OpenStack credentials: OS_PROJECT_NAME or OS_PROJECT_ID; "
                                   f"{_CRED_HELP}")
        return Credentials("v3token", {"token": get("OS_TOKEN"), **scope}, project)
    if get("OS_USERNAME") or get("OS_PASSWORD"):
        missing = [n for n in ("OS_USERNAME", "OS_PASSWORD") if not get(n)]
        if not project:
            missing.append("OS_PROJECT_NAME")
        if missing:
            raise ServeSystemError(f"missing OpenStack credentials: {', '.join(missing)}; {_CRED_HELP}")
        opts = {"username": get("OS_USERNAME"), "password": get("OS_PASSWORD"), **scope}
        if get("OS_USER_DOMAIN_NAME"):
            opts["user_domain_name"] = get("OS_USER_DOMAIN_NAME")
        return Credentials("v3password", opts, project)
    raise ServeSystemError(
        "missing OpenStack credentials: OS_APPLICATION_CREDENTIAL_ID and OS_APPLICATION_CREDENTIAL_SECRET, "
        f"or OS_USERNAME, OS_PASSWORD and OS_PROJECT_NAME; {_CRED_HELP}"
    )


# --- errors from the OpenStack clients -------------------------------------------------------


def one_line(text: Any) -> str:
    """``text`` on one line (an API's multi-line message inside our one-line errors)."""
    return " ".join(str(text).split())


def api_message(exc: BaseException) -> str:
    """The message an OpenStack/Blazar error carries for a user, unwrapped and on one line."""
    if exc.args and isinstance(exc.args[0], BaseException):
        return api_message(exc.args[0])  # python-chi's retry_create wraps errors in ResourceError(exc)
    details = getattr(exc, "details", None)  # openstacksdk HttpException: the service's own words
    status = getattr(exc, "status_code", None)
    if isinstance(details, str) and details.strip():
        return one_line(details) + (f" (HTTP {status})" if status else "")
    msg = one_line(exc) or type(exc).__name__
    return re.sub(r"^ERROR:\s*", "", msg)


def _client_exceptions() -> tuple[type[BaseException], ...]:
    from blazarclient.exception import BlazarClientException
    from chi.exception import CHIValueError, ResourceError, ServiceError
    from glanceclient.exc import BaseException as GlanceError
    from glanceclient.exc import HTTPException as GlanceHTTPError
    from keystoneauth1.exceptions import ClientException as KsaError
    from neutronclient.common.exceptions import NeutronClientException
    from novaclient.exceptions import ClientException as NovaError
    from openstack.exceptions import SDKException

    return (
        BlazarClientException,
        CHIValueError,
        ResourceError,
        ServiceError,
        GlanceError,
        GlanceHTTPError,
        KsaError,
        NeutronClientException,
        NovaError,
        SDKException,
    )


@contextlib.contextmanager
def api_errors(what: str) -> Iterator[None]:
    """Turn any OpenStack/python-chi exception into one ServeSystemError line about ``what``."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # python-chi prints; keep our stdout clean
            yield
    except ServeSystemError:
        raise
    except _client_exceptions() as exc:
        from keystoneauth1.exceptions import ConnectFailure, Unauthorized

        if isinstance(exc, Unauthorized):
            raise ServeSystemError(
                f"{what}: Chameleon refused the credentials (HTTP 401); check them, or create a new "
                "application credential (unscoped)"
            ) from exc
        if isinstance(exc, ConnectFailure):
            raise ServeSystemError(f"{what}: cannot reach Chameleon ({api_message(exc)})") from exc
        raise ServeSystemError(f"{what}: {api_message(exc)}") from exc


# --- session -----------------------------------------------------------------------------------


@dataclass
class Site:
    """A python-chi context bound to one Chameleon site (python-chi's own state is global)."""

    name: str

    @classmethod
    def connect(cls, creds: Credentials, site: str) -> Site:
        import chi
        import chi.context

        check_site(site)
        with api_errors(f"selecting site {site}"):
            chi.reset()  # python-chi read OS_* at import time; start from a clean slate
            try:
                sites = chi.context.list_sites()
            except Exception as exc:  # requests errors: python-chi's use_site would only print
                raise ServeSystemError(
                    f"cannot fetch the list of Chameleon sites ({one_line(exc)}); check your network "
                    "or CHI_RESOURCE_API_URL"
                ) from exc
            if site not in sites:
                known = ", ".join(s for s in sites if s.startswith("CHI@")) or ", ".join(sites)
                raise UsageError(f"unknown site {site!r}: use one of {known}")
            chi.set("auth_type", creds.auth_type)
            for key, value in creds.options.items():
                chi.set(key, value)
            if creds.auth_type == "v3applicationcredential":
                # never scope an application credential, whatever OS_PROJECT_* the shell has
                chi.set("project_name", None)
                chi.set("project_id", None)
            chi.use_site(site)
            if creds.project and "project_name" in creds.options:
                chi.context.use_project(creds.project)
        return cls(site)




def check_site(site: str) -> str:
    """``site`` when it is one of :data:`SITES` (checked offline, before any network call)."""
    if site not in SITES:
        raise UsageError(f"--site {site!r} is not a known Chameleon GPU site: use one of {', '.join(SITES)}")
    return site
