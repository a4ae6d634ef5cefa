"""What a stand-in model costs: parameters, multiply-accumulates and CPU time.

:func:`measure` counts a stand-in's (:mod:`serve_system.standin`) parameters and multiply-accumulates
(from the tensor shapes of a real run) and times one request on this machine's CPU; ``serve-system
models standins`` prints the table.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .standin import standin_bytes, standin_for


@dataclass(frozen=True)
class Measurement:
    model: str
    replaces: str
    architecture: str
    parameters: int
    macs: int  # multiply-accumulates for one request (batch 1); FLOPs ~ 2 x MACs
    cpu_ms_p50: float  # one request (batch 1), onnxruntime CPU, median wall-clock time
    cpu_ms_per_item_b8: float  # a batch of 8, per item (median wall-clock time / 8)
    cpu_time_ms: float  # processor time (user + system, all threads) per batch-1 request: load-independent
    size_bytes: int
    threads: int


def count_parameters(model: Any) -> int:
    from onnx import numpy_helper

    return int(sum(numpy_helper.to_array(t).size for t in model.graph.initializer
                   if t.data_type == 1))  # FLOAT initializers: weights (shape constants are INT64)


def count_macs(model: Any, feeds: dict[str, np.ndarray]) -> int:
    """Multiply-accumulates of Conv, MatMul and Gemm, from every tensor's shape in a real run."""
    import onnx
    import onnxruntime as ort

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    have = {o.name for o in probe.graph.output}
    for node in probe.graph.node:
        for out in node.output:
            if out and out not in have:
                probe.graph.output.append(onnx.ValueInfoProto(name=out))
                have.add(out)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    shapes = dict(zip(names, (np.shape(a) for a in sess.run(names, feeds))))
    shapes.update({k: v.shape for k, v in feeds.items()})
    shapes.update({t.name: tuple(t.dims) for t in model.graph.initializer})
    macs = 0
    for node in model.graph.node:
        out = shapes[node.output[0]]
        if node.op_type == "Conv":
            kshape = shapes[node.input[1]]  # [Cout, Cin/group, kh, kw]
            macs += int(np.prod(out)) * int(np.prod(kshape[1:]))
        elif node.op_type in ("MatMul", "Gemm"):
            a = shapes[node.input[0]]
            trans_a = node.op_type == "Gemm" and any(at.name == "transA" and at.i for at in node.attribute)
            k = a[0] if trans_a else a[-1]
            macs += int(np.prod(out)) * int(k)
    return macs


def measure(model: str, repeats: int = 20) -> Measurement:
    """Parameters, MACs and CPU time (onnxruntime, this machine) of one stand-in."""
    import onnxruntime as ort

    spec = standin_for(model)
    proto = spec.build()
    data = standin_bytes(model)
    rng = np.random.default_rng(0)
    one, eight = spec.feeds(1, rng), spec.feeds(8, rng)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])

    cpu: list[float] = []

    def timed(feeds: dict[str, np.ndarray], n: int) -> float:
        sess.run(None, feeds)  # warm-up
        times = []
        c0 = time.process_time()
        for _ in range(n):
            t0 = time.perf_counter()
            sess.run(None, feeds)
            times.append((time.perf_counter() - t0) * 1000.0)
        cpu.append((time.process_time() - c0) * 1000.0 / n)
        return statistics.median(times)

    arch = next(p.value for p in proto.metadata_props if p.key == "serve_system_architecture")
    import os

    b1 = timed(one, repeats)
    return Measurement(model=model, replaces=spec.replaces, architecture=arch,
                       parameters=count_parameters(proto), macs=count_macs(proto, one),
                       cpu_ms_p50=b1, cpu_ms_per_item_b8=timed(eight, max(repeats // 4, 3)) / 8,
                       cpu_time_ms=cpu[0], size_bytes=len(data), threads=os.cpu_count() or 1)
