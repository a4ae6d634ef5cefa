"""Stand-in models that compute like the lab's, generated locally (no download).

The lab's weights (food11.pth / model.onnx, the BLIP export, the MNIST write-up's model, the DLI
course's BERT-QA) are not committed and cannot be fetched offline. Where they are missing
(rehearsal nodes, CI), the tool generates a stand-in for each: an ONNX graph with the exact
signature of the real model (input and output names, dtypes, dims), an architecture of the same
kind and a comparable amount of compute, deterministic random weights, and a marker in its
metadata (and, once rendered, in the model's ``serve_system_weights`` config parameter) so every
output that uses it can say so. Predictions are meaningless; shapes, batching and compute are real.

==========================  ===================================================================
model (repository name)     stand-in
==========================  ===================================================================
``food_classifier``,        MobileNetV2 (width 1.0, 224x224, BatchNorm folded into the convs)
``food_classifier_onnx``    with an 11-class head: ``input`` [N,3,224,224] -> ``output`` [N,11]
``onnx-mnist-cpu``          two 3x3 convolutions, max-pool, two dense layers:
                            ``input.1`` [N,1,28,28] -> ``19`` [N,10]
``blip``                    ViT-style patch encoder (16x16 patches, 2 layers) and a 1-layer text
                            decoder with cross-attention, tied 30524-word head:
                            ``pixel_values`` [N,3,384,384], ``input_ids``/``attention_mask`` [N,S]
                            -> ``logits`` [N,S,30524]
``bertQA-onnx``             BERT encoder (2 layers, hidden 128, the BERT-Tiny shape) with a
                            start/end head: ``input__0..2`` [N,384] INT64 -> ``output__0..1``
                            [N,384] FP32
==========================  ===================================================================

What each costs (parameters, multiply-accumulates, CPU time) is measured by :mod:`serve_system.modelcost`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: Food-11 class labels, in the lab's order
CLASSES: tuple[str, ...] = (
    "Bread", "Dairy product", "Dessert", "Egg", "Fried food",
    "Meat", "Noodles/Pasta", "Rice", "Seafood", "Soup", "Vegetable/Fruit",
)
#: metadata key/value that marks a generated stand-in model
STANDIN_KEY = "serve_system_standin"
STANDIN_NOTE = "generated stand-in model (random weights, real signature): predictions are meaningless"
OPSET = 17
BLIP_VOCAB = 30524
BERT_VOCAB = 30522
BERT_SEQ = 384


class _Graph:
    """A small ONNX graph builder: nodes, deterministic initializers, unique names."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._n = 0

    def name(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}_{self._n}"

    def const(self, array: np.ndarray, prefix: str = "w") -> str:
        from onnx import numpy_helper

        name = self.name(prefix)
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def weight(self, shape: tuple[int, ...], fan_in: int, prefix: str = "w") -> str:
        """He-normal weights (keeps activations in range through deep ReLU stacks)."""
        std = float(np.sqrt(2.0 / max(fan_in, 1)))
        return self.const(self.rng.normal(0.0, std, size=shape).astype(np.float32), prefix)

    def bias(self, n: int) -> str:
        return self.const(self.rng.normal(0.0, 0.01, size=(n,)).astype(np.float32), "b")

    def ints(self, values: list[int]) -> str:
        return self.const(np.array(values, dtype=np.int64), "shape")

    def op(self, op_type: str, inputs: list[str], output: str | None = None, **attrs: Any) -> str:
        return self.ops(op_type, inputs, [output or self.name(op_type.lower())], **attrs)[0]

    def ops(self, op_type: str, inputs: list[str], outputs: list[str], **attrs: Any) -> list[str]:
        from onnx import helper

        self.nodes.append(helper.make_node(op_type, inputs, outputs, **attrs))
        return outputs

    # -- layers ---------------------------------------------------------------------------
    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1,
             act: str | None = "relu6", pad: int | None = None) -> str:
        w = self.weight((cout, cin // group, k, k), fan_in=cin // group * k * k)
        pad = (k - 1) // 2 if pad is None else pad
        y = self.op("Conv", [x, w, self.bias(cout)], kernel_shape=[k, k], strides=[stride, stride],
                    pads=[pad] * 4, group=group)
        if act == "relu6":
            y = self.op("Clip", [y, self.const(np.array(0.0, np.float32)),
                                 self.const(np.array(6.0, np.float32))])
        elif act == "relu":
            y = self.op("Relu", [y])
        return y

    def dense(self, x: str, din: int, dout: int) -> str:
        return self.op("Add", [self.op("MatMul", [x, self.weight((din, dout), fan_in=din)]), self.bias(dout)])

    def layer_norm(self, x: str, d: int) -> str:
        return self.op("LayerNormalization", [x, self.const(np.ones(d, np.float32)),
                                              self.const(np.zeros(d, np.float32))], axis=-1, epsilon=1e-6)

    def gelu(self, x: str) -> str:
        erf = self.op("Erf", [self.op("Div", [x, self.const(np.array(np.sqrt(2.0), np.float32))])])
        one_plus = self.op("Add", [erf, self.const(np.array(1.0, np.float32))])
        return self.op("Mul", [self.op("Mul", [x, one_plus]), self.const(np.array(0.5, np.float32))])

    def heads(self, x: str, heads: int, dh: int) -> str:
        """[N,S,H*dh] -> [N,H,S,dh]"""
        return self.op("Transpose", [self.op("Reshape", [x, self.ints([0, 0, heads, dh])])],
                       perm=[0, 2, 1, 3])

    def attention(self, q_in: str, kv_in: str, d: int, heads: int, mask: str | None = None) -> str:
        """Multi-head attention (q from ``q_in``, keys/values from ``kv_in``); ``mask`` is additive."""
        dh = d // heads
        q = self.heads(self.dense(q_in, d, d), heads, dh)
        k = self.heads(self.dense(kv_in, d, d), heads, dh)
        v = self.heads(self.dense(kv_in, d, d), heads, dh)
        scores = self.op("Div", [self.op("MatMul", [q, self.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                                 self.const(np.array(np.sqrt(dh), np.float32))])
        if mask is not None:
            scores = self.op("Add", [scores, mask])
        ctx = self.op("MatMul", [self.op("Softmax", [scores], axis=-1), v])
        ctx = self.op("Reshape", [self.op("Transpose", [ctx], perm=[0, 2, 1, 3]), self.ints([0, 0, d])])
        return self.dense(ctx, d, d)

    def mlp(self, x: str, d: int, hidden: int) -> str:
        return self.dense(self.gelu(self.dense(x, d, hidden)), hidden, d)

    def encoder_layer(self, x: str, d: int, heads: int, mask: str | None = None) -> str:
        """Post-norm (BERT-style) transformer encoder layer."""
        x = self.layer_norm(self.op("Add", [x, self.attention(x, x, d, heads, mask)]), d)
        return self.layer_norm(self.op("Add", [x, self.mlp(x, d, 4 * d)]), d)

    def additive_mask(self, mask_i64: str) -> str:
        """attention_mask [N,S] (1 = attend) -> additive [N,1,1,S] (0 or -10000)."""
        m = self.op("Cast", [mask_i64], to=1)
        m = self.op("Mul", [self.op("Sub", [self.const(np.array(1.0, np.float32)), m]),
                            self.const(np.array(-10000.0, np.float32))])
        return self.op("Unsqueeze", [m, self.ints([1, 2])])

    def lookup(self, table: str, ids: str, rows: int) -> str:
        """Embedding rows of ``ids`` (taken modulo ``rows``: random benchmark ids stay in range)."""
        return self.op("Gather", [table, self.op("Mod", [ids, self.const(np.array(rows, np.int64))])])

    def positions(self, ids: str, table: str) -> str:
        """Rows 0..S-1 of a position table, S taken from ``ids`` [N,S] at run time."""
        seq = self.op("Slice", [self.op("Shape", [ids]), self.ints([1]), self.ints([2])])
        return self.op("Slice", [table, self.ints([0]), seq, self.ints([0])])

    def model(self, name: str, inputs: list[Any], outputs: list[Any], doc: str) -> Any:
        import onnx
        from onnx import helper

        graph = helper.make_graph(self.nodes, name, inputs, outputs, initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="serve-system")
        model.ir_version = 8  # readable by every onnxruntime >= 1.10
        model.doc_string = doc
        helper.set_model_props(model, {STANDIN_KEY: STANDIN_NOTE, "serve_system_architecture": doc})
        onnx.checker.check_model(model)
        return model


def _vi(name: str, elem: int, dims: list[int | str]) -> Any:
    from onnx import helper

    return helper.make_tensor_value_info(name, elem, dims)


# MobileNetV2's inverted-residual settings: expansion t, channels c, repeats n, first stride s
_MOBILENET_V2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                 (6, 320, 1, 1))


def food11_model(seed: int = 11) -> Any:
    """MobileNetV2 (width 1.0) for 224x224 images with the Food-11 head: ``input`` -> ``output``."""
    from onnx import TensorProto

    g = _Graph(seed)
    x = g.conv("input", 3, 32, 3, stride=2)
    cin = 32
    for t, c, n, s in _MOBILENET_V2:
        for i in range(n):
            hidden = cin * t
            y = g.conv(x, cin, hidden, 1) if t != 1 else x
            y = g.conv(y, hidden, hidden, 3, stride=s if i == 0 else 1, group=hidden)
            y = g.conv(y, hidden, c, 1, act=None)
            x = g.op("Add", [x, y]) if (i > 0 and cin == c) else y
            cin = c
    x = g.conv(x, cin, 1280, 1)
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])])
    g.op("Gemm", [x, g.weight((1280, len(CLASSES)), fan_in=1280), g.bias(len(CLASSES))], output="output")
    return g.model(
        "food11_mobilenet_v2_standin",
        [_vi("input", TensorProto.FLOAT, ["batch", 3, 224, 224])],
        [_vi("output", TensorProto.FLOAT, ["batch", len(CLASSES)])],
        "MobileNetV2 (width 1.0, 224x224, BatchNorm folded) with an 11-class Food-11 head",
    )


def mnist_model(seed: int = 28) -> Any:
    """The MNIST write-up's signature (``input.1`` [N,1,28,28] -> ``19`` [N,10]), a small CNN."""
    from onnx import TensorProto

    g = _Graph(seed)
    x = g.conv("input.1", 1, 32, 3, act="relu")
    x = g.conv(x, 32, 64, 3, act="relu")
    x = g.op("Flatten", [g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])])
    x = g.op("Relu", [g.op("Gemm", [x, g.weight((64 * 14 * 14, 128), fan_in=64 * 14 * 14), g.bias(128)])])
    g.op("Gemm", [x, g.weight((128, 10), fan_in=128), g.bias(10)], output="19")
    return g.model(
        "mnist_cnn_standin",
        [_vi("input.1", TensorProto.FLOAT, ["batch", 1, 28, 28])],
        [_vi("19", TensorProto.FLOAT, ["batch", 10])],
        "CNN: conv3x3(32)-ReLU-conv3x3(64)-ReLU-maxpool2-dense(128)-ReLU-dense(10)",
    )


def blip_model(seed: int = 384, d: int = 256, heads: int = 4, vision_layers: int = 2) -> Any:
    """BLIP's captioning signature: image patches encoded, a text layer attending to them, logits."""
    from onnx import TensorProto

    g = _Graph(seed)
    patches = g.conv("pixel_values", 3, d, 16, stride=16, act=None, pad=0)  # [N,d,24,24]
    tokens = g.op("Transpose", [g.op("Reshape", [patches, g.ints([0, d, -1])])], perm=[0, 2, 1])  # [N,576,d]
    x = g.op("Add", [tokens, g.const(g.rng.normal(0, 0.02, size=(576, d)).astype(np.float32), "pos")])
    for _ in range(vision_layers):
        x = g.encoder_layer(x, d, heads)
    image = g.layer_norm(x, d)

    emb = g.const(g.rng.normal(0, 0.02, size=(BLIP_VOCAB, d)).astype(np.float32), "word_emb")
    pos = g.const(g.rng.normal(0, 0.02, size=(512, d)).astype(np.float32), "text_pos")
    t = g.op("Add", [g.lookup(emb, "input_ids", BLIP_VOCAB), g.positions("input_ids", pos)])
    mask = g.additive_mask("attention_mask")
    t = g.layer_norm(g.op("Add", [t, g.attention(t, t, d, heads, mask)]), d)
    t = g.layer_norm(g.op("Add", [t, g.attention(t, image, d, heads)]), d)
    t = g.layer_norm(g.op("Add", [t, g.mlp(t, d, 4 * d)]), d)
    g.op("MatMul", [t, g.op("Transpose", [emb], perm=[1, 0])], output="logits")
    return g.model(
        "blip_caption_standin",
        [_vi("pixel_values", TensorProto.FLOAT, ["batch", 3, 384, 384]),
         _vi("input_ids", TensorProto.INT64, ["batch", "seq"]),
         _vi("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [_vi("logits", TensorProto.FLOAT, ["batch", "seq", BLIP_VOCAB])],
        f"ViT-style image encoder (16x16 patches, {vision_layers} layers, hidden {d}) + 1-layer text decoder "
        f"with cross-attention and a tied {BLIP_VOCAB}-word head",
    )


def bert_qa_model(seed: int = 30, d: int = 128, heads: int = 2, layers: int = 2) -> Any:
    """The DLI course's BERT-QA signature (``input__0..2`` -> ``output__0..1``), BERT-Tiny sized."""
    from onnx import TensorProto

    g = _Graph(seed)
    words = g.const(g.rng.normal(0, 0.02, size=(BERT_VOCAB, d)).astype(np.float32), "word_emb")
    types = g.const(g.rng.normal(0, 0.02, size=(2, d)).astype(np.float32), "type_emb")
    pos = g.const(g.rng.normal(0, 0.02, size=(512, d)).astype(np.float32), "pos_emb")
    x = g.op("Add", [g.lookup(words, "input__0", BERT_VOCAB), g.lookup(types, "input__1", 2)])
    x = g.layer_norm(g.op("Add", [x, g.positions("input__0", pos)]), d)
    mask = g.additive_mask("input__2")
    for _ in range(layers):
        x = g.encoder_layer(x, d, heads, mask)
    logits = g.dense(x, d, 2)  # [N,S,2]
    start, end = g.ops("Split", [logits, g.ints([1, 1])], [g.name("start"), g.name("end")], axis=-1)
    g.op("Squeeze", [start, g.ints([-1])], output="output__0")
    g.op("Squeeze", [end, g.ints([-1])], output="output__1")
    return g.model(
        "bert_qa_standin",
        [_vi(f"input__{i}", TensorProto.INT64, ["batch", BERT_SEQ]) for i in range(3)],
        [_vi(f"output__{i}", TensorProto.FLOAT, ["batch", BERT_SEQ]) for i in range(2)],
        f"BERT encoder ({layers} layers, hidden {d}, {heads} heads, vocabulary {BERT_VOCAB}) with a "
        "start/end-logit head; inputs: token ids, token type ids, attention mask",
    )


# ------------------------------------------------------------------------------------ catalogue

def _food11_feeds(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"input": rng.standard_normal((n, 3, 224, 224), dtype=np.float32)}


def _mnist_feeds(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"input.1": rng.random((n, 1, 28, 28), dtype=np.float32)}


def _blip_feeds(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"pixel_values": rng.standard_normal((n, 3, 384, 384), dtype=np.float32),
            "input_ids": rng.integers(0, BLIP_VOCAB, size=(n, 16), dtype=np.int64),
            "attention_mask": np.ones((n, 16), dtype=np.int64)}


def _bert_feeds(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"input__0": rng.integers(0, BERT_VOCAB, size=(n, BERT_SEQ), dtype=np.int64),
            "input__1": np.zeros((n, BERT_SEQ), dtype=np.int64),
            "input__2": np.ones((n, BERT_SEQ), dtype=np.int64)}


@dataclass(frozen=True)
class StandIn:
    """A stand-in: what it replaces, how to build it and sample inputs for one request."""

    key: str
    replaces: str
    build: Callable[[], Any]
    feeds: Callable[[int, np.random.Generator], dict[str, np.ndarray]]


_FOOD11 = StandIn("food11", "the lab's Food-11 classifier (food11.pth / model.onnx)", food11_model,
                  _food11_feeds)
#: stand-ins by model name in model_repository/
STANDINS: dict[str, StandIn] = {
    "food_classifier": _FOOD11,
    "food_classifier_onnx": _FOOD11,
    "onnx-mnist-cpu": StandIn("mnist", "the MNIST write-up's onnx-mnist-cpu model", mnist_model,
                              _mnist_feeds),
    "blip": StandIn("blip", "the BLIP captioning tutorial's model.onnx", blip_model, _blip_feeds),
    "bertQA-onnx": StandIn("bert_qa", "the DLI course's BERT-QA ONNX export", bert_qa_model, _bert_feeds),
}


def standin_for(model: str) -> StandIn:
    from .errors import ServeSystemError

    try:
        return STANDINS[model]
    except KeyError:
        raise ServeSystemError(
            f"no stand-in for model {model!r} (stand-ins exist for {', '.join(sorted(STANDINS))}): "
            "give its weights instead") from None


@functools.lru_cache(maxsize=8)
def _standin_bytes(key: str) -> bytes:
    """Built once per machine: cached under the cache directory by a digest of this module's source
    and the versions of numpy and onnx (whatever changes the bytes changes the file name), since
    building one takes about a second and ``models render`` runs once per node on every site.yml.
    Where the image builder is absent (the FastAPI image carries this module alone) or the cache
    cannot be written, the model is just built."""
    spec = next(s for s in STANDINS.values() if s.key == key)
    try:
        from .images.build import cache_dir
    except ImportError:
        return bytes(spec.build().SerializeToString())
    import hashlib
    from importlib.metadata import version

    recipe = f"{key} numpy {np.__version__} onnx {version('onnx')} ".encode() + Path(__file__).read_bytes()
    path = cache_dir() / "standins" / f"{key}-{hashlib.sha256(recipe).hexdigest()[:16]}.onnx"
    if path.is_file():
        return path.read_bytes()
    data = bytes(spec.build().SerializeToString())
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        tmp.replace(path)  # atomic: nodes rendered at once never read half a file
    except OSError:
        tmp.unlink(missing_ok=True)
    return data


def standin_bytes(model: str) -> bytes:
    """Serialized stand-in ONNX model for ``model`` (deterministic: same bytes every call)."""
    return _standin_bytes(standin_for(model).key)


def onnx_standin_bytes(seed: int = 11) -> bytes:
    """The Food-11 stand-in (kept for callers that only know the food classifier)."""
    if seed == 11:
        return standin_bytes("food_classifier_onnx")
    return bytes(food11_model(seed).SerializeToString())


def write_onnx_standin(path: Path, seed: int = 11, model: str = "food_classifier_onnx") -> Path:
    """Write a stand-in ONNX model to ``path`` (parents created) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(onnx_standin_bytes(seed) if model == "food_classifier_onnx" else standin_bytes(model))
    return path


def is_standin(onnx_path: Path) -> bool:
    """True when ``onnx_path`` is a stand-in generated here."""
    import onnx

    model = onnx.load(str(onnx_path), load_external_data=False)
    return any(p.key == STANDIN_KEY for p in model.metadata_props)
