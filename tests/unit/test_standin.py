from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort

from serve_system.standin import CLASSES, is_standin, write_onnx_standin


def test_standin_has_the_lab_signature_and_batches(tmp_path: Path) -> None:
    path = write_onnx_standin(tmp_path / "1" / "model.onnx")
    assert is_standin(path)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (inp,) = sess.get_inputs()
    (out,) = sess.get_outputs()
    assert inp.name == "input" and inp.shape[1:] == [3, 224, 224]
    assert out.name == "output" and out.shape[1:] == [len(CLASSES)]
    x = np.random.default_rng(0).random((5, 3, 224, 224), dtype=np.float32)
    (y,) = sess.run(None, {"input": x})
    assert y.shape == (5, 11) and y.dtype == np.float32
    # deterministic: the same seed gives the same model bytes
    assert write_onnx_standin(tmp_path / "b.onnx").read_bytes() == path.read_bytes()
