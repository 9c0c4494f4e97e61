"""A PNG of one run that reads at a glance: answers, stale answers and errors per second above;
latency below (p50 and p99 as lines over each second's max as dots, so p99 stays visible where
it meets the max; log scale with plain-number ticks); the run's events as numbered dashed lines
(plot_events.py); beside the plots a summary (queries, failed, p50/p99, stale %), what a stale
answer is, and the events' key (plot_text.py).

:func:`figure` builds the matplotlib Figure (what the tests inspect), :func:`plot` saves it. The
rows are whole seconds (the one the run ended in, marked partial by the recorder, is left out), each
drawn at its middle.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from loadtest.loadgen.plot_events import draw_lines, draw_numbers, markers
from loadtest.loadgen.plot_text import side_panel, summary_text

#: inches and dots per inch: 1500 x 850 pixels at least (taller with a long key of events)
WIDTH_IN, HEIGHT_IN, DPI = 15.0, 8.5, 100
TICK_SIZE = 10.5


def plain_number(v: float, _pos: int | None = None) -> str:
    """A log axis' tick as a plain number: 0.5, 2, 50, 1,000 (never 5x10^1)."""
    if v <= 0 or not math.isfinite(v):
        return ""
    return f"{v:,.0f}" if v >= 1 else f"{v:.3g}"


def _throughput(ax: Axes, timeline: Sequence[Mapping[str, Any]]) -> None:
    x = [r["t"] + 0.5 for r in timeline]
    ax.plot(x, [r["ok"] for r in timeline], label="answers/s", color="tab:blue", lw=2, zorder=3)
    ax.plot(x, [r["stale"] for r in timeline], label="stale (flagged)/s, see note", color="tab:orange", lw=1.6,
            zorder=3)
    ax.plot(x, [r["errors"] for r in timeline], label="errors/s", color="tab:red", lw=1.6, zorder=3)
    top = max([1, *(max(r["ok"], r["stale"], r["errors"]) for r in timeline)])
    ax.set_ylim(0, top * 1.3)  # room for the legend above the lines
    ax.set_ylabel("per second")
    ax.legend(loc="upper left", ncols=3, framealpha=0.92)


def _latency(ax: Axes, timeline: Sequence[Mapping[str, Any]]) -> None:
    def points(key: str) -> tuple[list[float], list[float]]:
        pts = [(r["t"] + 0.5, r[key]) for r in timeline if r[key] is not None and r[key] > 0]
        return [p[0] for p in pts], [p[1] for p in pts]
    # max beneath as dots, p99 over it as the thickest line: where they meet, p99 shows
    ax.plot(*points("max_ms"), label="max (each second)", color="tab:red", ls="none", marker="o", ms=3.5,
            alpha=0.65, zorder=2)
    ax.plot(*points("p50_ms"), label="p50", color="tab:green", lw=1.8, zorder=3)
    ax.plot(*points("p99_ms"), label="p99", color="tab:purple", lw=2.4, zorder=4)
    values = [v for key in ("p50_ms", "p99_ms", "max_ms") for v in points(key)[1]]
    ax.set_ylabel("latency (ms)")
    ax.set_xlabel("seconds since the load started")
    if not values:
        return
    ax.set_yscale("log")
    lo, hi = min(values), max(values)
    ax.set_ylim(lo / 1.6, hi * 4)  # room for the legend above the lines
    decades = math.log10(hi * 4) - math.log10(lo / 1.6)
    subs = (1.0, 2.0, 5.0) if decades <= 4 else (1.0,)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.yaxis.set_major_formatter(FuncFormatter(plain_number))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.legend(loc="upper left", ncols=3, framealpha=0.92)


def _fit(fig: Figure, side: Axes, panel: Artist, canvas: FigureCanvasAgg) -> None:
    """Make the figure taller until the panel beside the plots (a long key of events) fits in it."""
    renderer = canvas.get_renderer()
    need, have = panel.get_window_extent(renderer).height, side.get_window_extent(renderer).height
    if need > have:
        width, height = fig.get_size_inches()
        fig.set_size_inches(width, height * need / have + 0.2)


def figure(timeline: Sequence[Mapping[str, Any]], events: Sequence[Mapping[str, Any]], title: str,
           summary: Mapping[str, Any] | None = None) -> Figure:
    """``timeline``: Recorder.timeline() rows (t in seconds); ``events``: {"t", "event", "pod"}
    on the same time base; ``summary``: Recorder.summary() (the box's figures)."""
    import matplotlib

    timeline = [r for r in timeline if not r.get("partial")]  # a second run in part is no drop
    end = max([1.0, *(r["t"] + 1.0 for r in timeline)]) if timeline else None
    # events while the load ran (the cluster's start and teardown are not the run's)
    marks = markers([e for e in events if 0 <= e["t"] <= (end + 1.0 if end is not None else math.inf)])
    with matplotlib.rc_context({"font.size": 11, "axes.labelsize": 12, "legend.fontsize": 10.5}):
        fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
        canvas = FigureCanvasAgg(fig)
        grid = fig.add_gridspec(2, 2, width_ratios=(3.0, 1.05), left=0.07, right=0.985, bottom=0.075,
                                top=0.86, hspace=0.12, wspace=0.06)
        side = fig.add_subplot(grid[:, 1])
        panel = side_panel(side, summary_text(summary, timeline), marks)
        _fit(fig, side, panel, canvas)
        top = fig.add_subplot(grid[0, 0])
        bottom = fig.add_subplot(grid[1, 0], sharex=top)
        top.tick_params(labelbottom=False)
        _throughput(top, timeline)
        _latency(bottom, timeline)
        top.set_xlim(0, max([end or 1.0, *(m.t for m in marks)]) * 1.01)
        for ax in (top, bottom):
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=TICK_SIZE)
        draw_lines((top, bottom), marks)
        draw_numbers(top, marks, canvas.get_renderer())
        fig.suptitle(title, fontsize=14, fontweight="bold", y=0.985)
    return fig


def plot(timeline: Sequence[Mapping[str, Any]], events: Sequence[Mapping[str, Any]], path: Path, title: str,
         summary: Mapping[str, Any] | None = None) -> Path:
    """The figure as a PNG at ``path``, in 256 colours (under 100 KB: small enough to commit)."""
    from PIL import Image

    buffer = io.BytesIO()
    figure(timeline, events, title, summary).savefig(buffer, format="png", dpi=DPI)
    buffer.seek(0)
    path.parent.mkdir(parents=True, exist_ok=True)
    with Image.open(buffer) as image:
        # an octree keeps each line's exact colour, however few its pixels (median cut merged
        # orange into red)
        image.convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(
            path, format="PNG", optimize=True, dpi=(DPI, DPI))
    return path
