"""What the plot says in words, in the panel beside it: a summary of the run (queries, failed,
latency percentiles, stale answers), what a stale answer is and why they come in bumps, and the
key of the numbered events (plot_events.py)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.offsetbox import AnchoredOffsetbox, HPacker, PaddedBox, TextArea, VPacker

from loadtest.loadgen.plot_events import Marker

SIZE = 10
STALE_NOTE = ("Stale (flagged): answered by a standby or a restoring replica, as allow_stale permits; the "
              "answer is marked stale and says how far behind it is. They come in bumps while a rebalance "
              "or a restore moves a partition's active (a pod stopping, starting or joining): reads in "
              "between are served by its standby. Unflagged stale (a count going back without the flag) "
              "would be a defect.")
#: characters per line of the wrapped note
WRAP = 50


def _ms(v: Any) -> str:
    if not isinstance(v, int | float):
        return "?"
    return f"{v:.1f}" if v < 10 else f"{v:,.0f}"


def summary_text(summary: Mapping[str, Any] | None, timeline: Sequence[Mapping[str, Any]]) -> str:
    """The run in a few lines: queries, failed (and the first statuses), p50/p99, p99.9/max, stale
    (flagged) with its share of the answers, unflagged stale. Without ``summary`` (the
    recorder's), what the timeline's rows add up to, and no percentiles (rows keep only their own)."""
    no_latency = "(none recorded)"
    if summary is None:
        ok, failed, stale = (sum(int(r[k]) for r in timeline) for k in ("ok", "errors", "stale"))
        summary = {"requests": ok + failed, "failed": failed, "stale_flagged": stale,
                   "stale_fraction": stale / ok if ok else 0.0}
        no_latency = "(in result.json)"
    lat = summary.get("latency_ms") or {}
    lines = [f"queries          {summary.get('requests', '?')}", f"failed           {summary.get('failed', '?')}"]
    errors = list((summary.get("errors") or {}).items())
    lines += [f"  {status[:30]}: {n}" for status, n in errors[:2]]
    if len(errors) > 2:
        lines.append(f"  and {len(errors) - 2} other statuses")
    if lat:
        lines += [f"p50 / p99        {_ms(lat.get('p50'))} / {_ms(lat.get('p99'))} ms",
                  f"p99.9 / max      {_ms(lat.get('p99.9'))} / {_ms(lat.get('max'))} ms"]
    else:
        lines.append(f"p50 / p99        {no_latency}")
    lines.append(f"stale (flagged)  {summary.get('stale_flagged', '?')} = "
                 f"{100 * float(summary.get('stale_fraction') or 0):.2f} % of answers")
    if "stale_unflagged" in summary:
        lines.append(f"unflagged stale  {summary['stale_unflagged']}")
    return "\n".join(lines)


def _text(s: str, **props: Any) -> TextArea:
    return TextArea(s, textprops={"fontsize": SIZE, **props})


def side_panel(side: Axes, summary: str, marks: Sequence[Marker]) -> AnchoredOffsetbox:
    """The panel's contents, top to bottom: the summary in a box, the stale note, the events' key
    (one coloured line per number). ``side``'s own axes are hidden."""
    side.set_axis_off()
    boxed = PaddedBox(_text(summary, family="monospace"), pad=6, draw_frame=True,
                      patch_attrs={"facecolor": "#f4f6fa", "edgecolor": "#8a94a6", "boxstyle": "round,pad=0.3"})
    parts: list[Artist] = [_text("Summary", fontweight="bold"), boxed,
                           _text(textwrap.fill(STALE_NOTE, WRAP), color="#333333", fontsize=SIZE - 0.5)]
    if marks:
        parts.append(_text("Events (numbered on the plots)", fontweight="bold"))
        parts += [HPacker(children=[_text(f"{m.n:>2}", family="monospace", color=m.colour, fontweight="bold"),
                                    _text(m.key_text(), family="monospace", fontsize=SIZE - 1)], pad=0, sep=6)
                  for m in marks]
    box = AnchoredOffsetbox("upper left", child=VPacker(children=parts, align="left", pad=0, sep=5), frameon=False,
                            bbox_to_anchor=(0.0, 1.0), bbox_transform=side.transAxes, borderpad=0)
    side.add_artist(box)
    return box
