"""Report a run: summary.csv + summary.json, the plots (:mod:`serve_system.results.plots`) and report.md.

Everything is recomputed from the raw tree (:mod:`serve_system.results`). The run folder is checked
first (:func:`serve_system.results.runs.check_run`): an empty or interrupted run, or a malformed
record, is refused with one line saying what is missing, before anything is written (``partial=True``
reports an interrupted run anyway and lists what is missing). report.md holds the best variant per
objective of the spec, the lab's claims checked against the numbers (``## Findings``,
:mod:`serve_system.results.findings`), the measurements and the plots; a plot without data is not
drawn, and report.md says which and why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from .. import metrics, safeio, textsafe
from ..errors import ServeSystemError
from ..experiment import perf as perfmod
from ..experiment.manifest import Manifest
from ..node import plans
from . import best as bestmod
from . import drawing as drawingmod
from . import findings as fnd
from . import intervals as iv
from . import plots as plotsmod
from . import reasons as why_
from . import runs, sequential
from . import shard as shardres
from . import tree as res
from .cells import cell, ms_cells
from .claim import BestEvidence
from .row import Row
from .status import Status

# -- the report's notes -------------------------------------------------------------------------


def contention_note(rows: list[Row], auto: bool) -> list[str]:
    """The report's one line on contention: how many levels counted, and why the others did not. Which
    levels: the ``## Per level`` table's *contended* column; which processes took the CPU and how much:
    ``contention`` and ``other_cpu`` in summary.csv / summary.json (said there, not here)."""
    hit = [r for r in rows if r.get("contention")]
    if not hit:
        return []
    why = ("measured beside other work (other processes took 25 % or more of the node's CPU, or the "
           "hypervisor stole 10 %)")
    if auto:
        head = (f"{len(rows) - len(hit)} of {len(rows)} level(s) counted; the other {len(hit)} were {why}, "
                "so `repetitions: auto` did not count them and measured those variants again within its "
                "budget")
    else:
        head = (f"all {len(rows)} level(s) counted, {len(hit)} of them {why}: measure again on a quiet node "
                "(a new run id), or use `repetitions: auto`, which measures such levels again")
    return [(f"> **Contention**: {head}. Which levels: *contended* in `## Per level`; which processes and "
             "how much: `contention` and `other_cpu` in `summary.csv` and `summary.json`."), ""]


# -- summary ------------------------------------------------------------------------------------


def _csv(path: Path, columns: tuple[str, ...], rows: Sequence[Mapping[str, object]]) -> None:
    with safeio.open_write(path, within=path.parent, newline="") as fh:
        w = textsafe.DictWriter(fh, fieldnames=list(columns))
        w.writeheader()
        for r in rows:
            w.writerow({k: textsafe.dumps(v) if isinstance(v, dict) else ("" if v is None else v)
                        for k, v in r.items() if k in columns})


class Outcome(TypedDict):
    """summary.json's fields beside the rows and their statistics: JSON, as written."""

    best: list[dict[str, object] | None]
    findings: list[dict[str, object]]
    missing: list[str]
    shard: dict[str, object] | None


class Reported(TypedDict):
    """What :func:`write_report` wrote: the row count, the files, the plots not drawn and why, and what
    the report judged (the best per objective, None where no level qualifies; the findings)."""

    rows: int
    summary_csv: str
    summary_json: str
    report: str
    plots: list[str]
    skipped: list[str]
    best: list[bestmod.Ranked | None]
    findings: list[fnd.Finding]
    missing: list[str]


def write_summary(run_dir: Path, rows: list[Row], extra: Outcome | None = None) -> tuple[Path, Path]:
    """summary.csv (the rows: one per repetition), summary_stats.csv (per level and metric: n, mean, sd,
    95 % interval, cv, noisy; :func:`tree.level_stats`) and summary.json ({experiment, run_id, rows,
    stats, best, findings, ...})."""
    csv_path, json_path = run_dir / "summary.csv", run_dir / "summary.json"
    stats = [s.as_row() for s in res.level_stats(rows)]
    _csv(csv_path, res.COLUMNS, rows)
    _csv(run_dir / "summary_stats.csv", res.STAT_COLUMNS, stats)
    doc: dict[str, object] = {"experiment": rows[0]["experiment"] if rows else None,
                              "run_id": rows[0]["run_id"] if rows else None, "rows": rows, "stats": stats}
    doc.update(extra or {})
    safeio.write_text(json_path, textsafe.dumps(doc, indent=1, default=str) + "\n", within=run_dir)
    return csv_path, json_path


def best(rows: list[Row], objective: plans.ObjectiveRecord) -> bestmod.Ranked | None:
    """The best (host, variant, load) by an objective, averaging repetitions; None if no row qualifies."""
    ranked = bestmod.rank(rows, objective)
    return ranked[0] if ranked else None


# -- report.md ----------------------------------------------------------------------------------


def _rule(o: plans.ObjectiveRecord) -> str:
    rule = f"{o.goal} {o.metric}"
    if o.at_load is not None:
        rule += f" at load {float(o.at_load):g}"
    if o.constraints:
        rule += " with " + ", ".join(f"{m} {k} {b}" for m, bd in o.constraints.items()
                                     for k, b in bd.to_json().items())
    return rule


def _standing(ranked: list[bestmod.Ranked], smallest: float, looks: sequential.Looks | None = None) -> str:
    """After the best variant: whether its lead over the next variant is decided, or a tie (at a
    sequential look: its repeated interval, as the findings judge it)."""
    found = bestmod.standing(ranked, smallest, looks)
    if found is None:
        return ""
    _, second, e, v = found
    lead = f"lead over `{second.variant}` {iv.effect_text(e)}"
    if v.word == iv.HELD:
        return f"; {lead}"
    if v.reason == iv.ONE_REPETITION:
        return f"; {lead}: not a clear best ({iv.ONE_REPETITION})"
    return f"; **tied** with `{second.variant}` ({lead}: the interval includes zero)"


def _interval(s: res.LevelStat | None, scale: float = 1.0, digits: int = 1) -> str:
    if s is None or s.mean is None:
        return "-"
    text = cell(s.mean / scale, digits)
    if s.ci_low is not None and s.ci_high is not None:
        text += f" [{cell(s.ci_low / scale, digits)}, {cell(s.ci_high / scale, digits)}]"
    return text


def _per_level(rows: list[Row]) -> list[str]:
    """## Per level: n, mean and 95 % interval per metric, and the noise flag (cv >= 10 %, pyperf's rule)."""
    stats = res.level_stats(rows)
    if not stats:
        return []
    by: dict[tuple[str, str, str, Any], dict[str, res.LevelStat]] = {}
    for s in stats:
        by.setdefault((s.host, s.variant, s.mode, s.load), {})[s.metric] = s
    intro = ("Each level's repetitions: n, the mean and its 95 % interval (Student's t; none with one "
             "repetition). A level is *noisy* when a metric's repetitions vary by "
             f"{iv.NOISY_CV * 100:g} % or more of their mean (coefficient of variation, pyperf's rule): its "
             "comparisons need more "
             "repetitions, or a quieter node. *windows cv* is the most that the measurement windows of "
             "one repetition varied (throughput over the last "
             f"{perfmod.STABILITY_WINDOWS} windows, which perf_analyzer's numbers rest on); a level is noisy "
             f"as well when it reaches {iv.NOISY_CV * 100:g} %.")
    windows: dict[tuple[str, str, str, Any], float] = {}
    for r in rows:
        if r.get("status") == Status.OK and r.get("window_cv") is not None:
            k = (r["host"], r["variant"], r.get("mode") or "concurrency", r["load"])
            windows[k] = max(windows.get(k, 0.0), float(r["window_cv"]))
    # the repetitions of each level measured beside other work (a column only where there are some)
    busy: dict[tuple[str, str, str, Any], int] = {}
    for r in rows:
        if r.get("contention"):
            k = (r["host"], r["variant"], r.get("mode") or "concurrency", r["load"])
            busy[k] = busy.get(k, 0) + 1
    extra = (" contended |", "---|") if busy else ("", "")
    lines = ["## Per level", "", intro, "",
             "| host | variant | load | n | throughput/s | avg ms | p95 ms | p99 ms | windows cv | noisy |"
             + extra[0], "|---|---|---|---|---|---|---|---|---|---|" + extra[1]]
    noisy_levels = []
    for (host, variant, mode, load), ms in by.items():
        n = max(s.n for s in ms.values())
        noisy = [f"{m.removesuffix('_us')} cv {(s.cv or 0.0) * 100:.0f} %" for m, s in ms.items() if s.noisy]
        wcv = windows.get((host, variant, mode, load))
        if wcv is not None and wcv >= iv.NOISY_CV:
            noisy.append(f"windows cv {wcv * 100:.0f} %")
        where = f"{mode[:4]} {cell(load)}"
        if noisy:
            noisy_levels.append(f"{host} / {variant} @ {where}: " + ", ".join(noisy))
        lines.append(f"| {host} | {variant} | {where} | {n} | {_interval(ms.get('throughput'))} | "
                     f"{_interval(ms.get('latency_avg_us'), metrics.TIME_SCALE, 2)} | "
                     f"{_interval(ms.get('p95_us'), metrics.TIME_SCALE, 2)} | "
                     f"{_interval(ms.get('p99_us'), metrics.TIME_SCALE, 2)} | "
                     f"{'' if wcv is None else f'{wcv * 100:.1f} %'} | {'**noisy**' if noisy else ''} |"
                     + (f" {busy.get((host, variant, mode, load), 0)} |" if busy else ""))
    if noisy_levels:
        lines += ["", f"Noisy levels ({len(noisy_levels)}): " + "; ".join(noisy_levels) + "."]
    return lines + [""]


def search_section(run: Path, rows: list[Row]) -> list[str]:
    """``## Search``: per host that searched (halving, optuna), the search path and the winner or the
    tie (:func:`serve_system.results.searchreport.markdown`); nothing for a grid."""
    from . import searchdecide as search  # optuna's study is rebuilt only for a run that used it
    from .searchreport import markdown

    lines: list[str] = []
    sharded = False
    for hdir in res.host_dirs(run):
        plan = res.read_plan(hdir)
        rec = None if plan is None else plan.search
        if rec is None:
            continue
        shard = rec.shard
        if shard and sharded:
            continue  # one search over every host: said once
        sharded = sharded or bool(shard)
        host_rows = rows if shard else [r for r in rows if r["host"] == hdir.name]
        title = f"sharded over {len(shard.hosts)} hosts" if shard else hdir.name
        try:
            lines += markdown(title, rec, search.step(rec, host_rows))
        except (KeyError, TypeError, ValueError) as exc:
            raise ServeSystemError(f"{hdir / 'plan.json'}: search: unreadable ({exc!r}): re-plan the run "
                                   "(serve-system plan)") from None
    if not lines:
        return []
    intro = ("Each candidate's path: measured at the search objective's load level, dropped only when "
             "the interval of its difference from the leader (its level adjusted over the pairs the rung "
             "ranks, the search's 5 % split over what it tests) lies wholly beyond the smallest effect on "
             "the worse side (ties survive); the winner is named when its lead over the runner-up "
             "excludes zero.")
    return ["", "## Search", "", intro, "", *lines]


def _header(run: Path, manifest: Manifest, rows: list[Row], gaps: list[str],
            stand_in: str | None) -> list[str]:
    """report.md's title, description, stand-in note, when the run started and ended, what is missing."""
    title = f"{manifest.experiment or run.parent.name}: run {manifest.run_id or run.name}"
    lines = [f"# {title}", ""]
    if manifest.description:
        lines += [str(manifest.description).strip(), ""]
    if stand_in:
        lines += [f"> **Stand-in model.** {stand_in} Latencies and batching are real; predictions are not.",
                  ""]
    if manifest.start:
        hosts = manifest.hosts or sorted({r["host"] for r in rows})
        # each host writes host.json (with its end time) when its part of the run is over
        ends = {h: runs.host_end(run, str(h)) for h in hosts}
        finished = [e for e in ends.values() if e]
        if finished and len(finished) == len(hosts):
            ended = max(finished)
        else:
            ended = "(not finished on " + ", ".join(h for h, e in ends.items() if not e) + ")"
        lines += [f"Started {manifest.start}, ended {ended}; hosts: {', '.join(hosts)}.", ""]
    if gaps:
        lines += [f"> **Interrupted run, reported with --partial.** Missing: {', '.join(gaps)}.", ""]
    return lines


def _measurements(rows: list[Row]) -> list[str]:
    """## Measurements: one line per host x variant x load x repetition."""
    lines: list[str] = []
    lines += ["## Measurements", "",
              ("| host | variant | load | rep | status | throughput/s | avg ms | p95 ms | p99 ms | "
               "queue ms | infer ms | avg batch | util |"),
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        util, busiest = r.get("gpu_util"), r.get("gpu_util_max")
        if util is not None:
            util_s = f"GPU {util * 100:.0f}%" + (f" (busiest {busiest * 100:.0f}%)" if busiest is not None
                                                 else "")
        else:
            util_s = f"CPU {r['cpu_util'] * 100:.0f}%" if r.get("cpu_util") is not None else "-"
        ms = ms_cells(r)
        mode = r.get("mode")
        load = f"{mode[:4] if mode else ''} {cell(r.get('load'))}".strip()
        lines.append(f"| {r['host']} | {r['variant']} | {load} | {cell(r.get('repetition'))} | {r['status']}"
                     f"{' (retried)' if r.get('retried') else ''} | {cell(r.get('throughput'))} | "
                     f"{ms('latency_avg_us')} | "
                     f"{ms('p95_us')} | {ms('p99_us')} | {ms('queue_us')} | {ms('compute_infer_us')} | "
                     f"{cell(r.get('avg_batch_size'), 2)} | {util_s} |")
    return lines


def write_report(run_dir: str | Path, partial: bool = False,
                 drawing: drawingmod.Drawing | None = None) -> Reported:
    """Check the run folder, then write summary.csv/json, plots and report.md; return what was written.
    The plots are drawn by ``drawing`` (default: a :class:`.drawing.Drawing` made here), given a host's
    as soon as its rows are read, while this process reads on and does the rest; nothing is written
    before the run is checked."""
    if drawing is None:
        with drawingmod.Drawing() as own:
            return write_report(run_dir, partial, own)
    skipped: list[str] = []

    def draw_host(host: str, host_rows: list[Row]) -> None:  # drawn while the next hosts are read
        to_draw, why = plotsmod.host_plots(host, host_rows)
        drawing.start(to_draw)
        skipped.extend(why)

    run, manifest, rows, gaps = runs.check_run(run_dir, partial, each_host=draw_host)
    shard = shardres.read(run, manifest)
    to_draw, why = plotsmod.run_plots(run, rows)
    drawing.start(to_draw)
    skipped += why
    objectives = manifest.objectives  # checked and completed by check_run
    smallest = manifest.smallest_effect
    winners = [best(rows, o) for o in objectives]
    looks = runs.plan_looks(run)
    judged = why_.set_aside(rows) if looks is not None else rows  # auto measured contended levels again
    found = fnd.evaluate(judged, res.variant_setups(run), objectives, smallest, looks)
    ranked_by = list(dict.fromkeys(o.metric for o in objectives))
    sharded = shardres.analyse(rows, shard, ranked_by, smallest) if shard else None
    # the plots are the first files written (the summaries are not written when plots/ is refused)
    plots = drawing.files(run / "plots")
    outcome: Outcome = {"best": [None if w is None else w.to_json() for w in winners],
                           "findings": [f.to_json() for f in found], "missing": gaps,
                           "shard": None if sharded is None else sharded.to_json()}
    csv_path, json_path = write_summary(run, rows, outcome)
    stand_in = manifest.stand_in or next((r["stand_in"] for r in rows if r.get("stand_in")), None)
    lines = _header(run, manifest, rows, gaps, stand_in)
    lines += contention_note(rows, looks is not None)
    # an objective after one that named no winner is not judged (the best variant's fixed sequence)
    unjudged = {ev.objective for f in found for ev in f.evidence
                if isinstance(ev, BestEvidence) and ev.verdict == bestmod.NOT_JUDGED}
    lines += ["## Best variant per objective", ""]
    for o, w in zip(objectives, winners, strict=True):
        if w is None:
            lines.append(f"- **{o.name}** ({_rule(o)}): no measured level qualifies"
                         + why_.unqualified(o, rows, set()))
        else:
            lines.append(f"- **{w.objective}** ({_rule(o)}): `{w.variant}` on {w.host} at "
                         f"{w.mode} {w.load:g} -> {w.metric} = {cell(w.value)} "
                         f"(mean of {w.repetitions})"
                         + (f"; not judged ({bestmod.NOT_JUDGED_WHY})" if w.objective in unjudged
                            else _standing(bestmod.rank(judged, o), smallest, looks)))
    if shard and sharded:
        lines += ["", ("(Sharded run: these compare raw numbers across nodes; see the normalised ranking "
                      "below.)"), "", *shardres.markdown(sharded, rows, shard, objectives)]
    lines += search_section(run, rows)
    lines += ["", *fnd.markdown(found, stand_in, smallest, looks)]
    lines += _per_level(rows)
    lines += _measurements(rows)
    problems = [r for r in rows if r["status"] != Status.OK]
    if problems:
        lines += ["", "## Not measured", ""]
        lines += [f"- {why_.level_failure(r)}" for r in problems]
    adapted = [f"{host}/{variant}: {why_.note(n)}"
               for (host, variant), setup in res.variant_setups(run).items() for n in setup.notes]
    if adapted:
        lines += ["", "## Adapted to the host", ""] + [f"- {n}" for n in adapted]
    if plots or skipped:
        lines += ["", "## Plots", ""] + [f"![{p.stem}](plots/{p.name})" for p in plots]
        if skipped:
            lines += ["", "Not drawn (no data): " + "; ".join(skipped) + "."]
    lines += ["", ("Files: `summary.csv` (one row per host x variant x load x repetition; times in "
                   "microseconds; `windows` and `window_cv`: perf_analyzer's measurement windows and how "
                   "much the last ones varied), `summary_stats.csv` (one row per host x variant x load x "
                   "metric over the repetitions: n, mean, sd, ci_low and ci_high of the 95 % interval "
                   "(Student's t), cv and "
                   "noisy), `summary.json` (the rows, those statistics as `stats`, the best variants and the "
                   "findings with their effects and intervals). Raw perf_analyzer output, stats and metrics "
                   "are under each `<host>/<variant>/<level>/`."), ""]
    md = run / "report.md"
    safeio.write_text(md, "\n".join(lines), within=run)
    return {"rows": len(rows), "summary_csv": str(csv_path), "summary_json": str(json_path),
            "report": str(md),
            "plots": [str(p) for p in plots], "skipped": skipped, "best": winners, "findings": found,
            "missing": gaps}
