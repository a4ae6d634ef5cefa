"""The node-side runner: measures a host's planned variants entirely on the node.

Shipped by the ``experiment`` role into the node's work folder as the node bundle (``.node.pyz``: a
zip application of this module, ``records.py``, the plan and its inputs, written by ``serve-system
plan``) and run inside the client container (``docker exec jupyter python3 .node.pyz``); standard
library only. One call measures the variants it is given, one after the
other, and with ``--restore`` then restores the baseline; the role makes one call for a Triton
spec's whole plan. For a Triton variant::

    load through the repository API with the variant's config -> READY -> warm-up ->
    per pending level: stats before, metrics sampling, perf_analyzer (under a memory and a time
    cap; retried with a longer window after an unstable measurement), stats after
    -> raw files + level.json (written last: the resume rule)

A refused load is recorded with Triton's own message. A level whose perf_analyzer is killed, or
during which Triton stops answering or restarts, is recorded as failed with the reason; the runner
waits for Triton, loads the variant again and goes on. So is a level whose perf_analyzer exits 0 having
measured nothing (no result row: its requests failed), with the first error it printed; where that error
says a Python stub process died, the variant is loaded afresh (new stubs) before the next level, and a
load that fails that way is recorded unavailable, not refused (the runtime failed, not the config).
FastAPI variants wait for the endpoint's /health and run the benchmark client per level.
``--restore`` loads every model's committed config again and writes the host record (``host.json``).
Every call ends by packing the host's complete records into one archive (``results.tar.gz``, fetched
in one transfer) and reporting its end.

The runner speaks in JSON lines, one :class:`records.Event` each (a level ended, a variant ended, the
call ended), on stdout and in ``--log``; the role waits for each level's event with ``--follow`` and
reads the call's output through its filter (``records.summarize_events``); ``--follow`` is the host-side
half of a call (:mod:`.follow`, in the same bundle). With ``--restore`` the
call's last level event waits until the archive is ready, so the role fetches right after it.
``/work/progress.json`` (a :class:`records.Progress`) is kept current. A second runner on the same
run waits for the first (a lock), then skips what it measured: nothing is measured twice.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

try:  # as part of the package (tests) or as a file next to records.py (on the node)
    from . import archive
    from . import records as rec
except ImportError:  # pragma: no cover - the node's layout
    import archive  # type: ignore[no-redef,import-not-found]  # the node's flat layout
    import records as rec  # type: ignore[no-redef,import-not-found]  # the node's flat layout

#: the node bundle's entry point (``serve-system plan`` writes the bundle: a zip application): the
#: host-side ``--follow`` (:mod:`.follow`, on the node itself), else the runner (in the client container)
BUNDLE_MAIN = ("import sys\nif '--follow' in sys.argv:\n    import follow\n"
               "    raise SystemExit(follow.main())\nimport runner\nraise SystemExit(runner.main())\n")
#: the bundle's modules; its other members (plan, inputs, the FastAPI client) are data put beside it
BUNDLE_MODULES = frozenset({"__main__.py", "runner.py", "follow.py", "records.py", "archive.py", "safeio.py"})

#: beside the plan: per model, the load body last loaded in this run (see Runner.step)
LOADED = ".loaded.json"
UNSTABLE = re.compile(r"Failed to obtain stable measurement", re.IGNORECASE)
#: perf_analyzer's own words for requests that failed (it can still exit 0 with nothing measured)
REQUEST_ERROR = re.compile(r"had error:\s*(.+)|(No valid requests recorded[^.\n]*)", re.IGNORECASE)
#: Triton's Python backend when a model instance's stub process died: every later request to it fails
#: the same way until the model is loaded again (new stubs)
STUB_DEAD = re.compile(r"Stub process '[^']*' is not healthy", re.IGNORECASE)


def _csv_rows(argv: list[str]) -> int | None:
    """The result rows of the CSV perf_analyzer was asked to write (``-f``); None: it was not asked."""
    if "-f" not in argv or argv.index("-f") + 1 >= len(argv):
        return None
    try:
        lines = Path(argv[argv.index("-f") + 1]).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return 0
    return max(0, sum(1 for ln in lines if ln.strip()) - 1)


def failed_load_status(kind: str, answered: bool, error: str | None) -> str:
    """A failed load's record status: refused where Triton refused the configuration; unavailable where
    the runtime failed (no answer at all, a Python stub process that died while the load started its
    instances, a FastAPI endpoint that does not serve)."""
    if kind == rec.FASTAPI or not answered or STUB_DEAD.search(error or ""):
        return rec.UNAVAILABLE
    return rec.REFUSED


def nothing_measured(argv: list[str], rc: int | None, text: str) -> str | None:
    """Why a perf_analyzer run that exited 0 measured nothing (no result row in its CSV), in its own
    words (the first request error it printed), or None when it measured the level."""
    if rc != 0 or _csv_rows(argv) != 0:
        return None
    found = list(REQUEST_ERROR.finditer(text))
    failed = next((m.group(1).strip() for m in found if m.group(1) and m.group(1).strip()), None)
    if failed:
        return f"perf_analyzer measured nothing: its requests failed: {failed}"
    said = next((m.group(2).strip() for m in found if m.group(2)), None)
    unstable = next((ln.strip() for ln in text.splitlines() if UNSTABLE.search(ln)), None)
    return f"perf_analyzer measured nothing: {said or unstable or 'no result row in its CSV'}"


class Http:
    """Tiny JSON-over-HTTP client (urllib), with the status and body of failures kept."""

    def __init__(self, base: str, timeout: float = 30.0):
        self.base = base.rstrip("/")
        self.timeout = timeout

    def call(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                return resp.status, _json(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _json(exc.read())
        except (OSError, ValueError) as exc:
            return -1, {"error": f"{type(exc).__name__}: {exc}"}


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8", "replace")) if raw else {}
    except ValueError:
        return {"text": raw.decode("utf-8", "replace")[:2000]}


class Sampler(threading.Thread):
    """Samples Triton's Prometheus metrics into metrics.jsonl while a level runs."""

    def __init__(self, url: str, out: Path, interval: float):
        super().__init__(daemon=True)
        self.url, self.out, self.interval = url, out, interval
        self.stop = threading.Event()
        self.errors = 0

    def run(self) -> None:
        with self.out.open("a", encoding="utf-8") as f:
            while not self.stop.is_set():
                t = time.time()
                try:
                    with urllib.request.urlopen(self.url, timeout=5) as resp:
                        line = {"t": t, "text": resp.read().decode("utf-8", "replace")}
                except OSError as exc:
                    self.errors += 1
                    line = {"t": t, "error": str(exc)}
                f.write(json.dumps(line) + "\n")
                f.flush()
                self.stop.wait(max(0.0, self.interval - (time.time() - t)))


#: the node's own /proc as the client container sees it (the serve_stack role mounts it there), else
#: the container's: /proc/stat and /proc/pressure are the node's either way, the processes are not
HOST_PROC = Path("/host/proc")


def proc_root() -> Path:
    return HOST_PROC if (HOST_PROC / "stat").is_file() else Path("/proc")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None


def cpu_snapshot(root: Path) -> dict[str, Any]:
    """One reading of the node's CPU counters: /proc/stat's busy, steal and total ticks and its CPU
    count, /proc/pressure/cpu's ``some`` total (microseconds), each process's CPU ticks and name."""
    out: dict[str, Any] = {"t": time.monotonic(), "cpus": 0, "procs": {}}
    for line in (_read(root / "stat") or "").splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            nums = [int(x) for x in parts[1:9] if x.isdigit()] + [0] * 8
            idle, steal = nums[3] + nums[4], nums[7]
            out.update(total=sum(nums[:8]), idle=idle, steal=steal)
        elif parts and parts[0].startswith("cpu") and parts[0][3:].isdigit():
            out["cpus"] += 1
    for line in (_read(root / "pressure" / "cpu") or "").splitlines():
        if line.startswith("some"):
            total = [f.split("=", 1)[1] for f in line.split() if f.startswith("total=")]
            if total and total[0].isdigit():
                out["pressure_us"] = int(total[0])
    try:  # the runner itself, as the node numbers it (``self`` resolves in the procfs' own namespace)
        me = int(os.readlink(root / "self"))
    except (OSError, ValueError):
        me = os.getpid()
    try:
        pids = [p for p in os.listdir(root) if p.isdigit() and int(p) != me]
    except OSError:
        pids = []
    for pid in pids:
        text = _read(root / pid / "stat")
        if not text or ")" not in text:
            continue
        comm = text[text.index("(") + 1:text.rindex(")")]
        rest = text[text.rindex(")") + 2:].split()
        if len(rest) > 12 and rest[11].isdigit() and rest[12].isdigit():
            out["procs"][int(pid)] = (comm, int(rest[11]) + int(rest[12]))
    return out


def contention(before: dict[str, Any], after: dict[str, Any], client_cpu_s: float = 0.0) -> rec.Contention:
    """What else used the node's CPU between two :func:`cpu_snapshot` readings (a level's span).
    ``client_cpu_s``: the measuring client's CPU seconds as its rusage counted them (it has exited
    by the second reading, so /proc no longer shows it)."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    seconds = max(1e-6, after["t"] - before["t"])
    cpus = max(1, int(after.get("cpus") or 1))
    c = rec.Contention(seconds=round(seconds, 3), cpus=cpus)
    if "total" in before and "total" in after and after["total"] > before["total"]:
        span = after["total"] - before["total"]
        c.busy = round(1 - (after["idle"] - before["idle"] + after["steal"] - before["steal"]) / span, 4)
        c.steal = round((after["steal"] - before["steal"]) / span, 4)
    if "pressure_us" in before and "pressure_us" in after:
        c.pressure = round(min(1.0, (after["pressure_us"] - before["pressure_us"]) / 1e6 / seconds), 4)
    procs = after["procs"]
    if any(comm in rec.MEASURING[:2] for comm, _ in procs.values()):  # the node's processes are visible
        used: dict[int, tuple[str, float]] = {}
        measuring = 0.0
        for pid, (comm, ticks) in procs.items():
            was = before["procs"].get(pid)
            delta = ticks - (was[1] if was and was[0] == comm else 0)
            if comm in rec.MEASURING:
                measuring += max(0, delta) / tick
            elif delta > 0:
                used[pid] = (comm, delta / tick)
        measuring += max(0.0, client_cpu_s)
        c.others = round(sum(s for _, s in used.values()) / (cpus * seconds), 4)
        c.measuring = round(measuring / (cpus * seconds), 4)
        if c.busy is not None:
            c.unseen = round(max(0.0, c.busy - c.others - c.measuring), 4)
        c.top = [f"{comm} ({pid}) {sec:.1f} CPU-s" for pid, (comm, sec) in
                 sorted(used.items(), key=lambda kv: -kv[1][1])[:5]]
    c.cause = rec.contention_cause(c)
    return c


def _rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        return None
    return None


def run_capped(argv: list[str], cwd: Path, memory_mb: float, timeout_s: float) -> tuple[rec.Attempt, str]:
    """Run a measuring command, killed if its resident memory passes ``memory_mb`` or time ``timeout_s``."""
    start = time.time()
    peak = 0.0
    reason = None
    out_path = cwd / ".attempt.out"
    with out_path.open("wb") as out:
        try:
            proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        except OSError as exc:
            return rec.Attempt(argv=argv, rc=None, start=start, end=time.time(),
                               reason=f"could not start: {exc}"), ""
        while (reaped := _reap(proc)) is None:
            rss = _rss_mb(proc.pid)
            if rss is not None:
                peak = max(peak, rss)
            if rss is not None and rss > memory_mb:
                reason = (f"killed by the runner: memory cap {memory_mb:.0f} MB reached "
                          f"(resident {rss:.0f} MB)")
            elif time.time() - start > timeout_s:
                reason = f"killed by the runner: time cap {timeout_s:.0f} s reached"
            if reason:
                os.killpg(proc.pid, signal.SIGKILL)
                reaped = _reap(proc, block=True)
                break
            time.sleep(0.2)
    rc = proc.returncode
    if reason is None and rc is not None and rc < 0:
        name = signal.Signals(-rc).name
        reason = (f"perf_analyzer was killed by {name}"
                  + (" (the kernel's OOM killer?)" if name == "SIGKILL" else ""))
    text = out_path.read_text(encoding="utf-8", errors="replace")
    out_path.unlink()
    return rec.Attempt(argv=argv, rc=rc, start=start, end=time.time(), reason=reason,
                       max_rss_mb=round(peak, 1) or None,
                       peak_rss_bytes=None if reaped is None else reaped[0] * 1024,
                       cpu_s=None if reaped is None else round(reaped[1], 3)), text


def _reap(proc: subprocess.Popen[bytes], block: bool = False) -> tuple[int, float] | None:
    """Reap ``proc`` if it ended (``block``: wait for it): its peak resident memory in KiB (the
    kernel's ru_maxrss, its reaped children included) and its CPU seconds (user + system), with
    ``proc.returncode`` set; None while it runs."""
    pid, status, usage = os.wait4(proc.pid, 0 if block else os.WNOHANG)
    if pid == 0:
        return None
    proc.returncode = os.waitstatus_to_exitcode(status)
    return int(usage.ru_maxrss), usage.ru_utime + usage.ru_stime


def host_facts() -> dict[str, Any]:
    """What the node's kernel says of the host, from inside the container (same kernel, CPUs and memory)."""
    memory_mb = None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            memory_mb = next((int(ln.split()[1]) // 1024 for ln in f if ln.startswith("MemTotal:")), None)
    except (OSError, ValueError):
        pass
    return {"kernel": os.uname().release, "cpus": os.cpu_count(), "memory_mb": memory_mb}


def given_facts(text: str) -> dict[str, Any]:
    """The facts a call gives (``--facts``: a JSON object), over the plan's; refused in one line if not
    an object (:class:`rec.RecordError`)."""
    try:
        facts = json.loads(text) if text else {}
    except ValueError as exc:
        raise rec.RecordError(f"--facts: not JSON ({exc}): give a JSON object of facts") from None
    if not isinstance(facts, dict):
        raise rec.RecordError(f"--facts: a JSON {type(facts).__name__}, not an object: give a JSON object")
    return facts


class Runner:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.plan_path = Path(args.plan)
        self.plan: rec.HostPlan = rec.read(self.plan_path, rec.HostPlan)
        self.home = self.plan_path.parent
        for key in ("metrics_interval", "ready_timeout", "perf_timeout", "perf_memory_mb", "progress"):
            if getattr(args, key, None) is None:  # the plan's setting, unless the call gave one
                setattr(args, key, getattr(self.plan.runner, key))
        ends = {**self.plan.endpoints, **{k: getattr(args, k) for k in ("triton", "metrics", "fastapi")
                                          if getattr(args, k)}}
        for key in () if args.triton_log else ("triton", "metrics", "fastapi"):  # --triton-log reaches none
            if not ends.get(key):
                raise rec.RecordError(f"{self.plan_path}: endpoints.{key}: missing: plan the run again with "
                                      f"serve-system plan, or give --{key}")
        self.triton, self.fastapi = Http(ends.get("triton", "")), Http(ends.get("fastapi", ""))
        self.metrics_url = ends.get("metrics", "")
        self.log = open(self.home / args.log, "a", encoding="utf-8") if args.log else None  # noqa: SIM115
        self.facts: dict[str, Any] = {**host_facts(), **self.plan.facts, **given_facts(args.facts)}
        self.session_levels: list[float] = []
        self.pending: dict[str, list[rec.LevelPlan]] = {}
        self.total = self.n = 0
        self.restored = self.hold_last = False
        self.held: rec.Event | None = None

    # ---------------------------------------------------------------------------------- progress
    def say(self, kind: str, text: str, **fields: Any) -> None:
        """Report one event (a JSON line) on stdout and in the ``--log`` file."""
        self.emit(rec.Event(kind=kind, host=self.plan.host, text=text, **fields))

    def emit(self, event: rec.Event) -> None:
        line = rec.event_line(event)
        print(line, flush=True)
        if self.log:
            self.log.write(line + "\n")
            self.log.flush()

    def counts(self) -> tuple[int, int]:
        done = rec.done_levels(self.home)
        total = sum(len(v.levels) for v in self.plan.variants)
        n = 0
        for v in self.plan.variants:
            if self.not_measurable(v.name):  # refused or unavailable: nothing left to do for its levels
                n += len(v.levels)
            else:
                n += sum(1 for lv in v.levels if lv.done or (v.name, lv.id) in done)
        return n, total

    def not_measurable(self, name: str) -> bool:
        path = self.home / name / "variant.json"
        try:
            return path.exists() and rec.read(path, rec.VariantRecord).status in (rec.REFUSED,
                                                                                  rec.UNAVAILABLE)
        except rec.RecordError:
            return False

    def progress(self, variant: str, level: str, state: str) -> None:
        done, total = self.counts()
        p = rec.Progress(experiment=self.plan.experiment, run_id=self.plan.run_id, variant=variant,
                         level=level, levels_done=done, levels_total=total, state=state, updated=time.time())
        try:
            rec.write(self.args.progress, p)
        except OSError as exc:
            print(f"progress file {self.args.progress}: {exc}", file=sys.stderr)

    def eta(self) -> str:
        done, total = self.counts()
        if not self.session_levels:
            return "ETA unknown"
        left = (total - done) * sum(self.session_levels) / len(self.session_levels)
        return f"ETA {time.strftime('%H:%M:%S', time.gmtime(time.time() + left))} UTC ({left:.0f} s left)"

    # ---------------------------------------------------------------------------------- triton
    def provenance(self, variant: rec.VariantPlan) -> dict[str, Any]:
        import hashlib

        if not hasattr(self, "_versions"):
            code, meta = self.triton.call("GET", "/v2") if self.plan.kind == rec.TRITON else (0, {})
            try:
                from importlib.metadata import version
                pa = version("perf-analyzer")
            except Exception:  # noqa: BLE001 - any failure: the version is unknown
                pa = "unknown"
            self._versions = {"triton": meta.get("version") if code == 200 else None,
                              "perf_analyzer": pa, "python": sys.version.split()[0]}
        return {**self.plan.provenance, **self._versions, **self.facts,
                "config_sha256": hashlib.sha256(variant.config_pbtxt.encode()).hexdigest()}

    def wait_ready(self, model: str | None, version: str, timeout: float) -> bool:
        path = f"/v2/models/{model}/versions/{version}/ready" if model else "/v2/health/ready"
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.triton.call("GET", path, timeout=5)[0] == 200:
                return True
            time.sleep(0.25)
        return False

    def load(self, v: rec.VariantPlan) -> tuple[bool, str | None, float, bool]:
        """Ask Triton to load the variant's config: (loaded, the error, seconds, whether Triton answered).

        A load that gets no answer at all (connection refused or reset: Triton is restarting, e.g. after a
        crash of an earlier config) is not a refusal: the runner waits for Triton to be ready again and
        asks once more, within --ready-timeout.
        """
        t0 = time.time()
        deadline = t0 + self.args.ready_timeout
        waited = False
        while True:
            code, body = self.triton.call("POST", f"/v2/repository/models/{v.model}/load", v.load_body,
                                          timeout=self.args.ready_timeout)
            if code != -1 or time.time() >= deadline:
                break
            if not waited:
                print(f"{self.plan.host} {v.name}: Triton did not answer the load "
                      f"({_error_text(body)}); waiting for it to be ready again", file=sys.stderr)
            waited = True
            if not self.wait_ready(None, "", max(0.0, deadline - time.time())):
                break
        took = time.time() - t0
        if code == 200:
            return True, None, took, True
        error = _error_text(body)
        if code == -1:
            why = (f"Triton did not answer the load ({error}), and was not ready again within "
                   f"{self.args.ready_timeout:.0f} s (if it stays unready, e.g. stuck in a load that never "
                   "ended, restart it on the node, e.g. docker restart triton_server, and run the same run "
                   "id again: what was measured is kept)")
            return False, why, took, False
        # Triton's own reason (e.g. a config check) is in the repository index, not the load answer
        icode, index = self.triton.call("POST", "/v2/repository/index", {})
        if icode == 200 and isinstance(index, list):
            reason = next((m.get("reason") for m in index if m.get("name") == v.model and m.get("reason")),
                          None)
            if reason and reason not in error:
                error = f"{error} | {reason}"
        return False, f"HTTP {code}: {error}", took, True

    def last_loaded(self) -> dict[str, str]:
        """Per model, the load body this run last loaded (kept beside the plan across runner calls)."""
        try:
            data = json.loads((self.home / LOADED).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def note_loaded(self, model: str, key: str | None) -> None:
        data = self.last_loaded()
        if key is None:
            data.pop(model, None)
        else:
            data[model] = key
        tmp = self.home / (LOADED + ".tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        tmp.replace(self.home / LOADED)

    def stats(self, v: rec.VariantPlan) -> tuple[int, Any]:
        return self.triton.call("GET", f"/v2/models/{v.model}/versions/{v.version}/stats")

    def measure(self, names: list[str], restore: bool, repetitions: list[int] | None = None) -> int:
        """Measure the named variants in the plan's order (its rounds: repetition 1 of every variant,
        then repetition 2, ...; ``repetitions`` picks some), restore the baseline if asked, pack, say END.
        Each variant's levels of one repetition follow a fresh load of its config and a warm-up."""
        unknown = [n for n in names if n not in {v.name for v in self.plan.variants}]
        if unknown:
            print(f"{self.plan_path}: variants: no variant named {unknown[0]!r}: give one of "
                  f"{', '.join(v.name for v in self.plan.variants)}", file=sys.stderr)
            return 2
        chosen = {v.name: v for v in self.plan.variants if v.name in names}
        self.pending = {n: [lv for lv in v.levels if not lv.done and not rec.level_done(self.home / n / lv.id)
                            and (not repetitions or lv.repetition in repetitions)]
                        for n, v in chosen.items()}
        self.total = sum(len(p) for p in self.pending.values())
        self.n = 0
        self.hold_last = restore
        measured = {n: 0 for n in chosen}
        failed = {n: 0 for n in chosen}
        refused: set[str] = set()
        try:
            for rep, name in self.steps():
                if name in chosen and name not in refused and (rep is None or not repetitions
                                                               or rep in repetitions):
                    m, f = self.step(chosen[name], rep)
                    if m is None:
                        refused.add(name)
                    else:
                        measured[name] += m
                        failed[name] += f
            for name, v in chosen.items():
                if name in refused:
                    continue
                earlier = sum(lv.done or rec.level_done(self.home / name / lv.id)
                              for lv in v.levels) - measured[name]
                self.say(rec.VARIANT, f"{self.plan.host} {name}: {measured[name]} level(s) measured"
                         + (f", {failed[name]} failed" if failed[name] else "")
                         + (f" ({earlier} already done)" if earlier else ""),
                         variant=name, status=rec.MEASURED, measured=measured[name])
            if restore:
                self.restore()
        finally:
            self.pack()
            if self.held:
                self.emit(self.held)
        total = sum(measured.values())
        self.say(rec.END, f"{self.plan.host}: {total} level(s) measured in {len(chosen)} variant(s)"
                 + (f"; host record written (baseline {'restored' if self.restored else 'NOT restored'})"
                    if restore else ""),
                 status=rec.OK, measured=total, host_record=restore,
                 restored=self.restored if restore else None)
        return 0

    @staticmethod
    def earlier_loads(path: Path) -> tuple[list[float], list[float]]:
        """The switch and warm-up seconds of the variant's earlier loads in this run (its record from an
        earlier repetition, this call's or an earlier call's; none on a first load or an unreadable one)."""
        if not path.is_file():
            return [], []
        try:
            old = rec.read(path, rec.VariantRecord)
        except rec.RecordError:
            return [], []
        return list(old.switches), list(old.warmups)

    def steps(self) -> list[tuple[int | None, str]]:
        """The order of the loads: the plan's rounds (repetition r of every variant, in the round's
        order, then r + 1), or, for a plan without rounds, each variant once in plan order."""
        if self.plan.rounds:
            return [(r, name) for r, names in enumerate(self.plan.rounds, 1) for name in names]
        return [(None, v.name) for v in self.plan.variants]

    def step(self, v: rec.VariantPlan, rep: int | None) -> tuple[int | None, int]:
        """Load a variant afresh and measure its pending levels of repetition ``rep`` (None: all).

        Returns (levels measured, of which failed); (None, 0) when the load was refused (or the FastAPI
        endpoint is unavailable): its remaining levels are dropped from this call.
        """
        vdir = self.home / v.name
        vdir.mkdir(parents=True, exist_ok=True)
        pending = [lv for lv in self.pending[v.name] if rep is None or lv.repetition == rep]
        if not pending:
            return 0, 0
        self.progress(v.name, pending[0].id, "running")
        vrec = rec.VariantRecord(name=v.name, model=v.model, version=v.version, status=rec.MEASURED,
                                 notes=list(v.notes), stand_in=v.stand_in, runtime=v.runtime)
        vrec.switches, vrec.warmups = self.earlier_loads(vdir / "variant.json")
        answered = True  # whether Triton answered the load (a refusal is an answer)
        if self.plan.kind == rec.FASTAPI:
            ok, vrec.error, vrec.health = self.fastapi_up(v)
            if (vrec.health or {}).get("standin"):  # the endpoint says it serves the generated stand-in
                vrec.stand_in = ("the FastAPI endpoint served its generated stand-in model (/health: standin "
                                 "true): random weights, predictions are meaningless")
        else:
            # Triton keeps a model loaded as it is when the config asked for is the one it serves (the
            # same variant again, two variants with one config): unloaded first then, so that every
            # repetition is a fresh load (new instances, new stubs). Otherwise loaded over the old one,
            # so a refused config leaves the previous one serving.
            if self.last_loaded().get(v.model) == _body_key(v.load_body):
                self.triton.call("POST", f"/v2/repository/models/{v.model}/unload", {},
                                 timeout=self.args.ready_timeout)
            t0 = vrec.load_started = time.time()
            ok, vrec.error, vrec.load_seconds, answered = self.load(v)
            self.note_loaded(v.model, _body_key(v.load_body) if ok else None)
            if ok and not self.wait_ready(v.model, v.version, self.args.ready_timeout):
                ok, vrec.error = False, f"not READY within {self.args.ready_timeout:.0f} s after loading"
            vrec.switch_seconds = round(time.time() - t0, 3)
            vrec.switches.append(vrec.switch_seconds)
        if not ok:
            # a refusal is Triton's answer; no answer at all (Triton gone) leaves the runtime unavailable
            vrec.status = failed_load_status(self.plan.kind, answered, vrec.error)
            rec.write(vdir / "variant.json", vrec)
            self.total -= len(self.pending[v.name])
            self.pending[v.name] = []
            self.progress(v.name, "", "running")
            self.say(rec.VARIANT, f"{self.plan.host} {v.name}: {vrec.status}: {vrec.error}",
                     variant=v.name, status=vrec.status, error=vrec.error, measured=0)
            return None, 0
        if v.warmup_argv:
            t0 = time.time()
            run_capped(v.warmup_argv, vdir, self.args.perf_memory_mb, self.args.perf_timeout)
            vrec.warmup_seconds = round(time.time() - t0, 3)
            vrec.warmups.append(vrec.warmup_seconds)
        rec.write(vdir / "variant.json", vrec)
        failed = 0
        for lv in pending:
            self.n += 1
            self.progress(v.name, lv.id, "running")
            lrec = self.level(v, lv, vdir / lv.id)
            failed += lrec.status != rec.OK
            self.session_levels.append(lrec.end - lrec.start + 1.0)
            self.progress(v.name, lv.id, "running")
            why = f" ({lrec.error})" if lrec.error else ""
            event = rec.Event(kind=rec.LEVEL, host=self.plan.host, variant=v.name, level=lv.id, seq=self.n,
                              total=self.total, status=lrec.status, error=lrec.error,
                              text=(f"{self.plan.host} {v.name} {lv.id} {self.n}/{self.total}: "
                                    f"{lrec.status}{why}; {self.eta()}"))
            if self.n == self.total and self.hold_last:
                self.held = event  # said once the call's records are packed: the role fetches right after it
            else:
                self.emit(event)
        return len(pending), failed

    def fastapi_up(self, v: rec.VariantPlan) -> tuple[bool, str | None, dict[str, Any] | None]:
        deadline = time.time() + self.args.ready_timeout
        code, body = -1, None
        while time.time() < deadline:
            code, body = self.fastapi.call("GET", "/health", timeout=10)
            if code in (200, 503):
                break
            time.sleep(1)
        health = body if isinstance(body, dict) else None
        if code == 200:
            return True, None, health
        detail = (health or {}).get("detail") or (health or {}).get("error") or f"HTTP {code}"
        return False, f"the endpoint is not serving: {detail}", health

    def level(self, v: rec.VariantPlan, lv: rec.LevelPlan, ldir: Path) -> rec.LevelRecord:
        if ldir.exists():  # an interrupted attempt: start it again from scratch
            shutil.rmtree(ldir)
        ldir.mkdir(parents=True)
        triton = self.plan.kind == rec.TRITON
        before = after = None
        sampler = None
        problems: list[str] = []
        if triton:
            code, before = self.stats(v)
            if code != 200:
                problems.append(f"Triton did not answer before the level ({before.get('error', code)})")
            rec.safeio.write_text(ldir / rec.STATS_BEFORE_FILE, json.dumps(before, indent=1) + "\n",
                                  within=ldir)
            sampler = Sampler(self.metrics_url, ldir / "metrics.jsonl", self.args.metrics_interval)
            sampler.start()
        root = proc_root()
        node_before = cpu_snapshot(root)
        attempts: list[rec.Attempt] = []
        commands = [lv.argv, *lv.retry_argv] if triton else [lv.argv]
        text = ""
        for n, argv in enumerate(commands):
            attempt, text = run_capped(argv, ldir, self.args.perf_memory_mb, self.args.perf_timeout)
            if n:
                attempt.reason = attempt.reason or "unstable measurement: retried with a longer window"
            attempts.append(attempt)
            name = "perf.stdout" if triton else "client.log"
            if n:
                shutil.move(str(ldir / name), str(ldir / f"{name}.attempt{n}"))
            rec.safeio.write_text(ldir / name, text, within=ldir)
            if attempt.reason and attempt.reason.startswith(("killed", "perf_analyzer was killed")):
                break
            if not (triton and UNSTABLE.search(text)):
                break
        used = contention(node_before, cpu_snapshot(root), sum(a.cpu_s or 0.0 for a in attempts))
        if sampler is not None:
            sampler.stop.set()
            sampler.join(timeout=10)
        restarted = False
        if triton:
            code, after = self.stats(v)
            if code != 200 or (sampler is not None and sampler.errors):
                problems.append("Triton stopped answering during the level")
                restarted = True
            elif _count(after) < _count(before):
                problems.append("Triton restarted during the level (its statistics were reset)")
                restarted = True
            if restarted:
                self.recover(v)
                code, after = self.stats(v)
            rec.safeio.write_text(ldir / rec.STATS_AFTER_FILE, json.dumps(after, indent=1) + "\n",
                                  within=ldir)
        last = attempts[-1]
        if last.reason and last.reason.startswith(("killed", "perf_analyzer was killed", "could not start")):
            problems.insert(0, last.reason)
        elif last.rc != 0 and not problems:
            tail = [ln.strip() for ln in text.splitlines() if ln.strip()]
            problems.append(f"exit status {last.rc}: {tail[-1] if tail else 'no output'}")
        elif triton and (empty := nothing_measured(last.argv, last.rc, text)) is not None:
            problems.append(empty)
        if triton and not restarted and STUB_DEAD.search(text):
            # the instance's stub died (Python backend): nothing it serves answers until a fresh load
            problems.append("a Python stub process died: the variant was loaded afresh for the next level")
            self.reload(v)
        lrec = rec.LevelRecord(
            variant=v.name, level=lv.id, mode=lv.mode, load=lv.load, repetition=lv.repetition,
            status=rec.FAILED if problems else rec.OK, error="; ".join(problems) or None,
            start=attempts[0].start, end=last.end, attempts=attempts,
            batch_size=int(v.perf.get("batch_size", 1)), tool="perf_analyzer" if triton else "fastapi_bench",
            requests=lv.requests, provenance=self.provenance(v),
            client_peak_rss_bytes=rec.client_peak_rss(attempts), contention=used)
        rec.write(ldir / "level.json", lrec)  # last: the level is complete
        return lrec

    def reload(self, v: rec.VariantPlan) -> None:
        """Load the variant afresh (unloaded first: new instances, new stubs) and wait READY."""
        self.triton.call("POST", f"/v2/repository/models/{v.model}/unload", {},
                         timeout=self.args.ready_timeout)
        ok = self.load(v)[0]
        self.note_loaded(v.model, _body_key(v.load_body) if ok else None)
        if ok:
            self.wait_ready(v.model, v.version, self.args.ready_timeout)

    def recover(self, v: rec.VariantPlan) -> None:
        """After Triton went away: wait for it, load the variant again, wait READY."""
        if not self.wait_ready(None, "", self.args.ready_timeout):
            return
        self.load(v)
        self.wait_ready(v.model, v.version, self.args.ready_timeout)

    def pack(self) -> None:
        """One archive of the host's complete records (variants, levels, host.json), fetched in one
        transfer."""
        archive.pack(self.home, [v.name for v in self.plan.variants], self.home / archive.ARCHIVE)

    def explain(self, names: list[str], log: str) -> int:
        """Add Triton's own reason to the records of refused loads, from its log (``docker logs -t``) on
        stdin.

        A line counts when it names the variant's model, reads as an error, and (when the log has
        Docker's timestamps) was written while that variant's load was under way.
        """
        lines = [_stamped(ln) for ln in log.splitlines() if ln.strip()]
        for v in self.plan.variants:
            if names and v.name not in names:
                continue
            path = self.home / v.name / "variant.json"
            if not path.exists():
                continue
            try:
                vrec = rec.read(path, rec.VariantRecord)
            except rec.RecordError as exc:
                print(exc, file=sys.stderr)
                return 2
            if vrec.status != rec.REFUSED:
                continue
            t0 = vrec.load_started
            t1 = None if t0 is None else t0 + (vrec.switch_seconds or 0.0)
            found = [text for t, text in lines
                     if vrec.model in text and re.match(r"^E\d{4}|.*\berror\b", text, re.IGNORECASE)
                     and (t is None or t0 is None or t1 is None or t0 - 2 <= t <= t1 + 2)]
            reason = found[-1] if found else None
            if reason and reason not in (vrec.error or ""):
                vrec.error = f"{vrec.error} | triton log: {reason}"
                rec.write(path, vrec)
            self.say(rec.VARIANT, f"{self.plan.host} {v.name}: {vrec.status}: {vrec.error}",
                     variant=v.name, status=vrec.status, error=vrec.error, measured=0)
        self.pack()
        return 0

    def restore(self) -> None:
        """Load every model's committed config again; write the host record (host.json)."""
        statuses = []
        t0 = time.time()
        for model in self.plan.models:
            self.triton.call("POST", f"/v2/repository/models/{model}/unload", {},
                             timeout=self.args.ready_timeout)
            code, _ = self.triton.call("POST", f"/v2/repository/models/{model}/load", {},
                                       timeout=self.args.ready_timeout)
            self.note_loaded(model, None)
            statuses.append(code)
        took = round(time.time() - t0, 3)
        done = rec.done_levels(self.home)
        failed = []
        for variant, level in sorted(done):
            try:
                lr = rec.read(self.home / variant / level / "level.json", rec.LevelRecord)
            except rec.RecordError:
                continue
            if lr.status != rec.OK:
                failed.append(f"{variant}/{level}")
        self.restored = all(s == 200 for s in statuses)
        host = rec.HostRecord(host=self.plan.host, end=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              baseline_restored=self.restored, restore_status=statuses, failed_levels=failed,
                              restore_seconds=took if self.plan.models else None)
        rec.write(self.home / "host.json", host)
        self.progress("", "", "finished")


def _error_text(body: Any) -> str:
    return str(body.get("error") or body) if isinstance(body, dict) else str(body)


def _body_key(body: Any) -> str:
    """A load body as a comparable string (the config override it carries)."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def _stamped(line: str) -> tuple[float | None, str]:
    """A ``docker logs --timestamps`` line as (UNIX seconds, text); (None, line) without a timestamp."""
    stamp, _, text = line.partition(" ")
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z", stamp)
    if not m:
        return None, line.strip()
    import calendar

    whole = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S"))
    return whole + float(f"0.{m.group(2) or 0}"), text.strip()


def _count(stats: Any) -> int:
    try:
        return sum(int(m["inference_stats"]["success"]["count"]) for m in stats["model_stats"])
    except (KeyError, TypeError, ValueError):
        return 0


def unpack_bundle(bundle: Path) -> None:
    """Put the node bundle's data members (plan, inputs, the FastAPI client) beside it, each replaced
    atomically and only when its content changed (a runner still going on reads them)."""
    with zipfile.ZipFile(bundle) as z:
        for name in z.namelist():
            if name in BUNDLE_MODULES or "/" in name or name.startswith("."):
                continue
            data, dest = z.read(name), bundle.parent / name
            if dest.is_file() and dest.read_bytes() == data:
                continue
            tmp = dest.with_name(f".{name}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, dest)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plan", help="the host's plan.json (in the run's node folder)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME",
                    help="measure this variant (repeat: measured in plan order)")
    ap.add_argument("--restore", action="store_true",
                    help="then restore the models' committed configs and write host.json")
    ap.add_argument("--log", default="", help="the events also go to this file (next to the plan)")
    ap.add_argument("--progress", default=None, help="the progress file (default: the plan's)")
    ap.add_argument("--triton", default="", help="Triton's HTTP API (default: the plan's endpoints)")
    ap.add_argument("--metrics", default="", help="Triton's metrics URL (default: the plan's endpoints)")
    ap.add_argument("--fastapi", default="", help="the FastAPI endpoint (default: the plan's endpoints)")
    # the runner's settings: the host plan's (records.RunnerSettings), unless given here
    ap.add_argument("--metrics-interval", type=float, default=None, help="seconds between metrics samples")
    ap.add_argument("--ready-timeout", type=float, default=None, help="wait for READY (s)")
    ap.add_argument("--perf-timeout", type=float, default=None, help="time cap of one perf_analyzer run (s)")
    ap.add_argument("--perf-memory-mb", type=float, default=None, help="memory cap of perf_analyzer (MB)")
    ap.add_argument("--facts", default="", help="host facts and image ids (JSON) for the provenance, over "
                    "the plan's")
    ap.add_argument("--triton-log", action="store_true",
                    help="read Triton's log (docker logs -t) on stdin and add its reason to the records of "
                         "refused loads (of --variant, or of every variant)")
    ap.add_argument("--repetition", type=int, action="append", default=[], metavar="N",
                    help="measure only the levels of repetition N (repeat; default: all)")
    ap.add_argument("--stderr", type=Path, default=None,
                    help="the runner's own errors go to this file (next to the plan)")
    args = ap.parse_args(argv)
    if not args.plan:
        ap.error("give --plan PLAN")
    if args.stderr:  # a detached runner (docker exec -d): what it would print on stderr is kept there
        fd = os.open(Path(args.plan).parent / args.stderr, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 2)
        os.close(fd)
    if not (args.variant or args.restore or args.triton_log):
        ap.error("give --variant NAME (repeatable), --restore or --triton-log")
    here = Path(__file__).parent
    if zipfile.is_zipfile(here):  # run as the node bundle (python3 .node.pyz ...)
        unpack_bundle(here)
    try:
        runner = Runner(args)
    except rec.RecordError as exc:
        print(exc, file=sys.stderr)
        return 2
    with open(runner.home / rec.RUNNER_LOCK, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            runner.say(rec.WAITING, f"waiting for an earlier runner of {runner.plan.run_id} to finish")
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if args.triton_log:
                return runner.explain(args.variant, sys.stdin.read())
            return runner.measure(args.variant, args.restore, args.repetition)
        except BaseException as exc:
            runner.progress("", "", "failed")
            runner.say(rec.END, f"{runner.plan.host}: the runner failed: {exc!r}", status=rec.FAILED,
                       error=repr(exc))
            raise


if __name__ == "__main__":
    raise SystemExit(main())
