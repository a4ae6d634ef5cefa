"""Triton's rules for a model configuration: what Triton refuses when it loads it, and notes on what
it accepts but probably does not do what was meant (:func:`advice`).
"""

from __future__ import annotations

import difflib
import math
import posixpath
import re
from typing import Any

from .backends import (
    AUTOCOMPLETE_BACKENDS,
    ENSEMBLE,
    KNOWN_BACKENDS,
    PLATFORM_BACKEND,
    PLATFORM_BACKENDS,
    ModelFiles,
    filled_backend,
    filled_platform,
)
from .ensemble import ensemble_rules
from .pbtxt import KIND_CPU, ModelConfig, Problem
from .protos import model_config_pb2

# Written from Triton's own checks (triton-inference-server/core: model_config_utils.cc's
# ValidateModelConfig, ValidateModelIOConfig, ValidateInstanceGroup and the ensemble checks, the
# model repository manager, backend_model.cc and the warm-up code) and the comments of
# model_config.proto. A refusal here is one Triton makes when it loads the configuration; what
# model_config.proto asks for but Triton does not check is a note (see :func:`advice`). Each rule
# names the field (a dotted path) and says, in Triton's words where it has them, what is wrong and
# how to fix it. Every rule is checked: a configuration gets all its problems at once (Triton itself
# stops at the first).

_BACKEND_NAME = re.compile(r"^[A-Za-z0-9_]+$")

KIND_MODEL = model_config_pb2.ModelInstanceGroup.Kind.Value("KIND_MODEL")
_TYPE_INVALID = model_config_pb2.DataType.Value("TYPE_INVALID")
_SEQ = model_config_pb2.ModelSequenceBatching.Control
_BOOL_CONTROLS = ("CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_END", "CONTROL_SEQUENCE_READY")
_CORRID_TYPES = ("TYPE_UINT64", "TYPE_INT64", "TYPE_UINT32", "TYPE_INT32", "TYPE_STRING")
_DELAY = model_config_pb2.ModelQueuePolicy.TimeoutAction.Value("DELAY")
_FORMAT_NONE = model_config_pb2.ModelInput.Format.Value("FORMAT_NONE")


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
    platform = filled_platform(cfg, backend)
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
        ensemble_rules(cfg, name, p)
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
    _sequence_controls(sb, p, n)
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
    _sequence_states(sb, n)


def _sequence_controls(sb: Any, p: list[Problem], n: list[Problem]) -> None:
    """The control inputs: one tensor per kind and one kind per tensor; false/true values for the
    boolean controls, a data type for the correlation id."""
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


def _sequence_states(sb: Any, n: list[Problem]) -> None:
    """The states: model_config.proto asks for these fields, Triton's configuration checks do not look
    (the backend may refuse them when it loads the model)."""
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

