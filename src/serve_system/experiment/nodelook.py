"""What the ``experiment`` role's one look at a node printed, read as data.

The look (``roles/experiment/tasks/main.yml``) prints one ``key=value`` line per fact: ``os=`` (the
node's PRETTY_NAME), ``image=/CONTAINER=ID`` (``docker inspect``), ``cap=X.Y`` (``nvidia-smi``'s
compute_cap), ``gpu=NAME`` (its name: where the driver refuses compute_cap, the capability comes
from NVIDIA's table by name, :func:`serve_system.triton.host.compute_capability_of`),
``repository=yes|no`` (whether the node has a model repository) and, per model folder of
that repository, ``config=MODEL BASE64`` (its ``config.pbtxt`` as the node's Triton serves it; nothing
after the name when it is missing or larger than :data:`CONFIG_LIMIT`). Nothing the node printed is
evaluated, and no model name it gives becomes a path unless the spec names that model too.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

from .. import safeio
from ..triton.host import compute_capability_of
from . import runfolder
from .spec.messages import SpecError

#: how nvidia-smi prints a field it cannot give ("[N/A]", "[Not Supported]")
_UNAVAILABLE = re.compile(r"\[[A-Za-z /]{1,40}\]")
#: the most GPU names a look keeps (a node has a handful)
_MAX_GPUS = 64
#: the most a node's base config may hold (Triton's configs are a few KB)
CONFIG_LIMIT = 1024 * 1024
#: why a model the spec names has no base config in the node's look
_NO_CONFIG = ("the node has no regular file model_repository/{model}/config.pbtxt of at most 1 MiB: deploy "
              "the models with playbooks/site.yml first")


class Look:
    """One host's look: the facts the runner records, and the base configs as printed (base64, not yet
    decoded: only the spec's models are); ``repository`` is None when the look did not say."""

    def __init__(self, host: str, gpus: int) -> None:
        self.host = host
        self.facts: dict[str, Any] = {"host": host, "os": "unknown", "gpus": gpus,
                                      "gpu_compute_capability": [], "images": {}}
        self.configs: dict[str, str] = {}
        self.repository: bool | None = None
        self.gpu_names: list[str] = []
        self.cap_refused = False

    def by_name(self) -> None:
        """Where the node printed GPU names but no capability (a driver that refuses compute_cap), the
        capabilities from NVIDIA's table; a name not in it leaves the capability unknown, and says so."""
        if self.cap_refused:
            self.facts["gpu_compute_capability"] = []
        if self.facts["gpu_compute_capability"] or not self.gpu_names:
            return
        caps = [compute_capability_of(n) for n in self.gpu_names]
        if all(c is not None for c in caps):
            self.facts["gpu_compute_capability"] = [f"{c:.1f}" for c in caps]
            self.facts["gpu_compute_capability_from"] = "name (nvidia-smi refused compute_cap)"
        else:
            unknown = sorted({n for n, c in zip(self.gpu_names, caps, strict=True) if c is None})
            self.facts["gpu_compute_capability_from"] = (
                f"unknown: nvidia-smi refused compute_cap and {', '.join(unknown)} is not in NVIDIA's table")


def read_look(host: str, gpus: int, text: str) -> Look:
    """The look's text -> :class:`Look`; a line of another form is refused in one line naming it."""
    look = Look(host, gpus)
    for line in text.splitlines():
        key, _, value = line.strip().partition("=")
        if key == "os" and value:
            look.facts["os"] = value[:200]
        elif key == "image" and "=" in value:
            container, _, image = value.partition("=")
            look.facts["images"][container.lstrip("/")[:200]] = image[:200]
        elif key == "cap":
            if _UNAVAILABLE.fullmatch(value.strip()):  # as if refused: the names decide
                look.cap_refused = True
            else:  # anything else that is no capability is refused by the plan, naming it
                look.facts["gpu_compute_capability"].append(value.strip())
        elif key == "gpu" and value.strip():
            if len(look.gpu_names) < _MAX_GPUS:
                look.gpu_names.append(value.strip()[:200])
                look.facts["gpu_names"] = list(look.gpu_names)
        elif key == "repository" and value in ("yes", "no"):
            look.repository = value == "yes"
        elif key == "config" and value:
            model, _, body = value.partition(" ")
            look.configs[model] = body.strip()
        elif line.strip():
            raise SpecError([(f"--node-facts {host}: line {line[:80]!r}: not os=..., image=/NAME=ID, "
                              "cap=X.Y, gpu=NAME, repository=yes|no or config=MODEL BASE64: give what the "
                              "experiment role's look at the node prints")])
    look.by_name()
    return look


def base_config(look: Look, model: str) -> bytes | None:
    """The base config of ``model`` the node printed, decoded; None when the look printed no config at
    all and did not say it looked at a repository (nothing to plan on: the spec's own base). Refused in
    one line when the node lacks it, it is not base64 or it is larger than :data:`CONFIG_LIMIT`."""
    where = f"--node-facts {look.host}: config={model[:80]!r}"
    if model not in look.configs:
        if look.repository is None and not look.configs:
            return None
        raise SpecError([f"{where}: {_NO_CONFIG.format(model=model[:80])}"])
    body = look.configs[model]
    if not body:
        raise SpecError([f"{where}: {_NO_CONFIG.format(model=model[:80])}"])
    try:
        raw = base64.b64decode(body, validate=True)
    except ValueError:
        raise SpecError([f"{where}: not base64: give what the experiment role's look at the node prints"]) \
            from None
    if len(raw) > CONFIG_LIMIT:
        raise SpecError([(f"{where}: larger than {CONFIG_LIMIT // 1024} KiB: not a Triton config; look at "
                          f"the node's model_repository/{model[:80]}/config.pbtxt")])
    return raw


def write_node_bases(run: Path, looks: dict[str, Look], models: set[str]) -> dict[str, Path]:
    """Each host's base configs the node printed for the models the spec names, kept with its results
    (``RUN_DIR/<host>/.node_base``, through the one write path; any other name the node gave is
    ignored, never made a path); {host: that folder} for the hosts whose look held configs. Every
    config is checked before the first is written."""
    decoded = {host: {m: base_config(look, m) for m in sorted(models)} for host, look in looks.items()}
    out: dict[str, Path] = {}
    for host, by_model in decoded.items():
        if all(raw is None for raw in by_model.values()):
            continue
        base = runfolder.check_host_dir(run, host) / ".node_base"
        for model, raw in by_model.items():
            if raw is not None:
                folder = base / safeio.plain_name(model, f"--node-facts {host}", "model")
                safeio.write_bytes(folder / "config.pbtxt", raw, within=run)
        out[host] = base
    return out
