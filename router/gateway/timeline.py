"""What happened to the cluster, read from two routing tables in a row: instances that joined or
disappeared (a crash or a stop: no heartbeat any more), rebalances, and restores starting and
ending. The dashboard marks them on its charts and lists them.

The gateway sees only what its snapshots (about one a second) show: a rebalance shorter than
the interval between two of them is not seen.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

#: kinds, in the order the dashboard's legend lists them
KINDS = ("joined", "gone", "rebalance", "restore", "restored", "error")


@dataclass(frozen=True)
class ClusterEvent:
    at: float  # wall clock, seconds (the snapshot that showed it)
    kind: str  # one of KINDS
    instance: str
    text: str

    def to_json(self) -> dict[str, Any]:
        """``at_ms`` as the snapshot's own (so a chart's point and its marker line up)."""
        return {**asdict(self), "at_ms": int(self.at * 1000)}


def _live(md: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {i["instance_id"]: i for i in md.get("instances", []) if i.get("alive")}


def changes(before: dict[str, Any], after: dict[str, Any], at: float) -> list[ClusterEvent]:
    """The events between two routing tables (JSON, as snapshot.metadata_to_json gives them)."""
    old, new = _live(before), _live(after)
    known = {i["instance_id"]: i for i in after.get("instances", [])}
    out: list[ClusterEvent] = []
    for iid in sorted(new.keys() - old.keys()):
        out.append(ClusterEvent(at, "joined", iid, f"{iid} joined ({new[iid]['state']})"))
    for iid in sorted(old.keys() - new.keys()):
        last = known.get(iid)
        why = f"last state {last['state']}, heartbeat {last['heartbeat_age_ms'] / 1000:.1f} s old" if last \
            else "no longer listed"
        out.append(ClusterEvent(at, "gone", iid, f"{iid} disappeared ({why})"))
    for iid in sorted(old.keys() & new.keys()):
        a, b = old[iid], new[iid]
        if b["state"] != a["state"]:
            if b["state"] == "REBALANCING":
                out.append(ClusterEvent(at, "rebalance", iid, f"{iid} rebalancing (was {a['state']})"))
            elif b["state"] == "ERROR":
                out.append(ClusterEvent(at, "error", iid, f"{iid} in ERROR (was {a['state']})"))
        started = sorted(set(b["restoring_tasks"]) - set(a["restoring_tasks"]))
        ended = sorted(set(a["restoring_tasks"]) - set(b["restoring_tasks"]))
        if started:
            out.append(ClusterEvent(at, "restore", iid, f"{iid} restoring {' '.join(started)}"))
        if ended:
            out.append(ClusterEvent(at, "restored", iid, f"{iid} restored {' '.join(ended)}"))
    for iid in sorted(new.keys() - old.keys()):
        if new[iid]["restoring_tasks"]:
            out.append(ClusterEvent(at, "restore", iid, f"{iid} restoring {' '.join(new[iid]['restoring_tasks'])}"))
    return out
