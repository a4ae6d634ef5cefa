"""serve-system ONNX shim: an ONNX model served by Triton's *Python* backend through onnxruntime.

Used only where Triton has no ONNX Runtime backend (the rehearsal Triton built from the
nvidia-pytriton wheel). The renderer copies this file to ``<model>/1/model.py`` and sets the model's
``backend: "python"`` and its ``serve_system_served_by`` parameter, so the model table, the config
and this log line all say that the model is NOT served by Triton's onnxruntime backend. Inputs and
outputs are read from the model's config, so any single-input ONNX model of the repository works.
Batches that Triton's dynamic batcher forms are run as one onnxruntime call.
"""

import json
import os

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.inputs = [i["name"] for i in config["input"]]
        self.outputs = [(o["name"], pb_utils.triton_string_to_numpy(o["data_type"]))
                        for o in config["output"]]
        path = os.path.join(os.path.dirname(__file__), "model.onnx")
        options = ort.SessionOptions()
        threads_param = config.get("parameters", {}).get("serve_system_ort_threads", {})
        threads = int(threads_param.get("string_value", "0"))
        if threads:
            options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])
        note = config.get("parameters", {}).get("serve_system_weights", {}).get("string_value", "")
        print(
            f"{config['name']}: served by the serve-system ONNX shim (Python backend + onnxruntime "
            f"{ort.__version__}, CPU), not by Triton's onnxruntime backend"
            + (f"; weights: {note}" if note else ""),
            flush=True,
        )

    def execute(self, requests):
        feeds = {name: [] for name in self.inputs}
        counts = []
        for request in requests:
            arrays = [pb_utils.get_input_tensor_by_name(request, name).as_numpy() for name in self.inputs]
            counts.append(arrays[0].shape[0])
            for name, arr in zip(self.inputs, arrays):
                feeds[name].append(arr)
        batch = {name: np.concatenate(parts, axis=0) for name, parts in feeds.items()}
        results = self.session.run([name for name, _ in self.outputs], batch)
        responses, start = [], 0
        for n in counts:
            tensors = [
                pb_utils.Tensor(name, np.ascontiguousarray(res[start:start + n]).astype(dtype))
                for (name, dtype), res in zip(self.outputs, results)
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
            start += n
        return responses
