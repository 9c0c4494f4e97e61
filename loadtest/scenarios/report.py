"""The table of a set of scenario results (Markdown), one row per scenario."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

COLUMNS = ("scenario", "queries", "failed", "stale (flagged)", "unflagged stale", "max stale lag (records)",
           "max staleness (s)", "p50 / p99 / p99.9 / max (ms)", "action (s)", "settled after (s)", "unserved (s)",
           "records restored", "records lost", "double-counted", "counts exact")


def row(r: dict[str, Any]) -> list[str]:
    if "error" in r:
        return [r["scenario"], f"run failed: {r['error']}", *[""] * (len(COLUMNS) - 2)]
    load = r.get("load", {})
    lat = load.get("latency_ms", {})
    failed = load.get("failed", "?")
    if load.get("errors"):
        failed = f"{failed} ({', '.join(f'{k}: {v}' for k, v in load['errors'].items())})"
    return [r["scenario"], str(load.get("requests", "?")), str(failed),
            f"{load.get('stale_flagged', '?')} ({100 * load.get('stale_fraction', 0):.2f}%)",
            str(load.get("stale_unflagged", "?")), str(load.get("max_stale_lag_records", "?")),
            str(load.get("max_staleness_s", "?")),
            " / ".join(f"{lat.get(k, 0):.1f}" for k in ("p50", "p99", "p99.9", "max")),
            str(r.get("action_s")), str(r.get("settled_s")), str(r.get("unserved_s")), str(r.get("records_restored")),
            str(r.get("records_lost")), str(r.get("records_double_counted")),
            "yes" if r.get("counts_exact") else f"no (after {r.get('settings', {}).get('timeout')} s)"]


def table(results: Sequence[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row(r)) + " |" for r in results]
    return "\n".join(lines) + "\n"
