"""``/metrics`` in the Prometheus text format (0.0.4): the instances' figures from the latest
routing table, the rates derived from it, the processing lag the gateway reads with Describe, the
gateway's own request counts and latencies, and every live instance's Kafka Streams metrics (its
Metrics RPC, asked at each scrape).

Naming, one scheme for both kinds (ops/README.md has the whole list and the scrape settings):

* Kafka Streams' metrics keep the names the Prometheus JMX exporter gives Kafka Streams' MBeans:
  ``kafka_streams_<group>_<name>`` with every ``-`` as ``_`` and one label per tag, ``-`` as ``_``
  (``kafka.streams:type=stream-thread-metrics,thread-id=T`` ``process-rate`` ->
  ``kafka_streams_stream_thread_metrics_process_rate{thread_id="T"}``), exactly as the instance's own
  ``/metrics`` names them (kernel/metrics_text.py), plus an ``instance`` label: the instance id.
  Every metric an instance records is exported, whatever its group and name, so a metric added to
  instance/runtime/metrics.py appears here with no change (``dirty-close-total`` of
  ``stream-thread-metrics`` -> ``kafka_streams_stream_thread_metrics_dirty_close_total``); a
  ``-total`` is a counter, anything else a gauge.
* What Kafka Streams has no metric for (the routing table, the query counters, the processing lag,
  the gateway) is ``iqmesh_*``, with the same ``instance`` label where it is about one instance.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable

import grpc

from kernel import metrics_text
from kernel.rpc import iqmesh_pb2 as pb
from router.gateway.backend import Backend
from router.gateway.metrics import BUCKETS, GatewayMetrics
from router.gateway.snapshot import Snapshot

log = logging.getLogger(__name__)

#: seconds an instance has to send its metrics (a scrape waits for the slowest)
SCRAPE_TIMEOUT_S = 3.0

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _labels(**labels: object) -> str:
    def esc(v: object) -> str:
        return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return "{" + ",".join(f'{k}="{esc(v)}"' for k, v in labels.items()) + "}" if labels else ""


class _Family:
    def __init__(self, name: str, kind: str, help_text: str) -> None:
        self.lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        self.name = name

    def add(self, value: float, suffix: str = "", **labels: object) -> None:
        v = int(value) if float(value).is_integer() else value
        self.lines.append(f"{self.name}{suffix}{_labels(**labels)} {v}")


def _instance_families(snap: Snapshot) -> Iterable[_Family]:
    up = _Family("iqmesh_instance_up", "gauge", "1 if the instance is alive (fresh heartbeat, RUNNING or REBALANCING).")
    state = _Family("iqmesh_instance_state", "gauge", "1 for the instance's current KafkaStreams state.")
    age = _Family("iqmesh_instance_heartbeat_age_seconds", "gauge", "Age of the instance's last published metadata.")
    tasks = _Family("iqmesh_instance_tasks", "gauge", "Tasks the instance holds, by kind (active, standby, restoring).")
    pos = _Family("iqmesh_store_partition_position", "gauge", "Changelog offset a store partition replica has applied.")
    end = _Family("iqmesh_store_partition_end_offset", "gauge", "Changelog end offset of a store partition.")
    lag = _Family("iqmesh_store_partition_lag", "gauge", "Changelog records a store partition replica is behind.")
    upd = _Family("iqmesh_instance_store_updates_per_second", "gauge",
                  "Growth of the changelog positions of the instance's active store partitions (between snapshots).")
    qps = _Family("iqmesh_instance_queries_per_second", "gauge",
                  "Gets and scans per second the instance answered itself, from any client (5 s average).")
    rps = _Family("iqmesh_instance_records_per_second", "gauge",
                  "Input records per second the instance's stream threads processed (5 s average).")
    processed = _Family("iqmesh_instance_records_processed_total", "counter",
                        "Input records the instance's stream threads processed since it started.")
    gets = _Family("iqmesh_instance_gets_total", "counter",
                   "Gets asked of the instance by how it served them: local (asked unrouted, answered from "
                   "a local replica), routed (routed to it by a peer's hop or a routing client, answered "
                   "locally), forwarded (it passed them on, one hop).")
    get_s = _Family("iqmesh_instance_get_seconds_total", "counter",
                    "Time the instance spent answering Gets (divide by the Gets for the mean latency).")
    scans = _Family("iqmesh_instance_scans_total", "counter", "Scan calls (MultiGet/Range/PrefixScan/All) it answered.")
    entries = _Family("iqmesh_instance_scan_entries_total", "counter", "Entries the instance's scan calls returned.")
    errors = _Family("iqmesh_instance_query_errors_total", "counter", "Failed query calls by gRPC status.")
    dropped = _Family("iqmesh_instance_dropped_records_total", "counter",
                      "Records the instance dropped, by reason (late for a window, null key, a handler's skip).")
    plag = _Family("iqmesh_instance_processing_lag_records", "gauge",
                   "Input records not yet committed as processed (end offset minus the group's committed "
                   "offset, as kafka-consumer-groups shows), summed over the input partitions of the tasks "
                   "the instance holds active; instance \"(no owner)\": partitions whose task no live "
                   "instance holds.")
    tlag = _Family("iqmesh_topic_processing_lag_records", "gauge",
                   "Input records not yet committed as processed, summed per input topic (repartition "
                   "topics included).")
    for i in snap.metadata.get("instances", []):
        iid = i["instance_id"]
        up.add(1 if i["alive"] else 0, instance=iid)
        state.add(1, instance=iid, state=i["state"])
        age.add(round(i["heartbeat_age_ms"] / 1000, 3), instance=iid)
        for kind in ("active", "standby", "restoring"):
            tasks.add(len(i[f"{kind}_tasks"]), instance=iid, kind=kind)
        for s in i["stores"]:
            labels = {"instance": iid, "store": s["store"], "partition": s["partition"], "role": s["role"]}
            pos.add(s["position"], **labels)
            end.add(s["end_offset"], **labels)
            lag.add(s["lag"], **labels)
        r = snap.rates.get(iid, {})
        upd.add(r.get("store_updates_per_s", 0.0), instance=iid)
        qps.add(r.get("queries_per_s", 0.0), instance=iid)
        rps.add(r.get("records_per_s", 0.0), instance=iid)
        c = i["counters"]
        processed.add(c["records_processed"], instance=iid)
        for served, field in (("local", "gets_local"), ("routed", "gets_routed"), ("forwarded", "gets_forwarded")):
            gets.add(c[field], instance=iid, served=served)
        get_s.add(c["get_seconds"], instance=iid)
        scans.add(c["scans"], instance=iid)
        entries.add(c["scan_entries"], instance=iid)
        for code, n in c["query_errors"].items():
            errors.add(n, instance=iid, code=code)
        for reason, n in c.get("dropped_records", {}).items():
            dropped.add(n, instance=iid, reason=reason)
    # empty until the gateway's first Describe answer (topology.py)
    for iid, n in snap.processing_lag.get("by_instance", {}).items():
        plag.add(n, instance=iid)
    for topic, n in snap.processing_lag.get("by_topic", {}).items():
        tlag.add(n, topic=topic)
    return (up, state, age, tasks, pos, end, lag, upd, qps, rps, processed, gets, get_s, scans, entries, errors,
            dropped, plag, tlag)


def _gateway_families(metrics: GatewayMetrics, snap: Snapshot | None) -> Iterable[_Family]:
    req = _Family("iqmesh_gateway_requests_total", "counter", "HTTP requests by method, route and status.")
    for (method, route, status), n in sorted(metrics.requests.items()):
        req.add(n, method=method, route=route, status=status)
    dur = _Family("iqmesh_gateway_request_duration_seconds", "histogram", "HTTP request latency by route.")
    for route, h in sorted(metrics.latency.items()):
        cumulative = 0
        for le, n in zip([*BUCKETS, float("inf")], h.counts, strict=True):
            cumulative += n
            dur.add(cumulative, "_bucket", route=route, le="+Inf" if le == float("inf") else le)
        dur.add(round(h.total, 6), "_sum", route=route)
        dur.add(h.count, "_count", route=route)
    ans = _Family("iqmesh_gateway_answers_total", "counter",
                  "Answers received through the gateway by serving instance, role and staleness "
                  "(a key lookup is one, a scan one per partition).")
    for (iid, role, stale), n in sorted(metrics.answers.items()):
        ans.add(n, instance=iid, role=role, stale=str(stale).lower())
    age = _Family("iqmesh_gateway_snapshot_age_seconds", "gauge", "Age of the gateway's latest routing table.")
    if snap is not None and snap.at:
        age.add(round(time.time() - snap.at, 3))
    return (req, dur, ans, age)


def render(metrics: GatewayMetrics, snap: Snapshot | None,
           streams: list[tuple[str, pb.MetricsReply | None]] | None = None) -> str:
    """``streams``: each live instance's Metrics reply (None: it did not answer)."""
    families = [*(_instance_families(snap) if snap is not None else ()), *_gateway_families(metrics, snap)]
    text = "\n".join(line for f in families for line in f.lines) + "\n"
    if streams is None:
        return text
    up = _Family("iqmesh_instance_metrics_up", "gauge",
                 "1 if the instance answered the gateway's Metrics call at this scrape.")
    samples: list[metrics_text.Sample] = []
    for iid, reply in streams:
        up.add(0 if reply is None else 1, instance=iid)
        for m in reply.metrics if reply is not None else ():
            tags = (("instance", iid), *sorted(m.tags.items()))
            samples.append(metrics_text.Sample(m.name, m.group, tags, m.value, m.description))
    return text + "\n".join(up.lines) + "\n" + metrics_text.render(samples)


async def scrape_streams(backend: Backend, snap: Snapshot | None) -> list[tuple[str, pb.MetricsReply | None]]:
    """Ask every live instance of the routing table for its metrics, all at once."""
    live = [(i["instance_id"], i["endpoint"]) for i in (snap.metadata.get("instances", []) if snap else [])
            if i["alive"] and i["endpoint"]]

    async def one(iid: str, endpoint: str) -> tuple[str, pb.MetricsReply | None]:
        try:
            reply = await backend.channels.stub(endpoint).Metrics(pb.MetricsRequest(), timeout=SCRAPE_TIMEOUT_S)
            return iid, reply
        except grpc.RpcError as e:
            log.info("metrics of %s (%s): %s %s", iid, endpoint, e.code(), e.details())
            return iid, None
    return list(await asyncio.gather(*(one(iid, ep) for iid, ep in live)))
