"""The lab's Food-11 classifier on Triton's Python backend, with batched execution.

Input ``INPUT_IMAGE`` (TYPE_STRING [1]): base64-encoded image bytes (the lab's Flask app sends them so).
Outputs ``FOOD_LABEL`` (TYPE_STRING [1]) and ``PROBABILITY`` (TYPE_FP32 [1], sigmoid of the top logit).

Weights, in order of preference (parameter ``serve_system_engine``: ``auto``, ``pytorch`` or ``onnx``):

1. ``food11.pth`` next to this file (the lab's PyTorch model, copied by the serve_stack role from the
   lab's repository), when ``torch`` is importable in the Triton image; on a GPU node the role sets
   ``serve_system_engine: pytorch``, so the lab's model runs through torch or not at all;
2. ``model.onnx`` next to this file, run with onnxruntime: the lab's own ONNX export (nodes without
   GPUs), or the generated stand-in (same signature, random weights; its labels are meaningless, and
   the load-time log line and the ``serve_system_weights`` config parameter say so).

A ``KIND_GPU`` instance runs on its GPU or refuses to load, with the reason: torch on ``cuda:<id>``, or
onnxruntime's CUDAExecutionProvider on that device. It never runs on the CPU silently. The log line
says which engine, provider and device serve.
"""

import base64
import io
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils
from PIL import Image

CLASSES = np.array([
    "Bread", "Dairy product", "Dessert", "Egg", "Fried food",
    "Meat", "Noodles/Pasta", "Rice", "Seafood", "Soup",
    "Vegetable/Fruit",
], dtype=object)
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(3, 1, 1)


#: the metadata key of a generated stand-in ONNX model (serve_system.standin.STANDIN_KEY)
STANDIN_KEY = "serve_system_standin"


def ort_version():
    import onnxruntime as ort

    return ort.__version__


def onnx_session(path, kind, device_id):
    """An onnxruntime session of ``path`` and the provider that runs it: a KIND_GPU instance gets the
    CUDAExecutionProvider on its device, or the load is refused (never the CPU in its place)."""
    import onnxruntime as ort

    if kind != "gpu":
        return ort.InferenceSession(path, providers=["CPUExecutionProvider"]), "CPUExecutionProvider"
    available = ort.get_available_providers()
    if "CUDAExecutionProvider" not in available:
        raise pb_utils.TritonModelException(
            f"food_classifier: a KIND_GPU instance, but onnxruntime {ort.__version__} here has no "
            f"CUDAExecutionProvider (available: {', '.join(available)}): install onnxruntime-gpu in the Triton "
            "image, or give the model a KIND_CPU instance group")
    session = ort.InferenceSession(path, providers=[("CUDAExecutionProvider", {"device_id": device_id})])
    if session.get_providers()[0] != "CUDAExecutionProvider":
        raise pb_utils.TritonModelException(
            f"food_classifier: a KIND_GPU instance, but onnxruntime's CUDAExecutionProvider did not start on "
            f"GPU {device_id} (it runs {', '.join(session.get_providers())}): check the CUDA and cuDNN libraries "
            "of the Triton image")
    return session, f"CUDAExecutionProvider, GPU {device_id}"


class TritonPythonModel:
    def initialize(self, args):
        model_dir = os.path.dirname(__file__)
        config = json.loads(args["model_config"])
        params = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        pth = os.path.join(model_dir, "food11.pth")
        onnx_path = os.path.join(model_dir, "model.onnx")
        self.torch = None
        # serve_system_engine: auto (food11.pth with torch when both are there, else model.onnx),
        # pytorch or onnx; a choice that cannot be served refuses the load with the reason
        engine = params.get("serve_system_engine", "auto") or "auto"
        if engine not in ("auto", "pytorch", "onnx"):
            raise pb_utils.TritonModelException(
                f"food_classifier: parameter serve_system_engine is {engine!r}; use auto, pytorch or onnx")
        if engine == "pytorch" and not os.path.exists(pth):
            raise pb_utils.TritonModelException(
                f"food_classifier: serve_system_engine=pytorch but there is no food11.pth in {model_dir}")
        kind = args.get("model_instance_kind", "cpu").lower()
        device_id = int(args.get("model_instance_device_id", 0))
        if engine != "onnx" and os.path.exists(pth):
            try:
                import torch
            except ImportError:
                torch = None
                print("food_classifier: food11.pth present but torch is not installed here; "
                      "falling back to model.onnx", flush=True)
            if torch is None and engine == "pytorch":
                raise pb_utils.TritonModelException(
                    "food_classifier: serve_system_engine=pytorch but torch is not installed in this server")
            if torch is not None:
                self.torch = torch
                if kind == "gpu":
                    if not torch.cuda.is_available():
                        raise pb_utils.TritonModelException(
                            f"food_classifier: a KIND_GPU instance, but torch {torch.__version__} sees no usable "
                            "GPU: use a CUDA build of torch that supports this GPU, or a KIND_CPU instance group")
                    torch.cuda.set_device(device_id)
                    self.device = torch.device(f"cuda:{device_id}")
                else:
                    self.device = torch.device("cpu")
                try:
                    self.model = torch.load(pth, map_location=self.device, weights_only=False)
                    self.model.to(self.device)
                except Exception as exc:  # a file torch cannot read: say which, and why
                    raise pb_utils.TritonModelException(
                        f"food_classifier: torch cannot load {pth} ({type(exc).__name__}: {exc})") from None
                self.model.eval()
                self.engine = f"pytorch {torch.__version__} ({self.device}) from food11.pth"
        if self.torch is None:
            if not os.path.exists(onnx_path):
                raise pb_utils.TritonModelException(
                    f"food_classifier: neither a usable food11.pth (with torch) nor model.onnx in {model_dir}"
                )
            self.session, provider = onnx_session(onnx_path, kind, device_id)
            self.input_name = self.session.get_inputs()[0].name
            meta = self.session.get_modelmeta().custom_metadata_map
            what = "a generated stand-in" if STANDIN_KEY in meta else "an ONNX model"
            self.engine = f"onnxruntime {ort_version()} ({provider}) from model.onnx, {what}"
        note = params.get("serve_system_weights", "")
        print(f"food_classifier: serving with {self.engine}" + (f"; weights: {note}" if note else ""), flush=True)

    def preprocess(self, image_data):
        """base64 image bytes (bytes or str, maybe base64 of base64 text) -> float32 [3, 224, 224]."""
        if isinstance(image_data, str):
            image_data = image_data.encode("utf-8")
        raw = base64.b64decode(image_data)
        image = Image.open(io.BytesIO(raw)).convert("RGB").resize((224, 224), Image.BILINEAR)
        arr = np.asarray(image, dtype=np.float32).transpose(2, 0, 1) / 255.0
        return (arr - MEAN) / STD

    def infer(self, batch):
        if self.torch is not None:
            with self.torch.no_grad():
                tensor = self.torch.from_numpy(batch).to(self.device)
                return self.model(tensor).cpu().numpy()
        return self.session.run(None, {self.input_name: batch})[0]

    def execute(self, requests):
        images, counts = [], []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT_IMAGE").as_numpy()  # [B, 1]
            counts.append(data.shape[0])
            images.extend(self.preprocess(item) for item in data.reshape(-1))
        # one inference over every image of every request Triton batched together
        logits = self.infer(np.stack(images).astype(np.float32))
        top = logits.argmax(axis=1)
        prob = 1.0 / (1.0 + np.exp(-logits[np.arange(len(top)), top]))
        responses, start = [], 0
        for n in counts:
            labels = CLASSES[top[start:start + n]].reshape(n, 1)
            probs = prob[start:start + n].astype(np.float32).reshape(n, 1)
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("FOOD_LABEL", labels),
                pb_utils.Tensor("PROBABILITY", probs),
            ]))
            start += n
        return responses
