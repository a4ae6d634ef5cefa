"""serve-system ONNX shim: an ONNX model served by Triton's *Python* backend through onnxruntime.

Used only where Triton has no ONNX Runtime backend (the rehearsal Triton built from the
nvidia-pytriton wheel). The renderer copies this file to ``<model>/1/model.py`` and sets the model's
``backend: "python"`` and its ``serve_system_served_by`` parameter, so the model table, the config
and this log line all say that the model is NOT served by Triton's onnxruntime backend. Inputs and
outputs are read from the model's config, so any single-input ONNX model of the repository works.
Batches that Triton's dynamic batcher forms are run as one onnxruntime call.

A ``KIND_CPU`` instance runs on onnxruntime's CPUExecutionProvider; a ``KIND_GPU`` instance on its
CUDAExecutionProvider, on the instance's GPU, or the load is refused with the reason (never the CPU
in its place). The load-time log line says which provider runs it.
"""

import json
import os

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils


def session_for(name, path, options, kind, device_id):
    """The session of ``path`` and the provider running it: the CPU for a KIND_CPU instance, the
    CUDAExecutionProvider on ``device_id`` for a KIND_GPU one (refused where it cannot start)."""
    if kind != "gpu":
        session = ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])
        return session, "CPUExecutionProvider"
    available = ort.get_available_providers()
    if "CUDAExecutionProvider" not in available:
        raise pb_utils.TritonModelException(
            f"{name}: a KIND_GPU instance, but onnxruntime {ort.__version__} here has no "
            f"CUDAExecutionProvider (available: {', '.join(available)}): install onnxruntime-gpu in the "
            "Triton image, or give the model a KIND_CPU instance group")
    session = ort.InferenceSession(path, sess_options=options,
                                   providers=[("CUDAExecutionProvider", {"device_id": device_id})])
    if session.get_providers()[0] != "CUDAExecutionProvider":
        raise pb_utils.TritonModelException(
            f"{name}: a KIND_GPU instance, but onnxruntime's CUDAExecutionProvider did not start on GPU "
            f"{device_id} (it runs {', '.join(session.get_providers())}): check the CUDA and cuDNN "
            "libraries of the Triton image")
    return session, f"CUDAExecutionProvider, GPU {device_id}"


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
        kind = args.get("model_instance_kind", "cpu").lower()
        device_id = int(args.get("model_instance_device_id", 0))
        self.session, provider = session_for(config["name"], path, options, kind, device_id)
        note = config.get("parameters", {}).get("serve_system_weights", {}).get("string_value", "")
        print(
            f"{config['name']}: served by the serve-system ONNX shim (Python backend + onnxruntime "
            f"{ort.__version__}, {provider}), not by Triton's onnxruntime backend"
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
