"""The fuzz tests' seed and budget, fixed once per session so that pytest's header can print them
(``conftest.pytest_terminal_summary``) and ``test_fuzz_inputs`` uses them."""

from __future__ import annotations

import os
import random

#: CI runs a fixed seed (a CI run is never flaky: each example it draws passed before it landed); a
#: longer hunt draws a fresh one with ``SERVE_SYSTEM_FUZZ_SEED=random``, a failure is replayed with
#: ``SERVE_SYSTEM_FUZZ_SEED=<seed>`` and kept as an ``@example``
FIXED_SEED = 20261126
_given = os.environ.get("SERVE_SYSTEM_FUZZ_SEED", "")
SEED = (random.SystemRandom().randrange(2**32) if _given == "random" else int(_given) if _given
        else FIXED_SEED)
#: examples per reader (CI: the default; a longer run: ``SERVE_SYSTEM_FUZZ_EXAMPLES=5000``)
EXAMPLES = int(os.environ.get("SERVE_SYSTEM_FUZZ_EXAMPLES") or 60)
