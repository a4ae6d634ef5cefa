"""Plots drawn: a plot spec (a file name, panels with a title, axes and series: data; :mod:`.plots`
builds them from the rows) drawn with matplotlib's Agg into PNG bytes, and :class:`Drawing`, the
processes that draw a report's plots beside the rest of its work.

Standard library and :mod:`serve_system.safeio` only at import: the drawing processes are forked from
the ``report`` command before it imports what reading a run needs (numpy, scipy, pydantic), and import
matplotlib while it reads the run. Every file is written by the command's own process through safeio.
"""

from __future__ import annotations

import importlib
import io
import multiprocessing
import os
import signal
import textwrap
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Self, TypedDict

from .. import safeio

Kind = Literal["errorbar", "line", "step", "bar", "box", "hline", "span"]


class TitleStyle(TypedDict, total=False):
    """A panel title's matplotlib keyword arguments (its font size also fits the title to the panel)."""

    fontsize: float
    pad: float


@dataclass
class Series:
    """One thing drawn on a panel; ``style``: matplotlib's keyword arguments for it."""

    kind: Kind
    x: list[Any] = field(default_factory=list)
    y: list[Any] = field(default_factory=list)
    label: str | None = None
    xerr: Any = None
    yerr: Any = None
    style: dict[str, object] = field(default_factory=dict)
    #: (text, x, y): a small label beside a point
    notes: list[tuple[str, float, float]] = field(default_factory=list)


@dataclass
class Panel:
    """One set of axes: its title, axis labels and scales, ticks and series."""

    title: str
    xlabel: str
    ylabel: str
    series: list[Series]
    title_style: TitleStyle = field(default_factory=lambda: TitleStyle())
    xscale: tuple[str, dict[str, object]] | None = None
    yscale: tuple[str, dict[str, object]] | None = None
    #: (positions, labels, font size or None)
    xticks: tuple[Sequence[float], list[str], float | None] | None = None
    ylim: dict[str, float] | None = None
    grid: dict[str, object] | None = field(default_factory=lambda: dict[str, object](alpha=0.3))
    legend: dict[str, object] | None = None


@dataclass
class Plot:
    """One PNG file: its panels side by side."""

    name: str
    size: tuple[float, float]
    panels: list[Panel]
    widths: list[float] | None = None


def _draw_series(ax: Any, s: Series) -> None:
    if s.kind == "errorbar":
        ax.errorbar(s.x, s.y, xerr=s.xerr, yerr=s.yerr, label=s.label, **s.style)
    elif s.kind == "line":
        ax.plot(s.x, s.y, label=s.label, **s.style)
    elif s.kind == "step":
        ax.step(s.x, s.y, where="post", label=s.label, **s.style)
    elif s.kind == "bar":
        ax.bar(s.x, s.y, yerr=s.yerr, label=s.label, **s.style)
    elif s.kind == "box":
        ax.boxplot(s.y, **s.style)
    elif s.kind == "hline":
        ax.axhline(s.y[0], label=s.label, **s.style)
    elif s.kind == "span":  # a named stretch of the x axis
        ax.axvspan(s.x[0], s.x[1], lw=0, **s.style)
        ax.text((s.x[0] + s.x[1]) / 2, 1.0, s.label, transform=ax.get_xaxis_transform(), ha="center",
                va="bottom", fontsize=7)
    for text, x, y in s.notes:
        ax.annotate(text, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")


def _fitted(title: str, inches: float, fontsize: float) -> str:
    """A title wrapped to the width of its panel (a long host name would run past the figure's edge)."""
    per_line = max(20, int(inches * 72 / (0.6 * fontsize)))
    return "\n".join(textwrap.wrap(title, per_line, break_on_hyphens=False)) or title


#: the resolution of every PNG (dots per inch)
DPI = 110
#: PNG's zlib level: 1 (the fastest) encodes a report's plots in about a third of the time of Pillow's
#: default, 6, for files about 10 % larger
PNG_LEVEL = 1
#: what drawing imports (what a drawing process imports as it starts)
_MATPLOTLIB = ("matplotlib.figure", "matplotlib.backends.backend_agg", "matplotlib.layout_engine")


def render(plot: Plot) -> bytes:
    """A plot spec drawn: its PNG file's bytes."""
    # a Figure on an Agg canvas of its own: no pyplot (its import, its figure manager, its registry of
    # open figures), the same pixels
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    # no layout engine on the figure: with one, savefig draws the whole figure once unrendered to lay it
    # out, then again; the constrained layout is run once below instead (the same pixels, byte for byte)
    fig = Figure(figsize=plot.size, dpi=DPI)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(plot.panels), squeeze=False,
                        gridspec_kw={"width_ratios": plot.widths} if plot.widths else None)
    ratios = plot.widths or [1.0] * len(plot.panels)
    for ax, p, share in zip(axes[0], plot.panels, ratios, strict=True):
        for s in p.series:
            _draw_series(ax, s)
        if p.xscale:
            ax.set_xscale(p.xscale[0], **p.xscale[1])
        if p.yscale:
            ax.set_yscale(p.yscale[0], **p.yscale[1])
        if p.xticks:
            ax.set_xticks(p.xticks[0], p.xticks[1], **({"fontsize": p.xticks[2]} if p.xticks[2] else {}))
        if p.ylim:
            ax.set_ylim(**p.ylim)
        ax.set_xlabel(p.xlabel)
        ax.set_ylabel(p.ylabel)
        ax.set_title(_fitted(p.title, plot.size[0] * share / sum(ratios), p.title_style.get("fontsize", 12)),
                     **p.title_style)
        if p.grid is not None:
            ax.grid(**p.grid)
        if p.legend is not None:
            ax.legend(**p.legend)
    ConstrainedLayoutEngine().execute(fig)
    out = io.BytesIO()
    fig.savefig(out, dpi=DPI, format="png", pil_kwargs={"compress_level": PNG_LEVEL})
    return out.getvalue()


def _write(plot: Plot, png: bytes, folder: Path) -> Path:
    """A plot's PNG written into ``folder`` (made first; never through a link)."""
    path = folder / safeio.plain_name(plot.name, str(folder), "plot name")
    return safeio.write_bytes(path, png, within=folder.parent)


def draw(plot: Plot, folder: Path) -> Path:
    """Draw a plot spec into ``folder`` (never through a link); return the file."""
    return _write(plot, render(plot), folder)


def workers() -> int:
    """The processes to draw in: the CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _worker_start() -> None:
    """A drawing process leaves Ctrl-C to the command (which ends the pool, each process by SIGTERM:
    it writes no file, so nothing is left half-written) and imports matplotlib at once, while the
    command goes on reading the run."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for module in _MATPLOTLIB:
        importlib.import_module(module)


def _one_thread() -> bool:
    """Whether this process runs a single thread, a library's own threads counted: threading does not
    see them (numpy's BLAS starts its pool at import), and a lock one of them holds at the fork stays
    held in the child, which then hangs."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:  # no /proc: what threading knows
        return threading.active_count() == 1


class Drawing:
    """The processes that draw a report's plots while the command does the rest of its work.

    Made first, it forks one process a CPU (``processes``: how many, default :func:`workers`), which
    import matplotlib while the command imports and reads the run; :meth:`start` hands them the plots
    and returns at once; :meth:`files` waits for their PNG bytes and writes them, in the plots' order,
    through safeio: nothing is written before then, so a run refused on the way leaves no file. A
    process is only forked from a process with no other thread, native ones counted (a lock another
    thread held would stay held in the child): with threads, one CPU, or no ``fork``, :meth:`files`
    draws here. Leaving the
    ``with`` block ends the processes."""

    def __init__(self, processes: int | None = None) -> None:
        n = processes or workers()
        self._pool: Any = None
        if n > 1 and "fork" in multiprocessing.get_all_start_methods() and _one_thread():
            self._pool = multiprocessing.get_context("fork").Pool(n, initializer=_worker_start)
        self._plots: list[Plot] = []
        self._pending: list[Any] = []

    @property
    def forked(self) -> bool:
        """Whether the plots are drawn in processes of their own."""
        return self._pool is not None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            if exc[0] is None:
                self._pool.close()
            else:
                self._pool.terminate()
            self._pool.join()

    def start(self, plots: list[Plot]) -> None:
        """Begin drawing ``plots``, after those given before (each process takes the next plot as it
        is free: a host's plots differ in cost)."""
        self._plots += plots
        if self._pool is not None and plots:
            self._pending.append(self._pool.map_async(render, plots, chunksize=1))

    def files(self, folder: Path) -> list[Path]:
        """The plots :meth:`start` was given, written into ``folder`` once drawn; their files, in order."""
        pngs = [png for done in self._pending for png in done.get()] if self._pool is not None \
            else map(render, self._plots)
        return [_write(plot, png, folder) for plot, png in zip(self._plots, pngs, strict=True)]
