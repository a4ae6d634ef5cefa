"""The lab's Food-11 classifier on Triton's Python backend, with batched execution.

Input ``INPUT_IMAGE`` (TYPE_STRING [1]): base64-encoded image bytes (the lab's Flask app sends them so).
Outputs ``FOOD_LABEL`` (TYPE_STRING [1]) and ``PROBABILITY`` (TYPE_FP32 [1], sigmoid of the top logit).

Weights, in order of preference:

1. ``food11.pth`` next to this file (the lab's PyTorch model, fetched by the serve_stack role from
   ``serve_stack_food11_pth_url``), when ``torch`` is importable in the Triton image;
2. ``model.onnx`` next to this file, run with onnxruntime on CPU. On rehearsal nodes and offline this
   is the locally generated stand-in (same signature, random weights): its labels are meaningless,
   and this model logs so at load time and in the ``serve_system_weights`` config parameter.
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
                kind = args.get("model_instance_kind", "cpu").lower()
                if kind == "gpu" and torch.cuda.is_available():
                    device_id = int(args.get("model_instance_device_id", 0))
                    torch.cuda.set_device(device_id)
                    self.device = torch.device(f"cuda:{device_id}")
                else:
                    self.device = torch.device("cpu")
                self.model = torch.load(pth, map_location=self.device, weights_only=False)
                self.model.to(self.device)
                self.model.eval()
                self.engine = f"pytorch ({self.device})"
        if self.torch is None:
            if not os.path.exists(onnx_path):
                raise pb_utils.TritonModelException(
                    f"food_classifier: neither a usable food11.pth (with torch) nor model.onnx in {model_dir}"
                )
            import onnxruntime as ort

            self.session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
            self.input_name = self.session.get_inputs()[0].name
            self.engine = "onnxruntime (CPU)"
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
