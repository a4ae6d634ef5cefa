"""The foundation every stage may use for Triton's model configurations: :mod:`.pbtxt` (read, parse,
override, render), :mod:`.backends` (the backend and platform tables, what Triton fills in), :mod:`.rules`
and :mod:`.ensemble` (Triton's refusals and notes), :mod:`.host` (what a host can run, and the
adaptation to it), :mod:`.problems` (all of them for a file or a host) and :mod:`.inputs` (the model's
inputs against perf_analyzer's shapes)."""
