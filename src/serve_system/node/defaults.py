"""Every default of the measuring engine, defined once: perf_analyzer's own defaults where a spec leaves a
setting out, the runner's timeouts and memory cap, and the planner's rough costs.

Read by the planner (:mod:`serve_system.experiment.plan`, ``.search``, ``.perfargv``), by the records
(:class:`.plans.RunnerSettings`' defaults) and by the runner; standard library only and importing
nothing: it travels in the node bundle with the rest of :mod:`serve_system.node`. A spec's ``perf``
setting, a role variable or an option of ``serve-system plan`` overrides the value here; nothing else
writes these numbers.
"""

from __future__ import annotations

# ------------------------------------------------------------------ perf_analyzer (its own defaults)

#: ``-i``: the protocol perf_analyzer speaks to Triton
PROTOCOL = "http"
#: ``-b``: the batch size of one request
BATCH_SIZE = 1
#: ``--request-distribution`` of a request-rate load
DISTRIBUTION = "constant"
#: ``--measurement-interval`` (ms): the length of one time window
WINDOW_MS = 5000
#: ``--measurement-request-count``: the requests of one count window
WINDOW_REQUESTS = 50
#: ``--max-trials``: the windows perf_analyzer tries before it gives up on stability
MAX_TRIALS = 10
#: perf_analyzer reports a level from its last this-many windows (its stability check)
STABILITY_WINDOWS = 3
#: ``--verbose-csv`` on the level's CSV export
VERBOSE_CSV = True
#: reruns of an unstable level, each with a window twice as long
RETRIES = 1
#: requests sent after each load, before measuring (a spec's ``warmup.requests``)
WARMUP_REQUESTS = 20

# ------------------------------------------------------------------ the runner (plans.RunnerSettings)

#: seconds between two metrics samples while a level runs
METRICS_INTERVAL_S = 1.0
#: seconds to wait for a loaded variant (or the FastAPI endpoint) to become READY
READY_TIMEOUT_S = 180.0
#: time cap of one perf_analyzer (or FastAPI client) run, in seconds
PERF_TIMEOUT_S = 900.0
#: memory cap of perf_analyzer (resident MB)
PERF_MEMORY_MB = 4096.0
#: the progress file the runner keeps current (as the client container sees it)
PROGRESS = "/work/progress.json"
#: the client container the runner runs in (``docker exec``)
CONTAINER = "jupyter"
#: the run's node folder as the client container sees it
CLIENT_DIR = "/work"
