"""Bad input for ``serve-system validate`` (Triton's model-configuration rules, encodings, the
command's own arguments), ``serve-system stats``, ``serve-system import``, and ``ansible-playbook``
with an unusable inventory (ansible.cfg's [inventory] settings)."""

from __future__ import annotations

import json

from .corpus import BadInput

CASES: list[BadInput] = []

# a model folder "m" with a valid Python-backend model; each case breaks one rule
HEAD = 'name: "m"\nbackend: "python"\nmax_batch_size: 8\n'
IO = ('input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
      'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]\n')
ENS_HEAD = 'name: "m"\nplatform: "ensemble"\nmax_batch_size: 8\n'
ENS_IO = ('input [ { name: "RAW" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
          'output [ { name: "LABEL" data_type: TYPE_FP32 dims: [ 4 ] } ]\n')
TWO_STEPS = ('ensemble_scheduling { step [\n'
             '  { model_name: "pre" input_map { key: "IN" value: "RAW" } output_map { key: "OUT" value: '
             '"mid" } },\n'
             '  { model_name: "cls" input_map { key: "IN" value: "mid" } output_map { key: "OUT" value: '
             '"LABEL" } }\n'
             '] }\n')
SEQ = "sequence_batching { control_input [ %s ] }\n"


def _cfg(case: str, text: str | bytes, field: str, rule: str, folder: str = "m",
         extra: tuple[str, ...] = ()) -> None:
    path = f"{folder}/config.pbtxt"
    CASES.append(BadInput(id=f"validate-{case}", argv=("serve-system", "validate", *extra, "{tmp}/" + path),
                          expect=("{tmp}/" + path, field, rule), files={path: text}))


# --- the file itself
_cfg("empty-file", "", "(config)", "the configuration is empty")
# issue 26: a string that is Jinja once protobuf's escapes are read (octal, hex) reaches the plan
_OCTAL = 'parameters { key: "p" value { string_value: "\\173\\173 7 \\175\\175" } }\n'
_HEX = 'parameters { key: "\\x7b% if 1 %\\x7d" value { string_value: "v" } }\n'
_cfg("jinja-octal-escape", HEAD + IO + _OCTAL,
     "parameters.p.string_value: '{{{{ 7 }}}}'", "holds a Jinja expression")
_cfg("jinja-hex-escape-key", HEAD + IO + _HEX,
     "parameters: key '{{% if 1 %}}'", "holds a Jinja expression")
_cfg("only-comments", "# name: \"m\"\n# backend: \"python\"\n", "(config)", "the configuration is empty")
_cfg("latin1-bytes", (HEAD + '# modèle\n' + IO).encode("latin-1"), "not UTF-8 text", "save config.pbtxt as "
                                                                                     "UTF-8")
_cfg("utf16-bom", (HEAD + IO).encode("utf-16"), "UTF-16 text", "save it as UTF-8")
_cfg("binary", b"\x08\x01\x12\x04food\x00\x00\x10\x10", "a binary file", "give the text configuration")
_cfg("unknown-field", HEAD + IO + "instance_groups [ { kind: KIND_CPU } ]\n", "instance_groups",
     'is not a field of model config (did you mean "instance_group"?')
_cfg("unknown-enum", HEAD + IO + "instance_group [ { kind: KIND_GPUS } ]\n", "KIND_GPUS",
     "KIND_GPUS is not a kind; use KIND_AUTO, KIND_GPU, KIND_CPU or KIND_MODEL")
_cfg("unknown-data-type", HEAD + 'input [ { name: "IN" data_type: TYPE_FLOAT32 dims: [ 4 ] } ]\n',
     "TYPE_FLOAT32", "is not a data type; use TYPE_INVALID, TYPE_BOOL,")
_cfg("unbalanced-brace", HEAD + IO + "dynamic_batching { max_queue_delay_microseconds: 100\n", ":6:",
     'Expected "}}"')  # {} are format fields in expect
_cfg("string-for-number", HEAD.replace("8", '"8"') + IO, "max_batch_size", '"8" is not a whole number')

# --- names, platform and backend
_cfg("name-differs-from-folder", HEAD + IO, "name", "must match the name of the model repository directory",
     folder="food_classifier")
_cfg("no-backend-no-platform", 'name: "m"\nmax_batch_size: 8\n' + IO, "backend",
     "must specify 'platform' or 'backend'")
_cfg("unknown-platform", 'name: "m"\nplatform: "onnx"\n' + IO, "platform", "unexpected platform type 'onnx'")
_cfg("platform-backend-pair", 'name: "m"\nplatform: "tensorrt_plan"\nbackend: "onnxruntime"\n' + IO,
     "platform",
     "unexpected 'platform' and 'backend' pair")
_cfg("ensemble-with-backend", ENS_HEAD + 'backend: "python"\n' + ENS_IO + TWO_STEPS, "backend",
     "empty backend type")
_cfg("unknown-platform-of-onnxruntime", 'name: "m"\nplatform: "onnx"\nbackend: "onnxruntime"\n' + IO,
     "platform", "unexpected 'platform' and 'backend' pair")
_cfg("runtime-escapes", HEAD + IO + 'runtime: "../other/libtriton_identity.so"\n', "runtime",
     "escapes the backend directory")

# --- inputs and outputs
_cfg("max-batch-size-negative", HEAD.replace("8", "-1") + IO, "max_batch_size", "must be non-negative")
_cfg("input-without-dims", HEAD + 'input [ { name: "IN" data_type: TYPE_FP32 } ]\n', "input[0].dims",
     "must specify 'dims'")
_cfg("input-dim-zero", HEAD + 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 3, 0 ] } ]\n',
     "input[0].dims",
     "dimension must be integer >= 1, or -1")
_cfg("output-dim-below-minus-one", HEAD + 'output [ { name: "O" data_type: TYPE_FP32 dims: [ -2 ] } ]\n',
     "output[0].dims", "dimension must be integer >= 1, or -1")
_cfg("input-without-data-type", HEAD + 'input [ { name: "IN" dims: [ 4 ] } ]\n', "input[0].data_type",
     "must specify 'data_type'")
_cfg("output-without-name", HEAD + 'output [ { data_type: TYPE_FP32 dims: [ 4 ] } ]\n', "output[0].name",
     "must specify 'name'")
_cfg("second-input-without-dims", HEAD + 'input [ { name: "A" data_type: TYPE_FP32 dims: [ 1 ] },\n'
     '        { name: "B" data_type: TYPE_INT64 } ]\n', "input[1].dims", "must specify 'dims'")
_cfg("reshape-element-count", HEAD + 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2, 4 ] '
     'reshape { shape: [ 3, 3 ] } } ]\n', "input[0].reshape.shape", "has different size for dims and reshape")
_cfg("reshape-variable-dim-count", HEAD + 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2, -1 ] '
     'reshape { shape: [ -1, -1, 2 ] } } ]\n', "input[0].reshape.shape",
     "different number of variable-size dimensions")
_cfg("reshape-only-one-variable", HEAD + 'output [ { name: "O" data_type: TYPE_FP32 dims: [ -1 ] '
     'reshape { shape: [ 4 ] } } ]\n', "output[0].reshape.shape", "has different size for dims and reshape")
_cfg("reshape-trunks-differ", HEAD + 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2, 4, -1, 6 ] '
     'reshape { shape: [ 4, -1, 2, 6 ] } } ]\n', "input[0].reshape.shape", "element counts between")
_cfg("reshape-zero", HEAD + 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 0 ] } '
                            '} ]\n',
     "input[0].reshape.shape", "reshape dimensions must be integer >= 1")
_cfg("empty-reshape-non-batching", 'name: "m"\nbackend: "python"\n'
     'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ ] } } ]\n', "input[0].reshape",
     "cannot have empty reshape for non-batching model")
_cfg("nchw-two-dims", HEAD + 'input [ { name: "IN" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 224, 224 '
                             '] } ]\n',
     "input[0].format", "require 3 dims")
_cfg("shape-tensor-not-tensorrt", HEAD + 'input [ { name: "IN" data_type: TYPE_INT32 dims: [ 2 ] '
     'is_shape_tensor: true } ]\n', "input[0].is_shape_tensor", "only supported for TensorRT")

# --- dynamic batching, priorities
_cfg("preferred-above-max", HEAD + IO + "dynamic_batching { preferred_batch_size: [ 4, 16 ] }\n",
     "dynamic_batching.preferred_batch_size", "preferred size must be <= max batch size")
_cfg("preferred-zero", HEAD + IO + "dynamic_batching { preferred_batch_size: [ 0 ] }\n",
     "dynamic_batching.preferred_batch_size", "must be positive")
_cfg("preferred-without-batching", 'name: "m"\nbackend: "python"\n' + IO
     + "dynamic_batching { preferred_batch_size: [ 4 ] }\n", "dynamic_batching.preferred_batch_size",
     "> max_batch_size 0")
_cfg("default-priority-zero", HEAD + IO + "dynamic_batching { priority_levels: 2 }\n",
     "dynamic_batching.default_priority_level", "must be in range [1, 2]")
_cfg("default-priority-too-high", HEAD + IO + "dynamic_batching { priority_levels: 2 default_priority_level: "
                                              "3 }\n",
     "dynamic_batching.default_priority_level", "must be in range [1, 2]")
_cfg("priority-policy-level", HEAD + IO + "dynamic_batching { priority_levels: 2 default_priority_level: 1 "
     "priority_queue_policy { key: 5 value: { max_queue_size: 4 } } }\n",
     "dynamic_batching.priority_queue_policy",
     "priority level in range [1, 2]")
_cfg("preserve-ordering-priorities", HEAD + IO + "dynamic_batching { preserve_ordering: true "
                                                 "priority_levels: 2 "
     "default_priority_level: 1 }\n", "dynamic_batching.preserve_ordering", "only one priority level")
_cfg("preserve-ordering-delay", HEAD + IO + "dynamic_batching { preserve_ordering: true default_queue_policy "
                                            "{ "
     "timeout_action: DELAY default_timeout_microseconds: 100 } }\n",
     "dynamic_batching.default_queue_policy.timeout_action", "can not have DELAY")

# --- batch inputs and outputs
_BI = 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N" data_type: TYPE_FP32 source_input: %s } ]\n'
_cfg("batch-input-unknown-source", HEAD + IO + _BI % '"NOPE"', "batch_input[0].source_input",
     "unknown source input name 'NOPE'")
_cfg("batch-input-two-sources", HEAD + IO + _BI % '[ "IN", "IN" ]', "batch_input[0].source_input",
     "expects 1 source input, got 2")
_cfg("batch-input-int64", HEAD + IO + _BI.replace("TYPE_FP32", "TYPE_INT64") % '"IN"',
     "batch_input[0].data_type",
     "must be TYPE_INT32 or TYPE_FP32")
_BO = 'batch_output [ { target_name: %s kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: %s } ]\n'
_cfg("batch-output-unknown-target", HEAD + IO + _BO % ('"NOPE"', '"IN"'), "batch_output[0].target_name",
     "unknown target output name 'NOPE'")
_cfg("batch-output-target-twice", HEAD + IO + _BO % ('[ "OUT", "OUT" ]', '"IN"'),
     "batch_output[0].target_name",
     "can only be specified once")
_cfg("batch-output-no-source", HEAD + IO + 'batch_output [ { target_name: "OUT" } ]\n',
     "batch_output[0].source_input", "expects 1 source input, got 0")

# --- sequence batching
_START = '{ name: "S" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }'
_cfg("sequence-two-starts", HEAD + IO + SEQ % (_START + ", " + _START.replace('"S"', '"S2"')),
     "sequence_batching.control_input[1].control[0].kind", "multiple CONTROL_SEQUENCE_START tensors")
_cfg("sequence-tensor-twice", HEAD + IO + SEQ % (_START + ', { name: "S" control [ { kind: '
                                                          'CONTROL_SEQUENCE_END '
     'int32_false_true: [ 0, 1 ] } ] }'), "sequence_batching.control_input[1].name",
     "is specified for multiple control kinds")
_cfg("sequence-start-without-values", HEAD + IO + SEQ % '{ name: "S" control [ { kind: '
                                                        'CONTROL_SEQUENCE_START } ] }',
     "sequence_batching.control_input[0].control[0]", "must specify either 'int32_false_true'")
_cfg("sequence-one-value", HEAD + IO + SEQ % '{ name: "S" control [ { kind: CONTROL_SEQUENCE_READY '
     'int32_false_true: [ 1 ] } ] }', "control[0].int32_false_true", "exactly 2 entries")
_cfg("sequence-two-value-kinds", HEAD + IO + SEQ % '{ name: "S" control [ { kind: CONTROL_SEQUENCE_END '
     'int32_false_true: [ 0, 1 ] fp32_false_true: [ 0, 1 ] } ] }',
     "sequence_batching.control_input[0].control[0]",
     "more than one from")
_cfg("sequence-corrid-fp32", HEAD + IO + SEQ % '{ name: "C" control [ { kind: CONTROL_SEQUENCE_CORRID '
     'data_type: TYPE_FP32 } ] }', "control[0].data_type", "unexpected data type TYPE_FP32 for control "
     "CONTROL_SEQUENCE_CORRID")
_cfg("sequence-corrid-values", HEAD + IO + SEQ % '{ name: "C" control [ { kind: CONTROL_SEQUENCE_CORRID '
     'data_type: TYPE_UINT64 int32_false_true: [ 0, 1 ] } ] }',
     "sequence_batching.control_input[0].control[0]",
     "must not specify")
_cfg("sequence-control-no-name", HEAD + IO + SEQ % '{ control [ { kind: CONTROL_SEQUENCE_START '
     'int32_false_true: [ 0, 1 ] } ] }', "sequence_batching.control_input[0].name", "must have a name")
_cfg("sequence-response-cache", HEAD + IO + "sequence_batching { }\nresponse_cache { enable: true }\n",
     "response_cache.enable", "does not currently support models with sequence batching")
_cfg("sequence-oldest-preferred", HEAD + IO + "sequence_batching { oldest { preferred_batch_size: [ 16 ] } "
                                              "}\n",
     "sequence_batching.oldest.preferred_batch_size", "<= max batch size")
_cfg("sequence-slot-utilization", HEAD + IO + "sequence_batching { direct { minimum_slot_utilization: 1.5 } "
                                              "}\n",
     "sequence_batching.direct.minimum_slot_utilization", "must be in range (0.0, 1.0]")

# --- instance groups (and the host)
_cfg("cpu-group-with-gpus", HEAD + IO + "instance_group [ { kind: KIND_CPU gpus: [ 0 ] } ]\n",
     "instance_group[0].gpus", "has kind KIND_CPU but specifies one or more GPUs")
_cfg("model-group-with-gpus", HEAD + IO + "instance_group [ { kind: KIND_MODEL gpus: [ 1 ] } ]\n",
     "instance_group[0].gpus", "has kind KIND_MODEL but specifies one or more GPUs")
_cfg("profile-not-tensorrt", HEAD + IO + 'instance_group [ { kind: KIND_GPU profile: [ "0" ] } ]\n',
     "instance_group[0].profile", "only supported for TensorRT")
_cfg("profile-not-a-number", 'name: "m"\nplatform: "tensorrt_plan"\n' + IO
     + 'instance_group [ { kind: KIND_GPU profile: [ "first" ] } ]\n', "instance_group[0].profile",
     "non-negative integer")
_cfg("gpu-id-beyond-host", HEAD + IO + "instance_group [ { kind: KIND_GPU gpus: [ 0, 1 ] } ]\n",
     "instance_group[0].gpus", "GPU id 1 does not exist on a host with 1 GPU(s)", extra=("--gpus", "1"))
_cfg("gpu-group-no-gpu-host", HEAD + IO + "instance_group [ { kind: KIND_GPU } ]\n", "instance_group[0].kind",
     "KIND_GPU on a host with no GPU", extra=("--gpus", "0"))

# --- ensembles
_cfg("ensemble-instance-group", ENS_HEAD + ENS_IO + TWO_STEPS + "instance_group [ { kind: KIND_CPU } ]\n",
     "instance_group", "should not be specified for an ensemble")
_cfg("ensemble-optimization", ENS_HEAD + ENS_IO + TWO_STEPS + "optimization { cuda { graphs: true } }\n",
     "optimization", "should not be specified for an ensemble")
_cfg("ensemble-warmup", ENS_HEAD + ENS_IO + TWO_STEPS + 'model_warmup [ { name: "w" batch_size: 1 } ]\n',
     "model_warmup", "should not be specified for an ensemble")
_cfg("ensemble-no-scheduling", ENS_HEAD + ENS_IO, "ensemble_scheduling", "ensemble scheduling must be set")
_cfg("scheduling-not-ensemble", HEAD + ENS_IO + TWO_STEPS, "platform", "ensemble scheduling cannot be set")
_cfg("ensemble-no-steps", ENS_HEAD + ENS_IO + "ensemble_scheduling { }\n", "ensemble_scheduling.step",
     "must specify 'step'")
_cfg("ensemble-step-no-model", ENS_HEAD + ENS_IO + TWO_STEPS.replace('model_name: "pre" ', ""),
     "ensemble_scheduling.step[0].model_name", "must specify 'model_name' in step 0")
_cfg("ensemble-step-no-input-map", ENS_HEAD + ENS_IO + TWO_STEPS.replace('input_map { key: "IN" value: "mid" '
                                                                         '} ', ""),
     "ensemble_scheduling.step[1].input_map", "must specify 'input_map' in step 1")
_cfg("ensemble-written-twice", ENS_HEAD + ENS_IO + TWO_STEPS.replace('value: "mid" } }', 'value: "LABEL" } }',
                                                                     1),
     "ensemble_scheduling.step[1].output_map", "can appear in an output map only once")
_cfg("ensemble-input-unused", ENS_HEAD + 'input [ { name: "RAW" data_type: TYPE_FP32 dims: [ 4 ] },\n'
     '        { name: "EXTRA" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
     'output [ { name: "LABEL" data_type: TYPE_FP32 dims: [ 4 ] } ]\n' + TWO_STEPS, "input[1]",
     "ensemble input 'EXTRA' is not used")
_cfg("ensemble-output-unwritten", ENS_HEAD + 'input [ { name: "RAW" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
     'output [ { name: "LABEL" data_type: TYPE_FP32 dims: [ 4 ] },\n'
     '         { name: "SCORE" data_type: TYPE_FP32 dims: [ 1 ] } ]\n' + TWO_STEPS,
     "output[1]", "ensemble output 'SCORE' is not written by any step")
_cfg("ensemble-output-misspelt", ENS_HEAD + ENS_IO + TWO_STEPS.replace('value: "LABEL"', 'value: "LABELS"'),
     "output[0]", "ensemble output 'LABEL' is not written by any step's output_map (did you mean 'LABELS'?)")
_cfg("ensemble-unreachable", ENS_HEAD + ENS_IO + TWO_STEPS.replace('input_map { key: "IN" value: "mid" }',
                                                                  'input_map { key: "IN" value: "middle" }'),
     "ensemble_scheduling.step[1].input_map", "unreachable (did you mean 'mid'?)")
_cfg("ensemble-input-misspelt", ENS_HEAD + ENS_IO + TWO_STEPS.replace('value: "RAW"', 'value: "RAW_IMAGE"'),
     "ensemble_scheduling.step[0].input_map", "'RAW_IMAGE' is read but neither an ensemble input")
_cfg("ensemble-unused-tensor", ENS_HEAD + ENS_IO + TWO_STEPS.replace(
     'output_map { key: "OUT" value: "LABEL" }', 'output_map [ { key: "OUT" value: "LABEL" }, '
     '{ key: "SCORE" value: "score" } ]'), "ensemble_scheduling.step[1].output_map",
     "ensemble tensor 'score' is unused in the ensemble")
_cfg("ensemble-calls-itself", ENS_HEAD + ENS_IO + TWO_STEPS.replace('"cls"', '"m"'),
     "ensemble_scheduling.step[1].model_name", "circular dependency")

# --- the rest: metrics, response cache, warm-up
_cfg("metrics-no-family", HEAD + IO + "model_metrics { metric_control [ { metric_identifier { } "
     "histogram_options { buckets: [ 1 ] } } ] }\n",
     "model_metrics.metric_control[0].metric_identifier.family",
     "non-empty 'family'")
_cfg("metrics-no-buckets", HEAD + IO + 'model_metrics { metric_control [ { metric_identifier { family: "f" } '
     "histogram_options { } } ] }\n", "model_metrics.metric_control[0].histogram_options.buckets",
     "non-empty 'buckets'")
_cfg("decoupled-response-cache", HEAD + IO + "model_transaction_policy { decoupled: true }\n"
     "response_cache { enable: true }\n", "response_cache.enable", "'decoupled' transaction policy")
_cfg("warmup-input-no-data", HEAD + IO + 'model_warmup [ { name: "w" batch_size: 1 inputs { key: "IN" value: '
                                         '{ '
     "data_type: TYPE_FP32 dims: [ 4 ] } } } ]\n", "model_warmup[0].inputs[IN]", "one of 'zero_data'")
_cfg("warmup-variable-dim", HEAD + 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
     'model_warmup [ { name: "w" batch_size: 1 inputs { key: "IN" value: { data_type: TYPE_FP32 dims: [ -1 ] '
     "zero_data: true } } } ]\n", "model_warmup[0].inputs[IN].dims", "all variable-size dimensions are "
                                                                     "specified")

# --- the validate command's own arguments
CASES += [
    BadInput(id="validate-missing-path", argv=("serve-system", "validate", "{tmp}/nope/config.pbtxt"),
             expect=("{tmp}/nope/config.pbtxt", "cannot read", "No such file or directory")),
    BadInput(id="validate-folder-without-configs", argv=("serve-system", "validate", "{tmp}/repo"),
             expect=("{tmp}/repo", "no config.pbtxt", "give a model repository"), files={"repo/README": "x"}),
    BadInput(id="validate-missing-folder", argv=("serve-system", "validate", "{tmp}/models"),
             expect=("{tmp}/models", "no such file", "give a config.pbtxt, a model repository folder")),
    BadInput(id="validate-unknown-suffix", argv=("serve-system", "validate", "{tmp}/config.json"),
             expect=("{tmp}/config.json", "unknown kind of file", "(*.pbtxt)"), files={"config.json": "{}"}),
    BadInput(id="validate-gpus-negative", argv=("serve-system", "validate", "--gpus", "-1",
                                                "{tmp}/m/config.pbtxt"),
             expect=("--gpus", "negative", "0 or more"), files={"m/config.pbtxt": HEAD + IO}),
    BadInput(id="validate-gpus-not-a-number", argv=("serve-system", "validate", "--gpus", "two",
                                                    "{tmp}/m/config.pbtxt"),
             expect=("--gpus", "not a whole number", "e.g. --gpus 1"), files={"m/config.pbtxt": HEAD + IO}),
]

# --- serve-system stats BEFORE AFTER
GOOD = {"model_stats": [{"name": "m", "version": "1", "inference_count": 10, "execution_count": 4,
                         "inference_stats": {"success": {"count": 10, "ns": 1000}},
                         "batch_stats": [{"batch_size": 2, "compute_infer": {"count": 3, "ns": 30}}]}]}


def _stats(case: str, after: str | bytes, field: str, rule: str, before: str | bytes | None = None,
           in_before: bool = False) -> None:
    files: dict[str, str | bytes] = {"before.json": json.dumps(GOOD) if before is None else before,
                                     "after.json": after}
    bad = "before.json" if in_before else "after.json"
    CASES.append(BadInput(id=f"stats-{case}", argv=("serve-system", "stats", "{tmp}/before.json",
                                                    "{tmp}/after.json"),
                          expect=("{tmp}/" + bad, field, rule), files=files))


def _model(**kw: object) -> str:
    return json.dumps({"model_stats": [{**GOOD["model_stats"][0], **kw}]})


_stats("malformed-json", '{"model_stats": [', "not JSON", "save the body of GET /v2/models/NAME/stats")
_stats("not-a-stats-document", "[1, 2, 3]", "no 'model_stats' list", "save the body")
_stats("model-stats-of-numbers", '{"model_stats": [1, 2]}', "model_stats[0]", "is not a model's statistics "
                                                                              "object")
_stats("counter-not-numeric", _model(inference_count="many"), "model_stats[0].inference_count",
       "is not a counter (a whole number >= 0)")
_stats("counter-negative", _model(execution_count=-3), "model_stats[0].execution_count", "whole number >= 0")
_stats("counter-float", _model(execution_count=2.5), "model_stats[0].execution_count", "whole number >= 0")
_stats("phase-count-not-numeric", _model(inference_stats={"queue": {"count": "x", "ns": 1}}),
       "model_stats[0].inference_stats.queue.count", "is not a counter")
_stats("batch-stats-not-list", _model(batch_stats={"batch_size": 1}), "model_stats[0].batch_stats",
       "not a list")
_stats("model-without-name", _model(name=None), "model_stats[0].name", "missing or not a string")
_stats("model-missing-from-before", _model(name="other"), "model_stats[0]", "is not in {tmp}/before.json")
_stats("model-listed-twice", json.dumps({"model_stats": GOOD["model_stats"] * 2}), "model_stats[1]",
       "is listed twice")
_stats("no-models-after", '{"model_stats": []}', "model_stats is empty", "was the model loaded?")
_stats("before-not-utf8", json.dumps(GOOD), "not UTF-8 text", "save the body of GET",
       before='{"model_stats": [], "x": "caf\xe9"}'.encode("latin-1"), in_before=True)
CASES += [
    BadInput(id="stats-before-missing", argv=("serve-system", "stats", "{tmp}/nope.json", "{tmp}/after.json"),
             expect=("{tmp}/nope.json", "cannot read", "no such file"),
             files={"after.json": json.dumps(GOOD)}),
    BadInput(id="stats-before-is-folder", argv=("serve-system", "stats", "{tmp}/snap", "{tmp}/after.json"),
             expect=("{tmp}/snap", "is a folder", "save the body of GET"),
             files={"snap/x.json": "{}", "after.json": json.dumps(GOOD)}),
]

# --- serve-system import
CSV_HEAD = ("Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute "
            "Input,Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,p95 "
            "latency,p99 latency")
CSV_ROW = "1,123.5,92,2222,772,26,4781,178,0,5601,12373,16228,44083"


def _imp(case: str, content: str | bytes, field: str, rule: str, extra: tuple[str, ...] = ()) -> None:
    CASES.append(BadInput(id=f"import-{case}", argv=("serve-system", "import", *extra, "{tmp}/perf.csv"),
                          expect=("{tmp}/perf.csv", field, rule) if not extra else (field, rule),
                          files={"perf.csv": content}))


_imp("unknown-column", CSV_HEAD + ",Throughput Guess\n" + CSV_ROW + ",5\n", "unknown column(s) 'Throughput "
                                                                            "Guess'",
     "not a perf_analyzer -f export column")
_imp("no-throughput-column", CSV_HEAD.replace("Inferences/Second", "Infer/s") + "\n" + CSV_ROW + "\n",
     "no 'Inferences/Second' column", "give perf_analyzer's -f export unchanged")
_imp("cell-not-a-number", CSV_HEAD + "\n" + CSV_ROW.replace("4781", "fast") + "\n",
     "row 2, column 'Server Compute Infer'", "is not a number")
_imp("cell-negative", CSV_HEAD + "\n" + CSV_ROW.replace("123.5", "-123.5") + "\n",
     "row 2, column 'Inferences/Second'", "must be >= 0")
_imp("row-too-long", CSV_HEAD + "\n" + CSV_ROW + ",7,8\n", "row 2", "more cells than the header")
_imp("row-too-short", CSV_HEAD + "\n1,123.5,92\n", "row 2", "fewer cells than the header")
_imp("column-twice", CSV_HEAD + ",p50 latency\n" + CSV_ROW + ",1\n", "header", "appear twice")
_imp("not-utf8", ("Concurrency: 1, throughput: 10 infer/sec, latency 5 usec caf\xe9\n").encode("latin-1"),
     "not UTF-8 text", "save it as UTF-8")
_imp("binary", b"\x89PNG\r\n\x1a\n\x00\x00", "a binary file", "-f CSV export")
_imp("no-results", "Successfully read data for 1 stream/streams with 1 step/steps.\n", "no perf_analyzer "
                                                                                       "results found",
     "expected 'Concurrency: N")
_imp("batch-negative", CSV_HEAD + "\n" + CSV_ROW + "\n", "-b/--batch-size", "give 1 or more",
     extra=("-b", "-5"))
_imp("batch-zero", CSV_HEAD + "\n" + CSV_ROW + "\n", "-b/--batch-size", "give 1 or more", extra=("-b", "0"))
_imp("batch-not-a-number", CSV_HEAD + "\n" + CSV_ROW + "\n", "-b/--batch-size", "not a whole number",
     extra=("--batch-size", "16x"))

# --- ansible-playbook: an unusable inventory or a pattern that matches nothing is an error
SITE = "{repo}/playbooks/site.yml"
CASES += [
    # the inventory launch writes, not written yet: the fix, not "Completely failed to parse" (the
    # serve_system_missing inventory plugin), for the site playbook and an experiment's alike
    BadInput(id="ansible-inventory-missing", argv=("ansible-playbook", "-i", "{tmp}/hosts.yml", SITE),
             expect=("{tmp}/hosts.yml: no inventory yet: run launch first", "-i PATH"), timeout=180),
    BadInput(id="ansible-inventory-missing-experiment",
             argv=("ansible-playbook", "-i", "{tmp}/hosts.yml", "{repo}/experiments/dynbatch.yml"),
             expect=("{tmp}/hosts.yml: no inventory yet: run launch first", "chi_scripts/launch.py"),
             timeout=180),
    BadInput(id="ansible-inventory-broken-yaml", argv=("ansible-playbook", "-i", "{tmp}/hosts.yml", SITE),
             expect=("{tmp}/hosts.yml", "Completely failed to parse inventory source"),
             files={"hosts.yml": "all:\n  hosts: [\n"}, error_prefix="[ERROR]", timeout=180),
    BadInput(id="ansible-inventory-without-serve-nodes", argv=("ansible-playbook", "-i", "{tmp}/hosts.yml",
                                                               SITE),
             expect=("Could not match supplied host pattern", "serve_nodes"),
             files={"hosts.yml": "all:\n  children:\n    other:\n      hosts:\n        a:\n"}, timeout=180),
    BadInput(id="ansible-inventory-empty-file", argv=("ansible-playbook", "-i", "{tmp}/hosts.yml", SITE),
             expect=("Could not match supplied host pattern", "serve_nodes"), files={"hosts.yml": ""},
             error_prefix="[ERROR]", timeout=180),
    BadInput(id="ansible-limit-matches-nothing", argv=("ansible-playbook", "-i", "{tmp}/hosts.yml", "--limit",
                                                       "node-typo", SITE),
             expect=("Could not match supplied host pattern", "node-typo"),
             files={"hosts.yml": "all:\n  children:\n    serve_nodes:\n      hosts:\n        node-1:\n"
                                 "          ansible_host: 127.0.0.1\n          ansible_port: 9\n"},
             timeout=180),
]
