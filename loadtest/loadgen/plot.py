"""A PNG of one run: answers and errors per second above, latency (p50, p99, max per second,
log scale) below, the run's events (rebalance, kill, restart, ready...) as labelled lines on both."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: event name -> colour; others grey
COLOURS = {"kill": "tab:red", "signal": "tab:red", "node lost": "tab:red", "volume lost": "tab:red",
           "rolling update": "tab:purple", "scale": "tab:purple", "terminated": "tab:orange",
           "container started": "tab:olive", "ready": "tab:green", "rebalance": "tab:blue",
           "settled": "tab:cyan"}


def plot(timeline: Sequence[dict[str, Any]], events: Sequence[dict[str, Any]], path: Path, title: str) -> Path:
    """``timeline``: Recorder.timeline() rows (t in seconds); ``events``: {"t", "event", "pod"}
    on the same time base. Small (about 60 KB) so it can be committed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [r["t"] for r in timeline]
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(9, 5), dpi=80)
    top.plot(t, [r["ok"] for r in timeline], label="answers/s", color="tab:blue", lw=1)
    top.plot(t, [r["stale"] for r in timeline], label="stale (flagged)/s", color="tab:orange", lw=1)
    top.plot(t, [r["errors"] for r in timeline], label="errors/s", color="tab:red", lw=1)
    top.set_ylabel("per second")
    top.legend(loc="upper left", fontsize=7)
    for key, colour in (("p50_ms", "tab:green"), ("p99_ms", "tab:orange"), ("max_ms", "tab:red")):
        pts = [(r["t"], r[key]) for r in timeline if r[key] is not None]
        bottom.plot([p[0] for p in pts], [p[1] for p in pts], label=key.replace("_ms", ""), color=colour, lw=1)
    bottom.set_yscale("log")
    bottom.set_ylabel("latency (ms)")
    bottom.set_xlabel("seconds")
    bottom.legend(loc="upper left", fontsize=7)
    top_y = top.get_ylim()[1]
    for e in events:
        colour = COLOURS.get(e["event"], "grey")
        for ax in (top, bottom):
            ax.axvline(e["t"], color=colour, lw=0.7, ls="--", alpha=0.7)
        label = f"{e['event']} {e.get('pod', '')}".strip()
        top.text(e["t"], top_y, label, rotation=90, fontsize=6, va="top", ha="right", color=colour)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
