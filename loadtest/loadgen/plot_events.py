"""The run's events on the plot: a dashed line each on both axes, numbered in time order; the
numbers sit above the upper axes, staggered in rows so none covers another (events closer than a
label's width share one, "4-7"), and the key beside the plots says what each number was."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backend_bases import RendererBase
from matplotlib.text import Annotation

#: event name -> colour; others grey
COLOURS = {"kill": "tab:red", "signal": "tab:red", "node lost": "tab:red", "volume lost": "tab:red",
           "rolling update": "tab:purple", "scale": "tab:purple", "terminated": "tab:orange",
           "container started": "tab:olive", "ready": "tab:green", "rebalance": "tab:blue",
           "unserved": "tab:brown", "served": "tab:cyan", "settled": "tab:cyan", "step": "black"}
#: the scenario's own marks and the watcher's: a group's label takes another member's colour
QUIET = frozenset({"step", "served", "unserved"})
#: rows of numbers above the upper axes, and the step between them (in that axes' height)
ROWS, ROW_STEP, FIRST_ROW = 4, 0.085, 1.025
LABEL_SIZE = 10
#: pixels kept free between two numbers in one row
GAP_PX = 6


@dataclass(frozen=True)
class Marker:
    n: int
    t: float
    event: str
    pod: str
    colour: str

    def key_text(self) -> str:
        """What the key says after the number: time and what happened (at most 40 characters)."""
        return f"{self.t:6.1f} s  {self.event} {self.pod}".rstrip()[:40]


def markers(events: Sequence[Mapping[str, Any]]) -> list[Marker]:
    """The events in time order, numbered from 1."""
    ordered = sorted(events, key=lambda e: float(e["t"]))
    return [Marker(i, float(e["t"]), str(e["event"]), str(e.get("pod") or ""), COLOURS.get(str(e["event"]), "grey"))
            for i, e in enumerate(ordered, 1)]


def draw_lines(axes: Sequence[Axes], marks: Sequence[Marker]) -> None:
    for m in marks:
        for ax in axes:
            ax.axvline(m.t, color=m.colour, lw=1.0, ls="--", alpha=0.75, zorder=1)


def _groups(top: Axes, marks: Sequence[Marker], min_px: float) -> list[list[Marker]]:
    """Markers closer on screen than ``min_px`` to the first of a group join that group."""
    out: list[list[Marker]] = []
    for m in marks:
        x = top.transData.transform((m.t, 0))[0]
        if out and x - top.transData.transform((out[-1][0].t, 0))[0] < min_px:
            out[-1].append(m)
        else:
            out.append([m])
    return out


def _overlap(row: Sequence[tuple[float, float]], lo: float, hi: float) -> float:
    """Pixels of (lo, hi) the labels of ``row`` cover."""
    return sum(max(0.0, min(hi, b) - max(lo, a)) for a, b in row)


def draw_numbers(top: Axes, marks: Sequence[Marker], renderer: RendererBase) -> list[Annotation]:
    """The numbers above ``top`` (its x limits set), each in the first row where it covers no
    other; the row where it covers least when every row is taken."""
    placed: list[list[tuple[float, float]]] = [[] for _ in range(ROWS)]
    labels: list[Annotation] = []
    for group in _groups(top, marks, 2.2 * LABEL_SIZE):
        first, last = group[0], group[-1]
        text = str(first.n) if first is last else f"{first.n}-{last.n}"
        # a group takes the colour of what happened to the cluster, not of the scenario's own marks
        colour = next((m.colour for m in group if m.event not in QUIET), first.colour)
        label = top.annotate(text, (first.t, FIRST_ROW), xycoords=("data", "axes fraction"), ha="center",
                             va="bottom", fontsize=LABEL_SIZE, color="white", fontweight="bold", annotation_clip=False,
                             bbox={"boxstyle": "round,pad=0.25", "fc": colour, "ec": "none", "alpha": 0.9})
        box = label.get_window_extent(renderer)
        covered = [_overlap(row, box.x0 - GAP_PX, box.x1 + GAP_PX) for row in placed]
        row = next((r for r in range(ROWS) if covered[r] == 0), min(range(ROWS), key=covered.__getitem__))
        label.xy = label.xyann = (first.t, FIRST_ROW + row * ROW_STEP)  # the point and the text
        placed[row].append((box.x0, box.x1))
        labels.append(label)
    return labels
