"""A search's ``### Search`` lines in report.md (stage 5): its path, the rule that decided it, the
winner with its interval, or the tie."""

from __future__ import annotations

from ..experiment.search import OPTUNA
from ..node.plans import SearchPlan
from .searchrule import Outcome, result_text


def markdown(host: str, rec: SearchPlan, out: Outcome) -> list[str]:
    """A host's ``### Search`` lines: the path (each candidate, its rung, value, why dropped or kept),
    then the winner with its interval, or the tie."""
    goal = rec.objective
    metric = goal.metric
    bound = "; ".join(f"{m} {k} {v:g}" for m, b in goal.constraints.items()
                      for k, v in (("max", b.max), ("min", b.min)) if v is not None)
    budget = ", ".join(f"{v:g} {k}" for k, v in (("runs", rec.budget.runs), ("minutes", rec.budget.minutes))
                       if v is not None)
    unit = "batch" if rec.strategy == OPTUNA else "rung"
    lines = [f"### {host}: {rec.strategy}", "",
             f"{goal.goal} {metric} at load {float(goal.at_load or 0):g}"
             + (f" subject to {bound}" if bound else "") + f"; budget {budget or 'none'}; "
             f"{len(rec.candidates)} candidates; used {out.runs} perf_analyzer run(s), "
             f"{out.minutes:.1f} measured minutes. "
             + ("Status: **decided**." if out.decided else f"Status: under way ({out.text})."), "",
             *([out.rule, ""] if out.rule else [])]
    shard = rec.shard
    if shard:
        lines += [(f"Each candidate measured on one host, the reference `{shard.reference}` on every "
                   f"host in every rung; a candidate's {metric} is read relative to its own host's reference "
                   "(on the log scale, scaled to the reference's mean over the hosts), and a comparison "
                   "across hosts carries the two references' uncertainty too."), ""]
    lines += [(f"| candidate |{' host |' if shard else ''} {unit} | n | {metric} mean [95 % interval] | "
               "dropped after | why |"), "|---|" + ("---|" if shard else "") + "---|---|---|---|---|"]

    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:,.1f}"

    for e in sorted(out.path, key=lambda e: (e.dropped is not None, -(e.dropped or 0), -e.rung, e.name)):
        ci = f" [{num(e.low)}, {num(e.high)}]" if e.low is not None else ""
        where = f" {e.host} |" if shard else ""
        lines.append(f"| `{e.name}` |{where} {e.rung} | {e.n} | {num(e.mean)}{ci} | "
                     f"{'-' if e.dropped is None else f'{unit} {e.dropped}'} | {e.why.replace('|', '/')} |")
    if out.decided:
        lines += ["", ("**Winner**: " if out.winner else "**Result**: ") + result_text(out) + "."]
        if out.winner:
            w = next(e for e in out.path if e.name == out.winner)
            lines[-1] += f" Its {metric}: {num(w.mean)} [{num(w.low)}, {num(w.high)}], n = {w.n}."
    return lines + [""]
