"""The two runtimes of the lab's endpoint: ONNX Runtime and PyTorch.

Each loads its model once, checks it (one forward pass on a zero image, 11 outputs), and turns a
``[N, 3, 224, 224]`` float32 batch into ``[N, 11]`` logits. A runtime that cannot run here (torch not
installed, CUDA asked for but absent, a broken model file) raises :class:`RuntimeUnavailable` with a
message that says what to do; the app then answers 503 on ``/health`` and ``/predict``.

Where the model file is missing and the stand-in policy allows it, the locally generated stand-in
(:mod:`serve_system.standin`; random weights, the lab's signature) is used, and
:attr:`ModelInfo.standin` says so.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..standin import CLASSES, STANDIN_KEY, STANDIN_NOTE, onnx_standin_bytes, write_onnx_standin
from .settings import Settings

log = logging.getLogger("serve_system.fastapi_app")


class RuntimeUnavailable(Exception):
    """The configured runtime cannot serve here; the message says why and what to change."""


@dataclass
class ModelInfo:
    """What is serving: shown by ``/health`` and in response headers."""

    runtime: str
    model_path: str
    device: str
    standin: bool
    notes: list[str] = field(default_factory=list)


class Runtime(Protocol):
    info: ModelInfo

    def logits(self, batch: np.ndarray) -> np.ndarray: ...


def _check_logits(out: Any, n: int, model_path: Path) -> np.ndarray:
    arr = np.asarray(out)
    if arr.ndim != 2 or arr.shape != (n, len(CLASSES)):
        raise RuntimeUnavailable(f"model {model_path} returned shape {tuple(arr.shape)} for {n} image(s); "
                                 f"the Food-11 endpoint needs ({n}, {len(CLASSES)}) logits")
    return arr


def _resolve_model(settings: Settings, standin_name: str) -> tuple[Path, bool]:
    """The model file to load and whether it must be (re)generated as the stand-in."""
    path = settings.model_path
    if path.is_file():
        return path, False
    if settings.standin == "never":
        raise RuntimeUnavailable(f"model file {path} not found (SERVE_FASTAPI_MODEL); copy the real weights "
                                 "there or allow the stand-in with SERVE_FASTAPI_STANDIN=auto")
    return settings.standin_dir / standin_name, True


# --- ONNX Runtime -----------------------------------------------------------------------------------

class OnnxRuntime:
    """ONNX Runtime with the CUDA provider where a GPU is usable, else the CPU provider."""

    def __init__(self, settings: Settings):
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise RuntimeUnavailable(f"ONNX runtime unavailable: onnxruntime cannot be imported ({exc}); "
                                     "install onnxruntime (CPU) or onnxruntime-gpu") from None
        path, generate = _resolve_model(settings, "food11_standin.onnx")
        notes: list[str] = []
        if generate:
            write_onnx_standin(path)
            notes.append(f"model file {settings.model_path} not found: serving the {STANDIN_NOTE}")
        available = ort.get_available_providers()
        if settings.device == "cuda" and "CUDAExecutionProvider" not in available:
            raise RuntimeUnavailable("SERVE_FASTAPI_DEVICE=cuda but this onnxruntime has no "
                                     f"CUDAExecutionProvider (available: {', '.join(available)}); "
                                     "install onnxruntime-gpu or use SERVE_FASTAPI_DEVICE=auto")
        providers = ["CPUExecutionProvider"]
        if settings.device != "cpu" and "CUDAExecutionProvider" in available:
            _preload_cuda_libraries(ort)
            providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
        try:
            self.session = ort.InferenceSession(str(path), providers=providers)
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own exception classes
            raise RuntimeUnavailable(f"ONNX runtime cannot load {path}: {exc}") from None
        used = self.session.get_providers()
        if "CUDAExecutionProvider" in providers and "CUDAExecutionProvider" not in used:
            notes.append("CUDAExecutionProvider is installed but could not start (CUDA/cuDNN libraries?): "
                         "running on CPU")
            if settings.device == "cuda":
                raise RuntimeUnavailable("SERVE_FASTAPI_DEVICE=cuda but the CUDA provider failed to start; "
                                         "check the CUDA and cuDNN libraries in the image")
        meta = self.session.get_modelmeta().custom_metadata_map
        standin = generate or STANDIN_KEY in meta
        if standin and not generate:
            notes.append(f"{path} is the {STANDIN_NOTE}")
        inputs = self.session.get_inputs()
        if len(inputs) != 1:
            raise RuntimeUnavailable(f"model {path} has {len(inputs)} inputs; "
                                     "the endpoint needs one image input")
        self.input_name = inputs[0].name
        self.info = ModelInfo("onnx", str(path), used[0], standin, notes)
        self.logits(np.zeros((1, 3, 224, 224), dtype=np.float32))  # a broken model fails here, at load time

    def logits(self, batch: np.ndarray) -> np.ndarray:
        try:
            (out, *_) = self.session.run(None, {self.input_name: batch})
        except Exception as exc:  # noqa: BLE001
            raise RuntimeUnavailable(f"ONNX runtime failed on {self.info.model_path}: {exc}") from None
        return _check_logits(out, batch.shape[0], Path(self.info.model_path))


def _preload_cuda_libraries(ort: Any) -> None:
    """onnxruntime-gpu >= 1.21 can load CUDA/cuDNN from the nvidia-* pip packages (installed with torch)."""
    preload = getattr(ort, "preload_dlls", None)
    if preload is None:
        return
    try:
        preload()
    except Exception as exc:  # noqa: BLE001 - the session start will say whether CUDA works
        log.warning("onnxruntime.preload_dlls() failed: %s", exc)


# --- PyTorch ----------------------------------------------------------------------------------------

class TorchRuntime:
    """PyTorch: a TorchScript archive or a whole pickled model (the lab's ``food11.pth``)."""

    def __init__(self, settings: Settings):
        try:
            import torch
        except ImportError as exc:
            raise RuntimeUnavailable(
                f"PyTorch runtime unavailable: torch cannot be imported in this image ({exc}); "
                "build the image with torch (and torchvision for the lab's pickled food11.pth) "
                "or set SERVE_FASTAPI_RUNTIME=onnx"
            ) from None
        self.torch = torch
        if settings.device == "cuda" and not torch.cuda.is_available():
            raise RuntimeUnavailable(f"SERVE_FASTAPI_DEVICE=cuda but torch {torch.__version__} "
                                     "sees no usable GPU; "
                                     "use SERVE_FASTAPI_DEVICE=auto or a CUDA build of torch")
        use_gpu = settings.device != "cpu" and torch.cuda.is_available()
        self.device = torch.device("cuda" if use_gpu else "cpu")
        path, generate = _resolve_model(settings, "food11_standin.pt")
        notes: list[str] = []
        if generate:
            write_torch_standin(path)
            notes.append(f"model file {settings.model_path} not found: serving the {STANDIN_NOTE}")
        self.model, standin = self._load(path)
        if standin and not generate:
            notes.append(f"{path} is the {STANDIN_NOTE}")
        self.info = ModelInfo("pytorch", str(path), str(self.device), generate or standin, notes)
        self.logits(np.zeros((1, 3, 224, 224), dtype=np.float32))

    def _load(self, path: Path) -> tuple[Any, bool]:
        torch = self.torch
        extra = {STANDIN_KEY: ""}
        try:
            model = torch.jit.load(str(path), map_location=self.device, _extra_files=extra)
        except Exception:  # noqa: BLE001 - not TorchScript: try a pickled model (the lab's format)
            try:
                model = torch.load(str(path), map_location=self.device, weights_only=False)
            except Exception as exc:  # noqa: BLE001
                raise RuntimeUnavailable(f"PyTorch runtime cannot load {path}: {exc} "
                                         "(a pickled model needs the classes it was saved with, "
                                         "e.g. torchvision)") from None
        if isinstance(model, dict):
            raise RuntimeUnavailable(f"{path} holds a state_dict, not a model: save the whole model "
                                     "(torch.save(model)) or a TorchScript archive")
        if not callable(model):
            raise RuntimeUnavailable(f"{path} holds a {type(model).__name__}, not a model")
        model.to(self.device)
        model.eval()
        return model, bool(extra.get(STANDIN_KEY))

    def logits(self, batch: np.ndarray) -> np.ndarray:
        torch = self.torch
        try:
            with torch.inference_mode():
                out = self.model(torch.from_numpy(batch).to(self.device))
            arr = out.detach().float().cpu().numpy()
        except Exception as exc:  # noqa: BLE001
            raise RuntimeUnavailable(f"PyTorch runtime failed on {self.info.model_path}: {exc}") from None
        return _check_logits(arr, batch.shape[0], Path(self.info.model_path))


def write_torch_standin(path: Path) -> Path:
    """The stand-in as a TorchScript archive: the ONNX stand-in's graph and weights, traced in torch.

    The module runs the ONNX graph node by node (the operators the Food-11 stand-in uses), so the
    archive computes exactly what the ONNX stand-in computes, with the same weights.
    """
    import onnx
    import torch
    import torch.nn.functional as F
    from onnx import helper, numpy_helper

    graph = onnx.load_from_string(onnx_standin_bytes()).graph
    consts = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in graph.initializer}
    nodes = [(n.op_type, list(n.input), list(n.output),
              {a.name: helper.get_attribute_value(a) for a in n.attribute})
             for n in graph.node]
    known = {"Conv", "Clip", "Add", "GlobalAveragePool", "Flatten", "Gemm"}
    unknown = sorted({op for op, *_ in nodes} - known)
    if unknown:
        raise RuntimeUnavailable(f"PyTorch stand-in: operators {', '.join(unknown)} not supported")

    class Food11Standin(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            for i, (name, value) in enumerate(consts.items()):
                self.register_buffer(f"c{i}", value)
            self.names = {name: f"c{i}" for i, name in enumerate(consts)}

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            env = {"input": x}
            for name, attr in self.names.items():
                env[name] = getattr(self, attr)
            for op, ins, outs, at in nodes:
                a = [env[i] for i in ins]
                if op == "Conv":
                    y = F.conv2d(a[0], a[1], a[2], stride=at["strides"], padding=at["pads"][:2],
                                 groups=at["group"])
                elif op == "Clip":
                    y = torch.clamp(a[0], float(a[1]), float(a[2]))
                elif op == "Add":
                    y = a[0] + a[1]
                elif op == "GlobalAveragePool":
                    y = a[0].mean(dim=(2, 3), keepdim=True)
                elif op == "Flatten":
                    y = torch.flatten(a[0], 1)
                else:  # Gemm (no transposes in the stand-in)
                    y = a[0] @ a[1] + a[2]
                env[outs[0]] = y
            return env["output"]

    with torch.no_grad():
        scripted = torch.jit.trace(Food11Standin().eval(), torch.zeros(1, 3, 224, 224))
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.jit.save(scripted, str(path), _extra_files={STANDIN_KEY: STANDIN_NOTE})
    return path


def load_runtime(settings: Settings) -> Runtime:
    """The runtime ``settings.runtime`` names, loaded and checked."""
    return OnnxRuntime(settings) if settings.runtime == "onnx" else TorchRuntime(settings)
