"""Filters of role serve_stack's CUDA check (the logic is serve_system.gpuroute, the one place of it).

    {{ 'python3' | serve_stack_cuda_probe }}
        the check container's command: ``[python, "-c", probe]`` (cuInit(0) through the driver's
        libcuda.so.1, one marked JSON line)
    {{ docker_container_result | serve_stack_cuda_verdict(host, image, nvidia_ctk_version_stdout, gpus) }}
        ``{"ok": bool, "msg": one line}``: on failure the line names the toolkit version, the CUresult and
        the fix
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from serve_system import gpuroute


def serve_stack_cuda_probe(python: str) -> list[str]:
    return [python, "-c", gpuroute.CUDA_PROBE]


def serve_stack_cuda_verdict(run: Mapping[str, Any], host: str, image: str, ctk_stdout: str,
                             gpus: int) -> dict[str, Any]:
    return gpuroute.cuda_verdict(run, host, image, ctk_stdout, int(gpus))


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"serve_stack_cuda_probe": serve_stack_cuda_probe,
                "serve_stack_cuda_verdict": serve_stack_cuda_verdict}
