"""Triton model configurations: parse config.pbtxt strictly, apply a variant's overrides, render, check.

Parsing uses Triton's own schema (``tritonclient.grpc.model_config_pb2``), so a key Triton does not
know is an error here too, with its line and column. Overrides are applied on the JSON form of the
configuration (what Triton's repository API takes): a top-level key of the override replaces the
base's key, ``null`` removes it. :func:`check` finds what Triton (or the host) would refuse before
anything is sent to a node.
"""

from __future__ import annotations

import codecs
import difflib
import json
import math
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2

from ..errors import ServeSystemError
from ..textfile import decode_utf8, read_bytes
from .spec.models import JINJA_RE

if TYPE_CHECKING:
    #: tritonclient ships no type information: its generated message classes are untyped for mypy
    ModelConfig: TypeAlias = Any
else:
    ModelConfig = model_config_pb2.ModelConfig

KIND_GPU = model_config_pb2.ModelInstanceGroup.Kind.Value("KIND_GPU")
KIND_CPU = model_config_pb2.ModelInstanceGroup.Kind.Value("KIND_CPU")


def kind_name(kind: int) -> str:
    """An instance group kind as config.pbtxt spells it without its prefix: GPU, CPU, MODEL, AUTO."""
    return str(model_config_pb2.ModelInstanceGroup.Kind.Name(kind)).removeprefix("KIND_")


class ConfigError(ServeSystemError):
    """A configuration that cannot be parsed or would be refused; the message is one line."""


@dataclass(frozen=True)
class Problem:
    """One thing Triton or the host would refuse: the field (dotted path) and why."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def parse_pbtxt(text: str, path: str = "config.pbtxt") -> ModelConfig:
    """Parse config.pbtxt text strictly; errors read ``path:line:col: message``."""
    cfg = ModelConfig()
    try:
        text_format.Parse(text, cfg)
    except text_format.ParseError as exc:
        line, col = exc.GetLine(), exc.GetColumn()
        msg = str(exc)
        # the library prefixes "line:col : " to its message: keep only the message
        prefix = f"{line}:{col} : "
        msg = msg.removeprefix(prefix)
        raise ConfigError(f"{path}:{line or 1}:{col or 1}: {msg}") from None
    return cfg


def read_text(path: str | Path) -> str:
    """A configuration file's text; unreadable, binary or non-UTF-8 files are one-line errors."""
    p = Path(path)
    raw = read_bytes(p, "give the config.pbtxt inside it", ConfigError, at=":1:1")
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise ConfigError(f"{p}: UTF-16 text (as Windows editors and PowerShell's '>' write it): Triton "
                          "reads config.pbtxt as UTF-8: save it as UTF-8") from None
    if b"\0" in raw:
        raise ConfigError(f"{p}: a binary file, not a config.pbtxt (protobuf text format): give the text "
                          "configuration") from None
    return decode_utf8(raw, p, "save config.pbtxt as UTF-8", ConfigError)


def load_pbtxt(path: str | Path) -> ModelConfig:
    """Read and parse a config.pbtxt file."""
    return parse_pbtxt(read_text(path), str(path))


def check_file(path: str | Path, host_gpus: int | None = None) -> list[str]:
    """Every problem of one config.pbtxt as ``path: field: rule`` lines (empty: Triton would accept it).

    A file named ``config.pbtxt`` is taken as a model folder's: its name must match the folder's,
    and a missing backend may come from the version folders' files, as Triton fills it in.
    """
    p = Path(path)
    try:
        cfg = load_pbtxt(p)
    except ConfigError as exc:
        return [str(exc)]
    folder, files = model_files(p)
    return [f"{p}: {prob}" for prob in check(cfg, host_gpus, folder, files.backend, files.known,
                                             files.python_autocompletes)]


def model_files(path: Path) -> tuple[str | None, ModelFiles]:
    """The model folder's name and what its files say, for a config.pbtxt in its model folder; a file
    of another name stands alone (no folder, nothing known)."""
    if path.name != "config.pbtxt":
        return None, ModelFiles()
    model_dir = path.resolve().parent
    return model_dir.name, ModelFiles(True, infer_backend(model_dir), python_autocompletes(model_dir))


def advice_file(path: str | Path) -> list[str]:
    """Notes on a config.pbtxt (``path: field: note`` lines): what Triton accepts but probably does not
    do what was meant, and what only the server decides; none if unparsable."""
    try:
        cfg = load_pbtxt(path)
    except ConfigError:
        return []
    folder, files = model_files(Path(path))
    return [f"{path}: {note}" for note in advice(cfg, folder, files)]


def to_dict(cfg: ModelConfig) -> dict[str, Any]:
    """The configuration as a plain dict with proto field names (the load API's JSON form)."""
    return json_format.MessageToDict(cfg, preserving_proto_field_name=True)


def from_dict(data: dict[str, Any], where: str) -> ModelConfig:
    """Build a ModelConfig from a dict, strictly; ``where`` prefixes the error message."""
    cfg = ModelConfig()
    try:
        json_format.ParseDict(data, cfg, ignore_unknown_fields=False)
    except json_format.ParseError as exc:
        raise ConfigError(f"{where}: {_short_parse_error(str(exc))}") from None
    return cfg


def _short_parse_error(msg: str) -> str:
    # json_format says e.g. 'Message type "inference.ModelDynamicBatching" has no field named "foo"
    # at "ModelConfig.dynamic_batching".\n Available Fields(except extensions): ...'
    return msg.split("\n", 1)[0].strip()


def apply_overrides(base: ModelConfig, overrides: dict[str, Any] | None, where: str) -> ModelConfig:
    """Return a new config: ``base`` with each top-level key of ``overrides`` replaced (None removes)."""
    data = to_dict(base)
    fields = ModelConfig.DESCRIPTOR.fields
    known = sorted({f.name for f in fields} | {f.json_name for f in fields})
    for key in overrides or {}:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f'did you mean "{close[0]}"? ' if close else ""
            raise ConfigError(f'{where}: "{key}" is not a field of Triton\'s ModelConfig ({hint}see '
                              "model_config.proto for the fields)")
    for key, value in (overrides or {}).items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return from_dict(data, where)


def render_pbtxt(cfg: ModelConfig) -> str:
    """config.pbtxt text for a configuration."""
    return text_format.MessageToString(cfg)


def load_api_body(cfg: ModelConfig) -> dict[str, Any]:
    """Body of ``POST /v2/repository/models/NAME/load`` that loads ``cfg`` as an override."""
    return {"parameters": {"config": json.dumps(to_dict(cfg), sort_keys=True)}}


#: TensorRT 10, the version in Triton 24.10 (the lab's image), runs on GPUs of compute capability 7.0
#: (Volta) or newer: Chameleon's gpu_p100 nodes are Pascal (6.0), where a TensorRT accelerator or a
#: TensorRT plan fails to load (TensorRT 10's support matrix)
TENSORRT_MIN_COMPUTE_CAPABILITY = 7.0


def tensorrt_accelerators(cfg: ModelConfig) -> list[str]:
    """Names of the GPU execution accelerators of ``cfg`` that are TensorRT."""
    return [a.name for a in cfg.optimization.execution_accelerators.gpu_execution_accelerator
            if a.name.lower() == "tensorrt"]


def _below_tensorrt(compute_capability: float | None) -> bool:
    return compute_capability is not None and compute_capability < TENSORRT_MIN_COMPUTE_CAPABILITY


def needs_adapting(cfg: ModelConfig, host_gpus: int, compute_capability: float | None = None) -> bool:
    """Whether a host with ``host_gpus`` GPUs of ``compute_capability`` (the lowest; None: unknown)
    cannot run ``cfg`` as written, in a way :func:`adapt_to_host` can mend."""
    if gpus_needed(cfg) > host_gpus:
        return True
    return host_gpus > 0 and _below_tensorrt(compute_capability) and bool(tensorrt_accelerators(cfg))


def gpus_needed(cfg: ModelConfig) -> int:
    """How many GPUs the configuration addresses (highest GPU id + 1; 1 for KIND_GPU without ids)."""
    need = 0
    for group in cfg.instance_group:
        if group.kind == KIND_GPU:
            need = max(need, (max(group.gpus) + 1) if group.gpus else 1)
    if cfg.optimization.execution_accelerators.gpu_execution_accelerator:
        need = max(need, 1)
    return need


# --------------------------------------------------------------------------------- Triton's rules
#
# Written from Triton's own checks (triton-inference-server/core: model_config_utils.cc's
# ValidateModelConfig, ValidateModelIOConfig, ValidateInstanceGroup and the ensemble checks, the
# model repository manager, backend_model.cc and the warm-up code) and the comments of
# model_config.proto. A refusal here is one Triton makes when it loads the configuration; what
# model_config.proto asks for but Triton does not check is a note (see :func:`advice`). Each rule
# names the field (a dotted path) and says, in Triton's words where it has them, what is wrong and
# how to fix it. Every rule is checked: a configuration gets all its problems at once (Triton itself
# stops at the first).

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
_BACKEND_NAME = re.compile(r"^[A-Za-z0-9_]+$")

KIND_MODEL = model_config_pb2.ModelInstanceGroup.Kind.Value("KIND_MODEL")
_TYPE_INVALID = model_config_pb2.DataType.Value("TYPE_INVALID")
_SEQ = model_config_pb2.ModelSequenceBatching.Control
_BOOL_CONTROLS = ("CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_END", "CONTROL_SEQUENCE_READY")
_CORRID_TYPES = ("TYPE_UINT64", "TYPE_INT64", "TYPE_UINT32", "TYPE_INT32", "TYPE_STRING")
_DELAY = model_config_pb2.ModelQueuePolicy.TimeoutAction.Value("DELAY")
_FORMAT_NONE = model_config_pb2.ModelInput.Format.Value("FORMAT_NONE")


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


def _filled_platform(cfg: ModelConfig, backend: str) -> str:
    return str(cfg.platform) or _DEFAULT_PLATFORM.get(backend, "")


def triton_rules(cfg: ModelConfig, folder: str | None = None, files_backend: str | None = None,
                 files_known: bool = False, python_autocomplete: bool = False) -> list[Problem]:
    """What Triton refuses in ``cfg`` when it loads it (no host facts needed).

    ``folder`` is the model's folder name in the repository (the name Triton serves it under),
    where known. ``files_known`` says the model's version folders were looked at, and
    ``files_backend`` is the backend their files imply (Triton fills a missing backend in from
    them); without ``files_known`` a missing backend is not a problem (it may come from the files).
    ``python_autocomplete``: the model.py fills the configuration in (``auto_complete_config``).
    """
    return _rules(cfg, folder, ModelFiles(files_known, files_backend, python_autocomplete))[0]


def _rules(cfg: ModelConfig, folder: str | None, files: ModelFiles) -> tuple[list[Problem], list[Problem]]:
    """Triton's refusals and the notes on what it accepts (``advice``'s Triton-side part)."""
    p: list[Problem] = []
    n: list[Problem] = []
    backend = filled_backend(cfg, folder, files)
    if cfg.ByteSize() == 0:
        if files.known and not backend:
            p.append(Problem("(config)", "the configuration is empty and Triton cannot fill it in: no "
                                         "version "
                             "folder holds a model file it knows (model.py, model.onnx, model.plan, ...) and "
                             "the folder is not named 'model.<backend>': give at least 'backend', the inputs "
                             "and the outputs of the model"))
        else:
            n.append(Problem("(config)", "the configuration is empty: Triton fills it in from the model "
                             f"({backend or 'the backend its files imply'}) if it auto-completes "
                             "configurations (the default; not with --disable-auto-complete-config)"))
        return p, n
    name = cfg.name or folder or "the model"
    if folder is not None and cfg.name and cfg.name != folder:
        p.append(Problem("name", f"{cfg.name!r} differs from its folder {folder!r}: if 'name' is given it "
                         "must match the name of the model repository directory containing the model "
                         f"(set name: \"{folder}\" or rename the folder)"))
    _platform_backend(cfg, backend, files, p, n)
    platform = _filled_platform(cfg, backend)
    fills_io = backend in AUTOCOMPLETE_BACKENDS or (backend == "python" and files.python_autocompletes) or (
        backend not in KNOWN_BACKENDS)  # a custom backend may auto-complete too; "" is not known here
    mbs = cfg.max_batch_size
    if mbs < 0:
        p.append(Problem("max_batch_size", f"'max_batch_size' must be non-negative value, got {mbs} (0: the "
                         "model does not batch)"))
    for kind, ios in (("input", cfg.input), ("output", cfg.output)):
        for i, io in enumerate(ios):
            _io_rules(f"{kind}[{i}]", kind, io, mbs, platform, (backend if fills_io else None), p, n)
    _batch_io(cfg, p, n)
    _dynamic_batching(cfg, p)
    _sequence_batching(cfg, p, n)
    if cfg.platform == ENSEMBLE or cfg.HasField("ensemble_scheduling"):
        _ensemble(cfg, name, p)
    else:
        _instance_groups(cfg, platform, p)
        _warmup(cfg, p, n)
    if cfg.model_transaction_policy.decoupled and cfg.response_cache.enable:
        p.append(Problem("response_cache.enable", "Response Cache does not currently support models with "
                         "'decoupled' transaction policy: disable the response cache"))
    if cfg.runtime and posixpath.normpath(cfg.runtime).split("/")[0] == "..":
        p.append(Problem("runtime", f"backend library name {cfg.runtime!r} escapes the backend directory: "
                                    "give "
                         "a library name inside it (e.g. libtriton_<backend>.so) or remove 'runtime'"))
    _model_metrics(cfg, p, n)
    _rate_limiter(cfg, n)
    return p, n


def _platform_backend(cfg: ModelConfig, backend: str, files: ModelFiles, p: list[Problem],
                      n: list[Problem]) -> None:
    platform = cfg.platform
    if platform == ENSEMBLE:
        if cfg.backend:
            p.append(Problem("backend", "an ensemble must have platform type 'ensemble' and empty backend "
                                        "type, "
                             f"got backend {cfg.backend!r}: remove 'backend'"))
        return
    if not backend:
        if platform:
            known = ", ".join(sorted([*PLATFORM_BACKEND, ENSEMBLE]))
            p.append(Problem("platform", f"unexpected platform type {platform!r} (Triton knows: {known}); "
                             "for a backend without a platform set 'backend' instead"))
        elif files.known:
            p.append(Problem("backend", "must specify 'platform' or 'backend' (Triton could not infer one "
                                        "from "
                             "the version folders' files nor from a folder named 'model.<backend>' either): "
                             "e.g. backend: \"python\" or backend: \"onnxruntime\""))
        return
    if backend in PLATFORM_BACKENDS:
        if platform and PLATFORM_BACKEND.get(platform) != backend:
            owner = PLATFORM_BACKEND.get(platform)
            why = (f"platform {platform!r} belongs to backend {owner!r}" if owner else
                   f"backend {backend!r} takes platform "
                   + " or ".join(repr(k) for k, v in PLATFORM_BACKEND.items() if v == backend))
            p.append(Problem("platform", f"unexpected 'platform' and 'backend' pair, got: {platform}, "
                                         f"{backend} "
                             f"({why})"))
    elif platform:
        n.append(Problem("platform", f"Triton ignores platform {platform!r} for backend {backend!r} (only "
                         f"{', '.join(sorted(PLATFORM_BACKENDS))} check their platform): remove 'platform'"))
    if backend not in KNOWN_BACKENDS:
        n.append(Problem("backend", _custom_backend_note(backend, cfg.backend == backend)))


def _custom_backend_note(backend: str, given: bool) -> str:
    where = "" if given else " (from the folder name 'model.<backend>')"
    head = f"backend {backend!r}{where} is not one Triton's release images ship"
    if backend in PLATFORM_BACKEND or backend == ENSEMBLE:
        fix = (f"platform: \"{backend}\" and no backend" if backend == ENSEMBLE else
               f"platform: \"{backend}\" or backend: \"{PLATFORM_BACKEND[backend]}\"")
        return f"{head}: {backend!r} is a platform name; if you meant it, set {fix}"
    close = difflib.get_close_matches(backend, sorted(KNOWN_BACKENDS), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    odd = "" if _BACKEND_NAME.fullmatch(backend) else " (its name has characters backend names rarely have)"
    return (f"{head}{hint}{odd}: a custom backend, which Triton loads only where the server has it: "
            f"libtriton_{backend}.so in the model's folder, its version folder or <backend "
            f"directory>/{backend}/, or a Python-based backend's <backend directory>/{backend}/model.py "
            "(--with-triton checks a local server; Triton's images ship: "
            f"{', '.join(sorted(KNOWN_BACKENDS))})")


def _io_rules(field: str, kind: str, io: Any, mbs: int, platform: str, filler: str | None,
              p: list[Problem], n: list[Problem]) -> None:
    """``filler``: the backend that may fill a missing data_type or dims in from the model (None:
    none will, so Triton refuses them missing)."""
    label = f"model {kind} {io.name!r}" if io.name else f"model {kind}"
    if not io.name:
        p.append(Problem(f"{field}.name", f"model {kind} must specify 'name'"))
    dims = list(io.dims)
    dims_fix = (" (without the batch dimension; -1 for a variable-size dimension; [ 1 ] for a scalar per "
                "batch item)")
    missing = [(attr, fix) for attr, fix, lacks in (
        ("data_type", " (e.g. TYPE_FP32)", io.data_type == _TYPE_INVALID),
        ("dims", dims_fix, not dims)) if lacks]
    for attr, fix in missing:
        if filler is None:
            p.append(Problem(f"{field}.{attr}", f"{label} must specify '{attr}'{fix}"))
        else:
            by = f"the {filler} backend" if filler else "its backend"
            n.append(Problem(f"{field}.{attr}", f"{label} gives no '{attr}': Triton refuses that unless {by} "
                             "fills it in from the model (auto-complete; not with "
                             f"--disable-auto-complete-config): give it{fix}"))
    for d in dims:
        if d < 1 and d != -1:
            p.append(Problem(f"{field}.dims", f"{label} dimension must be integer >= 1, or -1 to indicate a "
                             f"variable-size dimension, got {d}"))
            break
    if io.HasField("reshape"):
        shape = list(io.reshape.shape)
        if not shape and mbs == 0:
            p.append(Problem(f"{field}.reshape", f"{label} cannot have empty reshape for non-batching model "
                                                 "as "
                             "scalar tensors are not supported"))
        if any(d < 1 and d != -1 for d in shape):
            p.append(Problem(f"{field}.reshape.shape", f"{label} reshape dimensions must be integer >= 1, or "
                                                       "-1 "
                             "to indicate a variable-size dimension"))
        elif dims and all(d >= 1 or d == -1 for d in dims):
            why = _reshape_mismatch(dims, shape)
            if why:
                p.append(Problem(f"{field}.reshape.shape", f"{label} {why} (dims {dims}, reshape {shape})"))
    if kind == "input":
        fmt_name = model_config_pb2.ModelInput.Format.Name(io.format)
        if io.format != _FORMAT_NONE and len(dims) != 3:
            p.append(Problem(f"{field}.format", f"model input NHWC/NCHW require 3 dims ({fmt_name}, dims "
                                                f"{dims})"))
    if io.is_shape_tensor and platform != "tensorrt_plan":
        p.append(Problem(f"{field}.is_shape_tensor",
                         "shape tensors are only supported for TensorRT platform"))
    if io.is_non_linear_format_io:
        if platform != "tensorrt_plan":
            p.append(Problem(f"{field}.is_non_linear_format_io",
                             "Non-linear IO format is only supported for the TensorRT platform"))
        elif len(dims) != 3:
            p.append(Problem(f"{field}.is_non_linear_format_io", f"Non-linear IO format {kind} requires 3 "
                                                                 "dims"))


def _reshape_mismatch(dims: list[int], shape: list[int]) -> str | None:
    """Why ``reshape`` cannot hold ``dims`` (None: it can): same element count, or, with variable
    dimensions, the same count between each pair of -1s and the same number of -1s."""
    if -1 not in dims and -1 not in shape:
        n_dims, n_shape = math.prod(dims), math.prod(shape) if shape else 0
        if n_dims != n_shape and not (n_shape == 0 and n_dims == 1):
            return f"has different size for dims and reshape ({n_dims} elements against {n_shape})"
        return None
    if (-1 in dims) != (-1 in shape):
        return "has different size for dims and reshape (only one of them has a variable-size dimension)"

    def trunks(xs: list[int]) -> list[int]:
        out, cur = [], 1
        for x in xs:
            if x == -1:
                out.append(cur)
                cur = 1
            else:
                cur *= x
        return [*out, cur]

    a, b = trunks(dims), trunks(shape)
    if len(a) != len(b):
        return "has different number of variable-size dimensions for dims and reshape"
    if a != b:
        return ("has different size for dims and reshape (element counts between the variable-size "
                "dimensions differ)")
    return None


def _batch_io(cfg: ModelConfig, p: list[Problem], n: list[Problem]) -> None:
    inputs = {io.name for io in cfg.input}
    outputs = {io.name for io in cfg.output}
    bi_kinds = model_config_pb2.BatchInput.Kind
    for i, bi in enumerate(cfg.batch_input):
        field = f"batch_input[{i}]"
        if bi.kind not in bi_kinds.values():
            p.append(Problem(f"{field}.kind", f"unknown batch input kind {bi.kind} (kinds: "
                                              f"{', '.join(bi_kinds.keys())})"))
        elif len(bi.source_input) != 1:
            p.append(Problem(f"{field}.source_input", f"batch input kind '{bi_kinds.Name(bi.kind)}' expects "
                                                      "1 source "
                             f"input, got {len(bi.source_input)}"))
        if not bi.target_name:  # model_config.proto asks for it; Triton's ValidateBatchIO does not check
            n.append(Problem(f"{field}.target_name", "batch input names no model input it creates "
                             "('target_name'): the backend gets a nameless tensor; give target_name"))
        if bi.data_type not in (model_config_pb2.TYPE_INT32, model_config_pb2.TYPE_FP32):
            p.append(Problem(f"{field}.data_type", "batch input data type must be TYPE_INT32 or TYPE_FP32"))
        for src in bi.source_input:
            if src not in inputs:
                p.append(Problem(f"{field}.source_input", f"unknown source input name {src!r} (the model's "
                                                          "inputs: "
                                 f"{', '.join(sorted(inputs)) or 'none'})"))
    bo_kinds = model_config_pb2.BatchOutput.Kind
    for i, bo in enumerate(cfg.batch_output):
        field = f"batch_output[{i}]"
        if bo.kind not in bo_kinds.values():
            p.append(Problem(f"{field}.kind", f"unknown batch output kind {bo.kind} (kinds: "
                                              f"{', '.join(bo_kinds.keys())})"))
        elif len(bo.source_input) != 1:
            p.append(Problem(f"{field}.source_input", f"batch output kind '{bo_kinds.Name(bo.kind)}' expects "
                                                      "1 source "
                             f"input, got {len(bo.source_input)}"))
        for src in bo.source_input:
            if src not in inputs:
                p.append(Problem(f"{field}.source_input", f"unknown source input name {src!r} (the model's "
                                                          "inputs: "
                                 f"{', '.join(sorted(inputs)) or 'none'})"))
        seen: set[str] = set()
        for target in bo.target_name:
            if target not in outputs:
                p.append(Problem(f"{field}.target_name", f"unknown target output name {target!r} (the "
                                                         "model's "
                                 f"outputs: {', '.join(sorted(outputs)) or 'none'})"))
            elif target in seen:
                p.append(Problem(f"{field}.target_name", f"target output name {target!r} can only be "
                                                         "specified once"))
            seen.add(target)


def _dynamic_batching(cfg: ModelConfig, p: list[Problem]) -> None:
    if not cfg.HasField("dynamic_batching"):
        return
    db, mbs = cfg.dynamic_batching, cfg.max_batch_size
    for size in db.preferred_batch_size:
        if size <= 0:
            p.append(Problem("dynamic_batching.preferred_batch_size",
                             f"dynamic batching preferred size must be positive, got {size}"))
        elif size > mbs:
            p.append(Problem("dynamic_batching.preferred_batch_size",
                             f"preferred batch size {size} > max_batch_size {mbs} (Triton: dynamic batching "
                             "preferred size must be <= max batch size)"))
    levels = db.priority_levels
    if levels:
        if not 1 <= db.default_priority_level <= levels:
            p.append(Problem("dynamic_batching.default_priority_level",
                             f"default priority level must be in range [1, {levels}], got "
                             f"{db.default_priority_level}"))
        for level in sorted(db.priority_queue_policy):
            if not 1 <= level <= levels:
                p.append(Problem("dynamic_batching.priority_queue_policy",
                                 f"priority queue policy must have priority level in range [1, {levels}], "
                                 f"got {level}"))
    if db.preserve_ordering:
        if levels > 1:
            p.append(Problem("dynamic_batching.preserve_ordering",
                             f"only one priority level is allowed when 'preserve_ordering' is true ({levels} "
                             "given)"))
        policies = [("default_queue_policy", db.default_queue_policy)] + [
            (f"priority_queue_policy[{k}]", v) for k, v in sorted(db.priority_queue_policy.items())]
        for where, pol in policies:
            if pol.default_timeout_microseconds and pol.timeout_action == _DELAY:
                p.append(Problem(f"dynamic_batching.{where}.timeout_action",
                                 "queue policy can not have DELAY as timeout action when 'preserve_ordering' "
                                 "is true"))


def _sequence_batching(cfg: ModelConfig, p: list[Problem], n: list[Problem]) -> None:
    if not cfg.HasField("sequence_batching"):
        return
    sb, mbs = cfg.sequence_batching, cfg.max_batch_size
    if cfg.response_cache.enable:
        p.append(Problem("response_cache.enable", "Response Cache does not currently support models with "
                                                  "sequence "
                         "batching scheduler: disable the response cache"))
    seen_tensors: set[str] = set()
    seen_kinds: dict[int, str] = {}
    for i, ci in enumerate(sb.control_input):
        field = f"sequence_batching.control_input[{i}]"
        if not ci.name:
            p.append(Problem(f"{field}.name", "sequence batching control tensor must have a name"))
        elif ci.name in seen_tensors:
            p.append(Problem(f"{field}.name", f"sequence batching control tensor {ci.name!r} is specified "
                                              "for "
                             "multiple control kinds: one control_input per tensor"))
        seen_tensors.add(ci.name)
        if not ci.control:  # Triton looks for each control kind in the entries: none is no error
            n.append(Problem(f"{field}.control", f"control input {ci.name!r} has no 'control' entry: Triton "
                             "accepts it and never sets that tensor; give its kind"))
        for j, c in enumerate(ci.control):
            kind = _SEQ.Kind.Name(c.kind)
            cfield = f"{field}.control[{j}]"
            if c.kind in seen_kinds:
                p.append(Problem(f"{cfield}.kind", f"sequence batching specifies multiple {kind} tensors "
                                 f"({seen_kinds[c.kind]!r} and {ci.name!r}): one of each kind"))
            seen_kinds.setdefault(c.kind, ci.name)
            given = [n for n in ("int32_false_true", "fp32_false_true", "bool_false_true") if len(getattr(c,
                                                                                                          n))]
            if kind in _BOOL_CONTROLS:
                if not given:
                    p.append(Problem(cfield, f"sequence batching must specify either 'int32_false_true', "
                                     f"'fp32_false_true' or 'bool_false_true' for {kind}"))
                elif len(given) > 1:
                    p.append(Problem(cfield, "sequence batching specifies more than one from "
                                             "'int32_false_true', "
                                     f"'fp32_false_true' and 'bool_false_true' for {kind}"))
                elif len(getattr(c, given[0])) != 2:
                    p.append(Problem(f"{cfield}.{given[0]}", f"sequence batching control '{given[0]}' must "
                                                             "have "
                                     f"exactly 2 entries (the false value, then the true value) for {kind}"))
            else:  # CONTROL_SEQUENCE_CORRID: a typed tensor, no false/true values
                if given:
                    p.append(Problem(cfield, "sequence batching must not specify either 'int32_false_true', "
                                     f"'fp32_false_true' or 'bool_false_true' for {kind}: give 'data_type'"))
                dtype = model_config_pb2.DataType.Name(c.data_type)
                if dtype not in _CORRID_TYPES:
                    p.append(Problem(f"{cfield}.data_type", f"unexpected data type {dtype} for control "
                                                            f"{kind}. "
                                     f"Allowed data types are {', '.join(_CORRID_TYPES)}"))
    if sb.HasField("oldest"):
        for size in sb.oldest.preferred_batch_size:
            if size <= 0 or size > mbs:
                p.append(Problem("sequence_batching.oldest.preferred_batch_size",
                                 "sequence batching preferred batch size must be positive and <= max batch "
                                 f"size ({mbs}), got {size}"))
    if sb.HasField("direct"):
        util = sb.direct.minimum_slot_utilization
        if not 0.0 <= util <= 1.0:
            p.append(Problem("sequence_batching.direct.minimum_slot_utilization",
                             "sequence batching minimum slot utilization must be in range (0.0, 1.0], got "
                             f"{util:g}"))
    # the states: model_config.proto asks for these fields, Triton's configuration checks do not look
    # (the backend may refuse them when it loads the model)
    for i, st in enumerate(sb.state):
        field = f"sequence_batching.state[{i}]"
        for attr in ("input_name", "output_name"):
            if not getattr(st, attr):
                n.append(Problem(f"{field}.{attr}", f"sequence state gives no '{attr}': Triton's "
                                                    "configuration "
                                 "check accepts it, the backend may not; give it"))
        if st.data_type == _TYPE_INVALID:
            n.append(Problem(f"{field}.data_type", "sequence state gives no 'data_type': Triton's "
                                                   "configuration "
                             "check accepts it, the backend may not; give it"))
        if not st.dims:
            n.append(Problem(f"{field}.dims", "sequence state gives no 'dims': Triton's configuration check "
                             "accepts it, the backend may not; give them"))
        elif any(d < 1 and d != -1 for d in st.dims):
            n.append(Problem(f"{field}.dims", "sequence state dimensions should be integers >= 1, or -1 for "
                                              "a "
                             "variable-size dimension: Triton's configuration check accepts others, the "
                             "backend may not"))


def _instance_groups(cfg: ModelConfig, platform: str, p: list[Problem]) -> None:
    for i, group in enumerate(cfg.instance_group):
        field = f"instance_group[{i}]"
        kind = model_config_pb2.ModelInstanceGroup.Kind.Name(group.kind)
        if group.kind in (KIND_CPU, KIND_MODEL) and group.gpus:
            p.append(Problem(f"{field}.gpus", f"instance group has kind {kind} but specifies one or more "
                                              "GPUs: "
                             "remove 'gpus' or use KIND_GPU"))
        if any(g < 0 for g in group.gpus):
            p.append(Problem(f"{field}.gpus", f"GPU ids are >= 0, got {list(group.gpus)}"))
        if group.profile and platform != "tensorrt_plan":
            p.append(Problem(f"{field}.profile", "specifies profile field which is only supported for "
                                                 "TensorRT models"))
        for prof in group.profile:
            if not prof.isdigit():
                p.append(Problem(f"{field}.profile", f"invalid profile {prof!r}: the field should contain "
                                                     "the string "
                                 "representation of a non-negative integer"))


def _warmup(cfg: ModelConfig, p: list[Problem], n: list[Problem]) -> None:
    # Triton makes a sample's requests when it loads the model (TritonModelInstance::GenerateWarmupData):
    # it skips a sample of batch size 0 and sends batch_size requests of one item each, refusing an
    # input without data or with a variable-size dimension; the rest model_config.proto only asks for
    mbs = cfg.max_batch_size
    for i, w in enumerate(cfg.model_warmup):
        field = f"model_warmup[{i}]"
        if not w.name:
            n.append(Problem(f"{field}.name", "a warm-up sample should have a 'name' (Triton does not check "
                                              "it; "
                             "its log names samples by it)"))
        if w.batch_size < 1:
            n.append(Problem(f"{field}.batch_size", f"batch size {w.batch_size}: Triton skips this warm-up "
                                                    "sample; "
                             "give 1 or more to run it"))
            continue
        if w.batch_size > max(mbs, 1):
            n.append(Problem(f"{field}.batch_size", f"model_config.proto asks for a warm-up batch size in "
                             f"[1, {max(mbs, 1)}] (max_batch_size {mbs}), got {w.batch_size}: Triton does "
                             "not check it and sends that many requests of one item each"))
        if not w.inputs:
            n.append(Problem(f"{field}.inputs", "the warm-up sample gives no inputs: Triton sends requests "
                                                "without "
                             "inputs, which the model may fail on"))
        for iname, inp in sorted(w.inputs.items()):
            if inp.data_type == _TYPE_INVALID:
                n.append(Problem(f"{field}.inputs[{iname}].data_type", "warm-up input gives no 'data_type': "
                                 "Triton sends it untyped, which the model may fail on; give it"))
            if inp.WhichOneof("input_data_type") is None:
                p.append(Problem(f"{field}.inputs[{iname}]", f"warmup setting expects input {iname!r} to "
                                                             "have "
                                 "input_data_type set: give one of 'zero_data', 'random_data' or "
                                 "'input_data_file'"))
            if -1 in inp.dims:
                p.append(Problem(f"{field}.inputs[{iname}].dims", "warmup setting expects all variable-size "
                                 f"dimensions are specified for input {iname!r}: give every dimension's "
                                 f"size, got {list(inp.dims)}"))


def _ensemble(cfg: ModelConfig, name: str, p: list[Problem]) -> None:
    if cfg.platform != ENSEMBLE:
        p.append(Problem("platform", f"ensemble scheduling cannot be set for a model whose platform is not "
                         f"ensemble (got {cfg.platform!r}): set platform: \"ensemble\""))
        return
    if not cfg.HasField("ensemble_scheduling"):
        p.append(Problem("ensemble_scheduling", "ensemble scheduling must be set for a model whose platform "
                                                "is "
                         "ensemble: add ensemble_scheduling { step [ ... ] }"))
        return
    for attr, what in (("instance_group", "instance group"), ("model_warmup", "model_warmup")):
        if len(getattr(cfg, attr)):
            p.append(Problem(attr, f"{what} should not be specified for an ensemble (its steps' models have "
                                   "their "
                             "own): remove it"))
    if cfg.HasField("optimization"):
        p.append(Problem("optimization", "optimization should not be specified for an ensemble: remove it"))
    steps = cfg.ensemble_scheduling.step
    if not steps:
        p.append(Problem("ensemble_scheduling.step", "must specify 'step' for an ensemble"))
        return
    # the data flow: a tensor is written by at most one step; a step runs once all its inputs are ready
    writer: dict[str, int] = {}
    ok = True
    for i, step in enumerate(steps):
        field = f"ensemble_scheduling.step[{i}]"
        if not step.model_name:
            p.append(Problem(f"{field}.model_name", f"must specify 'model_name' in step {i}"))
        elif step.model_name == cfg.name:
            p.append(Problem(f"{field}.model_name", f"step {i} calls the ensemble itself ({cfg.name!r}): "
                                                    "circular "
                             "dependency"))
        if step.model_version < -1:
            p.append(Problem(f"{field}.model_version", "must be -1 (latest) or a version number, got "
                                                       f"{step.model_version}"))
        if not step.input_map:
            p.append(Problem(f"{field}.input_map", f"must specify 'input_map' in step {i}"))
            ok = False
        if not step.output_map:
            p.append(Problem(f"{field}.output_map", f"must specify 'output_map' in step {i}"))
            ok = False
        for tensor in sorted(step.output_map.values()):
            if tensor in writer:
                p.append(Problem(f"{field}.output_map", f"ensemble tensor {tensor!r} can appear in an output "
                                                        "map only "
                                 f"once (already written by step {writer[tensor]})"))
                ok = False
            writer.setdefault(tensor, i)
    if not ok:
        return
    ready = {inp.name for inp in cfg.input}
    consumed = {t for step in steps for t in step.input_map.values()}
    unused_inputs = [inp.name for inp in cfg.input if inp.name not in consumed]
    pending = list(range(len(steps)))
    progress = True
    while progress:
        progress = False
        for i in list(pending):
            if set(steps[i].input_map.values()) <= ready:
                ready |= set(steps[i].output_map.values())
                pending.remove(i)
                progress = True
    # a misspelt tensor name is both unreachable (read, never written) and unused (written, never
    # read): say it once, as a "did you mean"
    outputs = {o.name for o in cfg.output}
    unused = sorted(t for t in writer if t not in outputs and t not in consumed) + unused_inputs
    available = sorted(ready | set(writer))
    suggested: set[str] = set()
    rooted = False
    for i in pending:
        lack = sorted(t for t in steps[i].input_map.values() if t not in ready and t not in writer)
        for t in lack:
            rooted = True
            near = difflib.get_close_matches(t, unused, 1, 0.4) or difflib.get_close_matches(t, available, 1)
            suggested.update(near)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            p.append(Problem(f"ensemble_scheduling.step[{i}].input_map",
                             f"ensemble tensor {t!r} is read but neither an ensemble input nor written by a "
                             f"step: it is unreachable{hint}"))
    for i, out in enumerate(cfg.output):
        if out.name not in writer:
            near = difflib.get_close_matches(out.name, unused, 1, 0.4)
            suggested.update(near)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            p.append(Problem(f"output[{i}]", f"ensemble output {out.name!r} is not written by any step's "
                             f"output_map{hint}"))
        elif out.name not in ready and not rooted:
            p.append(Problem(f"output[{i}]", f"output {out.name!r} for ensemble is not written: its steps "
                                             "wait on "
                             "each other (a cycle in the steps' input and output maps)"))
    for i, inp in enumerate(cfg.input):
        if inp.name in unused_inputs and inp.name not in suggested:
            p.append(Problem(f"input[{i}]",
                             f"ensemble input {inp.name!r} is not used by any step's input_map"))
    for tensor in unused:
        if tensor not in suggested and tensor not in unused_inputs:
            p.append(Problem(f"ensemble_scheduling.step[{writer[tensor]}].output_map",
                             f"ensemble tensor {tensor!r} is unused in the ensemble: no step reads it and it "
                             "is not an ensemble output"))


def _model_metrics(cfg: ModelConfig, p: list[Problem], n: list[Problem]) -> None:
    for i, mc in enumerate(cfg.model_metrics.metric_control):
        field = f"model_metrics.metric_control[{i}]"
        if not mc.HasField("metric_identifier"):
            p.append(Problem(f"{field}.metric_identifier", "metric control must specify 'metric_identifier'"))
        elif not mc.metric_identifier.family:
            p.append(Problem(f"{field}.metric_identifier.family", "metric identifier must specify non-empty "
                                                                  "'family'"))
        if not mc.HasField("histogram_options"):
            p.append(Problem(f"{field}.histogram_options", "metric control must specify 'histogram_options'"))
        elif not mc.histogram_options.buckets:
            p.append(Problem(f"{field}.histogram_options.buckets", "histogram options must specify non-empty "
                                                                   "'buckets'"))
        elif list(mc.histogram_options.buckets) != sorted(set(mc.histogram_options.buckets)):
            # Triton's ValidateModelMetrics does not look at the order; prometheus-cpp wants them sorted
            n.append(Problem(f"{field}.histogram_options.buckets",
                             "histogram buckets should be in increasing order (Triton's check accepts "
                             "others; the metrics library expects them sorted)"))


def _rate_limiter(cfg: ModelConfig, n: list[Problem]) -> None:
    # Triton's rate limiter keys resources by name and does not check them in the configuration
    for i, group in enumerate(cfg.instance_group):
        seen: set[str] = set()
        for j, res in enumerate(group.rate_limiter.resources):
            field = f"instance_group[{i}].rate_limiter.resources[{j}]"
            if not res.name:
                n.append(Problem(f"{field}.name", "a rate-limiter resource without a 'name' (Triton accepts "
                                                  "it "
                                 "as the resource named ''): name it"))
            elif res.name in seen:
                n.append(Problem(f"{field}.name", f"resource {res.name!r} is listed twice in one instance "
                                                  "group: "
                                 "Triton keeps one count for it; list it once"))
            seen.add(res.name)


def advice(cfg: ModelConfig, folder: str | None = None, files: ModelFiles | None = None) -> list[Problem]:
    """What Triton accepts but probably does not do what the author meant, or what only the server
    decides (a custom backend): notes, not refusals."""
    notes: list[Problem] = list(_rules(cfg, folder, files or ModelFiles())[1])
    if cfg.HasField("dynamic_batching") and cfg.max_batch_size == 0:
        notes.append(Problem("dynamic_batching", "with max_batch_size 0 the dynamic batcher forms no batches "
                             "(Triton accepts it; requests are still queued and scheduled one by one): set "
                             "max_batch_size > 0 to batch"))
    for i, group in enumerate(cfg.instance_group):
        if group.count < 0:
            notes.append(Problem(f"instance_group[{i}].count", f"{group.count} is below 1: Triton accepts it "
                                                               "and "
                                 "runs its default instance count instead; give the count you mean"))
    return notes


def check(cfg: ModelConfig, host_gpus: int | None = None, folder: str | None = None,
          files_backend: str | None = None, files_known: bool = False,
          python_autocomplete: bool = False, compute_capability: float | None = None) -> list[Problem]:
    """What Triton would refuse in ``cfg``, and what a host with ``host_gpus`` GPUs (the lowest
    ``compute_capability`` among them, where known) cannot run."""
    problems = jinja_in(cfg) + triton_rules(cfg, folder, files_backend, files_known, python_autocomplete)
    if host_gpus is None:
        return problems
    if host_gpus > 0 and _below_tensorrt(compute_capability):
        need = f"{TENSORRT_MIN_COMPUTE_CAPABILITY:.1f}"
        if tensorrt_accelerators(cfg):
            problems.append(Problem(
                "optimization.execution_accelerators.gpu_execution_accelerator",
                f"TensorRT accelerator on GPUs of compute capability {compute_capability:.1f}: TensorRT 10 "
                f"needs {need} or more; drop it, or run on a newer GPU"))
        if filled_backend(cfg, folder) == "tensorrt":
            problems.append(Problem(
                "platform", f"a TensorRT plan on GPUs of compute capability {compute_capability:.1f}: "
                            f"TensorRT 10 needs {need} or more; serve the ONNX model instead"))
    for i, group in enumerate(cfg.instance_group):
        field = f"instance_group[{i}]"
        if group.kind == KIND_GPU and host_gpus == 0:
            problems.append(Problem(f"{field}.kind",
                                    "KIND_GPU on a host with no GPU: use KIND_CPU or a GPU node"))
        for gid in group.gpus:
            if host_gpus > 0 and gid >= host_gpus:
                problems.append(Problem(
                    f"{field}.gpus", f"GPU id {gid} does not exist on a host with {host_gpus} GPU(s)"))
    accel = cfg.optimization.execution_accelerators.gpu_execution_accelerator
    if accel and host_gpus == 0:
        names = ", ".join(a.name for a in accel)
        problems.append(Problem("optimization.execution_accelerators.gpu_execution_accelerator",
                                f"GPU accelerator ({names}) on a host with no GPU"))
    return problems


def jinja_in(cfg: ModelConfig) -> list[Problem]:
    """Every string of the configuration (map keys too) that holds a Jinja delimiter once protobuf's
    escapes are read (``"\\173\\173"`` is ``{{``): the plan, its manifest and the load body carry these
    strings to Ansible, which would evaluate them."""
    out = []

    def walk(obj: Any, field: str) -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                at = f"{field}.{k}" if field else str(k)
                if JINJA_RE.search(str(k)):
                    out.append(Problem(field or "(config)", f"key {str(k)[:60]!r} holds a Jinja expression "
                                       "({{, {% or {#) Ansible would evaluate: remove it"))
                walk(v, at)
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                walk(v, f"{field}[{i}]")
        elif isinstance(obj, str) and JINJA_RE.search(obj):
            out.append(Problem(field, f"{obj[:60]!r} holds a Jinja expression ({{{{, {{% or {{#) once its "
                                      "escapes are read, which Ansible would evaluate: remove it"))

    walk(to_dict(cfg), "")
    return out


def adapt_to_host(cfg: ModelConfig, host_gpus: int,
                  compute_capability: float | None = None) -> tuple[ModelConfig, list[str]]:
    """A copy of ``cfg`` that a host with ``host_gpus`` GPUs can run, and notes on what changed.

    With no GPU: KIND_GPU groups become KIND_CPU with the same total instance count, GPU
    accelerators are dropped. With fewer GPUs than addressed: GPU ids wrap onto the host's GPUs.
    On GPUs below TensorRT's compute capability (``compute_capability``, the lowest of the host's;
    None when unknown): TensorRT accelerators are dropped (the model runs on its backend alone).
    """
    out = ModelConfig()
    out.CopyFrom(cfg)
    notes: list[str] = []
    if host_gpus <= 0:
        for i, group in enumerate(out.instance_group):
            if group.kind == KIND_GPU:
                total = max(group.count, 1) * max(len(group.gpus), 1)
                notes.append(f"instance_group[{i}]: KIND_GPU x{total} -> KIND_CPU x{total} (host has no GPU)")
                group.kind = KIND_CPU
                group.count = total
                del group.gpus[:]
        accel = out.optimization.execution_accelerators
        if accel.gpu_execution_accelerator:
            names = ", ".join(a.name for a in accel.gpu_execution_accelerator)
            notes.append(f"optimization: GPU accelerator {names} dropped (host has no GPU)")
            del accel.gpu_execution_accelerator[:]
        return out, notes
    for i, group in enumerate(out.instance_group):
        if group.kind == KIND_GPU and any(g >= host_gpus for g in group.gpus):
            wrapped = sorted({g % host_gpus for g in group.gpus})
            notes.append(f"instance_group[{i}]: gpus {list(group.gpus)} -> {wrapped} "
                         f"(host has {host_gpus} GPU(s))")
            # keep the instance count per GPU listed: fold the lost GPUs' instances onto the kept ones
            group.count = max(group.count, 1) * len(group.gpus) // len(wrapped)
            del group.gpus[:]
            group.gpus.extend(wrapped)
    if _below_tensorrt(compute_capability) and tensorrt_accelerators(out):
        accel = out.optimization.execution_accelerators.gpu_execution_accelerator
        for i in reversed(range(len(accel))):
            if accel[i].name.lower() == "tensorrt":
                del accel[i]
        notes.append(f"optimization: GPU accelerator tensorrt dropped (TensorRT 10 needs compute capability "
                     f"{TENSORRT_MIN_COMPUTE_CAPABILITY:.1f}; the host's GPUs have {compute_capability:.1f})")
    return out, notes


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
