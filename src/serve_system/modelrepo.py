"""Render the committed ``model_repository/`` for one node.

The committed configs are the lab's (``KIND_GPU``, ``backend: "onnxruntime"``). A node may have no
GPU, or (rehearsal) a Triton without the ONNX Runtime backend, and its weights may have to be the
generated stand-in. :func:`render` writes the node's repository into a staging directory, editing
the configs as protobuf messages (``ModelConfig``: strict parsing, no text surgery):

* ``gpus == 0``: every ``KIND_GPU`` instance group becomes ``KIND_CPU`` with the same total instance
  count (its ``gpus`` list dropped), noted in the ``serve_system_instances`` parameter;
* ``onnx_serving == "python_shim"``: ``onnxruntime`` models get ``backend: "python"`` and the shim
  ``shims/onnx_python_shim.py`` as ``1/model.py``;
* models listed in ``standin`` get the stand-in ONNX weights generated for them
  (``serve_system.standin``: each known model has one with its signature and kind of compute), marked
  ``serve_system_standin_chosen`` where the user chose stand-ins (``--standin-chosen``);
* the lab's models (``serve_system.labrepo``) otherwise get the lab's weights, which the serve_stack role
  copies from the lab's repository on the node: their files, sha256 and repository (``--lab-weights``)
  go into the config's ``serve_system_weights`` and ``serve_system_weights_sha256`` parameters, and
  on a GPU node the engine the lab runs them with (``serve_system_engine``);
  any other model keeps the weights files its source directory holds (``1/model.onnx``, ...).

Every edit is recorded in the config's ``serve_system_*`` parameters and in ``models.json`` (the
model table the play prints), so nothing is changed silently. Files are rewritten only when their
content changes, and files the render no longer produces are removed, so the caller can report
``changed`` truthfully and an Ansible copy of the directory stays idempotent.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import labrepo, ownedtree, safeio
from .errors import ServeSystemError
from .node.plans import STANDIN_CHOSEN_PARAM
from .standin import STANDIN_NOTE, standin_bytes, standin_for

SHIM = Path(__file__).resolve().parent / "shims" / "onnx_python_shim.py"
ONNX_SERVING = ("onnxruntime", "python_shim")
WEIGHT_SUFFIXES = (".pth", ".onnx", ".pt")
MANIFEST = "models.json"
#: the config parameter saying that the user chose the stand-in (``serve_stack_weights: standin``)
CHOSEN_PARAM = STANDIN_CHOSEN_PARAM


@dataclass(frozen=True)
class ModelRow:
    """One line of the model table."""

    model: str
    backend: str
    served_by: str
    instances: str
    weights: str


def _set_param(config: Any, key: str, value: str) -> None:
    config.parameters[key].string_value = value


def render_model(
    src: Path, *, gpus: int, onnx_serving: str, standin: bool, lab: labrepo.LabWeights | None = None,
    standin_chosen: bool = False,
) -> tuple[dict[str, bytes], ModelRow]:
    """The files (relative path -> bytes) of one rendered model, and its table row. ``lab``: the lab's
    weights on the node, for the lab's models (unless ``standin``)."""
    from .triton.host import adapt_to_host  # protobuf and tritonclient: loaded only to render
    from .triton.pbtxt import kind_name, load_pbtxt, render_pbtxt

    config = load_pbtxt(src / "config.pbtxt")
    name = src.name
    if config.name and config.name != name:
        raise ServeSystemError(
            f"{src / 'config.pbtxt'}: name {config.name!r} must match its directory {name!r}")
    config.name = name
    files: dict[str, bytes] = {}
    own_weights: list[str] = []
    from_lab = [] if standin or lab is None else lab.for_model(name, gpus)
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        rel = path.relative_to(src).as_posix()
        if rel == "config.pbtxt" or "__pycache__" in rel or rel == "README.md":
            continue
        if rel.endswith(WEIGHT_SUFFIXES):
            if standin:
                continue  # the stand-in replaces them
            if from_lab:
                raise ServeSystemError(
                    f"{path}: {name}'s weights come from the lab's repository "
                    f"({lab.repository if lab else ''}): remove this file, or point serve_stack_lab_repo at "
                    "a repository that holds yours")
            own_weights.append(rel)
        files[rel] = path.read_bytes()

    lab_backend = config.backend or config.platform
    served_by = {"python": "Triton Python backend", "onnxruntime": "Triton onnxruntime backend"}.get(
        lab_backend, f"Triton {lab_backend} backend"
    )
    if lab_backend in ("onnxruntime", "onnxruntime_onnx") and onnx_serving == "python_shim":
        config.platform = ""
        config.backend = "python"
        served_by = "serve-system ONNX shim (Python backend + onnxruntime, {device})"
        _set_param(config, "serve_system_served_by",
                   "onnx_python_shim: Triton has no onnxruntime backend here")
        files["1/model.py"] = SHIM.read_bytes()

    config, moved = adapt_to_host(config, gpus)
    if moved:
        _set_param(config, "serve_system_instances", "; ".join(moved))
    kinds = [f"{g.count or 1}x{kind_name(g.kind)}"
             for g in config.instance_group]
    # the shim runs a KIND_GPU instance on onnxruntime's CUDA provider, a KIND_CPU one on its CPU provider
    served_by = served_by.format(device="CUDA" if any("GPU" in k for k in kinds) else "CPU")

    if standin:
        maker = standin_for(name)
        files["1/model.onnx"] = standin_bytes(name)
        weights = f"stand-in: {STANDIN_NOTE}; replaces {maker.replaces}"
        _set_param(config, "serve_system_weights", weights)
        if standin_chosen:  # the plan measures stand-ins on a GPU node only where they were chosen
            _set_param(config, CHOSEN_PARAM, "serve_stack_weights=standin")
    elif from_lab and lab is not None:
        weights, sums = labrepo.weights_text(name, from_lab, lab)
        _set_param(config, "serve_system_weights", weights)
        _set_param(config, "serve_system_weights_sha256", sums)
        engine = labrepo.ENGINE_ON_GPU.get(name)
        if gpus > 0 and engine and "serve_system_engine" not in config.parameters:
            _set_param(config, "serve_system_engine", engine)
    elif own_weights:
        weights = ", ".join(own_weights) + " (from the source repository)"
    elif name in labrepo.LAB_MODELS:
        raise ServeSystemError(f"{src}: model {name!r} is one of the lab's: give the lab's weights as the "
                               "node holds them (--lab-weights), or its stand-in (--standin)")
    else:
        raise ServeSystemError(f"{src}: model {name!r} has no weights (no 1/model.onnx) and no stand-in was "
                               "asked for: put its weights there, or deploy it with its stand-in")
    files["config.pbtxt"] = render_pbtxt(config).encode("utf-8")
    row = ModelRow(name, config.backend or config.platform, served_by, ",".join(kinds) or "default", weights)
    return files, row


def render(
    source: Path,
    dest: Path,
    *,
    models: list[str],
    gpus: int,
    onnx_serving: str,
    standin: list[str],
    standin_unless_given: list[str] | None = None,
    force: bool = False,
    lab: labrepo.LabWeights | None = None,
    standin_chosen: bool = False,
) -> tuple[bool, list[ModelRow]]:
    """Render ``models`` of ``source`` into ``dest``; returns (changed, model table).

    Models in ``standin`` get their stand-in; models in ``standin_unless_given`` get it only when
    their source directory holds no weights file (the user's own weights win); the lab's models
    otherwise get ``lab``'s weights. ``standin_chosen``: the user chose stand-ins (every one is marked so).
    """
    if onnx_serving not in ONNX_SERVING:
        raise ServeSystemError(f"onnx_serving must be one of {', '.join(ONNX_SERVING)}, got {onnx_serving!r}")
    standin = list(standin) + [m for m in standin_unless_given or [] if not has_weights(source / m)]
    unknown = sorted(set(standin) - set(models))
    if unknown:
        raise ServeSystemError(f"stand-in requested for models that are not deployed: {', '.join(unknown)}")
    wanted: dict[str, bytes] = {}
    rows: list[ModelRow] = []
    for name in models:
        safeio.plain_name(name, "--model", "model")  # it becomes a folder of the staging directory
        src = source / name
        if not (src / "config.pbtxt").is_file():
            raise ServeSystemError(f"{src}/config.pbtxt not found: model {name!r} is not in {source}")
        files, row = render_model(src, gpus=gpus, onnx_serving=onnx_serving, standin=name in standin, lab=lab,
                                  standin_chosen=standin_chosen)
        wanted.update({f"{name}/{rel}": data for rel, data in files.items()})
        rows.append(row)
    wanted[MANIFEST] = (json.dumps([asdict(r) for r in rows], indent=2) + "\n").encode()
    return ownedtree.sync_tree(dest, wanted, adopt=MANIFEST, force=force), rows


def has_weights(model_dir: Path) -> bool:
    """The model's source directory holds a weights file (model.onnx, food11.pth, ...)."""
    return model_dir.is_dir() and any(p.is_file() and p.name.endswith(WEIGHT_SUFFIXES)
                                      for p in model_dir.rglob("*"))


def format_table(rows: list[ModelRow]) -> list[str]:
    return [f"{r.model}: backend={r.backend} served_by={r.served_by} instances={r.instances} "
            f"weights={r.weights}"
            for r in rows]
