"""perf_analyzer's command line: one load level's argv, a longer window for a retry, and the bounds that
keep its copies of large requests within memory.

What perf_analyzer prints and exports is parsed in :mod:`.perf`, whose :data:`~.perf.CONCURRENCY` and
:data:`~.perf.REQUEST_RATE` are the load modes here too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..node import defaults as d
from .perf import CONCURRENCY, REQUEST_RATE

#: the one key whose name is no Python name: ``async`` in the spec and the plan, ``async_`` here
_ALIASES = {"async": "async_"}


@dataclass(frozen=True)
class PerfSettings:
    """perf_analyzer's settings for one variant, typed from the spec to the argv: the spec's ``perf`` with
    the variant's over it (:meth:`~.spec.models.TritonSpec.merged_perf`), and what the plan sets (the
    load's ``distribution``, the node's path of the input data, a bound on the requests). Each maps to
    perf_analyzer's option of the same name (:func:`build_argv`); None: its default
    (:mod:`serve_system.node.defaults`)."""

    protocol: str | None = None
    batch_size: int | None = None
    input_data: str | None = None
    shapes: dict[str, list[int]] | None = None
    warmup_request_count: int | None = None
    request_count: int | None = None
    measurement_mode: str | None = None
    measurement_interval_ms: int | None = None
    measurement_request_count: int | None = None
    percentile: int | None = None
    latency_threshold_ms: int | None = None
    stability_percentage: int | None = None
    max_trials: int | None = None
    max_threads: int | None = None
    async_: bool | None = None
    verbose_csv: bool | None = None
    retries: int | None = None
    distribution: str | None = None

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> PerfSettings:
        """From the settings as the spec names them (``async``) and the host plan keeps them."""
        return cls(**{_ALIASES.get(k, k): v for k, v in record.items()})

    def record(self) -> dict[str, Any]:
        """The settings given (None left out), named as the spec names them: the host plan's ``perf``."""
        back = {v: k for k, v in _ALIASES.items()}
        return {back.get(f.name, f.name): getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) is not None}

    @property
    def batch(self) -> int:
        return self.batch_size or d.BATCH_SIZE

    @property
    def timed(self) -> bool:
        """Whether perf_analyzer measures in time windows (else in count windows)."""
        return self.measurement_mode != "count_windows"

    @property
    def window_ms(self) -> int:
        """The length of one time window (ms): the spec's, else perf_analyzer's default."""
        return self.measurement_interval_ms or d.WINDOW_MS

    @property
    def window_requests(self) -> int:
        """The requests of one count window: the spec's, else perf_analyzer's default."""
        return self.measurement_request_count or d.WINDOW_REQUESTS


#: the settings passed as ``--option VALUE`` when given, in perf_analyzer's order
_OPTIONS = (
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


def build_argv(
    *,
    model: str,
    url: str,
    mode: str,
    load: float,
    perf: PerfSettings,
    csv_path: str | None = None,
    version: str | None = None,
) -> list[str]:
    """perf_analyzer's argument vector for one load level of an experiment."""
    argv = ["perf_analyzer", "-m", model, "-u", url, "-i", perf.protocol or d.PROTOCOL, "-v"]
    if version:
        argv += ["-x", str(version)]
    argv += ["-b", str(perf.batch)]
    if mode == CONCURRENCY:
        argv += ["--concurrency-range", str(int(load))]
    elif mode == REQUEST_RATE:
        argv += ["--request-rate-range", _fmt(load),
                 "--request-distribution", perf.distribution or d.DISTRIBUTION]
    else:
        raise ValueError(f"unknown load mode {mode!r}")
    if perf.input_data:
        argv += ["--input-data", str(perf.input_data)]
    for name, dims in (perf.shapes or {}).items():
        argv += ["--shape", f"{name}:{','.join(str(x) for x in dims)}"]
    for key, flag in _OPTIONS:
        if getattr(perf, key) is not None:
            argv += [flag, str(getattr(perf, key))]
    if perf.async_:
        argv.append("--async")
    if csv_path:
        argv += ["-f", csv_path]
        if d.VERBOSE_CSV if perf.verbose_csv is None else perf.verbose_csv:
            argv.append("--verbose-csv")
    return argv


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def longer_window(perf: PerfSettings, factor: int = 2) -> PerfSettings:
    """perf settings with a longer measurement window, for a retry after an unstable measurement."""
    longer = replace(perf, max_trials=(perf.max_trials or d.MAX_TRIALS) * factor)
    if not perf.timed:
        return replace(longer, measurement_request_count=perf.window_requests * factor)
    return replace(longer, measurement_interval_ms=perf.window_ms * factor)


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


def bound_requests(perf: PerfSettings, request_bytes: int | None) -> tuple[PerfSettings, str | None]:
    """perf settings under which perf_analyzer's copies of the requests stay within the budget, and a note.

    For requests of ``LARGE_REQUEST_BYTES`` or more (smaller or unknown ones, None, are left as they
    are), with :func:`request_limit` requests at most: a ``request_count`` (with the warm-up, a quarter
    of it at most) is capped; count windows are capped (half of it: a retry doubles them); time
    windows, which grow with the server's speed, become count windows of ``COUNT_WINDOW`` requests.
    """
    if request_bytes is None or request_bytes < LARGE_REQUEST_BYTES:
        return perf, None
    most = request_limit(request_bytes)
    count = perf.request_count
    if count is not None:
        warm = perf.warmup_request_count or 0
        if count + warm <= most:
            return perf, None
        out = replace(perf, warmup_request_count=min(warm, most // 4)) if warm else perf
        out = replace(out, request_count=max(1, min(count, most - (out.warmup_request_count or 0))))
        was = f"request_count {count}" + (f", warmup_request_count {warm}" if warm else "")
        now = f"request_count {out.request_count}" + (
            f", warmup_request_count {out.warmup_request_count}" if warm else "")
    elif not perf.timed:
        window = perf.window_requests
        if window <= most // 2:
            return perf, None
        out = replace(perf, measurement_request_count=max(1, most // 2))
        was, now = f"count windows of {window}", f"count windows of {out.measurement_request_count}"
    else:
        out = replace(perf, measurement_mode="count_windows",
                       measurement_request_count=max(1, min(COUNT_WINDOW, most // 2)))
        was, now = "time windows", f"count windows of {out.measurement_request_count} requests"
    return out, (f"requests of {request_bytes / 1e6:.2f} MB: {now} instead of {was} (perf_analyzer keeps "
                 f"~{RETAINED_COPIES} copies of each request's inputs of a window: at most "
                 f"{REQUEST_MEMORY_BUDGET // 2**20} MB)")
