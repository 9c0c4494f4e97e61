"""The chaos table (Markdown) and short log excerpts of failing runs."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from loadtest.chaos.result import RunResult

COLUMNS = ["scenario", "guarantee", "runs", "converged", "max s to converge", "records lost",
           "records double-counted", "queries failed", "stale answers flagged", "stale answers unflagged",
           "restored at takeover / written since last commit", "longest pause of a member that stayed (s)"]

_NOTEWORTHY = re.compile(r"Traceback|Error|error|Exception|WARNING|state \w+ -> |restore-end|rejoin|"
                         r"removed|fenced|stopped")


def table(results: Iterable[RunResult]) -> str:
    """One row per (scenario, guarantee), in order of first appearance; sums over the runs."""
    groups: dict[tuple[str, str], list[RunResult]] = {}
    for r in results:
        groups.setdefault((r.scenario, r.guarantee), []).append(r)
    rows = [COLUMNS, ["---"] * len(COLUMNS)]
    for (scenario, guarantee), rs in groups.items():
        times = [r.converge_s for r in rs if r.converged and r.converge_s is not None]
        takeover = [f"{r.restored_at_takeover} / {r.since_last_commit}" for r in rs
                    if r.restored_at_takeover is not None or r.since_last_commit is not None]
        rows.append([
            scenario, guarantee, str(len(rs)), f"{sum(r.converged for r in rs)}/{len(rs)}",
            f"{max(times):.1f}" if times else "-",
            str(sum(r.lost for r in rs)), str(sum(r.double_counted for r in rs)),
            f"{sum(r.queries_failed for r in rs)} of {sum(r.queries for r in rs)}",
            str(sum(r.stale_flagged for r in rs)), str(sum(r.stale_unflagged for r in rs)),
            ", ".join(takeover),
            max((f"{r.pause_s:.1f}" for r in rs if r.pause_s is not None), key=float, default="-"),
        ])
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)


def describe(r: RunResult) -> str:
    """One paragraph about a run: what happened and what went wrong."""
    head = (f"{r.scenario} / {r.guarantee} seed {r.seed} ({r.application_id}): {r.lines} lines, "
            f"action on {r.victim or '-'} at {'-' if r.action_at_s is None else r.action_at_s}s into the input, "
            + (f"converged in {r.converge_s}s" if r.converged else "not converged"))
    parts = [head]
    parts += [f"  ! {v}" for v in r.violations()]
    if r.failure_reasons:
        parts.append(f"  failed queries by reason: {r.failure_reasons}")
    parts += [f"  unflagged stale: {e}" for e in r.unflagged_examples]
    if r.restored_any_partition is not None:
        parts.append(f"  restored after the kill: {r.restored_at_takeover} into the victim's partitions, "
                     f"{r.restored_any_partition} in all")
    parts += [f"  note: {n}" for n in r.notes]
    return "\n".join(parts)


def log_excerpt(logs_dir: Path, tail: int = 8, noteworthy: int = 12) -> str:
    """For each instance log under ``logs_dir``: its noteworthy lines (state changes, errors,
    restores; the last ``noteworthy`` of them) and its last ``tail`` lines."""
    out = []
    for log in sorted(logs_dir.glob("*/instance.log")):
        lines = log.read_text(errors="replace").splitlines()
        marked = [x for x in lines if _NOTEWORTHY.search(x)][-noteworthy:]
        out.append(f"--- {log.parent.name} ({len(lines)} lines)")
        out += [f"    {x[:200]}" for x in marked]
        out.append("    ...")
        out += [f"    {x[:200]}" for x in lines[-tail:] if x not in marked]
    return "\n".join(out)
