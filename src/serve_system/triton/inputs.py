"""A model's inputs against perf_analyzer's shapes: the dims, the ``--shape`` check, a request's size."""

from __future__ import annotations

import math

from .pbtxt import ModelConfig, Problem
from .protos import model_config_pb2


def input_dims(cfg: ModelConfig) -> dict[str, list[int]]:
    """Model input name -> dims (without the batch dimension)."""
    return {inp.name: list(inp.dims) for inp in cfg.input}


#: bytes per element of Triton's fixed-size data types (TYPE_STRING has none)
_DTYPE_BYTES = {"TYPE_BOOL": 1, "TYPE_UINT8": 1, "TYPE_INT8": 1, "TYPE_UINT16": 2, "TYPE_INT16": 2,
                "TYPE_FP16": 2, "TYPE_BF16": 2, "TYPE_UINT32": 4, "TYPE_INT32": 4, "TYPE_FP32": 4,
                "TYPE_UINT64": 8, "TYPE_INT64": 8, "TYPE_FP64": 8}


def request_bytes(cfg: ModelConfig, shapes: dict[str, list[int]], batch_size: int) -> int | None:
    """Bytes of the input tensors of one request perf_analyzer generates (``--shape`` over the config's
    dims); None when a size is unknown (a variable dim without a shape, a string input)."""
    total = 0
    for inp in cfg.input:
        dims = shapes.get(inp.name) or list(inp.dims)
        size = _DTYPE_BYTES.get(model_config_pb2.DataType.Name(inp.data_type))
        if size is None or any(d < 0 for d in dims):
            return None
        total += math.prod(dims) * size
    return total * max(batch_size, 1) if cfg.input else None


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
                problems.append(Problem(f"shapes.{name}", f"shape {shape} does not match the input's dims "
                                                          f"{want}"))
                break
    return problems
