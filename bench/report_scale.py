#!/usr/bin/env python3
"""``serve-system report`` against the number of hosts: seconds a host at 1, 10 and 40 hosts, before and
after side by side (target: at most 0.5 s a host at 40 hosts, one host at most 1.5 s).

The run is a real one: a quiet ``dynbatch`` rehearsal (tests/unit/fixtures/rehearsal/dynbatch_run.tar.xz:
one host, 2 variants x 3 loads x 4 repetitions, every raw file the runner wrote: perf_analyzer's stdout
and CSV, Triton's statistics, the sampled :8002/metrics pages), or ``--source RUN_DIR`` (a run folder of
one host). Its host folder is copied under new names (node-01, node-02, ...; the name rewritten in its
records) into a run of N hosts, and each report is the CLI as a user runs it: ``python -m
serve_system.cli report RUN`` in a subprocess, on a fresh copy of the run every time. Printed per host
count and side: the wall seconds a host (median, min-max over ``--repeat`` runs) and the CPU seconds
the report's processes used (its own and any workers').

With ``--baseline GIT_REF`` (a ``git worktree`` of that commit, made in a temporary folder and removed at
the end) or ``--before-repo DIR`` (a checkout), the same reports run with that code first on PYTHONPATH,
the sides alternating from one repeat to the next; their outputs (report.md, summary.csv,
summary_stats.csv, summary.json and every plot) are compared byte for byte, each run on the same path.

    .venv/bin/python bench/report_scale.py [--baseline node41] [--hosts 1,10,40] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
FIXTURE = HERE / "tests" / "unit" / "fixtures" / "rehearsal" / "dynbatch_run.tar.xz"
#: the report's outputs, compared between the sides (plots/*.png besides)
OUTPUTS = ("report.md", "summary.csv", "summary_stats.csv", "summary.json")
PER_HOST, ONE_HOST = 0.5, 1.5


def source_run(dest: Path, source: Path | None) -> tuple[Path, str]:
    """The one-host run to copy (the fixture unpacked into ``dest``, or ``source``) and its host's name."""
    if source is None:
        with tarfile.open(FIXTURE) as tar:
            tar.extractall(dest, filter="data")
        source = dest
    hosts = [p for p in source.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name != "plots"]
    if len(hosts) != 1 or not (source / "manifest.json").is_file():
        sys.exit(f"{source}: expected a run folder with manifest.json and one host folder")
    return source, hosts[0].name


def build_run(source: Path, host: str, n: int, dest: Path) -> Path:
    """A run of ``n`` hosts: the source's manifest and host folder copied under node-01 ... node-NN (the
    name replaced in the records' JSON); nothing the report writes (plots, summaries)."""
    names = [f"node-{i:02d}" for i in range(1, n + 1)]
    dest.mkdir(parents=True)
    old, new_list = f'"{host}"'.encode(), ", ".join(f'"{h}"' for h in names).encode()
    (dest / "manifest.json").write_bytes((source / "manifest.json").read_bytes().replace(old, new_list))
    for name in names:
        shutil.copytree(source / host, dest / name, ignore=shutil.ignore_patterns(".*"))
        for f in (dest / name).rglob("*.json"):
            f.write_bytes(f.read_bytes().replace(old, f'"{name}"'.encode()))
    return dest


def report(code: Path, run: Path) -> tuple[float, float]:
    """One ``report`` of ``run`` with ``code``'s package; (wall s, CPU s of the process and its children)."""
    env = {**os.environ, "PYTHONPATH": str(code / "src")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "serve_system.cli", "report", str(run)], env=env,
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        sys.exit(f"report failed ({code}, {run}):\n{done.stdout}{done.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def outputs(run: Path) -> dict[str, bytes]:
    files = {name: (run / name).read_bytes() for name in OUTPUTS}
    files |= {f"plots/{p.name}": p.read_bytes() for p in sorted((run / "plots").glob("*.png"))}
    return files


def compare(n: int, sides: dict[str, dict[str, bytes]]) -> None:
    (a, fa), (b, fb) = sides.items()
    differ = sorted(k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k))
    print(f"outputs at {n} host(s), {a} vs {b}: {len(fa)} vs {len(fb)} file(s), "
          + (f"{len(differ)} differ: {', '.join(differ[:8])}" if differ else "the same byte for byte"))


def worktree(ref: str, where: Path) -> Path:
    path = where / "baseline"
    subprocess.run(["git", "-C", str(HERE), "worktree", "add", "--detach", str(path), ref], check=True,
                   capture_output=True)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", default="1,10,40", help="host counts, comma-separated")
    ap.add_argument("--repeat", type=int, default=3, help="reports per host count and side")
    ap.add_argument("--source", type=Path, help="a one-host run folder (default: the recorded dynbatch run)")
    base = ap.add_mutually_exclusive_group()
    base.add_argument("--baseline", metavar="GIT_REF", help="compare with this commit (a git worktree)")
    base.add_argument("--before-repo", type=Path, help="compare with this checkout")
    args = ap.parse_args()
    counts = [int(x) for x in args.hosts.split(",")]
    with tempfile.TemporaryDirectory(prefix="report_scale_") as tmp_:
        tmp = Path(tmp_)
        before = (worktree(args.baseline, tmp) if args.baseline
                  else args.before_repo.resolve() if args.before_repo else None)
        try:
            run_bench(tmp, counts, args.repeat, args.source, before)
        finally:
            if args.baseline and before is not None:
                subprocess.run(["git", "-C", str(HERE), "worktree", "remove", "--force", str(before)],
                               check=False, capture_output=True)
    return 0


def run_bench(tmp: Path, counts: list[int], repeat: int, source_dir: Path | None,
              before: Path | None) -> None:
    source, host = source_run(tmp / "source", source_dir)
    sides = ({"before": before} if before else {}) | {"after": HERE}
    templates = {n: build_run(source, host, n, tmp / "template" / str(n) / "dynbatch" / "r1") for n in counts}
    wall: dict[tuple[int, str], list[float]] = {}
    cpu: dict[tuple[int, str], list[float]] = {}
    seen: dict[int, dict[str, dict[str, bytes]]] = {}
    print(f"report of {', '.join(map(str, counts))} host(s) (copies of {host}), {repeat} run(s) each, "
          f"sides {' / '.join(sides)} alternating; {os.cpu_count()} CPUs (shared: other work counts)")
    for i in range(repeat):
        order = list(sides) if i % 2 == 0 else list(reversed(sides))
        for n in counts:
            for side in order:
                run = tmp / "run" / "dynbatch" / "r1"  # one path for both sides: outputs comparable
                shutil.rmtree(run.parent.parent, ignore_errors=True)
                shutil.copytree(templates[n], run)
                w, c = report(sides[side], run)
                wall.setdefault((n, side), []).append(w)
                cpu.setdefault((n, side), []).append(c)
                print(f"  run {i + 1}: {n:>3} host(s) {side:>6}: {w:6.2f} s wall ({w / n:.3f} s a host), "
                      f"{c:6.2f} CPU s", flush=True)
                if i == 0:
                    seen.setdefault(n, {})[side] = outputs(run)
    print()
    print(f"{'hosts':>5} {'side':>6} {'runs':>4} {'s a host (median)':>18} {'min-max':>13} {'report s':>9} "
          f"{'CPU s a host':>13}")
    for n in counts:
        for side in sides:
            ws = [w / n for w in wall[(n, side)]]
            cs = [c / n for c in cpu[(n, side)]]
            print(f"{n:>5} {side:>6} {len(ws):>4} {statistics.median(ws):>18.3f} "
                  f"{min(ws):>6.3f}-{max(ws):<6.3f} {statistics.median(wall[(n, side)]):>9.2f} "
                  f"{statistics.median(cs):>13.3f}")
    print()
    top = max(counts)
    goals = [(top, PER_HOST, f"at most {PER_HOST} s a host at {top} hosts")] if top > 1 else []
    goals += [(1, ONE_HOST, f"one host at most {ONE_HOST} s")] if 1 in counts else []
    for n, goal, text in goals:
        got = statistics.median(w / n for w in wall[(n, "after")])
        print(f"target {text}: {got:.3f} s ({'met' if got <= goal else 'NOT met'})")
    if before:
        for n in counts:
            compare(n, seen[n])


if __name__ == "__main__":
    raise SystemExit(main())
