"""The load generator's and the scenarios' plot, read from the matplotlib Figure it is drawn as
(no OCR) and from the PNG it is saved as: large enough to read (pixels, dots per inch, font
sizes), every event numbered once with no number covering another and each in the key, no drop
to 0 answers/s for the second the run ended in, p99 drawn over the max, plain-number log ticks,
the summary box (queries, failed, p50/p99, stale %) and the note on stale answers."""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Annotation, Text
from PIL import Image

from loadtest.loadgen.plot import figure, plot
from loadtest.loadgen.recorder import Answer, Recorder

RATE = 20
#: a rolling update's marks, as loadtest.scenarios sends them: several within a second or two
EVENTS = [
    {"t": 3.31, "event": "step", "pod": ""}, {"t": 3.31, "event": "rolling update", "pod": "iqmesh"},
    {"t": 3.32, "event": "unserved", "pod": ""}, {"t": 3.62, "event": "terminated", "pod": "iqmesh-2"},
    {"t": 3.83, "event": "served", "pod": ""}, {"t": 4.33, "event": "unserved", "pod": ""},
    {"t": 5.0, "event": "ready", "pod": "iqmesh-2"}, {"t": 5.4, "event": "served", "pod": ""},
    {"t": 7.9, "event": "terminated", "pod": "iqmesh-1"}, {"t": 8.1, "event": "rebalance", "pod": ""},
    {"t": 8.3, "event": "unserved", "pod": ""}, {"t": 8.6, "event": "served", "pod": ""},
    {"t": 9.0, "event": "ready", "pod": "iqmesh-1"}, {"t": 9.1, "event": "terminated", "pod": "iqmesh-0"},
]


def run_record(seconds: float = 12.5) -> tuple[Recorder, dict[str, Any]]:
    """A run at RATE answers a second until ``seconds`` (the schedule ended mid-second): fast
    answers (2 ms, one of 20 at 40 ms so p99 = max each second), stale bumps, two failures."""
    rec = Recorder()
    t0 = rec.started_wall
    n = int(seconds * RATE)
    for i in range(n):
        at = t0 + i / RATE
        if i in (55, 56):
            rec.failed("UNAVAILABLE REBALANCING", 0.5, at)
            continue
        stale = 60 <= i < 110  # a bump while a partition's active moved
        rec.answered("k", Answer(i, stale, 3 if stale else 0), 0.04 if i % RATE == 7 else 0.002, at)
    rec.end(t0 + seconds)
    summary = rec.summary()
    return rec, {**summary, "timeline": rec.timeline()}


def _axes(fig: Figure, ylabel: str) -> Axes:
    return next(ax for ax in fig.axes if ax.get_ylabel() == ylabel)


def _line(ax: Axes, label: str) -> Line2D:
    return next(line for line in ax.get_lines() if line.get_label() == label)


def _size(t: Text) -> float:
    return float(t.get_fontsize())


def _ys(line: Line2D) -> list[float]:
    return [float(v) for v in np.asarray(line.get_ydata())]


def _legend(ax: Axes) -> list[Text]:
    legend = ax.get_legend()
    assert legend is not None, ax.get_ylabel()
    return list(legend.get_texts())


def _texts(where: Figure | Axes) -> list[Text]:
    return [t for t in where.findobj(Text) if isinstance(t, Text) and t.get_text().strip()]


def _side(fig: Figure) -> Axes:
    """The panel beside the plots (its axes hidden): summary, note, the events' key."""
    return next(ax for ax in fig.axes if not ax.axison)


def _renderer(fig: Figure) -> RendererAgg:
    """The figure drawn (so every box has its place), and the renderer it was drawn with."""
    canvas = fig.canvas
    assert isinstance(canvas, FigureCanvasAgg)
    canvas.draw()
    return canvas.get_renderer()


def test_the_second_the_run_ended_in_is_marked_partial() -> None:
    rec, _ = run_record(12.5)
    rows = rec.timeline()
    assert [r["t"] for r in rows if not r["partial"]] == list(range(12))  # 12.0-12.5 s was run only in part
    assert [r["t"] for r in rows if r["partial"]] == [12] and rows[-1]["ok"] < RATE
    assert min(r["ok"] + r["errors"] for r in rows if not r["partial"]) == RATE
    assert sum(r["ok"] + r["errors"] for r in rows) == rec.total  # the rows still add up
    # without an end (a recorder fed by hand) no second is partial
    rec.ended_wall = None
    assert not any(r["partial"] for r in rec.timeline())


def test_the_figure_is_large_and_says_what_it_shows(tmp_path: Path) -> None:
    _, result = run_record()
    fig = figure(result["timeline"], EVENTS, "rolling-update on dev", result)
    width, height = fig.get_size_inches() * fig.dpi
    assert fig.dpi >= 100 and width >= 1400 and height >= 800, (fig.dpi, width, height)
    top, bottom = _axes(fig, "per second"), _axes(fig, "latency (ms)")
    for ax in (top, bottom):
        assert min(_size(t) for t in _legend(ax)) >= 10
        assert _size(ax.yaxis.label) >= 12
        assert min(_size(t) for t in ax.get_yticklabels()) >= 10
    assert [t.get_text() for t in _legend(top)][0] == "answers/s"
    assert {t.get_text() for t in _legend(bottom)} == {"p50", "p99", "max (each second)"}

    # the run ended mid-second: no last point at a fraction of the rate
    answers = _ys(_line(top, "answers/s"))
    assert len(answers) == 12 and min(answers[-3:]) == RATE, answers

    # p99 meets the max every second here: it is drawn over it, the max as dots beneath
    p99, peak, p50 = _line(bottom, "p99"), _line(bottom, "max (each second)"), _line(bottom, "p50")
    assert _ys(p99) == _ys(peak)
    assert p99.get_zorder() > peak.get_zorder() and p99.get_linewidth() >= p50.get_linewidth()
    assert peak.get_linestyle() == "None" and peak.get_marker() not in (None, "None", "")

    # log ticks are plain numbers (no 6x10^0)
    fig.canvas.draw()
    ticks = [t.get_text() for t in bottom.get_yticklabels() if t.get_visible() and t.get_text()]
    assert ticks and all(re.fullmatch(r"[0-9][0-9,]*(\.[0-9]+)?", t) for t in ticks), ticks
    assert bottom.get_yscale() == "log"

    # the summary box and the note on stale answers, in the figure
    texts = [t.get_text() for t in _texts(fig)]
    summary = next(t for t in texts if "p50 / p99" in t)
    assert re.search(r"queries\s+250\b", summary) and re.search(r"failed\s+2\b", summary), summary
    assert "2.0 / 40 ms" in summary, summary
    stale = result["stale_flagged"]
    assert re.search(rf"stale \(flagged\)\s+{stale} = {100 * stale / result['ok']:.2f} %", summary), summary
    note = next(t for t in texts if t.startswith("Stale (flagged)"))
    assert all(w in note for w in ("standby", "restoring", "rebalance", "restore")), note


def test_event_numbers_do_not_cover_one_another_and_each_is_in_the_key() -> None:
    _, result = run_record()
    fig = figure(result["timeline"], EVENTS, "rolling-update on dev", result)
    renderer = _renderer(fig)
    top = _axes(fig, "per second")
    labels = [t for t in top.texts if isinstance(t, Annotation)]
    numbered: list[int] = []
    boxes = []
    for label in labels:
        assert label.get_rotation() == 0 and _size(label) >= 10
        first, _, last = label.get_text().partition("-")
        numbered += range(int(first), int(last or first) + 1)
        patch = label.get_bbox_patch()
        assert patch is not None
        boxes.append(patch.get_window_extent(renderer))
    assert sorted(numbered) == list(range(1, len(EVENTS) + 1))  # each event numbered, once
    assert len(labels) > 3  # not all in one label: only those too close to tell apart share one
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not a.overlaps(b), (a, b)
    # every number's line in the key beside the plots: its time and what happened
    texts = [t.get_text() for t in _texts(_side(fig))]
    for n, e in enumerate(sorted(EVENTS, key=lambda e: float(str(e["t"]))), 1):
        assert f"{n:>2}" in texts
        assert any(t.startswith(f"{e['t']:6.1f} s  {e['event']}") for t in texts), (n, e)
    # the dashed lines: one per event on each plot
    for ax in (top, _axes(fig, "latency (ms)")):
        assert sum(1 for line in ax.get_lines() if line.get_linestyle() == "--") == len(EVENTS)


def test_the_png_has_the_figure_s_size_and_stays_small(tmp_path: Path) -> None:
    _, result = run_record()
    path = plot(result["timeline"], EVENTS, tmp_path / "p.png", "rolling-update on dev", result)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])  # IHDR
    assert width >= 1400 and height >= 800, (width, height)
    phys = data.index(b"pHYs")
    ppm = struct.unpack(">I", data[phys + 4:phys + 8])[0]
    assert ppm / 39.3701 == pytest.approx(100, abs=1)  # dots per inch
    assert len(data) < 150_000
    # made small without losing a line's colour: each is in the image, not merged into another
    with Image.open(path) as image:
        colours = [rgb for _, rgb in image.convert("RGB").getcolors(1 << 20) or [] if isinstance(rgb, tuple)]
    for name in ("tab:blue", "tab:orange", "tab:red", "tab:green", "tab:purple"):
        want = [round(255 * c) for c in to_rgb(name)]
        assert min(max(abs(a - b) for a, b in zip(rgb, want, strict=True)) for rgb in colours) <= 3, name


def test_a_long_key_of_events_makes_the_figure_taller_rather_than_run_off_it() -> None:
    _, result = run_record()
    many = [{"t": 0.3 + i * 0.25, "event": "ready" if i % 2 else "served", "pod": f"iqmesh-{i}"} for i in range(45)]
    fig = figure(result["timeline"], many, "scale", result)
    renderer = _renderer(fig)
    height = fig.get_size_inches()[1] * fig.dpi
    key = [t for t in _texts(_side(fig)) if re.fullmatch(r"\s*\d+", t.get_text())]
    assert len(key) == 45
    assert all(t.get_window_extent(renderer).y0 >= 0 for t in key), height


def test_a_run_without_answers_is_drawn_too(tmp_path: Path) -> None:
    rec = Recorder()
    rec.end(rec.started_wall + 0.5)
    fig = figure(rec.timeline(), [], "nothing answered", rec.summary())
    summary = next(t.get_text() for t in _texts(_side(fig)) if "p50 / p99" in t.get_text())
    assert re.search(r"queries\s+0\b", summary) and "(none recorded)" in summary, summary
    assert plot([], [], tmp_path / "empty.png", "nothing", None).stat().st_size > 0
