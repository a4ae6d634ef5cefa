#!/usr/bin/env python3
"""Do the verdicts survive a re-run? The three targets of the verdicts work, side by side in one run.

On one rehearsal node (an inventory's host):

1. A/A: ``experiments/noise.yml`` (the same config as two variants, interleaved, ``repetitions:
   auto``) run ``--aa-runs`` times: how many runs name a clear best variant (target: none).
2. ``experiments/dynbatch.yml`` as shipped, ``--runs`` times: each finding's verdict per run; a finding
   that is *held* in one run and *did not hold* in another contradicts itself (target: none).
3. Its cost: each shipped run is paired with a run of the spec as it was before repetitions and
   intervals (one repetition, 5 s windows: ``--plain-interval-ms``, perf_analyzer's own stability
   rule), in turn (plain, shipped, plain,
   ...); the median ratio of their wall times (target: <= 1.5).

    .venv/bin/python bench/noise.py -i inventory/hosts.yml --limit NODE [--aa-runs 10] [--runs 5]

It is long (about 3 min per run on a rehearsal node): run it in the background.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from playbook_run import HERE, dynbatch_copy, run_playbook, write


def plain_spec(dest: Path, interval_ms: int) -> Path:
    """The shipped dynbatch spec as it ran before: one repetition, no budget, ``interval_ms`` windows,
    perf_analyzer's own stability rule."""
    spec, path = dynbatch_copy(dest, measurement_interval_ms=interval_ms)
    spec["repetitions"] = 1
    spec.pop("budget", None)
    for key in ("stability_percentage", "max_trials"):
        spec["perf"].pop(key, None)
    return write(spec, path)


def run(playbook: str, inventory: Path, limit: str, results: Path, run_id: str,
        spec: Path | None = None) -> float:
    extra = ["-e", f"experiment_results_dir={results}"] + (["-e", f"experiment_spec={spec}"] if spec else [])
    return run_playbook(HERE, playbook, inventory, limit, results, run_id, extra)


def findings(results: Path, experiment: str, run_id: str) -> dict[str, str]:
    doc = json.loads((results / experiment / run_id / "summary.json").read_text())
    return {f["key"]: f["verdict"] for f in doc["findings"]}


def positions(results: Path, run_id: str, host: str) -> list[tuple[float, float]]:
    """(first, second) pairs of an A/A run: per round and load, the throughput of the variant measured
    first in that round and of the one measured second (the plan's recorded order)."""
    run = results / "noise" / run_id
    rounds = json.loads((run / host / "plan.json").read_text())["rounds"]
    rows = json.loads((run / "summary.json").read_text())["rows"]
    tput = {(r["variant"], r["repetition"], r["load"]): r["throughput"] for r in rows
            if r["status"] == "ok" and r.get("throughput")}
    pairs = []
    for rep, order in enumerate(rounds, 1):
        for load in sorted({r["load"] for r in rows}):
            got = [tput.get((v, rep, load)) for v in order[:2]]
            if got[0] and got[1]:
                pairs.append((float(got[0]), float(got[1])))
    return pairs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-i", "--inventory", type=Path, required=True)
    ap.add_argument("--limit", required=True, help="the rehearsal node to run on")
    ap.add_argument("--aa-runs", type=int, default=10)
    ap.add_argument("--runs", type=int, default=5,
                    help="runs of the shipped dynbatch spec (and of the plain one)")
    ap.add_argument("--plain-interval-ms", type=int, default=5000)
    ap.add_argument("--results", type=Path, default=Path("/tmp/serve-system-bench-noise"))
    args = ap.parse_args()
    args.results.mkdir(parents=True, exist_ok=True)
    inv = args.inventory.resolve()
    stamp = time.strftime("%Y%m%dT%H%M%S")

    clear = []
    order: list[tuple[float, float]] = []
    for i in range(args.aa_runs):
        rid = f"aa-{stamp}-{i}"
        run("noise.yml", inv, args.limit, args.results, rid)
        verdict = findings(args.results, "noise", rid).get("best_variant")
        clear.append(verdict == "held")
        order += positions(args.results, rid, args.limit)
        print(f"A/A run {i + 1}: best_variant {verdict}", flush=True)

    plain = plain_spec(args.results / "plain_spec", args.plain_interval_ms)
    walls: list[tuple[float, float]] = []
    seen: dict[str, list[str]] = {}
    for i in range(args.runs):
        w_plain = run("dynbatch.yml", inv, args.limit, args.results, f"plain-{stamp}-{i}", plain)
        rid = f"shipped-{stamp}-{i}"
        w_shipped = run("dynbatch.yml", inv, args.limit, args.results, rid)
        walls.append((w_plain, w_shipped))
        for key, verdict in findings(args.results, "dynbatch", rid).items():
            seen.setdefault(key, []).append(verdict)
        print(f"dynbatch run {i + 1}: plain {w_plain:.0f} s, shipped {w_shipped:.0f} s; "
              + ", ".join(f"{k} {v[-1]}" for k, v in seen.items()), flush=True)

    print()
    print(f"1. A/A: a clear best named in {sum(clear)} of {len(clear)} runs (target 0)")
    if len(order) >= 2:  # the same config measured first and second in a round: the order effect
        import math

        from serve_system.results import intervals as iv

        s = iv.summarize([math.log(b / a) for a, b in order])  # paired: each round and load its own ratio
        span = (f" [{math.exp(s.ci_low) - 1:+.1%}, {math.exp(s.ci_high) - 1:+.1%}]"
                if s.ci_low is not None and s.ci_high is not None else "")
        print(f"   order effect: the config measured second in a round against the same config measured "
              f"first: throughput {math.exp(s.mean or 0.0) - 1:+.1%}{span}, n = {s.n} (rounds x loads)")
    flips = [k for k, v in seen.items() if "held" in v and "did not hold" in v]
    for key, verdicts in seen.items():
        print(f"   {key}: " + " / ".join(verdicts))
    print(f"2. dynbatch, {len(walls)} runs: {len(flips)} finding(s) held in one run and not in another "
          f"(target 0){': ' + ', '.join(flips) if flips else ''}")
    if walls:
        ratios = [s / p for p, s in walls]
        print(f"3. wall time shipped / plain: median {statistics.median(ratios):.2f}x "
              f"(min {min(ratios):.2f}, max {max(ratios):.2f}; plain median "
              f"{statistics.median(p for p, _ in walls):.0f} s) (target <= 1.5)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
