"""The node-side runner: measures a host's planned variants entirely on the node.

Shipped by the ``experiment`` role into the node's work folder as the node bundle (``.node.pyz``: a
zip application of the package :mod:`serve_system.node` with the plan and its inputs, written by
``serve-system plan``; its layout: :mod:`.bundle`) and run inside the client container
(``docker exec jupyter python3 .node.pyz``); standard library only. This module is the measuring's
order (loads, levels, events, restore, pack). Moved out of it, one concern each: the node's
processes it drives and reads (perf_analyzer under its caps, /proc's CPU counters around a level, the
metrics sampler, the host's facts) are :mod:`.nodeproc`'s; Triton's HTTP API as it uses it (the JSON
client, a load retried while Triton restarts, READY, a fresh load, statistics, the last-loaded
config, a refusal's reason in its log) is :mod:`.tritonapi`'s; the lines it speaks are :mod:`.events`'.
One call measures the variants it is given, one after the other, and with ``--restore`` then restores
the baseline; the role makes one call for a Triton spec's whole plan. For a Triton variant::

    load through the repository API with the variant's config -> READY -> warm-up ->
    per pending level: stats before, metrics sampling, perf_analyzer (under a memory and a time
    cap; retried with a longer window after an unstable measurement), stats after
    -> raw files + level.json (written last: the resume rule; with the setting it was measured under)

A refused load is recorded with Triton's own message. A level whose perf_analyzer is killed, or
during which Triton stops answering or restarts, is recorded as failed with the reason; the runner
waits for Triton, loads the variant again and goes on. So is a level whose perf_analyzer exits 0 having
measured nothing (no result row: its requests failed), with the first error it printed; where that error
says a Python stub process died, the variant is loaded afresh (new stubs) before the next level, and a
load that fails that way is recorded unavailable, not refused (the runtime failed, not the config).
FastAPI variants wait for the endpoint's /health and run the benchmark client per level.
``--restore`` loads every model's committed config again and writes the host record (``host.json``);
``--restore-past MINUTES`` (a ``repetitions: auto`` call: its budget) does so once the host's levels
have taken that long (:func:`records.measured_minutes`, as ``serve-system decide`` counts them), so no
decision and no restore call follow the call that spent it.
Every call ends by packing the host's complete records into one archive (``results.tar.gz``, fetched
in one transfer) and reporting its end.

The runner speaks in JSON lines, one :class:`events.Event` each (a level ended, a variant ended, the
call ended), on stdout and in ``--log``; the role waits for each level's event with ``--follow`` and
reads the call's output through its filter (``events.summarize_events``); ``--follow`` is the host-side
half of a call (:mod:`.follow`, in the same bundle). With ``--restore`` (or ``--restore-past``) the
call's last level event waits until the archive is ready, so the role fetches right after it.
``/work/progress.json`` (a :class:`records.Progress`) is kept current. A second runner on the same
run waits for the first (a lock), then skips what it measured: nothing is measured twice. A level the
node holds from an earlier plan of the run id under another configuration, load or perf settings is set
aside first (:func:`resume.settle`) and measured again.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from . import archive, bundle, defaults, events, nodeproc, plans, resume, tritonapi
from . import records as rec

#: Triton's Python backend when a model instance's stub process died: every later request to it fails
#: the same way until the model is loaded again (new stubs)
STUB_DEAD = re.compile(r"Stub process '[^']*' is not healthy", re.IGNORECASE)


def failed_load_status(kind: str, answered: bool, error: str | None) -> str:
    """A failed load's record status: refused where Triton refused the configuration; unavailable where
    the runtime failed (no answer at all, a Python stub process that died while the load started its
    instances, a FastAPI endpoint that does not serve)."""
    if kind == rec.FASTAPI or not answered or STUB_DEAD.search(error or ""):
        return rec.UNAVAILABLE
    return rec.REFUSED


def given_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The runner's settings a call gives (its options made from :data:`plans.NUMBERS`, and
    ``--progress``), to go over the plan's."""
    given = {f.name: getattr(args, f.name, None) for f in plans.NUMBERS}
    given["progress"] = getattr(args, "progress", None)
    return {k: v for k, v in given.items() if v is not None}


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
        self.plan_path = Path(args.plan)
        self.plan: plans.HostPlan = rec.read(self.plan_path, plans.HostPlan)
        self.home = self.plan_path.parent
        #: how it measures: the plan's settings, each one the call gives over it
        self.settings: plans.RunnerSettings = dataclasses.replace(self.plan.runner, **given_settings(args))
        ends = {**self.plan.endpoints, **{k: getattr(args, k) for k in ("triton", "metrics", "fastapi")
                                          if getattr(args, k)}}
        for key in () if args.triton_log else ("triton", "metrics", "fastapi"):  # --triton-log reaches none
            if not ends.get(key):
                raise rec.RecordError(f"{self.plan_path}: endpoints.{key}: missing: plan the run again with "
                                      f"serve-system plan, or give --{key}")
        self.triton = tritonapi.Triton(ends.get("triton", ""), self.home, self.plan.host,
                                       self.settings.ready_timeout)
        self.fastapi = tritonapi.Http(ends.get("fastapi", ""))
        self.metrics_url = ends.get("metrics", "")
        self.log = open(self.home / args.log, "a", encoding="utf-8") if args.log else None  # noqa: SIM115
        self.facts: dict[str, Any] = {**nodeproc.host_facts(), **self.plan.facts, **given_facts(args.facts)}
        self.session_levels: list[float] = []
        self.pending: dict[str, list[plans.LevelPlan]] = {}
        self.total = self.n = 0
        self.restored = self.hold_last = False
        self.held: events.Event | None = None

    # ---------------------------------------------------------------------------------- progress
    def say(self, kind: str, text: str, **fields: Any) -> None:
        """Report one event (a JSON line) on stdout and in the ``--log`` file."""
        self.emit(events.Event(kind=kind, host=self.plan.host, text=text, **fields))

    def emit(self, event: events.Event) -> None:
        line = events.event_line(event)
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

    def done(self, v: plans.VariantPlan, lv: plans.LevelPlan) -> bool:
        """Whether the node holds level ``lv`` of ``v`` measured under the plan's setting (the resume
        rule)."""
        return rec.level_done(self.home / v.name / lv.id, resume.level_setting(v, lv))

    def settle(self) -> None:
        """Set aside what this plan measures again (the node keeps its copy of the run between plays:
        a level measured under another configuration, load or perf settings), never deleted; said on
        stderr, one line each (the controller's plan has said it to the user)."""
        for s in resume.settle(self.home, self.plan.variants):
            print(f"{self.plan.host} {s}", file=sys.stderr)

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
            rec.write(self.settings.progress, p)
        except OSError as exc:
            print(f"progress file {self.settings.progress}: {exc}", file=sys.stderr)

    def eta(self) -> str:
        done, total = self.counts()
        if not self.session_levels:
            return "ETA unknown"
        left = (total - done) * sum(self.session_levels) / len(self.session_levels)
        return f"ETA {time.strftime('%H:%M:%S', time.gmtime(time.time() + left))} UTC ({left:.0f} s left)"

    # ---------------------------------------------------------------------------------- measuring
    def provenance(self, variant: plans.VariantPlan) -> dict[str, Any]:
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

    def measure(self, names: list[str], restore: bool, repetitions: list[int] | None = None,
                restore_past: float | None = None) -> int:
        """Measure the named variants in the plan's order (its rounds: repetition 1 of every variant,
        then repetition 2, ...; ``repetitions`` picks some), restore the baseline if asked, pack, say END.
        Each variant's levels of one repetition follow a fresh load of its config and a warm-up.
        ``restore_past`` (``repetitions: auto``'s budget, in measured minutes): restore the baseline too
        once the host's levels have taken that long (:func:`~.records.measured_minutes`): no further
        call could be asked."""
        unknown = [n for n in names if n not in {v.name for v in self.plan.variants}]
        if unknown:
            print(f"{self.plan_path}: variants: no variant named {unknown[0]!r}: give one of "
                  f"{', '.join(v.name for v in self.plan.variants)}", file=sys.stderr)
            return 2
        chosen = {v.name: v for v in self.plan.variants if v.name in names}
        self.pending = {n: [lv for lv in v.levels if not lv.done and not self.done(v, lv)
                            and (not repetitions or lv.repetition in repetitions)]
                        for n, v in chosen.items()}
        self.total = sum(len(p) for p in self.pending.values())
        self.n = 0
        self.hold_last = restore or restore_past is not None
        why = ""
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
                earlier = sum(lv.done or self.done(v, lv) for lv in v.levels) - measured[name]
                self.say(events.VARIANT, f"{self.plan.host} {name}: {measured[name]} level(s) measured"
                         + (f", {failed[name]} failed" if failed[name] else "")
                         + (f" ({earlier} already done)" if earlier else ""),
                         variant=name, status=rec.MEASURED, measured=measured[name])
            spent = rec.measured_minutes(self.home) if restore_past is not None else 0.0
            if restore_past is not None and not restore and spent >= restore_past:
                restore = True
                why = f"; the budget is spent ({spent:.1f} of {restore_past:g} measured minutes)"
            if restore:
                self.restore()
        finally:
            self.pack()
            if self.held:
                self.emit(self.held)
        total = sum(measured.values())
        self.say(events.END, f"{self.plan.host}: {total} level(s) measured in {len(chosen)} variant(s)" + why
                 + (f"; host record written (baseline {'restored' if self.restored else 'NOT restored'})"
                    if restore else ""),
                 status=rec.OK, measured=total, host_record=restore,
                 restored=self.restored if restore else None)
        return 0

    @staticmethod
    def earlier_loads(path: Path, config: str | None = None) -> tuple[list[float], list[float]]:
        """The switch and warm-up seconds of the variant's earlier loads in this run (its record from an
        earlier repetition, this call's or an earlier call's; none on a first load, an unreadable one or
        one of another configuration than ``config``)."""
        if not path.is_file():
            return [], []
        try:
            old = rec.read(path, rec.VariantRecord)
        except rec.RecordError:
            return [], []
        if config is not None and old.config_sha256 not in (None, config):
            return [], []
        return list(old.switches), list(old.warmups)

    def steps(self) -> list[tuple[int | None, str]]:
        """The order of the loads: the plan's rounds (repetition r of every variant, in the round's
        order, then r + 1), or, for a plan without rounds, each variant once in plan order."""
        if self.plan.rounds:
            return [(r, name) for r, names in enumerate(self.plan.rounds, 1) for name in names]
        return [(None, v.name) for v in self.plan.variants]

    def step(self, v: plans.VariantPlan, rep: int | None) -> tuple[int | None, int]:
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
        vrec.config_sha256 = resume.config_sha256(v)
        vrec.switches, vrec.warmups = self.earlier_loads(vdir / "variant.json", vrec.config_sha256)
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
            if self.triton.last_loaded().get(v.model) == tritonapi.body_key(v.load_body):
                self.triton.call("POST", f"/v2/repository/models/{v.model}/unload", {},
                                 timeout=self.settings.ready_timeout)
            t0 = vrec.load_started = time.time()
            ok, vrec.error, vrec.load_seconds, answered = self.triton.load(v)
            self.triton.note_loaded(v.model, tritonapi.body_key(v.load_body) if ok else None)
            if ok and not self.triton.wait_ready(v.model, v.version, self.settings.ready_timeout):
                ok, vrec.error = False, f"not READY within {self.settings.ready_timeout:.0f} s after loading"
            vrec.switch_seconds = round(time.time() - t0, 3)
            vrec.switches.append(vrec.switch_seconds)
        if not ok:
            # a refusal is Triton's answer; no answer at all (Triton gone) leaves the runtime unavailable
            vrec.status = failed_load_status(self.plan.kind, answered, vrec.error)
            rec.write(vdir / "variant.json", vrec)
            self.total -= len(self.pending[v.name])
            self.pending[v.name] = []
            self.progress(v.name, "", "running")
            self.say(events.VARIANT, f"{self.plan.host} {v.name}: {vrec.status}: {vrec.error}",
                     variant=v.name, status=vrec.status, error=vrec.error, measured=0)
            return None, 0
        if v.warmup_argv:
            t0 = time.time()
            nodeproc.run_capped(v.warmup_argv, vdir, self.settings.perf_memory_mb, self.settings.perf_timeout)
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
            event = events.Event(kind=events.LEVEL, host=self.plan.host, variant=v.name, level=lv.id,
                                 seq=self.n, total=self.total, status=lrec.status, error=lrec.error,
                                 text=(f"{self.plan.host} {v.name} {lv.id} {self.n}/{self.total}: "
                                       f"{lrec.status}{why}; {self.eta()}"))
            if self.n == self.total and self.hold_last:
                self.held = event  # said once the call's records are packed: the role fetches right after it
            else:
                self.emit(event)
        return len(pending), failed

    def fastapi_up(self, v: plans.VariantPlan) -> tuple[bool, str | None, dict[str, Any] | None]:
        deadline = time.time() + self.settings.ready_timeout
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

    def level(self, v: plans.VariantPlan, lv: plans.LevelPlan, ldir: Path) -> rec.LevelRecord:
        if ldir.exists():  # an interrupted attempt: start it again from scratch
            shutil.rmtree(ldir)
        ldir.mkdir(parents=True)
        triton = self.plan.kind == rec.TRITON
        before = after = None
        sampler = None
        problems: list[str] = []
        if triton:
            code, before = self.triton.stats(v)
            if code != 200:
                problems.append(f"Triton did not answer before the level ({before.get('error', code)})")
            rec.safeio.write_text(ldir / rec.STATS_BEFORE_FILE, json.dumps(before, indent=1) + "\n",
                                  within=ldir)
            sampler = nodeproc.Sampler(self.metrics_url, ldir / "metrics.jsonl",
                                       self.settings.metrics_interval)
            sampler.start()
        root = nodeproc.proc_root()
        node_before = nodeproc.cpu_snapshot(root)
        attempts: list[rec.Attempt] = []
        commands = [lv.argv, *lv.retry_argv] if triton else [lv.argv]
        text = ""
        for n, argv in enumerate(commands):
            attempt, text = nodeproc.run_capped(argv, ldir, self.settings.perf_memory_mb,
                                                self.settings.perf_timeout)
            if n:
                attempt.reason = attempt.reason or "unstable measurement: retried with a longer window"
            attempts.append(attempt)
            name = "perf.stdout" if triton else "client.log"
            if n:
                shutil.move(str(ldir / name), str(ldir / f"{name}.attempt{n}"))
            rec.safeio.write_text(ldir / name, text, within=ldir)
            if attempt.reason and attempt.reason.startswith(("killed", "perf_analyzer was killed")):
                break
            if not (triton and nodeproc.UNSTABLE.search(text)):
                break
        used = nodeproc.contention(node_before, nodeproc.cpu_snapshot(root),
                                   sum(a.cpu_s or 0.0 for a in attempts))
        if sampler is not None:
            sampler.stop.set()
            sampler.join(timeout=10)
        restarted = False
        if triton:
            code, after = self.triton.stats(v)
            if code != 200 or (sampler is not None and sampler.errors):
                problems.append("Triton stopped answering during the level")
                restarted = True
            elif tritonapi.success_count(after) < tritonapi.success_count(before):
                problems.append("Triton restarted during the level (its statistics were reset)")
                restarted = True
            if restarted:
                self.triton.recover(v)
                code, after = self.triton.stats(v)
            rec.safeio.write_text(ldir / rec.STATS_AFTER_FILE, json.dumps(after, indent=1) + "\n",
                                  within=ldir)
        last = attempts[-1]
        if last.reason and last.reason.startswith(("killed", "perf_analyzer was killed", "could not start")):
            problems.insert(0, last.reason)
        elif last.rc != 0 and not problems:
            tail = [ln.strip() for ln in text.splitlines() if ln.strip()]
            problems.append(f"exit status {last.rc}: {tail[-1] if tail else 'no output'}")
        elif triton and (empty := nodeproc.nothing_measured(last.argv, last.rc, text)) is not None:
            problems.append(empty)
        if triton and not restarted and STUB_DEAD.search(text):
            # the instance's stub died (Python backend): nothing it serves answers until a fresh load
            problems.append("a Python stub process died: the variant was loaded afresh for the next level")
            self.triton.reload(v)
        lrec = rec.LevelRecord(
            variant=v.name, level=lv.id, mode=lv.mode, load=lv.load, repetition=lv.repetition,
            status=rec.FAILED if problems else rec.OK, error="; ".join(problems) or None,
            start=attempts[0].start, end=last.end, attempts=attempts,
            batch_size=int(v.perf.get("batch_size", defaults.BATCH_SIZE)),
            tool="perf_analyzer" if triton else "fastapi_bench",
            requests=lv.requests, provenance=self.provenance(v),
            client_peak_rss_bytes=rec.client_peak_rss(attempts), contention=used,
            setting=resume.level_setting(v, lv))
        rec.write(ldir / "level.json", lrec)  # last: the level is complete
        return lrec

    def pack(self) -> None:
        """One archive of the host's complete records (variants, levels, host.json), fetched in one
        transfer."""
        archive.pack(self.home, [v.name for v in self.plan.variants], self.home / archive.ARCHIVE)

    def explain(self, names: list[str], log: str) -> int:
        """Add Triton's own reason to the records of refused loads, from its log (``docker logs -t``) on
        stdin (the line chosen by :func:`tritonapi.load_reason`)."""
        lines = tritonapi.log_lines(log)
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
            reason = tritonapi.load_reason(lines, vrec.model, vrec.load_started, vrec.switch_seconds)
            if reason and reason not in (vrec.error or ""):
                vrec.error = f"{vrec.error} | triton log: {reason}"
                rec.write(path, vrec)
            self.say(events.VARIANT, f"{self.plan.host} {v.name}: {vrec.status}: {vrec.error}",
                     variant=v.name, status=vrec.status, error=vrec.error, measured=0)
        self.pack()
        return 0

    def restore(self) -> None:
        """Load every model's committed config again; write the host record (host.json)."""
        statuses = []
        t0 = time.time()
        for model in self.plan.models:
            self.triton.call("POST", f"/v2/repository/models/{model}/unload", {},
                             timeout=self.settings.ready_timeout)
            code, answer = self.triton.load_model(model)
            if code != 200:
                print(f"{self.plan.host} {model}: the committed config was not loaded again "
                      f"(HTTP {code}: {tritonapi.error_text(answer)})", file=sys.stderr)
            self.triton.note_loaded(model, None)
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plan", help="the host's plan.json (in the run's node folder)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME",
                    help="measure this variant (repeat: measured in plan order)")
    ap.add_argument("--restore", action="store_true",
                    help="then restore the models' committed configs and write host.json")
    ap.add_argument("--restore-past", type=float, default=None, metavar="MINUTES",
                    help="then restore as --restore does once the host's levels have taken MINUTES "
                         "(repetitions: auto's budget)")
    ap.add_argument("--log", default="", help="the events also go to this file (next to the plan)")
    ap.add_argument("--progress", default=None, help="the progress file (default: the plan's)")
    ap.add_argument("--triton", default="", help="Triton's HTTP API (default: the plan's endpoints)")
    ap.add_argument("--metrics", default="", help="Triton's metrics URL (default: the plan's endpoints)")
    ap.add_argument("--fastapi", default="", help="the FastAPI endpoint (default: the plan's endpoints)")
    # the runner's settings: the host plan's (plans.RunnerSettings), unless given here
    for f in plans.NUMBERS:
        unit = f" ({f.metadata['unit']})" if "unit" in f.metadata else ""
        ap.add_argument(f"--{f.name.replace('_', '-')}", type=float, default=None,
                        help=f.metadata["help"] + unit)
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
    here = bundle.running()
    if here is not None:  # run as the node bundle (python3 .node.pyz ...)
        bundle.unpack(here)
    try:
        runner = Runner(args)
    except rec.RecordError as exc:
        print(exc, file=sys.stderr)
        return 2
    with open(runner.home / rec.RUNNER_LOCK, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            runner.say(events.WAITING, f"waiting for an earlier runner of {runner.plan.run_id} to finish")
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            runner.settle()
            if args.triton_log:
                return runner.explain(args.variant, sys.stdin.read())
            return runner.measure(args.variant, args.restore, args.repetition, args.restore_past)
        except BaseException as exc:
            runner.progress("", "", "failed")
            runner.say(events.END, f"{runner.plan.host}: the runner failed: {exc!r}", status=rec.FAILED,
                       error=repr(exc))
            raise


if __name__ == "__main__":
    raise SystemExit(main())
