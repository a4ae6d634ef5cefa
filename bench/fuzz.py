#!/usr/bin/env python3
"""The fuzzer (tests/fuzz) for as long as it is given: random examples, a new seed per round.

CI runs the same properties on a fixed, derandomized budget (tests/fuzz/conftest.py, profile ``ci``).
This runs profile ``long``: each round is one pytest run of tests/fuzz with a fresh seed (printed, so a
failure is reproduced with ``--hypothesis-seed=SEED``), until ``--minutes`` are spent. Printed per
round: the seed, pass or fail, and per reader (test) the examples hypothesis ran; at the end the total
examples per reader and the failing seeds. A failure's shrunk example belongs in the test as an
``@example`` (a regression case). Exit status 1 when any round failed.

    .venv/bin/python bench/fuzz.py --minutes 30 [--examples 5000]

``--cli``: the CLI fuzzer instead (tests/unit/test_fuzz_cli.py: every command line's exit, stderr and
writes), a fresh seed per round through ``SERVE_SYSTEM_FUZZ_SEED``, ``--examples`` per command per round.

    .venv/bin/python bench/fuzz.py --cli --minutes 10 --examples 100
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
#: hypothesis --hypothesis-show-statistics: "tests/fuzz/...::test_x:" then "  - N passing examples, ..."
TEST = re.compile(r"^(?:tests/fuzz/)?\S*::(test_\w+):\s*$")
PASSING = re.compile(r"^\s*-\s*(\d+) passing, (\d+) failing, and (\d+) invalid")
#: test_fuzz_cli.py's closing line: "CLI fuzz seed S, N examples per command: T run; ..."
CLI_RUN = re.compile(r"CLI fuzz seed \d+, \d+ examples per command: (\d+) run;")


def cli_round(seed: int, examples: int, timeout: float) -> tuple[bool | None, Counter[str], str]:
    """(passed, {"command lines": examples run}, output) of one run of the CLI fuzzer."""
    env = {**os.environ, "SERVE_SYSTEM_FUZZ_SEED": str(seed), "SERVE_SYSTEM_CLI_FUZZ_EXAMPLES": str(examples)}
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "tests/unit/test_fuzz_cli.py", "-q", "-s",
                               "-p", "no:cacheprovider"], cwd=HERE, env=env, capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None, Counter(), f"round cut off after {timeout:.0f} s (the time given is spent)"
    out = proc.stdout + proc.stderr
    m = CLI_RUN.search(out)
    return proc.returncode == 0, Counter({"command lines": int(m.group(1)) if m else 0}), out


def one_round(seed: int, examples: int, timeout: float) -> tuple[bool | None, Counter[str], str]:
    """(passed, examples per reader, output) of one pytest run; passed is None when the run was cut off
    at the end of the time given (every example runs under its own alarm in the tests: a hang fails
    the example, it does not reach this timeout)."""
    env = {**os.environ, "HYPOTHESIS_PROFILE": "long", "FUZZ_EXAMPLES": str(examples)}
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "tests/fuzz", "-q", "-p", "no:cacheprovider",
                               f"--hypothesis-seed={seed}", "--hypothesis-show-statistics"],
                              cwd=HERE, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        out, ok = proc.stdout + proc.stderr, proc.returncode == 0
    except subprocess.TimeoutExpired:
        return None, Counter(), f"round cut off after {timeout:.0f} s (the time given is spent)"
    counts: Counter[str] = Counter()
    test = None
    for line in out.splitlines():
        if m := TEST.match(line.strip()):
            test = m.group(1)
        elif (m := PASSING.match(line)) and test is not None:
            counts[test] += int(m.group(1)) + int(m.group(2))
    return ok, counts, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0, help="how long to fuzz (default 30)")
    ap.add_argument("--examples", type=int, default=2000, help="examples per reader per round (default 2000)")
    ap.add_argument("--seed", type=int, default=None, help="the first round's seed (default: random)")
    ap.add_argument("--cli", action="store_true", help="the CLI fuzzer (tests/unit/test_fuzz_cli.py)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    end = time.monotonic() + args.minutes * 60
    total: Counter[str] = Counter()
    failed: list[int] = []
    rounds = 0
    what = "tests/unit/test_fuzz_cli.py" if args.cli else "tests/fuzz"
    print(f"fuzzing {what} for {args.minutes:g} min, {args.examples} examples per reader per round "
          "(numbers from a shared machine: examples per minute vary with its load)", flush=True)
    while time.monotonic() < end:
        seed = args.seed if rounds == 0 and args.seed is not None else rng.randrange(2**32)
        left = end - time.monotonic()
        ok, counts, out = (cli_round if args.cli else one_round)(seed, args.examples, max(left, 60.0) + 120.0)
        if ok is None:
            print(f"round {rounds + 1}: seed {seed}: {out}", flush=True)
            break
        rounds += 1
        total.update(counts)
        print(f"round {rounds}: seed {seed}: {'ok' if ok else 'FAILED'}; "
              + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), flush=True)
        if not ok:
            failed.append(seed)
            print("\n".join(out.splitlines()[-60:]), flush=True)
    print(f"\n{rounds} round(s); examples per reader: "
          + ", ".join(f"{k} {v}" for k, v in sorted(total.items())))
    print(f"total examples: {sum(total.values())}; failing seeds: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
