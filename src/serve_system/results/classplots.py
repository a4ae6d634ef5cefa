"""A class comparison's box plots (:mod:`.classcmp`): one per metric and load, a box per variant, every
node a point, the outliers named."""

from __future__ import annotations

from pathlib import Path

from .. import metrics, safeio
from .classcmp import Cell, ClassResult
from .classmd import METRIC_NAMES, load_text
from .classstats import METRICS


def box_plots(result: ClassResult, out: Path) -> list[Path]:
    """One PNG per (metric, mode, load): a box per variant with the nodes as points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[tuple[str, str, float], list[Cell]] = {}
    for c in result.cells:
        groups.setdefault((c.metric, c.mode, c.load), []).append(c)
    made = []
    for (metric, mode, load), cs in sorted(groups.items(), key=lambda kv: (METRICS.index(kv[0][0]),
                                                                           kv[0][1], kv[0][2])):
        scale = metrics.get(metric).scale
        fig, ax = plt.subplots(figsize=(max(4.0, 1.4 * len(cs) + 2), 4.2))
        data = [[v / scale for v in c.values.values()] for c in cs]
        ax.boxplot(data, showfliers=False)
        ax.set_xticks(range(1, len(cs) + 1), [c.variant for c in cs], rotation=20)
        for i, c in enumerate(cs, start=1):
            names = list(c.values)
            for j, name in enumerate(names):
                x = i + (j - (len(names) - 1) / 2) * min(0.3 / max(len(names), 1), 0.04)
                y = c.values[name] / scale
                bad = name in c.outliers
                ax.plot(x, y, "o", color="tab:red" if bad else "tab:blue", alpha=0.9 if bad else 0.5,
                        markersize=5 if bad else 3)
                if bad:
                    ax.annotate(name, (x, y), textcoords="offset points", xytext=(5, 3), fontsize=8,
                                color="tab:red")
        ax.set_ylabel(METRIC_NAMES[metric])
        ax.set_title(f"{METRIC_NAMES[metric]} across nodes at {load_text(mode, load)}")
        fig.tight_layout()
        path = out / "plots" / safeio.plain_name(f"box_{metric}_{mode}_{load:g}.png", f"--out {out}", "plot")
        with safeio.open_write(path, within=out, binary=True) as fh:  # never through a link
            fig.savefig(fh, dpi=100, format="png")
        plt.close(fig)
        made.append(path)
    return made
