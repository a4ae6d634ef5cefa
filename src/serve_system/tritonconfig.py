"""Triton model configurations: parse config.pbtxt strictly, apply a variant's overrides, render, check.

Parsing uses Triton's own schema (``tritonclient.grpc.model_config_pb2``), so a key Triton does not
know is an error here too, with its line and column. Overrides are applied on the JSON form of the
configuration (what Triton's repository API takes): a top-level key of the override replaces the
base's key, ``null`` removes it. :func:`check` finds what Triton (or the host) would refuse before
anything is sent to a node.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2

from .errors import ServeSystemError

if TYPE_CHECKING:
    #: tritonclient ships no type information: its generated message classes are untyped for mypy
    ModelConfig: TypeAlias = Any
else:
    ModelConfig = model_config_pb2.ModelConfig

KIND_GPU = model_config_pb2.ModelInstanceGroup.Kind.Value("KIND_GPU")
KIND_CPU = model_config_pb2.ModelInstanceGroup.Kind.Value("KIND_CPU")


class ConfigError(ServeSystemError):
    """A configuration that cannot be parsed or would be refused; the message is one line."""


@dataclass(frozen=True)
class Problem:
    """One thing Triton or the host would refuse: the field (dotted path) and why."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def parse_pbtxt(text: str, path: str = "config.pbtxt") -> ModelConfig:
    """Parse config.pbtxt text strictly; errors read ``path:line:col: message``."""
    cfg = ModelConfig()
    try:
        text_format.Parse(text, cfg)
    except text_format.ParseError as exc:
        line, col = exc.GetLine(), exc.GetColumn()
        msg = str(exc)
        # the library prefixes "line:col : " to its message: keep only the message
        prefix = f"{line}:{col} : "
        msg = msg.removeprefix(prefix)
        raise ConfigError(f"{path}:{line or 1}:{col or 1}: {msg}") from None
    return cfg


def load_pbtxt(path: str | Path) -> ModelConfig:
    """Read and parse a config.pbtxt file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{p}:1:1: cannot read: {exc.strerror}") from None
    return parse_pbtxt(text, str(p))


def to_dict(cfg: ModelConfig) -> dict[str, Any]:
    """The configuration as a plain dict with proto field names (the load API's JSON form)."""
    return json_format.MessageToDict(cfg, preserving_proto_field_name=True)


def from_dict(data: dict[str, Any], where: str) -> ModelConfig:
    """Build a ModelConfig from a dict, strictly; ``where`` prefixes the error message."""
    cfg = ModelConfig()
    try:
        json_format.ParseDict(data, cfg, ignore_unknown_fields=False)
    except json_format.ParseError as exc:
        raise ConfigError(f"{where}: {_short_parse_error(str(exc))}") from None
    return cfg


def _short_parse_error(msg: str) -> str:
    # json_format says e.g. 'Message type "inference.ModelDynamicBatching" has no field named "foo"
    # at "ModelConfig.dynamic_batching".\n Available Fields(except extensions): ...'
    return msg.split("\n", 1)[0].strip()


def apply_overrides(base: ModelConfig, overrides: dict[str, Any] | None, where: str) -> ModelConfig:
    """Return a new config: ``base`` with each top-level key of ``overrides`` replaced (None removes)."""
    data = to_dict(base)
    for key, value in (overrides or {}).items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return from_dict(data, where)


def render_pbtxt(cfg: ModelConfig) -> str:
    """config.pbtxt text for a configuration."""
    return text_format.MessageToString(cfg)


def load_api_body(cfg: ModelConfig) -> dict[str, Any]:
    """Body of ``POST /v2/repository/models/NAME/load`` that loads ``cfg`` as an override."""
    return {"parameters": {"config": json.dumps(to_dict(cfg), sort_keys=True)}}


def gpus_needed(cfg: ModelConfig) -> int:
    """How many GPUs the configuration addresses (highest GPU id + 1; 1 for KIND_GPU without ids)."""
    need = 0
    for group in cfg.instance_group:
        if group.kind == KIND_GPU:
            need = max(need, (max(group.gpus) + 1) if group.gpus else 1)
    if cfg.optimization.execution_accelerators.gpu_execution_accelerator:
        need = max(need, 1)
    return need


def check(cfg: ModelConfig, host_gpus: int | None = None) -> list[Problem]:
    """What Triton would refuse in ``cfg``, and what a host with ``host_gpus`` GPUs cannot run."""
    problems: list[Problem] = []
    mbs = cfg.max_batch_size
    if mbs < 0:
        problems.append(Problem("max_batch_size", f"must be >= 0, got {mbs}"))
    if cfg.HasField("dynamic_batching"):
        db = cfg.dynamic_batching
        if mbs == 0:
            problems.append(Problem(
                "dynamic_batching",
                "dynamic batching with max_batch_size 0 forms no batches (Triton accepts it and ignores "
                "it): set max_batch_size > 0 or remove dynamic_batching"))
        for size in db.preferred_batch_size:
            if size <= 0:
                problems.append(Problem("dynamic_batching.preferred_batch_size",
                                        f"sizes must be > 0, got {size}"))
            elif mbs > 0 and size > mbs:
                problems.append(Problem(
                    "dynamic_batching.preferred_batch_size",
                    f"preferred batch size {size} > max_batch_size {mbs} "
                    "(Triton: dynamic batching preferred size must be <= max batch size)"))
    for i, group in enumerate(cfg.instance_group):
        field = f"instance_group[{i}]"
        if group.count < 0:
            problems.append(Problem(f"{field}.count", f"must be >= 0, got {group.count}"))
        if group.kind == KIND_CPU and group.gpus:
            problems.append(Problem(f"{field}.gpus", "GPU ids given for a KIND_CPU group"))
        if host_gpus is None:
            continue
        if group.kind == KIND_GPU and host_gpus == 0:
            problems.append(Problem(f"{field}.kind",
                                    "KIND_GPU on a host with no GPU: use KIND_CPU or a GPU node"))
        for gid in group.gpus:
            if host_gpus > 0 and (gid < 0 or gid >= host_gpus):
                problems.append(Problem(
                    f"{field}.gpus", f"GPU id {gid} does not exist on a host with {host_gpus} GPU(s)"))
    accel = cfg.optimization.execution_accelerators.gpu_execution_accelerator
    if accel and host_gpus == 0:
        names = ", ".join(a.name for a in accel)
        problems.append(Problem("optimization.execution_accelerators.gpu_execution_accelerator",
                                f"GPU accelerator ({names}) on a host with no GPU"))
    return problems


def adapt_to_host(cfg: ModelConfig, host_gpus: int) -> tuple[ModelConfig, list[str]]:
    """A copy of ``cfg`` that a host with ``host_gpus`` GPUs can run, and notes on what changed.

    With no GPU: KIND_GPU groups become KIND_CPU with the same total instance count, GPU
    accelerators are dropped. With fewer GPUs than addressed: GPU ids wrap onto the host's GPUs.
    """
    out = ModelConfig()
    out.CopyFrom(cfg)
    notes: list[str] = []
    if host_gpus <= 0:
        for i, group in enumerate(out.instance_group):
            if group.kind == KIND_GPU:
                total = max(group.count, 1) * max(len(group.gpus), 1)
                notes.append(f"instance_group[{i}]: KIND_GPU x{total} -> KIND_CPU x{total} (host has no GPU)")
                group.kind = KIND_CPU
                group.count = total
                del group.gpus[:]
        accel = out.optimization.execution_accelerators
        if accel.gpu_execution_accelerator:
            names = ", ".join(a.name for a in accel.gpu_execution_accelerator)
            notes.append(f"optimization: GPU accelerator {names} dropped (host has no GPU)")
            del accel.gpu_execution_accelerator[:]
        return out, notes
    for i, group in enumerate(out.instance_group):
        if group.kind == KIND_GPU and any(g >= host_gpus for g in group.gpus):
            wrapped = sorted({g % host_gpus for g in group.gpus})
            notes.append(f"instance_group[{i}]: gpus {list(group.gpus)} -> {wrapped} "
                         f"(host has {host_gpus} GPU(s))")
            # keep the instance count per GPU listed: fold the lost GPUs' instances onto the kept ones
            group.count = max(group.count, 1) * len(group.gpus) // len(wrapped)
            del group.gpus[:]
            group.gpus.extend(wrapped)
    return out, notes


def input_dims(cfg: ModelConfig) -> dict[str, list[int]]:
    """Model input name -> dims (without the batch dimension)."""
    return {inp.name: list(inp.dims) for inp in cfg.input}


def check_shapes(cfg: ModelConfig, shapes: dict[str, list[int]]) -> list[Problem]:
    """perf_analyzer ``--shape NAME:dims`` against the model's inputs (names, ranks, fixed dims)."""
    problems: list[Problem] = []
    dims = input_dims(cfg)
    for name, shape in shapes.items():
        if name not in dims:
            known = ", ".join(dims) or "none"
            problems.append(Problem(f"shapes.{name}",
                                    f"the model has no input named {name!r} (its inputs: {known})"))
            continue
        want = dims[name]
        if len(shape) != len(want):
            problems.append(Problem(f"shapes.{name}",
                                    f"shape {shape} has {len(shape)} dims, the input has {len(want)} {want}"))
            continue
        for got, exp in zip(shape, want):
            if exp != -1 and got != exp:
                problems.append(Problem(f"shapes.{name}", f"shape {shape} does not match the input's dims {want}"))
                break
    return problems
