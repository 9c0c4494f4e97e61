"""What happened to the cluster, read from two routing tables in a row: instances that joined, are
late (their heartbeat older than a few of their intervals) or gone (stopped, failed, or no
heartbeat for their session timeout), rebalances, and restores starting and ending. The dashboard
marks them on its charts and lists them.

The gateway sees only what its snapshots (about one a second) show: a rebalance shorter than
the interval between two of them is not seen.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kernel.instance_state import State
from kernel.metadata import liveness_ms

#: kinds, in the order the dashboard's legend lists them
KINDS = ("joined", "late", "back", "gone", "rebalance", "restore", "restored", "error", "dirty-close")
#: states an instance is in only on its way out, or after it
_LEAVING = frozenset({State.PENDING_SHUTDOWN, State.NOT_RUNNING, State.PENDING_ERROR, State.ERROR})


@dataclass(frozen=True)
class ClusterEvent:
    at: float  # wall clock, seconds (the snapshot that showed it)
    kind: str  # one of KINDS
    instance: str
    text: str

    def to_json(self) -> dict[str, Any]:
        """``at_ms`` as the snapshot's own (so a chart's point and its marker line up)."""
        return {**asdict(self), "at_ms": int(self.at * 1000)}


def presence(inst: dict[str, Any]) -> str:
    """``alive``, ``late`` (its heartbeat is older than a few of its intervals: a busy machine, a
    long pause) or ``gone`` (leaving, or stopped, or no heartbeat for its session timeout: the
    group would have removed it) of one instance of a routing table."""
    age = inst["heartbeat_age_ms"]
    if inst["state"] in _LEAVING or age > (inst.get("session_timeout_ms") or 10_000):
        return "gone"
    return "late" if age > liveness_ms(inst.get("heartbeat_interval_ms") or 1000) else "alive"


def aged(md: dict[str, Any], seconds: float, latest: dict[str, tuple[State, int]] | None = None) -> dict[str, Any]:
    """Routing table ``md`` as it stands ``seconds`` after it was read, when no newer one can be
    had (no instance answers): every heartbeat that much older, unless ``latest`` (instance id ->
    state, heartbeat age in ms, from the instances topic) knows newer; ``alive`` as :func:`presence`
    says. So a total outage shows its instances late, then gone, instead of as they last were."""
    instances = []
    for inst in md.get("instances", []):
        inst = dict(inst)
        known = (latest or {}).get(inst["instance_id"])
        age = inst["heartbeat_age_ms"] + int(seconds * 1000)
        if known is not None and known[1] < age:
            inst["state"], age = known
        inst["heartbeat_age_ms"] = age
        inst["alive"] = presence(inst) == "alive"
        instances.append(inst)
    return {**md, "instances": instances}


def changes(before: dict[str, Any], after: dict[str, Any], at: float) -> list[ClusterEvent]:
    """The events between two routing tables (JSON, as snapshot.metadata_to_json gives them)."""
    old = {i["instance_id"]: i for i in before.get("instances", [])}
    new = {i["instance_id"]: i for i in after.get("instances", [])}
    out: list[ClusterEvent] = []
    for iid in sorted(old.keys() | new.keys()):
        a, b = old.get(iid), new.get(iid)
        was = presence(a) if a is not None else "gone"
        now = presence(b) if b is not None else "gone"
        if b is None:
            if was != "gone":
                out.append(ClusterEvent(at, "gone", iid, f"{iid} disappeared (no longer listed)"))
            continue
        age_s = b["heartbeat_age_ms"] / 1000
        if was == "gone" and now != "gone":
            out.append(ClusterEvent(at, "joined", iid, f"{iid} joined ({b['state']})"))
        elif was == "alive" and now == "late":
            out.append(ClusterEvent(at, "late", iid, f"{iid} is late: heartbeat {age_s:.1f} s old (gone after "
                                                     f"{(b.get('session_timeout_ms') or 10_000) / 1000:.0f} s)"))
        elif was == "late" and now == "alive":
            out.append(ClusterEvent(at, "back", iid, f"{iid} heartbeats again"))
        elif was != "gone" and now == "gone":
            why = f"state {b['state']}" if b["state"] in _LEAVING else f"no heartbeat for {age_s:.1f} s"
            out.append(ClusterEvent(at, "gone", iid, f"{iid} is gone ({why})"))
        if a is None:
            if b["restoring_tasks"]:
                out.append(ClusterEvent(at, "restore", iid, f"{iid} restoring {' '.join(b['restoring_tasks'])}"))
            continue
        if b["state"] != a["state"]:
            if b["state"] is State.REBALANCING:
                out.append(ClusterEvent(at, "rebalance", iid, f"{iid} rebalancing (was {a['state']})"))
            elif b["state"] is State.ERROR:
                out.append(ClusterEvent(at, "error", iid, f"{iid} in ERROR (was {a['state']})"))
        started = sorted(set(b["restoring_tasks"]) - set(a["restoring_tasks"]))
        ended = sorted(set(a["restoring_tasks"]) - set(b["restoring_tasks"]))
        if started:
            out.append(ClusterEvent(at, "restore", iid, f"{iid} restoring {' '.join(started)}"))
        if ended:
            out.append(ClusterEvent(at, "restored", iid, f"{iid} restored {' '.join(ended)}"))
        dirty = b.get("counters", {}).get("dirty_closes", 0) - a.get("counters", {}).get("dirty_closes", 0)
        if dirty > 0:
            out.append(ClusterEvent(at, "dirty-close", iid, f"{iid} closed {dirty} task(s) without a commit: "
                                                            "they start over from the last commit"))
    return out
