"""Bad experiment specs and bad ``plan`` arguments: ``serve-system validate`` / ``plan`` / ``schema``.

Every case is one problem in an otherwise valid spec (``GOOD`` below, which validates and plans on
a host without GPU), so the one stderr line must name that problem's file and field. Note: argv and
``expect`` go through ``str.format`` (``{tmp}``), so literal braces are doubled there.
"""

from __future__ import annotations

from .corpus import BadInput

CONFIG = """\
base_config_text: |
  name: "m"
  platform: "onnxruntime_onnx"
  max_batch_size: 8
  input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
  output [ { name: "y" data_type: TYPE_FP32 dims: [ 2 ] } ]
  instance_group [ { kind: KIND_CPU } ]
"""

HEAD = "name: t\nmodel: m\n" + CONFIG
LOAD = "load: {mode: concurrency, levels: [1, 8]}\nperf: {batch_size: 1}\n"
VARIANTS = """\
variants:
  - name: base
  - name: dyn
    config: {dynamic_batching: {max_queue_delay_microseconds: 100}}
"""
OBJECTIVES = "objectives:\n  - {name: best, metric: throughput, goal: max, at_load: 8}\n"
GOOD = HEAD + LOAD + VARIANTS + OBJECTIVES

FASTAPI = """\
kind: fastapi
name: fastapi
description: the lab's endpoint
variants: [{name: onnx, runtime: onnx}, {name: pytorch, runtime: pytorch}]
levels: [{senders: 1, requests: 100}, {senders: 16, requests: 1000}]
repetitions: 1
warmup: {requests: 0}
request_timeout_s: 60
"""

BOMB = "".join(
    [HEAD, LOAD, VARIANTS, "description: &a [x, x, x, x, x, x, x, x, x, x]\n"]
    + [f"x{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
       for p, c in zip("abcdefgh", "bcdefghi")])

V = ("serve-system", "validate", "{tmp}/spec.yml")


def _validate(id: str, text: str | bytes, *expect: str) -> BadInput:
    return BadInput(id=f"spec-{id}", argv=V, files={"spec.yml": text}, expect=("{tmp}/spec.yml:", *expect))


def _plan(id: str, args: tuple[str, ...], *expect: str,
          files: dict[str, str | bytes] | None = None) -> BadInput:
    return BadInput(id=f"plan-{id}", argv=("serve-system", "plan", "{tmp}/spec.yml", "--quiet", *args),
                    files={"spec.yml": GOOD, **(files or {})}, expect=expect)


CASES: list[BadInput] = [
    # keys and types
    _validate("unknown-key", GOOD + "colour: red\n", "colour: unknown key (", "known: "),
    _validate("typo-did-you-mean", GOOD.replace("objectives:", "objectivs:"),
              "objectivs: unknown key (did you mean 'objectives'?"),
    _validate("variant-unknown-key", GOOD.replace("  - name: base\n", "  - name: base\n    confg: {}\n"),
              "variants[0].confg: unknown key (did you mean 'config'?"),
    _validate("perf-unknown-key",
              GOOD.replace("perf: {batch_size: 1}", "perf: {batch_size: 1, percentil: 9}"),
              "perf.percentil: unknown key (did you mean 'percentile'?"),
    _validate("repetitions-text", GOOD + "repetitions: two\n", "repetitions: is 'two': use a whole number"),
    _validate("repetitions-zero", GOOD + "repetitions: 0\n",
              "repetitions: is 0: use a whole number from 1 to 100, or auto"),
    _validate("repetitions-word", GOOD + "repetitions: many\n",
              "repetitions: is 'many': use a whole number from 1 to 100, or auto"),
    _validate("budget-without-auto", GOOD + "budget: {repetitions: 5}\n",
              "budget: only with repetitions: auto: set repetitions: auto, or remove budget"),
    _validate("budget-too-few", GOOD + "repetitions: auto\nbudget: {repetitions: 2}\n",
              "budget.repetitions: is 2: use a number >= 3"),
    _validate("budget-minutes-negative", GOOD + "repetitions: auto\nbudget: {minutes: -5}\n",
              "budget.minutes: is -5: use a number > 0"),
    _validate("smallest-effect-percent", GOOD + "smallest_effect: 5\n",
              "smallest_effect: is 5.0: use a share between 0 and 1, e.g. 0.05 for 5 %"),
    _validate("smallest-effect-text", GOOD + "smallest_effect: 5%\n",
              "smallest_effect: is '5%': use a number"),
    _validate("batch-size-negative", GOOD.replace("batch_size: 1", "batch_size: -4"),
              "perf.batch_size: is -4: use a number >= 1"),
    _validate("percentile-out-of-range", GOOD.replace("perf: {batch_size: 1}", "perf: {percentile: 150}"),
              "perf.percentile: is 150: use a number <= 99"),
    _validate("level-negative", GOOD.replace("levels: [1, 8]", "levels: [1, -8]"),
              "load.levels: level -8 is not a positive number"),
    _validate("level-zero-range", GOOD.replace("levels: [1, 8]", "levels: '0:8:1'"),
              "load.levels: a range needs start > 0"),
    _validate("load-mode-unknown", GOOD.replace("mode: concurrency", "mode: concurent"),
              "load.mode: is 'concurent': use 'concurrency' or 'request_rate'"),
    _validate("distribution-without-rate",
              GOOD.replace("levels: [1, 8]}", "levels: [1, 8], distribution: poisson}"),
              "load.distribution: only for mode request_rate"),
    _validate("version-not-a-number", GOOD + "version: latest\n", "version: 'latest' is not a model version"),
    _validate("on-missing-gpus-unknown", GOOD + "on_missing_gpus: maybe\n",
              "on_missing_gpus: is 'maybe': use 'refuse' or 'adapt'"),
    _validate("no-base-config", GOOD.replace(CONFIG, ""), "base_config: missing: give base_config"),
    _validate("retries-unbounded", GOOD.replace("perf: {batch_size: 1}", "perf: {retries: 100000000}"),
              "perf.retries: is 100000000: use a number <= 10"),
    _validate("too-many-runs", GOOD.replace("levels: [1, 8]", "levels: '1:2000:1'") + "repetitions: 5\n",
              "variants: 20000 perf_analyzer runs", "split it into several"),
    _validate("level-listed-twice", GOOD.replace("levels: [1, 8]", "levels: [1, 8, 8]"),
              "load.levels: a level is listed twice: list each load level once"),
    _validate("distribution-unknown", GOOD.replace("mode: concurrency, levels: [1, 8]",
                                                   "mode: request_rate, levels: [1, 8], distribution: "
                                                   "bursty"),
              "load.distribution: is 'bursty': use 'constant' or 'poisson'"),
    _validate("version-zero", GOOD + "version: 0\n",
              "version: '0' is not a model version: use a whole number >= 1"),
    _validate("sweep-empty-values", HEAD + LOAD + "sweep:\n  name: 'i{n}'\n  grid: {n: []}\n",
              "sweep.grid.n: is empty: give at least one entry"),
    _validate("sweep-grid-not-mapping", HEAD + LOAD + "sweep:\n  name: 'i{n}'\n  grid: [1, 2]\n",
              "sweep.grid: is [1, 2]: use a mapping"),
    _validate("objective-and-objectives", GOOD + "objective: {metric: throughput}\n",
              "objective: given with objectives: move it into objectives"),
    _validate("constraint-bound-typo",
              GOOD.replace("at_load: 8}", "at_load: 8, constraints: {p95_us: {maxi: 5}}}"),
              "objectives[0].constraints.p95_us.maxi: unknown key (did you mean 'max'?"),
    _validate("variant-base-config-missing",
              GOOD.replace("  - name: base\n", "  - name: base\n    base_config: nowhere/config.pbtxt\n"),
              "base: base_config: ", "nowhere/config.pbtxt", "cannot read"),
    # names
    _validate("name-escapes", GOOD.replace("name: t\n", "name: ../../etc\n", 1),
              "name: '../../etc' is not a plain name"),
    _validate("model-with-slash", GOOD.replace("model: m\n", "model: a/b\n"),
              "model: 'a/b' is not a plain name"),
    _validate("variant-name-space", GOOD.replace("- name: base", "- name: my base"),
              "variants[0].name: 'my base' is not a plain name"),
    _validate("jinja-model", GOOD.replace("model: m\n", "model: \"{{ lookup('pipe', 'id') }}\"\n"),
              "model: ", "Jinja expression", "remove it"),
    _validate("jinja-variant-name", GOOD.replace("- name: dyn", "- name: '{% raw %}x'"),
              "variants[1].name: ", "Jinja expression"),
    _validate("jinja-description", GOOD + "description: 'costs {{ 7 * 7 }} ms'\n", "description: ", "Jinja"),
    _validate("duplicate-variant", GOOD.replace("- name: dyn", "- name: base"),
              "variants[1].name: 'base' is a duplicate variant name"),
    _validate("empty-variants", HEAD + LOAD + "variants: []\n", "variants: no variants: give 'variants'"),
    _validate("sweep-unknown-parameter",
              HEAD + LOAD + "sweep:\n  name: 'i{n}_{m}'\n  grid: {n: [1, 2]}\n  config: {}\n",
              "sweep.name: 'i{{n}}_{{m}}': unknown parameter 'm'"),
    _validate("sweep-bad-generated-name",
              HEAD + LOAD + "sweep:\n  name: 'i{n}'\n  grid: {n: [1, '/x']}\n  config: {}\n",
              "sweep.name: generated 'i/x' is not a plain name"),
    # objectives
    _validate("at-load-not-a-level", GOOD.replace("at_load: 8", "at_load: 4"),
              "objectives[0].at_load: 4 is not a load level of any variant: use one of 1, 8"),
    _validate("objective-metric-unknown", GOOD.replace("metric: throughput", "metric: speed"),
              "objectives[0].metric: is 'speed': use 'throughput'"),
    _validate("objective-constraint-metric",
              GOOD.replace("at_load: 8}", "at_load: 8, constraints: {p42: {max: 1}}}"),
              "objectives[0].constraints.p42", "use 'throughput'"),
    # paths
    _validate("base-config-escapes", GOOD.replace(CONFIG, "base_config: ../../../../../etc/passwd\n"),
              "base_config: '../../../../../etc/passwd' points outside the spec's folder",
              "keep the file inside"),
    _validate("input-data-absolute",
              GOOD.replace("perf: {batch_size: 1}", "perf: {input_data: /etc/hostname}"),
              "perf.input_data: '/etc/hostname' points outside the spec's folder"),
    _validate("variant-input-data-escapes",
              GOOD.replace("  - name: base\n", "  - name: base\n    perf: {input_data: ../secret.json}\n"),
              "variants[0].perf.input_data: '../secret.json' points outside"),
    _validate("input-data-missing", GOOD.replace("perf: {batch_size: 1}", "perf: {input_data: inputs.json}"),
              "spec.yml: perf.input_data: inputs.json not found: give an existing JSON file"),
    _validate("override-unknown-config-field", GOOD.replace("config: {dynamic", "config: {dynamic_batchin"),
              "dyn: config: \"dynamic_batchin_batching\" is not a field of Triton's ModelConfig (did you "
              "mean \"dynamic_batching\"?"),
    # protobuf's wording never reaches the user: the field, what is wrong and the fix (the valid choices)
    _validate("override-list-as-text",
              GOOD.replace("max_queue_delay_microseconds: 100", "preferred_batch_size: '4, 6, 8'"),
              "dyn: config: dynamic_batching.preferred_batch_size: a list, not one value: give [4, 6, 8]"),
    _validate("override-unknown-kind",
              GOOD.replace("config: {dynamic_batching: {max_queue_delay_microseconds: 100}}",
                           "config: {instance_group: [{kind: KIND_GUP}]}"),
              "dyn: config: instance_group[0].kind: KIND_GUP is not a kind; use KIND_AUTO, KIND_GPU, "
              "KIND_CPU or KIND_MODEL"),
    _validate("override-group-not-a-list",
              GOOD.replace("config: {dynamic_batching: {max_queue_delay_microseconds: 100}}",
                           "config: {instance_group: {kind: KIND_CPU, count: 2}}"),
              "dyn: config: instance_group: a list, not one value: give [{{kind: KIND_CPU, count: 2}}]"),
    _validate("override-delay-with-unit",
              GOOD.replace("max_queue_delay_microseconds: 100", "max_queue_delay_microseconds: 100us"),
              "dyn: config: dynamic_batching.max_queue_delay_microseconds: 100us is not a whole number"),
    _validate("override-delay-negative",
              GOOD.replace("max_queue_delay_microseconds: 100", "max_queue_delay_microseconds: -5"),
              "dyn: config: dynamic_batching.max_queue_delay_microseconds: -5 is negative: give 0 or more"),
    _validate("batch-over-max", GOOD.replace("batch_size: 1", "batch_size: 64"),
              "spec.yml: perf.batch_size: 64 > max_batch_size 8: use a smaller batch_size"),
    # the file itself
    _validate("alias-bomb", BOMB, "expands to more than 100000 values", "remove the repeated aliases"),
    _validate("deep-nesting", GOOD + "description: " + "[" * 5000 + "]" * 5000 + "\n",
              "nested deeper than 64 levels: flatten the spec"),
    _validate("recursive-alias", GOOD + "extra: &r [*r]\n", "refers to itself"),
    _validate("oversized", GOOD + "description: '" + "x" * (1 << 20) + "'\n", "larger than 1024 KiB"),
    _validate("not-utf8", GOOD.encode() + b"description: caf\xe9\n", "not UTF-8 text (byte 0xe9",
              "save the file as UTF-8"),
    _validate("duplicate-key", GOOD + "name: u\n", "name: key given twice: keep one"),
    _validate("yaml-syntax", GOOD + "variants: [\n", "not valid YAML"),
    _validate("not-a-mapping", "- name: t\n", "a spec is a mapping"),
    _validate("empty-file", "", "empty: a spec is a mapping"),
    _validate("kind-unknown", "kind: tritn\n" + GOOD,
              "kind: 'tritn' is not a kind of spec (did you mean 'triton'?"),
    BadInput(id="spec-missing-file", argv=("serve-system", "validate", "{tmp}/nope.yml"),
             expect=("{tmp}/nope.yml: (file): cannot read: No such file or directory",)),
    BadInput(id="spec-folder", argv=("serve-system", "validate", "{tmp}/dir.yml"),
             files={"dir.yml/keep": "x"}, expect=("{tmp}/dir.yml: (file): is a folder",)),
    # kind: fastapi
    _validate("fastapi-runtime", FASTAPI.replace("runtime: pytorch", "runtime: tensorflow"),
              "variants[1].runtime: is 'tensorflow': use 'onnx' or 'pytorch'"),
    _validate("fastapi-no-levels", FASTAPI.replace("levels: [{senders: 1, requests: 100}, {senders: 16, "
                                                   "requests: 1000}]", "levels: []"),
              "levels: is empty: give at least one entry"),
    _validate("fastapi-zero-senders", FASTAPI.replace("senders: 1,", "senders: 0,"),
              "levels[0].senders: is 0: use a number >= 1"),
    _validate("fastapi-fewer-requests", FASTAPI.replace("requests: 1000", "requests: 8"),
              "levels[1].requests: 8 requests for 16 senders"),
    _validate("fastapi-too-many-senders", FASTAPI.replace("senders: 16", "senders: 100000"),
              "levels[1].senders: is 100000: use a number <= 1024"),
    _validate("fastapi-warmup-negative", FASTAPI.replace("warmup: {requests: 0}", "warmup: {requests: -1}"),
              "warmup.requests: is -1: use a number >= 0"),
    _validate("fastapi-missing-variants",
              FASTAPI.replace("variants: [{name: onnx, runtime: onnx}, {name: pytorch, "
                                                          "runtime: pytorch}]\n", ""),
              "variants: missing (required): add it"),
    _validate("fastapi-jinja-description", FASTAPI.replace("the lab's endpoint", "'{{ 1 }}'"),
              "description: ", "Jinja expression"),
    _validate("fastapi-triton-key", FASTAPI + "model: food_classifier\n", "model: unknown key ("),
    _validate("fastapi-timeout", FASTAPI.replace("request_timeout_s: 60", "request_timeout_s: 0"),
              "request_timeout_s: is 0: use a number > 0"),
    _validate("fastapi-duplicate", FASTAPI.replace("name: pytorch", "name: onnx"),
              "variants[1].name: 'onnx' is a duplicate variant name"),
    # plan: arguments that would write or delete outside the run folder
    _plan("host-escape-fresh", ("--run-dir", "{tmp}/results/t/r1", "--host", "../x=0", "--fresh"),
          "--host '../x=0': '../x' is not a plain host name",
          files={"results/t/x/keep.txt": "measured", "results/t/r1/manifest.json": '{"experiment": "t"}'}),
    _plan("host-jinja", ("--run-dir", "{tmp}/results/t/r1", "--host", "{{{{ x }}}}=0"),
          "--host '{{{{ x }}}}=0': ", "Jinja expression"),
    _plan("host-no-gpus", ("--run-dir", "{tmp}/results/t/r1", "--host", "node-1"),
          "--host 'node-1': give NAME=GPUS"),
    _plan("host-twice", ("--run-dir", "{tmp}/results/t/r1", "--host", "n=0", "--host", "n=1"),
          "--host 'n=1': host 'n' given twice"),
    _plan("run-dir-dotdot", ("--run-dir", "{tmp}/results/t/r1/../../../elsewhere", "--host", "n=0"),
          "--run-dir '{tmp}/results/t/r1/../../../elsewhere': '..' in the path"),
    _plan("run-id-bad", ("--run-dir", "{tmp}/results/t/r 1", "--host", "n=0"),
          "--run-dir '{tmp}/results/t/r 1': 'r 1' is not a plain run id"),
    _plan("run-dir-wrong-experiment", ("--run-dir", "{tmp}/results/other/r1", "--host", "n=0"),
          "--run-dir '{tmp}/results/other/r1': its folder is 'other', not the experiment's name 't'"),
    _plan("run-dir-normalised-escape", ("--run-dir", "{tmp}/x", "--host", "n=0"),
          "--run-dir '{tmp}/x': its folder is 'case', not the experiment's name 't': give results/t/<run "
          "id>"),
    _plan("run-dir-is-file", ("--run-dir", "{tmp}/results/t/r1", "--host", "n=0"),
          "--run-dir '{tmp}/results/t/r1': exists and is not a folder", files={"results/t/r1": "x"}),
    _plan("run-dir-other-experiment", ("--run-dir", "{tmp}/results/t/r1", "--host", "n=0"),
          "holds a run of experiment 'other', not 't'",
          files={"results/t/r1/manifest.json": '{"experiment": "other"}'}),
    _plan("run-dir-bad-manifest", ("--run-dir", "{tmp}/results/t/r1", "--host", "n=0"),
          "{tmp}/results/t/r1/manifest.json: (file): not readable JSON",
          files={"results/t/r1/manifest.json": "{not json"}),
    _plan("base-dir-unknown-host",
          ("--run-dir", "{tmp}/results/t/r1", "--host", "n=0", "--base-dir", "m={tmp}"),
          "--base-dir 'm={tmp}': 'm' is not one of the --host names"),
    _plan("host-dir-is-file", ("--run-dir", "{tmp}/results/t/r1", "--host", "n=0", "--fresh"),
          "--host 'n': ", "is not a folder of the run",
          files={"results/t/r1/manifest.json": '{"experiment": "t"}',
                 "results/t/r1/n": "a file where the host's folder goes"}),
    _plan("base-dir-not-a-folder",
          ("--run-dir", "{tmp}/results/t/r1", "--host", "n=0", "--base-dir", "n={tmp}/none"),
          "--base-dir 'n={tmp}/none': '{tmp}/none' is not a folder"),
    _plan("host-gpus-huge", ("--run-dir", "{tmp}/results/t/r1", "--host", "n=99999"),
          "--host 'n=99999': give NAME=GPUS"),
    BadInput(id="plan-bad-spec-writes-nothing",
             argv=("serve-system", "plan", "{tmp}/spec.yml", "--run-dir", "{tmp}/results/t/r1", "--host",
                   "n=0"),
             files={"spec.yml": GOOD.replace("at_load: 8", "at_load: 3")},
             expect=("{tmp}/spec.yml: objectives[0].at_load: 3 is not a load level",)),
    BadInput(id="plan-alias-bomb", argv=("serve-system", "plan", "{tmp}/spec.yml", "--run-dir",
                                         "{tmp}/results/t/r1", "--host", "n=0"),
             files={"spec.yml": BOMB}, expect=("{tmp}/spec.yml:", "expands to more than")),
    BadInput(id="schema-output-not-json", argv=("serve-system", "schema", "-o", "{tmp}/schema.txt"),
             expect=("--output '{tmp}/schema.txt': not a .json file name",)),
]

# search: (halving, optuna) over a sweep grid
SWEEP = ("sweep:\n  name: 'd{delay}'\n  grid: {delay: [100, 500, 1000]}\n"
         "  config: {dynamic_batching: {max_queue_delay_microseconds: '{delay}'}}\n")
SEARCH = HEAD + LOAD + SWEEP + OBJECTIVES
CASES += [
    _validate("search-strategy-unknown", SEARCH + "search: {strategy: halfing, budget: {runs: 20}}\n",
              "search.strategy: is 'halfing': use 'grid', 'halving' or 'optuna'"),
    _validate("search-no-budget", SEARCH + "search: {strategy: halving}\n",
              "search.budget: missing: give runs: N (perf_analyzer runs) or minutes: M"),
    _validate("search-budget-too-small", SEARCH + "search: {strategy: halving, budget: {runs: 4}}\n",
              "search.budget.runs: 4 runs cannot measure the first rung (3 candidates x 3 repetitions) = 9",
              "raise runs or lower search.repetitions"),
    _validate("search-objective-unknown",
              SEARCH + "search: {strategy: halving, objective: fastest, budget: {runs: 20}}\n",
              "search.objective: 'fastest' is not an objective of the spec: name one of best"),
    _validate("search-objective-no-load",
              SEARCH.replace(", at_load: 8", "") + "search: {strategy: halving, budget: {runs: 20}}\n",
              "search.objective: 'best' has no at_load: give the objective at_load"),
    _validate("search-optuna-without-sweep", GOOD + "search: {strategy: optuna, budget: {runs: 20}}\n",
              "search.strategy: optuna draws candidates from a sweep's grid only: add a sweep:"),
    _validate("search-with-auto",
              SEARCH + "repetitions: auto\nsearch: {strategy: halving, budget: {runs: 20}}\n",
              "repetitions: 'auto' with search.strategy halving: remove repetitions"),
    _validate("search-one-repetition",
              SEARCH + "search: {strategy: halving, repetitions: 1, budget: {runs: 20}}\n",
              "search.repetitions: is 1: use a number >= 2"),
    _validate("search-budget-typo", SEARCH + "search: {strategy: halving, budget: {run: 20}}\n",
              "search.budget.run: unknown key (did you mean 'runs'?"),
]

# issue 26: what a careless or hostile spec hides behind decoding, escapes, substitution and numbers
KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
INVENTORY = "all:\n  hosts:\n    n1: {ansible_host: 10.0.0.1, ansible_ssh_private_key_file: ~/.ssh/id}\n"
ESCAPED = GOOD.replace('  name: "m"\n', '  name: "m"\n  parameters { key: "p" value { string_value: '
                                          '"\\173\\173 7 * 7 \\175\\175" } }\n')
JOINED = (HEAD + LOAD + "sweep:\n  name: 'v{n}'\n  grid: {n: [1], a: ['{']}\n"
          "  config: {parameters: {p: {string_value: '{a}{a} lookup(\"pipe\", \"id\") }}'}}}\n")


def _data(id: str, path: str, *expect: str, files: dict[str, str | bytes]) -> BadInput:
    spec = GOOD.replace("perf: {batch_size: 1}", f"perf: {{batch_size: 1, input_data: {path}}}")
    return _validate(id, spec, "perf.input_data: ", "may not be read for a spec nor sent to a node",
                     *expect) if not files else BadInput(
        id=f"spec-{id}", argv=V, files={"spec.yml": spec, "ansible.cfg": "", **files},
        expect=("{tmp}/spec.yml: perf.input_data: ", "may not be read for a spec nor sent to a node",
                "name another file", *expect))


CASES += [
    _validate("jinja-binary", GOOD + "description: !!binary e3sgNyAqIDcgfX0=\n",
              "description: a binary value decoding to '{{{{ 7 * 7 }}}}' holds a Jinja expression"),
    _validate("binary-value", GOOD + "description: !!binary aGVsbG8=\n",
              "description: a binary value (!!binary): ", "write it as text"),
    _validate("jinja-binary-key", GOOD.replace("perf: {batch_size: 1}", "perf: {batch_size: 1}\n"
                                               "? !!binary e3sgeCB9fQ==\n: 1"),
              "a binary value decoding to '{{{{ x }}}}' holds a Jinja expression"),
    _validate("jinja-protobuf-escape", ESCAPED,
              "spec.yml: base_config_text: parameters.p.string_value: '{{{{ 7 * 7 }}}}' holds a Jinja "
              "expression",
              "once its escapes are read"),
    _validate("jinja-protobuf-hex-key", GOOD.replace('  name: "m"\n', '  name: "m"\n  parameters { key: '
                                                     '"\\x7b% x" value { string_value: "v" } }\n'),
              "spec.yml: base_config_text: parameters: key '{{% x' holds a Jinja expression"),
    _validate("jinja-sweep-joined", JOINED, "sweep (generated 'v1'): config.parameters.p.string_value: ",
              "holds a Jinja expression"),
    _validate("sweep-format-width",
              HEAD + LOAD + "sweep:\n  name: 'v{n:>99999999999}'\n  grid: {n: [1, 2]}\n",
              "sweep.name: 'v{{n:>99999999999}}': '{{n:>99999999999}}' is not a plain placeholder",
              "write the parameter's name alone"),
    _validate("sweep-format-attribute", HEAD + LOAD + "sweep:\n  name: 'v{n.__class__.__mro__}'\n"
                                                      "  grid: {n: [1, 2]}\n",
              "sweep.name: ", "is not a plain placeholder"),
    _validate("sweep-format-index", HEAD + LOAD + "sweep:\n  name: 'v{n[0]}'\n  grid: {n: [ab, cd]}\n",
              "sweep.name: ", "is not a plain placeholder"),
    _validate("level-nan", GOOD.replace("levels: [1, 8]", "levels: [1, .nan]"),
              "load.levels[1]: nan is not a finite number: use a number"),
    _validate("level-infinite", GOOD.replace("levels: [1, 8]", "levels: [1, .inf]"),
              "load.levels[1]: inf is not a finite number"),
    _validate("level-huge", GOOD.replace("levels: [1, 8]", "levels: [1, 1.0e+300]"),
              "load.levels: level 1e+300 is not a load: use a load from 0.001 to 100000"),
    _validate("level-huge-int", GOOD.replace("levels: [1, 8]", "levels: [1, 1" + "0" * 12 + "]"),
              "load.levels: level 1000", "is not a load: use a load from 0.001 to 100000"),
    _validate("level-range-nan", GOOD.replace("levels: [1, 8]", "levels: '1:nan:1'"),
              "load.levels: range end nan is not a positive number"),
    _validate("level-range-infinite", GOOD.replace("levels: [1, 8]", "levels: '1:1e999'"),
              "load.levels: range end inf is not a load"),
    _validate("level-range-empty", GOOD.replace("levels: [1, 8]", "levels: {start: 1, end: 8, step: .nan}"),
              "load.levels.step: nan is not a finite number"),
    _validate("level-range-tiny-step", GOOD.replace("levels: [1, 8]", "levels: '1:1.00001:0.0000001'"),
              "load.levels: range step 1e-07 is finer than the levels' 6 decimals: use a larger step"),
    _validate("level-tiny", GOOD.replace("levels: [1, 8]", "levels: [0.00001]"),
              "load.levels: level 1e-05 is not a load: use a load from 0.001"),
    _validate("constraint-nan",
              GOOD.replace("at_load: 8}", "at_load: 8, constraints: {p95_us: {max: .nan}}}"),
              "objectives[0].constraints.p95_us.max: nan is not a finite number"),
    _validate("config-huge-int", GOOD.replace("max_queue_delay_microseconds: 100",
                                              "max_queue_delay_microseconds: 1" + "0" * 400),
              "variants[1].config.dynamic_batching.max_queue_delay_microseconds: a whole number of 401 "
              "digits: use a number of at most 20 digits"),
    _validate("config-date", GOOD.replace("max_queue_delay_microseconds: 100",
                                          "max_queue_delay_microseconds: 2024-01-01"),
              "max_queue_delay_microseconds: a YAML date value ('2024-01-01')", "quote it"),
    _validate("key-line-break", GOOD.replace("config: {dynamic", 'config: {"a\\r\\nb": .nan, dynamic'),
              "variants[1].config.a\\r\\nb: nan is not a finite number"),
    _validate("duplicate-key-escape", GOOD + '"\\e[2Jname": 1\n"\\e[2Jname": 2\n',
              "\\x1b[2Jname: key given twice: keep one"),
    _validate("name-trailing-newline", GOOD.replace("name: t\n", 'name: "t\\n"\n', 1),
              "name: 't\\n' is not a plain name"),
    _plan("host-trailing-newline", ("--run-dir", "{tmp}/results/t/r1", "--host", "n\n=0"),
          "--host 'n\\n=0': 'n\\n' is not a plain host name"),
    _validate("key-not-text", GOOD.replace("config: {dynamic", "config: {1: 2, dynamic"),
              "variants[1].config.1: key '1' is not text: quote it"),
    # a spec may not name a key, credentials or the inventory as a file it reads or ships
    _data("input-data-rehearsal-key", "inventory/.rehearsal/id_ed25519",
          "inside a private folder (.rehearsal",
          files={"inventory/.rehearsal/id_ed25519": KEY}),
    _data("input-data-inventory", "inventory/hosts.yml", "inside the repository's inventory/ folder",
          files={"inventory/hosts.yml": INVENTORY}),
    _data("input-data-ssh", "keys/.ssh/data.json", "inside a private folder (.ssh",
          files={"keys/.ssh/data.json": "{}"}),
    _data("input-data-key-name", "id_rsa", "its name 'id_rsa' is a key's", files={"id_rsa": "{}"}),
    _data("input-data-key-content", "inputs.json", "it holds BEGIN OPENSSH PRIVATE KEY",
          files={"inputs.json": KEY}),
    _data("input-data-inventory-content", "inputs.json", "it holds ansible_host",
          files={"inputs.json": INVENTORY}),
    _data("input-data-openrc", "data/CHI-123-openrc.sh", "its name 'CHI-123-openrc.sh'",
          files={"data/CHI-123-openrc.sh": "export OS_AUTH_URL=x\n"}),
    BadInput(id="spec-base-config-key", argv=V,
             files={"spec.yml": GOOD.replace(CONFIG, "base_config: inventory/node.key\n"), "ansible.cfg": "",
                    "inventory/node.key": KEY},
             expect=("{tmp}/spec.yml: base_config: 'inventory/node.key' may not be read for a spec",
                     "inside the repository's inventory/ folder")),
    _plan("fastapi-image-key", ("--run-dir", "{tmp}/results/t/r1", "--host", "n=0", "--fastapi-image",
                                "{tmp}/inventory/.rehearsal/id_ed25519"),
          "--fastapi-image '{tmp}/inventory/.rehearsal/id_ed25519': may not be sent to a node: it is "
          "inside a private folder", files={"inventory/.rehearsal/id_ed25519": KEY}),
    _plan("url-jinja", ("--run-dir", "{tmp}/results/t/r1", "--host", "n=0", "--url",
                        "{{{{ lookup('env','HOME') }}}}"),
          "--url \"{{{{ lookup('env','HOME') }}}}\": holds a Jinja expression"),
]
