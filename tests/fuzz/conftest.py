"""The fuzzer's budget: hypothesis profiles.

``ci`` (the default): a fixed number of examples per reader, derandomized (the same examples on every
run: the seed is derived from each test's name), at most a few seconds per reader, well under CI's
3 minutes for all of them. ``long``: bench/fuzz.py's random run for as long as it is given (its seed is
printed and passed with ``--hypothesis-seed``). Set with ``HYPOTHESIS_PROFILE``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_COMMON = {"deadline": None, "database": None, "print_blob": True,
           "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much]}
settings.register_profile("ci", max_examples=int(os.environ.get("FUZZ_EXAMPLES", "500")), derandomize=True,
                          **_COMMON)
settings.register_profile("long", max_examples=int(os.environ.get("FUZZ_EXAMPLES", "2000")), **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_report_header() -> str:
    s = settings.default
    how = "derandomized (seed from each test's name)" if s.derandomize else "random (see --hypothesis-seed)"
    profile = os.environ.get("HYPOTHESIS_PROFILE", "ci")
    return f"fuzz: hypothesis profile {profile}, {s.max_examples} examples per reader, {how}"
