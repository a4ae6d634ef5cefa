"""What one (host, variant) ran, as the claims compare it: its backend, instances, batching, arrivals,
the rest of its configuration, and who really served it (the ONNX shim) or how the host adapted it.
Read from the variant records (:func:`serve_system.results.tree.variant_setups`); the findings and
their reasons both read it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..triton import pbtxt as tc

#: the ``serve_system_served_by`` value of a model the serve-system ONNX shim served
SHIM_PREFIX = "onnx_python_shim"


@dataclass
class VariantSetup:
    """How a (host, variant) was set up, as its raw files say
    (:func:`serve_system.results.tree.variant_setups`): ``config_pbtxt`` (the exact config sent, or
    None), ``runtime`` (FastAPI variants), the variant record's ``status``, ``error`` and ``notes`` (how
    the host changed it, and who served it: the ONNX shim), ``distribution`` and ``batch_size`` (from
    the first level's perf_analyzer argv and level.json), and the host's ``host_gpus`` (its plan.json)
    / ``host_cpus`` (the CPUs the runner counted, in the level records' provenance). A record that does
    not read leaves its part empty (the rows say why)."""

    config_pbtxt: str | None = None
    runtime: str | None = None
    status: str | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    distribution: str | None = None
    batch_size: int = 1
    host_gpus: int | None = None
    host_cpus: int | None = None


def is_shim(served_by: str | None) -> bool:
    return bool(served_by) and str(served_by).startswith(SHIM_PREFIX)


@dataclass(frozen=True)
class Setup:
    """What one (host, variant) ran: the parts of its configuration the claims compare."""

    host: str
    variant: str
    model: str | None
    backend: str | None
    instances: int
    instance_kind: str
    dynamic_batching: bool
    distribution: str
    batch_size: int
    host_cpus: int | None
    #: the configuration without name, instance groups and dynamic batching (a hashable key)
    rest: str
    #: the configuration without name and instance groups
    without_instances: str
    #: the configuration without name and dynamic batching
    without_batching: str
    #: who really served it where not the backend its spec names (``serve_system_served_by``: the shim)
    served_by: str | None = None
    #: how the host changed its configuration (GPU instances moved to CPU, GPU ids folded)
    adapted: tuple[str, ...] = ()

    @property
    def planned_backend(self) -> str | None:
        """The backend its spec names: onnxruntime for a model the ONNX shim served."""
        return "onnxruntime" if is_shim(self.served_by) else self.backend


def _key(cfg: Mapping[str, object], drop: tuple[str, ...]) -> str:
    """A configuration without the fields ``drop`` names, as a comparable key. ``cfg`` is the model
    configuration as Triton's load API takes it (:func:`serve_system.triton.pbtxt.to_dict`): free-form, any
    of the protobuf's fields, compared whole."""
    return json.dumps({k: v for k, v in cfg.items() if k not in drop}, sort_keys=True)


_PLATFORMS = {"onnxruntime_onnx": "onnxruntime", "tensorrt_plan": "tensorrt", "pytorch_libtorch": "pytorch"}


def make_setup(host: str, variant: str, raw: VariantSetup) -> Setup | None:
    """A :class:`Setup` from :func:`~serve_system.results.tree.variant_setups`' record; None when
    nothing says how it ran."""
    dist = raw.distribution or "constant"
    batch = int(raw.batch_size or 1)
    backend: str | None
    if raw.runtime:  # a FastAPI variant: one process, no Triton configuration
        rt = str(raw.runtime)
        backend = {"onnx": "onnxruntime", "pytorch": "python"}.get(rt, rt)
        return Setup(host, variant, f"fastapi:{rt}", backend, 1, "process", False, dist, batch,
                     raw.host_cpus, "fastapi", "fastapi", "fastapi")
    text = raw.config_pbtxt
    if not text:
        return None
    try:
        cfg = tc.to_dict(tc.parse_pbtxt(text, f"{host}/{variant}/config.pbtxt"))
    except tc.ConfigError:
        return None
    backend = cfg.get("backend") or _PLATFORMS.get(cfg.get("platform", ""), cfg.get("platform"))
    groups = cfg.get("instance_group") or [{}]
    instances = sum(int(g.get("count", 1)) * max(1, len(g.get("gpus") or [])) for g in groups)
    kinds = sorted({str(g.get("kind", "KIND_AUTO")).removeprefix("KIND_") for g in groups})
    rest = _key(cfg, ("name", "instance_group", "dynamic_batching"))
    served = ((cfg.get("parameters") or {}).get("serve_system_served_by") or {}).get("string_value")
    adapted = tuple(str(n) for n in raw.notes if not str(n).startswith("served by:"))
    return Setup(host, variant, cfg.get("name"), backend, instances, "+".join(kinds),
                 "dynamic_batching" in cfg, dist, batch, raw.host_cpus, rest,
                 _key(cfg, ("name", "instance_group")), _key(cfg, ("name", "dynamic_batching")),
                 served, adapted)
