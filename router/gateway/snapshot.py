"""The cluster as the dashboard, /v1/instances, /metrics and /readyz see it: the routing table
(Metadata RPC) asked about once a second, plus rates from one snapshot to the next.

Rates are what the metadata lets us derive: *store updates/s* is the growth of the changelog
positions of the partitions an instance held active at both ends of a 30 s window (a partition
that moved is left out); *records/s* and *queries/s* are the growth over 5 s of the counters each
instance publishes (records its stream threads processed; Gets and scans it answered itself, from
any client). Lag is the sum an instance reports over its store partitions.
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

from kernel.local_read import Role
from kernel.rpc import iqmesh_pb2 as pb
from router.client.sync_client import routing_table_to_dict
from router.gateway.backend import Backend
from router.gateway.errors import ApiError
from router.gateway.metrics import GatewayMetrics
from router.gateway.points import chart_point, gap_point
from router.gateway.series import GatewayReading, GetTimes, gateway_rates, instance_get_ms
from router.gateway.timeline import ClusterEvent, aged, changes, presence
from router.gateway.topology import TopologyPoller, processing_lag

log = logging.getLogger(__name__)

#: a snapshot older than this means the gateway has lost the cluster (readiness)
STALE_AFTER_S = 5.0


def metadata_to_json(reply: pb.MetadataReply) -> dict[str, Any]:
    """The routing table as plain JSON (the dict ``iqmesh metadata`` prints), with each instance's
    counters."""
    md = routing_table_to_dict(reply)
    for inst, i in zip(md["instances"], reply.instances, strict=True):
        inst["counters"] = counters_to_json(i.counters)
    return md


def counters_to_json(c: pb.InstanceCounters) -> dict[str, Any]:
    return {"records_processed": c.records_processed, "gets_local": c.gets_local,
            "gets_routed": c.gets_routed, "gets_forwarded": c.gets_forwarded,
            "get_seconds": round(c.get_seconds, 6), "scans": c.scans, "scan_entries": c.scan_entries,
            "query_errors": dict(sorted(c.query_errors.items())),
            "dropped_records": dict(sorted(c.dropped_records.items())), "dirty_closes": c.dirty_closes}


def answered(counters: dict[str, Any]) -> int:
    """Queries an instance answered itself (a forwarded Get counts where it was answered)."""
    return int(counters["gets_local"] + counters["gets_routed"] + counters["scans"])


def store_replicas(md: dict[str, Any]) -> list[dict[str, Any]]:
    """Per store and partition: the live active and the standbys with their position and lag. A
    global store (``"global": true``) has one partition and every live instance answers it from
    its own copy (``instances``)."""
    out: list[dict[str, Any]] = []
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
                if s["role"] in (Role.ACTIVE, Role.RESTORING):
                    slot["active"] = replica
                else:
                    slot["standbys"].append(replica)
        out.append({"store": store, "partitions": n, "global": False, "replicas": parts})
    live = [i["instance_id"] for i in md["instances"] if i["alive"]]
    for store in md.get("global_stores", ()):
        out.append({"store": store, "partitions": 1, "global": True, "replicas": [], "instances": live})
    return sorted(out, key=lambda s: s["store"])


@dataclass
class Snapshot:
    at: float  # wall clock, seconds
    via: str   # endpoint asked
    metadata: dict[str, Any]
    #: instance id -> {"store_updates_per_s", "records_per_s", "queries_per_s", "query_errors_per_s", "lag"}
    rates: dict[str, dict[str, float]] = field(default_factory=dict)
    error: str = ""
    #: the gateway's query latency (p50_ms, p99_ms) and requests and errors per second
    gateway_rates: dict[str, float | None] = field(default_factory=dict)
    #: the latest cluster events (timeline.py), oldest first
    events: list[dict[str, Any]] = field(default_factory=list)
    #: records behind the input per instance and per topic (topology.py; empty before the first Describe)
    processing_lag: dict[str, dict[str, int]] = field(default_factory=dict)
    #: the topology (topology.topology_to_json) and why it or the lag could not be read
    topology: dict[str, Any] = field(default_factory=dict)
    topology_error: str = ""
    #: this snapshot's point on the dashboard's charts (points.py)
    point: dict[str, Any] = field(default_factory=dict)

    def to_json(self, metrics: GatewayMetrics) -> dict[str, Any]:
        md = self.metadata
        instances = [{**i, **self.rates.get(i["instance_id"], {}), "presence": presence(i)}
                     for i in md.get("instances", [])]
        return {
            "at_ms": int(self.at * 1000), "age_ms": int((time.time() - self.at) * 1000), "via": self.via,
            "asked": md.get("asked", ""), "error": self.error, "instances": instances,
            "stores": store_replicas(md) if md else [],
            "gateway": {"requests_total": metrics.requests_total, "errors_total": metrics.errors_total,
                        "uptime_s": round(time.time() - metrics.started, 1)},
            "gateway_rates": self.gateway_rates, "events": self.events, "processing_lag": self.processing_lag,
            "topology": self.topology, "topology_error": self.topology_error, "point": self.point,
        }


#: rates are averaged over this much of the recent past: changelog positions move once per commit
#: (commit.interval.ms, 30 s by default), the counters with every heartbeat (1 s by default)
UPDATES_WINDOW_S = 30.0
QUERIES_WINDOW_S = 5.0


@dataclass(frozen=True)
class Sample:
    """What rates are computed from: active changelog positions and the instances' counters, at a time."""

    at: float
    positions: dict[tuple[str, str, int], int]  # (instance, store, partition) -> position, ACTIVE only
    answers: dict[str, int]    # instance -> queries it answered (counter)
    processed: dict[str, int]  # instance -> records it processed (counter)
    errors: dict[str, int] = field(default_factory=dict)  # instance -> failed query calls (counter)
    gateway: GatewayReading | None = None
    gets: GetTimes | None = None

    @staticmethod
    def of(md: dict[str, Any], at: float, gateway: GatewayReading | None = None) -> Sample:
        return Sample(at, {(i["instance_id"], s["store"], s["partition"]): s["position"] for i in md["instances"]
                           for s in i["stores"] if s["role"] is Role.ACTIVE and s["position"] >= 0},
                      {i["instance_id"]: answered(i["counters"]) for i in md["instances"]},
                      {i["instance_id"]: i["counters"]["records_processed"] for i in md["instances"]},
                      {i["instance_id"]: sum(i["counters"]["query_errors"].values()) for i in md["instances"]},
                      gateway, GetTimes.of(md))


def _growth_per_s(now: dict[str, int], base: dict[str, int], iid: str, seconds: float) -> float:
    """A counter's growth per second; a restarted instance (counter went down) counts from zero."""
    n, b = now.get(iid, 0), base.get(iid, 0)
    return round((n - b if n >= b else n) / seconds, 2)


def rates(md: dict[str, Any], now: Sample, updates_base: Sample | None,
          queries_base: Sample | None) -> dict[str, dict[str, float]]:
    """Per instance: store updates/s since ``updates_base`` (partitions active on that instance at
    both times), records processed/s and queries answered/s since ``queries_base``, and its
    summed lag now."""
    updates: dict[str, float] = {}
    if updates_base is not None and now.at > updates_base.at:
        for key, pos in now.positions.items():
            if key in updates_base.positions:
                updates[key[0]] = updates.get(key[0], 0.0) + max(0, pos - updates_base.positions[key])
    out = {}
    for inst in md["instances"]:
        iid = inst["instance_id"]
        r = {"store_updates_per_s": 0.0, "records_per_s": 0.0, "queries_per_s": 0.0, "query_errors_per_s": 0.0,
             "lag": float(sum(max(0, s["lag"]) for s in inst["stores"]))}
        if updates_base is not None and now.at > updates_base.at:
            r["store_updates_per_s"] = round(updates.get(iid, 0.0) / (now.at - updates_base.at), 2)
        if queries_base is not None and now.at > queries_base.at:
            seconds = now.at - queries_base.at
            r["records_per_s"] = _growth_per_s(now.processed, queries_base.processed, iid, seconds)
            r["queries_per_s"] = _growth_per_s(now.answers, queries_base.answers, iid, seconds)
            r["query_errors_per_s"] = _growth_per_s(now.errors, queries_base.errors, iid, seconds)
        out[iid] = r
    return out


class SnapshotPoller:
    """Asks the routing table every ``interval`` seconds; ``latest`` is the newest snapshot,
    ``history`` the recent ones (for charts drawn when a page opens), ``changed`` wakes the SSE
    streams. ``on_alive`` receives the live endpoints (discovery learns them)."""

    def __init__(self, backend: Backend, metrics: GatewayMetrics, interval: float = 1.0,
                 on_alive: Callable[[list[str]], None] | None = None, keep: int = 300,
                 keep_events: int = 100, topology: TopologyPoller | None = None) -> None:
        self.backend = backend
        self.metrics = metrics
        self.interval = interval
        self.on_alive = on_alive
        self.latest: Snapshot | None = None
        self.history: deque[dict[str, Any]] = deque(maxlen=keep)
        #: cluster events seen (timeline.py), oldest first
        self.events: deque[ClusterEvent] = deque(maxlen=keep_events)
        self.changed = asyncio.Condition()
        self.topology = topology
        self._samples: deque[Sample] = deque()
        #: when the last routing table was read, and that table
        self._read: tuple[float, dict[str, Any]] | None = None

    async def poll_once(self) -> Snapshot:
        at = time.time()
        try:
            reply, via = await self.backend.call(lambda c: c.metadata())
        except (grpc.RpcError, ApiError) as e:
            msg = e.message if isinstance(e, ApiError) else f"{e.code().name}: {e.details()}"
            prev = self.latest
            md = {}
            if self._read is not None:  # no instance answers: the last table, its heartbeats aging
                read_at, read_md = self._read
                md = aged(read_md, at - read_at, self.backend.discovery.last_heard())
                if prev is not None and prev.metadata:
                    self.events.extend(changes(prev.metadata, md, at))
            snap = Snapshot(prev.at if prev else 0.0, prev.via if prev else "", md,
                            prev.rates if prev else {}, error=msg, gateway_rates=prev.gateway_rates if prev else {},
                            events=self._events_json(), point=gap_point(at, md))
            self.history.append(snap.point)
        else:
            md = metadata_to_json(reply)
            self._read = (at, md)
            reading = GatewayReading.of(self.metrics)
            now = Sample.of(md, at, reading)
            if self.latest is not None and self.latest.metadata:
                self.events.extend(changes(self.latest.metadata, md, at))
            queries_base = self._base(at - QUERIES_WINDOW_S)
            gw = gateway_rates(reading, queries_base.gateway if queries_base else None,
                               at - queries_base.at if queries_base else 0.0)
            view = self.topology.latest if self.topology is not None else None
            plag = processing_lag(view.input_lag, md) if view is not None and view.at else {}
            snap = Snapshot(at, via, md, rates(md, now, self._base(at - UPDATES_WINDOW_S), queries_base),
                            gateway_rates=gw, events=self._events_json(), processing_lag=plag,
                            topology=view.topology if view is not None else {},
                            topology_error=view.error if view is not None else "")
            self._samples.append(now)
            while self._samples and self._samples[0].at < at - UPDATES_WINDOW_S:
                self._samples.popleft()
            get_ms = instance_get_ms(now.gets, queries_base.gets if queries_base else None) if now.gets else {}
            snap.point = chart_point(at, md, snap.rates, get_ms, gw, plag)
            self.history.append(snap.point)
            if self.on_alive is not None:
                self.on_alive([i["endpoint"] for i in md["instances"] if i["alive"] and i["endpoint"]])
        self.latest = snap
        async with self.changed:
            self.changed.notify_all()
        return snap

    def _events_json(self) -> list[dict[str, Any]]:
        return [e.to_json() for e in self.events]

    def _base(self, since: float) -> Sample | None:
        """The oldest sample taken at or after ``since`` (the start of a rate's window)."""
        return next((x for x in self._samples if x.at >= since), None)

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
