"""The lab's claims, checked against a run's measurements: the report's ``## Findings``.

Each claim gets one verdict, exactly one of :data:`VERDICTS`, and the numbers behind it. Whether a
claim applies is decided from the data (which variants and loads exist, and the configurations that
were actually sent), never from the experiment's name:

- ``queue_delay``: on one instance without dynamic batching, Triton's queue delay grows with the
  number of concurrent clients (the lab: at concurrency 8 the delay is about 8x the inference time);
- ``dynamic_batching``: two variants whose configurations differ only by ``dynamic_batching``, at
  the same load: the batched one forms larger batches and serves more requests per second (with a
  request rate the throughput is the rate, so only the batch is compared);
- ``instances``: variants that differ only by their instance groups, at the same load: throughput
  rises with the instance count until the CPU or GPU saturates (utilisation >= 85 %, or as many CPU
  instances as the host has CPUs);
- ``poisson``: the same configuration at the same request rate with constant and with Poisson
  arrivals: Poisson arrivals raise the tail latency (p99; p95 where p99 is missing);
- ``onnx_backend``: ONNX (the ``onnxruntime`` backend, or the FastAPI ``onnx`` runtime) against the
  Python backend (or the FastAPI ``pytorch`` runtime) at the same load and instance count: higher
  throughput and lower latency;
- ``best_variant``: for each objective of the spec, the best variant, and whether it stands clear of
  the next variant (ahead by at least :data:`CLEAR_MARGIN`).

A claim that did not hold is reported as such. Inputs: the summary rows
(:func:`serve_system.results.collect`) and the set-ups (:func:`serve_system.results.variant_setups`).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from typing import Any

from ..experiment import records
from ..experiment import tritonconfig as tc

HELD, NOT_HELD, NOT_MEASURABLE = "held", "did not hold", "not measurable here"
VERDICTS = (HELD, NOT_HELD, NOT_MEASURABLE)
#: utilisation (0..1) from which a processor counts as saturated
SATURATED = 0.85
#: how far ahead the best variant must be of the next one to stand clear (relative)
CLEAR_MARGIN = 0.02


@dataclass
class Finding:
    key: str
    claim: str
    verdict: str
    detail: str
    evidence: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Setup:
    """What one (host, variant) ran: the parts of its configuration the claims compare."""

    host: str
    variant: str
    model: str | None
    backend: str | None
    instances: int
    instance_kind: str
    dynamic_batching: bool
    distribution: str
    batch_size: int
    host_cpus: int | None
    #: the configuration without name, instance groups and dynamic batching (a hashable key)
    rest: str
    #: the configuration without name and instance groups
    without_instances: str
    #: the configuration without name and dynamic batching
    without_batching: str


def _key(cfg: dict[str, Any], drop: tuple[str, ...]) -> str:
    return json.dumps({k: v for k, v in cfg.items() if k not in drop}, sort_keys=True)


def make_setup(host: str, variant: str, raw: dict[str, Any]) -> Setup | None:
    """A :class:`Setup` from :func:`results.variant_setups`' record; None when nothing says how it ran."""
    dist = raw.get("distribution") or "constant"
    batch = int(raw.get("batch_size") or 1)
    backend: str | None
    if raw.get("runtime"):  # a FastAPI variant: one process, no Triton configuration
        rt = str(raw["runtime"])
        backend = {"onnx": "onnxruntime", "pytorch": "python"}.get(rt, rt)
        return Setup(host, variant, f"fastapi:{rt}", backend, 1, "process", False, dist, batch,
                     raw.get("host_cpus"), "fastapi", "fastapi", "fastapi")
    text = raw.get("config_pbtxt")
    if not text:
        return None
    try:
        cfg = tc.to_dict(tc.parse_pbtxt(text, f"{host}/{variant}/config.pbtxt"))
    except tc.ConfigError:
        return None
    backend = cfg.get("backend") or {"onnxruntime_onnx": "onnxruntime", "tensorrt_plan": "tensorrt",
                                     "pytorch_libtorch": "pytorch"}.get(cfg.get("platform", ""), cfg.get("platform"))
    groups = cfg.get("instance_group") or [{}]
    instances = sum(int(g.get("count", 1)) * max(1, len(g.get("gpus") or [])) for g in groups)
    kinds = sorted({str(g.get("kind", "KIND_AUTO")).removeprefix("KIND_") for g in groups})
    rest = _key(cfg, ("name", "instance_group", "dynamic_batching"))
    return Setup(host, variant, cfg.get("name"), backend, instances, "+".join(kinds), "dynamic_batching" in cfg,
                 dist, batch, raw.get("host_cpus"), rest, _key(cfg, ("name", "instance_group")),
                 _key(cfg, ("name", "dynamic_batching")))


# -- measurements, repetitions averaged ----------------------------------------------------------

METRICS = ("throughput", "latency_avg_us", "p50_us", "p95_us", "p99_us", "queue_us", "compute_infer_us",
           "avg_batch_size", "gpu_util", "gpu_util_max", "cpu_util")


def _means(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str, float], dict[str, Any]]:
    """(host, variant, mode, load) -> mean of each metric over the ok repetitions."""
    groups: dict[tuple[str, str, str, float], list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("status") == "ok" and r.get("load") is not None:
            groups.setdefault((r["host"], r["variant"], r.get("mode") or "concurrency", float(r["load"])), []).append(r)
    out: dict[tuple[str, str, str, float], dict[str, Any]] = {}
    for key, rs in groups.items():
        m: dict[str, Any] = {"repetitions": len(rs)}
        for k in METRICS:
            vals = [float(r[k]) for r in rs if r.get(k) is not None]
            m[k] = statistics.fmean(vals) if vals else None
        out[key] = m
    return out


def _ms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1000:.2f} ms"


def _pct(new: float, old: float) -> str:
    return f"{(new - old) / old * 100:+.0f} %" if old else "n/a"


def _load(mode: str, load: float) -> str:
    return f"{'concurrency' if mode == 'concurrency' else mode.replace('_', ' ')} {load:g}"


def _verdict(results: list[bool]) -> str:
    return NOT_MEASURABLE if not results else (HELD if all(results) else NOT_HELD)


def _unmeasured(setups: dict[tuple[str, str], Setup], raw: dict[tuple[str, str], dict[str, Any]],
                pred: Any) -> str:
    """' (not measured: v: why; ...)' for variants that would have taken part but did not run."""
    why = []
    for (h, v), r in raw.items():
        s = setups.get((h, v))
        if r.get("status") in records.NOT_MEASURED and (s is None or pred(s)):
            why.append(f"`{v}` {r['status']}: {str(r.get('error') or '').strip()[:160]}")
    return (" Not measured: " + "; ".join(why) + ".") if why else ""


# -- the claims ---------------------------------------------------------------------------------


def queue_delay(means: dict[tuple[str, str, str, float], dict[str, Any]], setups: dict[tuple[str, str], Setup]) -> Finding:
    claim = "Queue delay grows with concurrency on one instance"
    parts, results, evidence = [], [], []
    for (host, variant), s in sorted(setups.items()):
        if s.instances != 1 or s.dynamic_batching:
            continue
        pts = sorted((load, m) for (h, v, mode, load), m in means.items()
                     if (h, v, mode) == (host, variant, "concurrency") and m.get("queue_us") is not None)
        if len(pts) < 2:
            continue
        queues = [m["queue_us"] for _, m in pts]
        # grows: highest concurrency queues longer than the lowest, and no step falls by more than 10 %
        ok = queues[-1] > queues[0] and all(b >= 0.9 * a for a, b in pairwise(queues))
        results.append(ok)
        steps = ", ".join(f"{load:g} -> {_ms(m['queue_us'])} (infer {_ms(m.get('compute_infer_us'))})" for load, m in pts)
        parts.append(f"`{variant}` on {host} (1 {s.instance_kind} instance, no dynamic batching): queue at "
                     f"concurrency {steps}{'' if ok else ' - does not grow'}")
        evidence.append({"host": host, "variant": variant,
                         "levels": [{"load": load, "queue_us": m["queue_us"], "compute_infer_us": m.get("compute_infer_us")}
                                    for load, m in pts], "grows": ok})
    if not results:
        return Finding("queue_delay", claim, NOT_MEASURABLE,
                       "No variant with one instance and no dynamic batching was measured at two or more "
                       "concurrency levels with Triton's queue time.")
    return Finding("queue_delay", claim, _verdict(results), "; ".join(parts) + ".", evidence)


def dynamic_batching(means: dict[tuple[str, str, str, float], dict[str, Any]], setups: dict[tuple[str, str], Setup],
                     raw: dict[tuple[str, str], dict[str, Any]],
                     batches: dict[tuple[str, str, str, float], float] | None = None) -> Finding:
    claim = "Dynamic batching raises the average batch and throughput at the same load"
    parts, results, evidence = [], [], []
    for (host, base_v), base in sorted(setups.items()):
        if base.dynamic_batching:
            continue
        for (h2, dyn_v), dyn in sorted(setups.items()):
            if h2 != host or not dyn.dynamic_batching or dyn.without_batching != base.without_batching \
                    or (dyn.distribution, dyn.batch_size, dyn.instances) != (base.distribution, base.batch_size, base.instances):
                continue
            for (hh, v, mode, load), bm in sorted(means.items()):
                if (hh, v) != (host, base_v):
                    continue
                dm = means.get((host, dyn_v, mode, load))
                if dm is None or (mode == "concurrency" and load * base.batch_size <= 1):
                    continue  # one request at a time: nothing to batch
                if bm.get("avg_batch_size") is None or dm.get("avg_batch_size") is None:
                    continue
                batch_up = dm["avg_batch_size"] > bm["avg_batch_size"]
                text = (f"{_load(mode, load)} on {host}: average batch {bm['avg_batch_size']:.2f} (`{base_v}`) -> "
                        f"{dm['avg_batch_size']:.2f} (`{dyn_v}`)")
                ev = {"host": host, "without": base_v, "with": dyn_v, "mode": mode, "load": load,
                      "avg_batch_without": bm["avg_batch_size"], "avg_batch_with": dm["avg_batch_size"]}
                if mode == "concurrency" and bm.get("throughput") and dm.get("throughput") is not None:
                    thr_up = dm["throughput"] > bm["throughput"]
                    text += (f", throughput {bm['throughput']:.1f} -> {dm['throughput']:.1f}/s "
                             f"({_pct(dm['throughput'], bm['throughput'])})")
                    ev.update(throughput_without=bm["throughput"], throughput_with=dm["throughput"])
                    ok = batch_up and thr_up
                    if not ok:
                        text += " - " + " and ".join(w for w, bad in (("batch not larger", not batch_up),
                                                                       ("throughput not higher", not thr_up)) if bad)
                else:
                    ok = batch_up
                    text += (f", p95 {_ms(bm.get('p95_us'))} -> {_ms(dm.get('p95_us'))} (request rate: the throughput is the "
                             f"rate, so only the batch is judged)") + ("" if ok else " - batch not larger")
                ev["held"] = ok
                results.append(ok)
                parts.append(text)
                evidence.append(ev)
    if not results:
        # Triton's statistics still say which batches formed where perf_analyzer measured nothing stable
        seen = []
        for (host, bv, mode, load), bb in sorted((batches or {}).items()):
            found_base = setups.get((host, bv))
            if found_base is None or found_base.dynamic_batching:
                continue
            for (h2, dv), dyn in sorted(setups.items()):
                db = (batches or {}).get((host, dv, mode, load))
                if h2 == host and dyn.dynamic_batching and dyn.without_batching == found_base.without_batching \
                        and db is not None and (dyn.distribution, dyn.batch_size) == (found_base.distribution, found_base.batch_size):
                    seen.append(f"{_load(mode, load)}: {bb:.2f} (`{bv}`) -> {db:.2f} (`{dv}`)")
        told = (" Triton's statistics alone (no throughput to compare) give average batches " + "; ".join(seen) + ".") \
            if seen else ""
        return Finding("dynamic_batching", claim, NOT_MEASURABLE,
                       "No two variants differing only by dynamic batching were measured at a common load above "
                       "one outstanding request." + told + _unmeasured(setups, raw, lambda s: s.dynamic_batching),
                       evidence)
    held = sum(results)
    summary = f"Held at {held} of {len(results)} comparisons. " if 0 < held < len(results) else ""
    return Finding("dynamic_batching", claim, _verdict(results), summary + "; ".join(parts) + ".", evidence)


def _busy(m: dict[str, Any], s: Setup) -> tuple[bool, str]:
    gpu = m.get("gpu_util_max") if m.get("gpu_util_max") is not None else m.get("gpu_util")
    util = gpu if gpu is not None else m.get("cpu_util")
    what = "busiest GPU" if gpu is not None else "CPU"
    if util is not None and util >= SATURATED:
        return True, f"{what} {util * 100:.0f} %"
    if "CPU" in s.instance_kind and s.host_cpus and s.instances >= s.host_cpus:
        return True, f"{s.instances} CPU instances on {s.host_cpus} CPUs"
    return False, f"{what} {util * 100:.0f} %" if util is not None else "utilisation not reported"


def instances(means: dict[tuple[str, str, str, float], dict[str, Any]], setups: dict[tuple[str, str], Setup]) -> Finding:
    claim = "More instances raise throughput until the CPU or GPU saturates"
    groups: dict[tuple[str, str, str, int], list[Setup]] = {}
    for s in setups.values():
        if s.model and not s.model.startswith("fastapi:"):
            groups.setdefault((s.host, s.without_instances, s.distribution, s.batch_size), []).append(s)
    parts, results, evidence = [], [], []
    for (host, _, _, _), ss in sorted(groups.items(), key=lambda kv: kv[0]):
        if len({s.instances for s in ss}) < 2:
            continue
        loads = sorted({(mode, load) for (h, v, mode, load) in means if h == host and any(v == s.variant for s in ss)})
        for mode, load in loads:
            pts = sorted(((s, means[(host, s.variant, mode, load)]) for s in ss
                          if (host, s.variant, mode, load) in means and means[(host, s.variant, mode, load)].get("throughput")),
                         key=lambda p: p[0].instances)
            if len({p[0].instances for p in pts}) < 2 or mode != "concurrency":
                continue
            ok, steps = True, []
            for (sa, ma), (sb, mb) in pairwise(pts):
                if sb.instances == sa.instances:
                    continue
                rose = mb["throughput"] > ma["throughput"]
                busy, util = _busy(ma, sa)
                step_ok = rose or busy
                ok = ok and step_ok
                verdict = "rises" if rose else ("flat/falls, already saturated" if busy else "flat/falls while not saturated")
                steps.append(f"{sa.instances} -> {sb.instances} instances: {ma['throughput']:.1f} -> {mb['throughput']:.1f}/s "
                             f"({_pct(mb['throughput'], ma['throughput'])}; at {sa.instances}: {util}) {verdict}")
            results.append(ok)
            parts.append(f"{_load(mode, load)} on {host} (" + ", ".join(f"`{s.variant}` {s.instances}x {s.instance_kind}"
                                                                         for s, _ in pts) + "): " + "; ".join(steps))
            evidence.append({"host": host, "mode": mode, "load": load, "held": ok,
                             "points": [{"variant": s.variant, "instances": s.instances, "throughput": m["throughput"],
                                         "gpu_util": m.get("gpu_util"), "gpu_util_max": m.get("gpu_util_max"),
                                         "cpu_util": m.get("cpu_util")} for s, m in pts]})
    if not results:
        return Finding("instances", claim, NOT_MEASURABLE,
                       "No variants differing only by their instance count were measured at a common concurrency.")
    return Finding("instances", claim, _verdict(results), "; ".join(parts) + ".", evidence)


def poisson(means: dict[tuple[str, str, str, float], dict[str, Any]], setups: dict[tuple[str, str], Setup],
            raw: dict[tuple[str, str], dict[str, Any]]) -> Finding:
    claim = "Poisson arrivals raise tail latency over constant arrivals at the same rate"
    parts, results, evidence = [], [], []
    for (host, cv), c in sorted(setups.items()):
        if c.distribution != "constant":
            continue
        for (h2, pv), p in sorted(setups.items()):
            if h2 != host or p.distribution != "poisson" or (p.rest, p.without_instances, p.batch_size) != (
                    c.rest, c.without_instances, c.batch_size) or p.instances != c.instances:
                continue
            for (hh, v, mode, load), cm in sorted(means.items()):
                pm = means.get((host, pv, mode, load))
                if (hh, v) != (host, cv) or mode != "request_rate" or pm is None:
                    continue
                tail = "p99_us" if cm.get("p99_us") is not None and pm.get("p99_us") is not None else "p95_us"
                if cm.get(tail) is None or pm.get(tail) is None:
                    continue
                ok = pm[tail] > cm[tail]
                results.append(ok)
                parts.append(f"{load:g} requests/s on {host}: {tail[:3]} {_ms(cm[tail])} constant (`{cv}`) -> "
                             f"{_ms(pm[tail])} Poisson (`{pv}`) ({_pct(pm[tail], cm[tail])}); queue "
                             f"{_ms(cm.get('queue_us'))} -> {_ms(pm.get('queue_us'))}" + ("" if ok else " - not higher"))
                evidence.append({"host": host, "constant": cv, "poisson": pv, "load": load, "tail": tail,
                                 "constant_us": cm[tail], "poisson_us": pm[tail], "held": ok})
    if not results:
        return Finding("poisson", claim, NOT_MEASURABLE,
                       "No configuration was measured at the same request rate with both constant and Poisson "
                       "arrivals." + _unmeasured(setups, raw, lambda s: True))
    return Finding("poisson", claim, _verdict(results), "; ".join(parts) + ".", evidence)


def onnx_backend(means: dict[tuple[str, str, str, float], dict[str, Any]], setups: dict[tuple[str, str], Setup],
                 raw: dict[tuple[str, str], dict[str, Any]]) -> Finding:
    claim = "ONNX (ONNX Runtime) serves faster than the Python backend (PyTorch)"
    parts, results, evidence = [], [], []
    for (host, pyv), py in sorted(setups.items()):
        if py.backend != "python":
            continue
        for (h2, ov), ox in sorted(setups.items()):
            if h2 != host or ox.backend != "onnxruntime" or (ox.instances, ox.dynamic_batching, ox.batch_size,
                                                             ox.distribution) != (py.instances, py.dynamic_batching,
                                                                                  py.batch_size, py.distribution):
                continue
            if (ox.rest == "fastapi") != (py.rest == "fastapi"):
                continue
            for (hh, v, mode, load), pm in sorted(means.items()):
                om = means.get((host, ov, mode, load))
                if (hh, v) != (host, pyv) or om is None or not pm.get("throughput") or om.get("throughput") is None:
                    continue
                lat = "latency_avg_us" if pm.get("latency_avg_us") and om.get("latency_avg_us") else "p50_us"
                if not pm.get(lat) or om.get(lat) is None:
                    continue
                ok = om["throughput"] > pm["throughput"] and om[lat] < pm[lat]
                results.append(ok)
                what = "FastAPI" if py.rest == "fastapi" else "Triton"
                parts.append(f"{what} {_load(mode, load)} on {host}: `{pyv}` {pm['throughput']:.1f}/s, {lat.split('_')[0]} "
                             f"{_ms(pm[lat])} vs `{ov}` {om['throughput']:.1f}/s "
                             f"({_pct(om['throughput'], pm['throughput'])}), {_ms(om[lat])}" + ("" if ok else " - ONNX not faster"))
                evidence.append({"host": host, "python": pyv, "onnx": ov, "mode": mode, "load": load,
                                 "throughput_python": pm["throughput"], "throughput_onnx": om["throughput"],
                                 "latency_metric": lat, "latency_python_us": pm[lat], "latency_onnx_us": om[lat], "held": ok})
    if not results:
        return Finding("onnx_backend", claim, NOT_MEASURABLE,
                       "No ONNX and Python-backend variants were both measured at the same load, batch and instance "
                       "count." + _unmeasured(setups, raw, lambda s: s.backend in ("onnxruntime", "python")), evidence)
    return Finding("onnx_backend", claim, _verdict(results), "; ".join(parts) + ".", evidence)


def rank(rows: list[dict[str, Any]], objective: dict[str, Any]) -> list[dict[str, Any]]:
    """Every (host, variant, mode, load) that qualifies for an objective, best first (repetitions averaged)."""
    metric, goal = objective.get("metric", "throughput"), objective.get("goal", "max")
    at_load = objective.get("at_load")
    cons = objective.get("constraints") or {}
    groups: dict[tuple[str, str, Any, Any], list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("status") != "ok" or r.get("load") is None:
            continue
        if at_load is not None and float(r["load"]) != float(at_load):
            continue
        groups.setdefault((r["host"], r["variant"], r["mode"], r["load"]), []).append(r)
    cands = []
    for key, rs in groups.items():
        vals: dict[str, float] = {}
        for m in {metric, *cons}:
            nums = [float(r[m]) for r in rs if r.get(m) is not None]
            if nums:
                vals[m] = statistics.fmean(nums)
        if metric not in vals:
            continue
        if all(m in vals and not ("max" in b and vals[m] > b["max"]) and not ("min" in b and vals[m] < b["min"])
               for m, b in cons.items()):
            cands.append({"objective": objective.get("name", f"{goal}_{metric}"), "metric": metric, "goal": goal,
                          "host": key[0], "variant": key[1], "mode": key[2], "load": key[3], "value": vals[metric],
                          "repetitions": len(rs), "at_load": at_load, "constraints": cons})
    cands.sort(key=lambda c: c["value"], reverse=goal == "max")
    return cands


def _fmt_metric(metric: str, v: float) -> str:
    return _ms(v) if metric.endswith("_us") else f"{v:,.2f}"


def best_variant(rows: list[dict[str, Any]], objectives: list[dict[str, Any]]) -> Finding:
    claim = "The sweep's objective picks one best variant"
    parts, results, evidence = [], [], []
    for o in objectives:
        ranked = rank(rows, o)
        top = ranked[0] if ranked else None
        second = next((c for c in ranked if top and c["variant"] != top["variant"]), None)
        name = o.get("name") or f"{o.get('goal', 'max')}_{o.get('metric', 'throughput')}"
        if top is None or second is None:
            parts.append(f"**{name}**: " + ("no measured level qualifies" if top is None else
                                              f"only `{top['variant']}` qualifies, nothing to compare"))
            continue
        margin = abs(top["value"] - second["value"]) / abs(second["value"]) if second["value"] else float("inf")
        ok = margin >= CLEAR_MARGIN
        results.append(ok)
        where = "" if o.get("at_load") is not None else f" at {top['mode']} {top['load']:g}"
        parts.append(f"**{name}** ({o.get('goal', 'max')} {top['metric']}): `{top['variant']}`{where} "
                     f"{_fmt_metric(top['metric'], top['value'])} vs next `{second['variant']}` "
                     f"{_fmt_metric(second['metric'], second['value'])} ({margin * 100:.1f} % apart"
                     + ("" if ok else f", under {CLEAR_MARGIN * 100:.0f} %: no clear best") + ")")
        evidence.append({"objective": name, "best": top, "next": second, "margin": margin, "held": ok})
    if not results:
        return Finding("best_variant", claim, NOT_MEASURABLE,
                       "Fewer than two variants qualify for any objective" + (": " + "; ".join(parts) if parts else "") + ".")
    return Finding("best_variant", claim, _verdict(results),
                   f"A best variant stands clear when it is at least {CLEAR_MARGIN * 100:.0f} % ahead of the next "
                   "variant. " + "; ".join(parts) + ".", evidence)


def evaluate(rows: list[dict[str, Any]], raw_setups: dict[tuple[str, str], dict[str, Any]],
             objectives: list[dict[str, Any]]) -> list[Finding]:
    """Every claim's finding for a run, in the lab's order.

    A claim not measurable here also names the run's levels that failed (e.g. perf_analyzer found no
    stable measurement): they may be why.
    """
    setups = {k: s for k, r in raw_setups.items() if (s := make_setup(k[0], k[1], r)) is not None}
    means = _means(rows)
    batches = {(r["host"], r["variant"], r.get("mode") or "concurrency", float(r["load"])): float(r["avg_batch_size"])
               for r in rows if r.get("load") is not None and r.get("avg_batch_size") is not None}
    found = [queue_delay(means, setups), dynamic_batching(means, setups, raw_setups, batches), instances(means, setups),
             poisson(means, setups, raw_setups), onnx_backend(means, setups, raw_setups),
             best_variant(rows, objectives)]
    failed = [r for r in rows if r.get("status") != "ok" and r.get("load") is not None]
    if failed:
        first = failed[0]
        note = (f" {len(failed)} level(s) of this run were not measured (listed under Not measured), e.g. "
                f"`{first['variant']}` {_load(first.get('mode') or 'concurrency', float(first['load']))}: "
                f"{str(first.get('error') or first['status']).strip()[:120]}.")
        for f in found:
            if f.verdict == NOT_MEASURABLE:
                f.detail += note
    return found


def markdown(findings: list[Finding], stand_in: str | None = None) -> list[str]:
    """The report's ``## Findings`` section, as lines (saying so when a stand-in model was measured)."""
    lines = ["## Findings", "",
             "Each of the lab's claims checked against this run's measurements (repetitions averaged)"
             + (", measured on a stand-in model: the numbers are real for this model, not the lab's." if stand_in
                else "."), ""]
    for f in findings:
        lines.append(f"- **{f.claim}**: **{f.verdict}**. {f.detail}")
    return lines + [""]
