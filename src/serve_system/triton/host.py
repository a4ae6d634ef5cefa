"""What a host can run: the GPUs a configuration addresses, TensorRT's compute capability, the host's
refusals, and the GPU-to-CPU (and below-TensorRT) rewrite of a configuration for a host."""

from __future__ import annotations

import re

from .backends import filled_backend
from .pbtxt import KIND_CPU, KIND_GPU, ModelConfig, Problem

#: TensorRT 10, the version in Triton 24.10 (the lab's image), runs on GPUs of compute capability 7.0
#: (Volta) or newer: Chameleon's gpu_p100 nodes are Pascal (6.0), where a TensorRT accelerator or a
#: TensorRT plan fails to load (TensorRT 10's support matrix)
TENSORRT_MIN_COMPUTE_CAPABILITY = 7.0


#: NVIDIA's table of compute capabilities (developer.nvidia.com/cuda-gpus) for the data-centre and
#: workstation GPUs a testbed has, by the model in the name ``nvidia-smi --query-gpu=name`` prints
#: ("Tesla P100-PCIE-16GB", "NVIDIA A100-PCIE-40GB", "Quadro RTX 6000"): the fallback where the driver
#: refuses ``--query-gpu=compute_cap`` (older drivers, e.g. 470, do)
GPU_COMPUTE_CAPABILITY: tuple[tuple[str, float], ...] = (
    (r"K80", 3.7), (r"K40", 3.5), (r"M40", 5.2), (r"M60", 5.2), (r"P4", 6.1), (r"P40", 6.1),
    (r"P100", 6.0), (r"V100", 7.0), (r"T4", 7.5), (r"RTX 6000", 7.5), (r"RTX 8000", 7.5),
    (r"A100", 8.0), (r"A30", 8.0), (r"A10", 8.6), (r"A16", 8.6), (r"A40", 8.6), (r"RTX A6000", 8.6),
    (r"L4", 8.9), (r"L40S?", 8.9), (r"H100", 9.0), (r"H200", 9.0), (r"GH200", 9.0), (r"B200", 10.0),
)
_GPU_MODELS = tuple((re.compile(rf"(?<![A-Z0-9]){model}(?![A-Z0-9])"), cap)
                    for model, cap in GPU_COMPUTE_CAPABILITY)


def compute_capability_of(name: str) -> float | None:
    """The compute capability of a GPU by the name nvidia-smi prints for it (None: not in the table);
    the longest model that matches wins ("GH200" over "H200", "RTX 6000" over nothing shorter)."""
    upper = " ".join(name.upper().replace("-", " ").split())
    found = [(len(rx.pattern), cap) for rx, cap in _GPU_MODELS if rx.search(upper)]
    return max(found)[1] if found else None


def tensorrt_accelerators(cfg: ModelConfig) -> list[str]:
    """Names of the GPU execution accelerators of ``cfg`` that are TensorRT."""
    return [a.name for a in cfg.optimization.execution_accelerators.gpu_execution_accelerator
            if a.name.lower() == "tensorrt"]


def below_tensorrt(compute_capability: float | None) -> bool:
    """Whether GPUs of ``compute_capability`` (None: unknown) are too old for TensorRT 10."""
    return compute_capability is not None and compute_capability < TENSORRT_MIN_COMPUTE_CAPABILITY


def needs_adapting(cfg: ModelConfig, host_gpus: int, compute_capability: float | None = None) -> bool:
    """Whether a host with ``host_gpus`` GPUs of ``compute_capability`` (the lowest; None: unknown)
    cannot run ``cfg`` as written, in a way :func:`adapt_to_host` can mend."""
    if gpus_needed(cfg) > host_gpus:
        return True
    return host_gpus > 0 and below_tensorrt(compute_capability) and bool(tensorrt_accelerators(cfg))


def gpus_needed(cfg: ModelConfig) -> int:
    """How many GPUs the configuration addresses (highest GPU id + 1; 1 for KIND_GPU without ids)."""
    need = 0
    for group in cfg.instance_group:
        if group.kind == KIND_GPU:
            need = max(need, (max(group.gpus) + 1) if group.gpus else 1)
    if cfg.optimization.execution_accelerators.gpu_execution_accelerator:
        need = max(need, 1)
    return need


def host_problems(cfg: ModelConfig, host_gpus: int, folder: str | None = None,
                  compute_capability: float | None = None) -> list[Problem]:
    """What a host with ``host_gpus`` GPUs (the lowest ``compute_capability`` among them, where known)
    cannot run of ``cfg`` (``folder``: the model's folder name, for the backend Triton fills in)."""
    problems: list[Problem] = []
    if host_gpus > 0 and below_tensorrt(compute_capability):
        need = f"{TENSORRT_MIN_COMPUTE_CAPABILITY:.1f}"
        if tensorrt_accelerators(cfg):
            problems.append(Problem(
                "optimization.execution_accelerators.gpu_execution_accelerator",
                f"TensorRT accelerator on GPUs of compute capability {compute_capability:.1f}: TensorRT 10 "
                f"needs {need} or more; drop it, or run on a newer GPU"))
        if filled_backend(cfg, folder) == "tensorrt":
            problems.append(Problem(
                "platform", f"a TensorRT plan on GPUs of compute capability {compute_capability:.1f}: "
                            f"TensorRT 10 needs {need} or more; serve the ONNX model instead"))
    for i, group in enumerate(cfg.instance_group):
        field = f"instance_group[{i}]"
        if group.kind == KIND_GPU and host_gpus == 0:
            problems.append(Problem(f"{field}.kind",
                                    "KIND_GPU on a host with no GPU: use KIND_CPU or a GPU node"))
        for gid in group.gpus:
            if host_gpus > 0 and gid >= host_gpus:
                problems.append(Problem(
                    f"{field}.gpus", f"GPU id {gid} does not exist on a host with {host_gpus} GPU(s)"))
    accel = cfg.optimization.execution_accelerators.gpu_execution_accelerator
    if accel and host_gpus == 0:
        names = ", ".join(a.name for a in accel)
        problems.append(Problem("optimization.execution_accelerators.gpu_execution_accelerator",
                                f"GPU accelerator ({names}) on a host with no GPU"))
    return problems


def adapt_to_host(cfg: ModelConfig, host_gpus: int,
                  compute_capability: float | None = None) -> tuple[ModelConfig, list[str]]:
    """A copy of ``cfg`` that a host with ``host_gpus`` GPUs can run, and notes on what changed.

    With no GPU: KIND_GPU groups become KIND_CPU with the same total instance count, GPU
    accelerators are dropped. With fewer GPUs than addressed: GPU ids wrap onto the host's GPUs.
    On GPUs below TensorRT's compute capability (``compute_capability``, the lowest of the host's;
    None when unknown): TensorRT accelerators are dropped (the model runs on its backend alone).
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
    if below_tensorrt(compute_capability) and tensorrt_accelerators(out):
        accel = out.optimization.execution_accelerators.gpu_execution_accelerator
        for i in reversed(range(len(accel))):
            if accel[i].name.lower() == "tensorrt":
                del accel[i]
        notes.append(f"optimization: GPU accelerator tensorrt dropped (TensorRT 10 needs compute capability "
                     f"{TENSORRT_MIN_COMPUTE_CAPABILITY:.1f}; the host's GPUs have {compute_capability:.1f})")
    return out, notes
