"""Triton's backends and platforms: which backend serves a platform, which backends Triton's images
ship, and the backend Triton fills in from a model's folder and files (auto-complete)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .pbtxt import ModelConfig

#: platform -> the backend that serves it (Triton fills the backend in from the platform)
PLATFORM_BACKEND: dict[str, str] = {
    "tensorrt_plan": "tensorrt",
    "tensorflow_graphdef": "tensorflow",
    "tensorflow_savedmodel": "tensorflow",
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
    "libtorch": "pytorch",
    "torch_aoti": "pytorch",
}
ENSEMBLE = "ensemble"
#: the backends Triton knows by type (its GetBackendType): their platform must be one of theirs;
#: any other backend (python, openvino, a custom one) takes any platform, which Triton ignores
PLATFORM_BACKENDS = frozenset(PLATFORM_BACKEND.values())
#: the platform Triton fills in for a backend that names none
_DEFAULT_PLATFORM = {"tensorrt": "tensorrt_plan", "onnxruntime": "onnxruntime_onnx",
                     "pytorch": "pytorch_libtorch"}
#: backends that Triton's release images ship; any other is a custom backend, which Triton loads
#: when the server has it (libtriton_<name>.so, or a Python-based backend's model.py)
KNOWN_BACKENDS = frozenset({
    "python", "onnxruntime", "pytorch", "tensorflow", "tensorrt", "openvino", "fil", "dali",
    "identity", "repeat", "square", "vllm", "tensorrtllm",
})
#: backends that fill a model's missing input and output fields in from its model file when
#: Triton auto-completes the configuration (the default); pytorch does not, python only where the
#: model.py defines auto_complete_config
AUTOCOMPLETE_BACKENDS = frozenset({"tensorrt", "onnxruntime", "openvino", "tensorflow"})
#: file in a version folder -> the backend Triton infers when the configuration names none
BACKEND_BY_FILE: tuple[tuple[str, str], ...] = (
    ("model.plan", "tensorrt"), ("model.onnx", "onnxruntime"), ("model.xml", "openvino"),
    ("model.pt", "pytorch"), ("model.pt2", "pytorch"), ("model.savedmodel", "tensorflow"),
    ("model.graphdef", "tensorflow"), ("model.py", "python"),
)


def _first_version(model_dir: Path) -> Path | None:
    try:
        versions = sorted(p for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit())
    except OSError:
        return None
    return versions[0] if versions else None  # Triton inspects the first version folder only


def infer_backend(model_dir: Path) -> str | None:
    """The backend Triton would fill in from the files of the model's version folders, if any."""
    version = _first_version(model_dir)
    if version is None:
        return None
    for fname, backend in BACKEND_BY_FILE:
        if (version / fname).exists():
            return backend
    return None


def python_autocompletes(model_dir: Path) -> bool:
    """Whether the model's model.py (first version folder) fills its configuration in itself."""
    version = _first_version(model_dir)
    try:
        return version is not None and "auto_complete_config" in (version / "model.py").read_text(
            errors="replace")
    except OSError:
        return False


@dataclass(frozen=True)
class ModelFiles:
    """What the model's folder says, for the fields Triton fills in from it (auto-complete).

    ``known``: the folder was looked at (a config.pbtxt in its model folder); ``backend``: the
    backend the first version folder's files imply; ``python_autocompletes``: its model.py defines
    ``auto_complete_config``. Without ``known``, a missing backend is not a problem (it may come
    from the files).
    """

    known: bool = False
    backend: str | None = None
    python_autocompletes: bool = False


def filled_backend(cfg: ModelConfig, folder: str | None = None, files: ModelFiles | None = None) -> str:
    """The backend Triton loads the model with: the configuration's, or the one it fills in from the
    platform, the default model file name, the version folder's files or the folder name
    ('model.<backend>', a custom backend); "" where none."""
    files = files or ModelFiles()
    if cfg.backend:
        return str(cfg.backend)
    if cfg.platform in PLATFORM_BACKEND:
        return PLATFORM_BACKEND[cfg.platform]
    if cfg.default_model_filename:
        return dict(BACKEND_BY_FILE).get(cfg.default_model_filename, "")
    if cfg.platform:
        return ""
    if files.backend:
        return files.backend
    if files.known and folder and "." in folder:
        return folder.split(".", 1)[1]
    return ""


def filled_platform(cfg: ModelConfig, backend: str) -> str:
    return str(cfg.platform) or _DEFAULT_PLATFORM.get(backend, "")



def model_files(path: Path) -> tuple[str | None, ModelFiles]:
    """The model folder's name and what its files say, for a config.pbtxt in its model folder; a file
    of another name stands alone (no folder, nothing known)."""
    if path.name != "config.pbtxt":
        return None, ModelFiles()
    model_dir = path.resolve().parent
    return model_dir.name, ModelFiles(True, infer_backend(model_dir), python_autocompletes(model_dir))

