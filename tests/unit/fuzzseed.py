"""The fuzz tests' seed and budget, fixed once per session so that pytest's header can print them
(``conftest.pytest_terminal_summary``) and ``test_fuzz_inputs`` uses them."""

from __future__ import annotations

import os
import random

#: replay a run with ``SERVE_SYSTEM_FUZZ_SEED=<seed>``
SEED = int(os.environ.get("SERVE_SYSTEM_FUZZ_SEED") or random.SystemRandom().randrange(2**32))
#: examples per reader (CI: the default; a longer run: ``SERVE_SYSTEM_FUZZ_EXAMPLES=5000``)
EXAMPLES = int(os.environ.get("SERVE_SYSTEM_FUZZ_EXAMPLES") or 60)
