"""A Triton model configuration as text and as data: parse config.pbtxt strictly, apply a variant's
overrides, render it, and the load API's body.

Parsing uses Triton's own schema (``tritonclient.grpc.model_config_pb2``), so a key Triton does not
know is an error here too, with its line and column. Overrides are applied on the JSON form of the
configuration (what Triton's repository API takes): a top-level key of the override replaces the
base's key, ``null`` removes it.
"""

from __future__ import annotations

import codecs
import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from google.protobuf import json_format, text_format

from ..errors import ServeSystemError
from ..textfile import decode_utf8, read_bytes
from . import protowords
from .protos import model_config_pb2

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
        msg = protowords.text_error(msg.removeprefix(prefix), model_config_pb2.DESCRIPTOR.pool)
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



def to_dict(cfg: ModelConfig) -> dict[str, Any]:
    """The configuration as a plain dict with proto field names (the load API's JSON form)."""
    return json_format.MessageToDict(cfg, preserving_proto_field_name=True)


def from_dict(data: dict[str, Any], where: str) -> ModelConfig:
    """Build a ModelConfig from a dict, strictly; ``where`` prefixes the error message."""
    problem = protowords.check_data(data, ModelConfig.DESCRIPTOR)  # the field and the fix, in our words
    if problem is not None:
        raise ConfigError(f"{where}: {problem}")
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
