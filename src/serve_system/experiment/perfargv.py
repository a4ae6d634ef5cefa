"""perf_analyzer's command line: one load level's argv, a longer window for a retry, and the bounds that
keep its copies of large requests within memory.

What perf_analyzer prints and exports is parsed in :mod:`.perf`, whose :data:`~.perf.CONCURRENCY` and
:data:`~.perf.REQUEST_RATE` are the load modes here too.
"""

from __future__ import annotations

from typing import Any

from . import defaults as d
from .perf import CONCURRENCY, REQUEST_RATE


def build_argv(
    *,
    model: str,
    url: str,
    mode: str,
    load: float,
    perf: dict[str, Any],
    csv_path: str | None = None,
    version: str | None = None,
) -> list[str]:
    """perf_analyzer's argument vector for one load level of an experiment.

    ``perf`` holds the spec's perf_analyzer settings (see :class:`serve_system.experiment.spec.models.Perf`).
    """
    argv = ["perf_analyzer", "-m", model, "-u", url, "-i", perf.get("protocol", d.PROTOCOL), "-v"]
    if version:
        argv += ["-x", str(version)]
    argv += ["-b", str(perf.get("batch_size", d.BATCH_SIZE))]
    if mode == CONCURRENCY:
        argv += ["--concurrency-range", str(int(load))]
    elif mode == REQUEST_RATE:
        argv += ["--request-rate-range", _fmt(load),
                 "--request-distribution", perf.get("distribution", d.DISTRIBUTION)]
    else:
        raise ValueError(f"unknown load mode {mode!r}")
    if perf.get("input_data"):
        argv += ["--input-data", str(perf["input_data"])]
    for name, dims in (perf.get("shapes") or {}).items():
        argv += ["--shape", f"{name}:{','.join(str(d) for d in dims)}"]
    opts = (
        ("warmup_request_count", "--warmup-request-count"),
        ("request_count", "--request-count"),
        ("measurement_mode", "--measurement-mode"),
        ("measurement_interval_ms", "--measurement-interval"),
        ("measurement_request_count", "--measurement-request-count"),
        ("percentile", "--percentile"),
        ("latency_threshold_ms", "--latency-threshold"),
        ("stability_percentage", "--stability-percentage"),
        ("max_trials", "--max-trials"),
        ("max_threads", "--max-threads"),
    )
    for key, flag in opts:
        if perf.get(key) is not None:
            argv += [flag, str(perf[key])]
    if perf.get("async"):
        argv.append("--async")
    if csv_path:
        argv += ["-f", csv_path]
        if perf.get("verbose_csv", d.VERBOSE_CSV):
            argv.append("--verbose-csv")
    return argv


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def window_ms(perf: dict[str, Any]) -> int:
    """The length of one time window (ms): the spec's, else perf_analyzer's default."""
    return int(perf.get("measurement_interval_ms") or d.WINDOW_MS)


def window_requests(perf: dict[str, Any]) -> int:
    """The requests of one count window: the spec's, else perf_analyzer's default."""
    return int(perf.get("measurement_request_count") or d.WINDOW_REQUESTS)


def longer_window(perf: dict[str, Any], factor: int = 2) -> dict[str, Any]:
    """perf settings with a longer measurement window, for a retry after an unstable measurement."""
    out = dict(perf)
    if out.get("measurement_mode") == "count_windows":
        out["measurement_request_count"] = window_requests(out) * factor
    else:
        out["measurement_interval_ms"] = window_ms(out) * factor
    out["max_trials"] = int(out.get("max_trials") or d.MAX_TRIALS) * factor
    return out


#: perf_analyzer 2.60 keeps a copy of every request's input tensors until it sums up the window they
#: were sent in, and holds about twice that at its peak (measured on a rehearsal node: 715 MB for 600
#: requests of FP32 3x224x224, 602 KB each, at concurrency 8 and 16; 361 MB for 300). So its memory
#: grows with the requests of one window: with time windows, with the server's speed, without bound.
RETAINED_COPIES = 2
#: what one level's retained requests may take: half the runner's default memory cap, the rest for
#: perf_analyzer itself and the client container's other processes
REQUEST_MEMORY_BUDGET = int(d.PERF_MEMORY_MB) // 2 * 1024 * 1024
#: requests at least this large (bytes of generated input tensors) are bounded by a request count
LARGE_REQUEST_BYTES = 64 * 1024


def request_limit(request_bytes: int, budget: int = REQUEST_MEMORY_BUDGET) -> int:
    """The most requests (warm-up included) one perf_analyzer run may send with requests this large."""
    return max(1, budget // (RETAINED_COPIES * max(request_bytes, 1)))


#: requests per count window given to large inputs instead of time windows (stability is still
#: checked window by window; perf_analyzer frees a window's copies once it is summed up)
COUNT_WINDOW = 200


def bound_requests(perf: dict[str, Any], request_bytes: int | None) -> tuple[dict[str, Any], str | None]:
    """perf settings under which perf_analyzer's copies of the requests stay within the budget, and a note.

    For requests of ``LARGE_REQUEST_BYTES`` or more (smaller or unknown ones, None, are left as they
    are), with :func:`request_limit` requests at most: a ``request_count`` (with the warm-up, a quarter
    of it at most) is capped; count windows are capped (half of it: a retry doubles them); time
    windows, which grow with the server's speed, become count windows of ``COUNT_WINDOW`` requests.
    """
    if request_bytes is None or request_bytes < LARGE_REQUEST_BYTES:
        return perf, None
    most = request_limit(request_bytes)
    out = dict(perf)
    count = perf.get("request_count")
    if count is not None:
        warm = int(perf.get("warmup_request_count") or 0)
        if count + warm <= most:
            return perf, None
        if warm:
            out["warmup_request_count"] = min(warm, most // 4)
        out["request_count"] = max(1, min(count, most - int(out.get("warmup_request_count") or 0)))
        was = f"request_count {count}" + (f", warmup_request_count {warm}" if warm else "")
        now = f"request_count {out['request_count']}" + (
            f", warmup_request_count {out['warmup_request_count']}" if warm else "")
    elif perf.get("measurement_mode") == "count_windows":
        window = window_requests(perf)
        if window <= most // 2:
            return perf, None
        out["measurement_request_count"] = max(1, most // 2)
        was, now = f"count windows of {window}", f"count windows of {out['measurement_request_count']}"
    else:
        out.update(measurement_mode="count_windows", measurement_request_count=max(1, min(COUNT_WINDOW,
                                                                                             most // 2)))
        was, now = "time windows", f"count windows of {out['measurement_request_count']} requests"
    return out, (f"requests of {request_bytes / 1e6:.2f} MB: {now} instead of {was} (perf_analyzer keeps "
                 f"~{RETAINED_COPIES} copies of each request's inputs of a window: at most "
                 f"{REQUEST_MEMORY_BUDGET // 2**20} MB)")
