"""The cluster as the dashboard, /v1/instances, /metrics and /readyz see it: the routing table
(Metadata RPC) asked about once a second, plus rates from one snapshot to the next.

Rates are what the metadata lets us derive: *store updates/s* is the growth of the changelog
positions of the partitions an instance held active in both snapshots (a partition that moved is
left out for that interval); *queries/s* counts the answers each instance gave through this
gateway (:class:`GatewayMetrics`). Lag is the sum an instance reports over its store partitions.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from router.gateway.backend import Backend
from router.gateway.errors import ApiError
from router.gateway.metrics import GatewayMetrics
from router.rpc import iqmesh_pb2 as pb

log = logging.getLogger(__name__)

#: a snapshot older than this means the gateway has lost the cluster (readiness)
STALE_AFTER_S = 5.0


def metadata_to_json(reply: pb.MetadataReply) -> dict[str, Any]:
    """The routing table as plain JSON (numbers stay numbers, unlike protobuf's JSON for int64)."""
    return {
        "asked": reply.asked,
        "store_partitions": dict(sorted(reply.store_partitions.items())),
        "instances": [{
            "instance_id": i.instance_id, "endpoint": i.endpoint, "state": i.state, "alive": i.alive,
            "heartbeat_age_ms": i.heartbeat_age_ms, "active_tasks": sorted(i.active_tasks),
            "standby_tasks": sorted(i.standby_tasks), "restoring_tasks": sorted(i.restoring_tasks),
            "stores": [{"store": s.store, "partition": s.partition, "role": s.role, "position": s.position,
                        "end_offset": s.end_offset, "lag": s.lag}
                       for s in sorted(i.stores, key=lambda s: (s.store, s.partition, s.role))],
        } for i in reply.instances],
    }


def store_replicas(md: dict[str, Any]) -> list[dict[str, Any]]:
    """Per store and partition: the live active and the standbys with their position and lag."""
    out = []
    for store, n in md["store_partitions"].items():
        parts: list[dict[str, Any]] = [{"partition": p, "active": None, "standbys": []} for p in range(n)]
        for inst in md["instances"]:
            if not inst["alive"]:
                continue
            for s in inst["stores"]:
                if s["store"] != store or not 0 <= s["partition"] < n:
                    continue
                replica = {"instance_id": inst["instance_id"], "role": s["role"], "position": s["position"],
                           "end_offset": s["end_offset"], "lag": s["lag"]}
                slot = parts[s["partition"]]
                if s["role"] in ("ACTIVE", "RESTORING"):
                    slot["active"] = replica
                else:
                    slot["standbys"].append(replica)
        out.append({"store": store, "partitions": n, "replicas": parts})
    return out


@dataclass
class Snapshot:
    at: float  # wall clock, seconds
    via: str   # endpoint asked
    metadata: dict[str, Any]
    #: instance id -> {"store_updates_per_s", "queries_per_s", "lag"}
    rates: dict[str, dict[str, float]] = field(default_factory=dict)
    error: str = ""

    def to_json(self, metrics: GatewayMetrics) -> dict[str, Any]:
        md = self.metadata
        instances = [{**i, **self.rates.get(i["instance_id"], {})} for i in md.get("instances", [])]
        return {
            "at_ms": int(self.at * 1000), "age_ms": int((time.time() - self.at) * 1000), "via": self.via,
            "asked": md.get("asked", ""), "error": self.error, "instances": instances,
            "stores": store_replicas(md) if md else [],
            "gateway": {"requests_total": metrics.requests_total, "errors_total": metrics.errors_total,
                        "uptime_s": round(time.time() - metrics.started, 1)},
        }


def _active_positions(md: dict[str, Any]) -> dict[tuple[str, str, int], int]:
    return {(i["instance_id"], s["store"], s["partition"]): s["position"]
            for i in md["instances"] for s in i["stores"] if s["role"] == "ACTIVE" and s["position"] >= 0}


def rates_between(prev: Snapshot | None, md: dict[str, Any], at: float, answers: dict[str, int],
                  prev_answers: dict[str, int]) -> dict[str, dict[str, float]]:
    """Per instance: store updates/s and queries/s since ``prev``, and its summed lag now."""
    dt = at - prev.at if prev is not None and prev.metadata else 0.0
    before = _active_positions(prev.metadata) if dt > 0 and prev is not None else {}
    updates: dict[str, float] = {}
    for (iid, store, p), pos in _active_positions(md).items():
        if (iid, store, p) in before:
            updates[iid] = updates.get(iid, 0.0) + max(0, pos - before[(iid, store, p)])
    out = {}
    for inst in md["instances"]:
        iid = inst["instance_id"]
        q = answers.get(iid, 0) - prev_answers.get(iid, 0)
        out[iid] = {"store_updates_per_s": round(updates.get(iid, 0.0) / dt, 2) if dt > 0 else 0.0,
                    "queries_per_s": round(max(0, q) / dt, 2) if dt > 0 else 0.0,
                    "lag": float(sum(max(0, s["lag"]) for s in inst["stores"]))}
    return out


class SnapshotPoller:
    """Asks the routing table every ``interval`` seconds; ``latest`` is the newest snapshot,
    ``history`` the recent ones (for charts drawn when a page opens), ``changed`` wakes the SSE
    streams. ``on_alive`` receives the live endpoints (discovery learns them)."""

    def __init__(self, backend: Backend, metrics: GatewayMetrics, interval: float = 1.0,
                 on_alive: Callable[[list[str]], None] | None = None, keep: int = 300) -> None:
        self.backend = backend
        self.metrics = metrics
        self.interval = interval
        self.on_alive = on_alive
        self.latest: Snapshot | None = None
        self.history: deque[dict[str, Any]] = deque(maxlen=keep)
        self.changed = asyncio.Condition()
        self._answers: dict[str, int] = {}

    async def poll_once(self) -> Snapshot:
        at = time.time()
        try:
            reply, via = await self.backend.call(lambda c: c.metadata())
        except (grpc.RpcError, ApiError) as e:
            msg = e.message if isinstance(e, ApiError) else f"{e.code().name}: {e.details()}"
            prev = self.latest
            snap = Snapshot(prev.at if prev else 0.0, prev.via if prev else "", prev.metadata if prev else {},
                            prev.rates if prev else {}, error=msg)
        else:
            md = metadata_to_json(reply)
            answers = self.metrics.answers_by_instance()
            snap = Snapshot(at, via, md, rates_between(self.latest, md, at, answers, self._answers))
            self._answers = answers
            self.history.append({"t": at, "rates": snap.rates})
            if self.on_alive is not None:
                self.on_alive([i["endpoint"] for i in md["instances"] if i["alive"] and i["endpoint"]])
        self.latest = snap
        async with self.changed:
            self.changed.notify_all()
        return snap

    async def run(self) -> None:
        while True:
            try:
                await self.poll_once()
            except Exception:
                log.exception("polling the routing table failed")
            await asyncio.sleep(self.interval)

    @property
    def fresh(self) -> bool:
        s = self.latest
        return s is not None and not s.error and time.time() - s.at < STALE_AFTER_S
