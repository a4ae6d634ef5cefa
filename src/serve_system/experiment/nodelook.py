"""What the ``experiment`` role's one look at a node printed, read as data.

The look (``roles/experiment/tasks/main.yml``) prints one ``key=value`` line per fact: ``os=`` (the
node's PRETTY_NAME), ``image=/CONTAINER=ID`` (``docker inspect``), ``cap=X.Y`` (``nvidia-smi``'s
compute_cap), ``gpu=NAME`` (its name: where the driver refuses compute_cap, the capability comes
from NVIDIA's table by name, :func:`serve_system.triton.host.compute_capability_of`),
``repository=yes|no`` (whether the node has a model repository), per model folder of
that repository, ``config=MODEL BASE64`` (its ``config.pbtxt`` as the node's Triton serves it; nothing
after the name when it is missing or larger than :data:`CONFIG_LIMIT`), and ``weights=BASE64`` (the
``weights.json`` the serve_stack role writes: the lab's repository and commit, each weights file's
sha256, the generated ones; kept in the facts, so every level's provenance records it:
:func:`read_weights`). Nothing the node printed is evaluated, and no model name it gives becomes a path
unless the spec names that model too.
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
#: the most the node's weights record may hold (a few files' checksums)
WEIGHTS_LIMIT = 256 * 1024
_SHA256 = re.compile(r"[0-9a-f]{64}")
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
        elif key == "weights" and value:
            look.facts["weights"] = read_weights(host, value)
        elif key == "config" and value:
            model, _, body = value.partition(" ")
            look.configs[model] = body.strip()
        elif line.strip():
            raise SpecError([(f"--node-facts {host}: line {line[:80]!r}: not os=..., image=/NAME=ID, "
                              "cap=X.Y, gpu=NAME, repository=yes|no, config=MODEL BASE64 or weights=BASE64: "
                              "give what the experiment role's look at the node prints")])
    look.by_name()
    return look


def read_weights(host: str, body: str) -> dict[str, Any]:
    """The node's weights record (``weights=BASE64`` of serve_stack's ``weights.json``) as the facts keep
    it: ``weights`` (lab or standin), ``repository``, ``commit``, ``files`` ([{path, sha256, size,
    standin}]) and ``generated`` ({path: sha256}); anything else in it is dropped, and a record of another
    form is refused in one line."""
    where = f"--node-facts {host}: weights="
    fix = ("give what the experiment role's look prints of the serve_stack role's weights.json "
           "(run playbooks/deploy.yml)")
    try:
        raw = base64.b64decode(body, validate=True)
    except ValueError:
        raise SpecError([f"{where}: not base64: {fix}"]) from None
    if len(raw) > WEIGHTS_LIMIT:
        raise SpecError([f"{where}: larger than {WEIGHTS_LIMIT // 1024} KiB: {fix}"])
    try:
        doc = safeio.loads_json(safeio.decode(raw, where), where)
    except safeio.UnsafeFile as exc:
        raise SpecError([f"{exc}: {fix}"]) from None

    def text(value: Any) -> bool:
        return isinstance(value, str) and len(value) <= 4096

    ok = (isinstance(doc, dict) and doc.get("weights") in ("lab", "standin") and text(doc.get("repository"))
          and text(doc.get("commit")) and isinstance(doc.get("files"), list) and len(doc["files"]) <= 64
          and isinstance(doc.get("generated", {}), dict) and len(doc.get("generated", {})) <= 256)
    files = doc.get("files") if ok else []
    ok = ok and all(isinstance(f, dict) and text(f.get("path")) and isinstance(f.get("sha256"), str)
                    and _SHA256.fullmatch(f["sha256"]) and isinstance(f.get("standin"), bool)
                    and isinstance(f.get("size"), int) and not isinstance(f.get("size"), bool) for f in files)
    generated = doc.get("generated", {}) if ok else {}
    ok = ok and all(text(k) and isinstance(v, str) and _SHA256.fullmatch(v) for k, v in generated.items())
    if not ok:
        raise SpecError([(f"{where}: not the record serve_stack writes (weights lab or standin, repository, "
                          f"commit, files with path, sha256, size and standin): {fix}")])
    return {"weights": doc["weights"], "repository": doc["repository"], "commit": doc["commit"],
            "files": [{k: f[k] for k in ("path", "sha256", "size", "standin")} for f in files],
            "generated": dict(generated)}


def unchosen_standins(look: Look) -> str | None:
    """Why a GPU node's lab weights are generated ones nobody chose (its weights record says the lab's
    weights are served and they are a stand-in repository's), or None."""
    record = look.facts.get("weights")
    if look.facts["gpus"] <= 0 or not record or record["weights"] != "lab":
        return None
    made = [f["path"] for f in record["files"] if f["standin"]]
    if not made:
        return None
    return (f"{look.host}: the GPU node serves generated stand-in weights ({made[0]} of "
            f"{record['repository'][:200]} is one), which nobody chose: point serve_stack_lab_repo at the "
            "lab's repository, or choose stand-ins with -e serve_stack_weights=standin, then run "
            "playbooks/deploy.yml")


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
