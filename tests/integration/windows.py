"""How long the integration tests measure: decided here, once, not by each test.

Every integration test says with a marker which windows it measures with, and takes them from the
``windows`` fixture (conftest.py):

- ``@pytest.mark.windows("behaviour")``: it checks a path (resume, faults, sharding, a search's
  steps, the role's rounds, a report): perf_analyzer measures with the shortest windows that still
  exercise it (:data:`BEHAVIOUR`: count windows of a few requests; a timed window of 300 ms where a
  test needs time windows, as a search's rungs do);
- ``@pytest.mark.windows("interruptible")``: it acts while a level runs (kills Triton, kills the
  playbook): levels that last seconds (:data:`INTERRUPTIBLE`);
- ``@pytest.mark.windows("measurement")``: it checks a measurement itself (noise, A/A, contention, a
  slowed node named): real time windows (:data:`MEASUREMENT`), or the spec's own;
- ``@pytest.mark.windows("none")``: it measures nothing.

tests/unit/test_integration_windows.py fails for an integration test without the marker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KINDS = ("behaviour", "interruptible", "measurement", "none")


@dataclass(frozen=True)
class Windows:
    """A spec's perf settings for one kind of test."""

    kind: str
    #: merged into a spec's ``perf``
    perf: dict[str, Any] = field(default_factory=dict)
    #: a timed window (ms) where a test needs time windows (a halving search's first rung)
    window_ms: int = 1000
    #: warm-up requests before each level
    warmup: int = 10
    #: perf_analyzer's own options, for a test that runs it by hand (as the lab's notebook does)
    cli: tuple[str, ...] = ()

    def dropped(self, perf: dict[str, Any] | None) -> dict[str, Any]:
        """``perf`` without what would make it long under count windows (time windows, fixed request
        counts); as it is for time windows."""
        out = dict(perf or {})
        if self.perf.get("measurement_mode") == "count_windows":
            for key in ("measurement_interval_ms", "request_count", "warmup_request_count"):
                out.pop(key, None)
        return out

    def spec_perf(self, perf: dict[str, Any] | None = None) -> dict[str, Any]:
        """A spec's ``perf`` measuring with these windows."""
        return {**self.dropped(perf), **self.perf}


#: count windows of 12 requests (a fraction of a second on the stand-ins), at most 5 trials, one retry
BEHAVIOUR = Windows("behaviour", {"measurement_mode": "count_windows", "measurement_request_count": 12,
                                  "stability_percentage": 60, "max_trials": 5, "retries": 1},
                    window_ms=300, warmup=4,
                    # perf_analyzer alone, without the runner's retry: more trials (a busy 2-core
                    # machine can need more than 10 windows to agree)
                    cli=("--measurement-mode", "count_windows", "--measurement-request-count", "20",
                         "--stability-percentage", "100", "--max-trials", "30"))
#: 1.5 s time windows: a level lasts at least 4.5 s, long enough to act during it
INTERRUPTIBLE = Windows("interruptible", {"measurement_interval_ms": 1500, "stability_percentage": 60,
                                          "max_trials": 8}, window_ms=1500, warmup=10)
#: the windows measurement tests were calibrated with (1.5 s time windows)
MEASUREMENT = Windows("measurement", {"measurement_interval_ms": 1500, "stability_percentage": 60,
                                      "max_trials": 8}, window_ms=1000, warmup=10)
NONE = Windows("none")

BY_KIND = {w.kind: w for w in (BEHAVIOUR, INTERRUPTIBLE, MEASUREMENT, NONE)}
