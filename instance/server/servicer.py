"""gRPC InteractiveQuery service of one instance: answers locally or forwards one hop."""

from __future__ import annotations

import base64
import json
import logging
import time
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from instance.errors import InvalidStateStoreException
from instance.runtime.kafka_streams import KafkaStreams
from instance.runtime.states import State
from instance.server.status import UnavailableError, to_status
from instance.server.tokens import PositionToken
from router.client import ChannelPool
from router.metadata import InstanceInfo, task_lag
from router.rpc import iqmesh_pb2 as pb
from router.rpc import iqmesh_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)


def value_to_json(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return json.dumps(base64.b64encode(value).decode())
    return json.dumps(value, separators=(",", ":"), default=str)


_REASON_ORDER = ("NOT_UP_TO_BOUND", "NO_REPLICA_WITHIN_LAG", "REBALANCING", "NOT_ACTIVE", "NOT_AVAILABLE")


@dataclass(frozen=True)
class _Query:
    """The request options that decide which replica may answer."""

    allow_stale: bool
    max_lag: int | None
    bound: PositionToken | None

    @staticmethod
    def of(request: pb.GetRequest, store: str) -> _Query:
        o = request.options
        max_lag = o.max_lag if o.HasField("max_lag") and o.max_lag >= 0 else None
        bound = PositionToken.decode(o.position) if o.position else None
        if bound is not None and bound.store != store:
            raise ValueError(f"position token is for store {bound.store!r}, not {store!r}")
        return _Query(o.allow_stale, max_lag, bound)


class QueryServicer(pb_grpc.InteractiveQueryServicer):
    def __init__(self, streams: KafkaStreams) -> None:
        self.streams = streams
        self.pool = ChannelPool()

    def Get(self, request: pb.GetRequest, context: grpc.ServicerContext) -> pb.GetReply:
        try:
            return self._get(request)
        except grpc.RpcError as e:  # from the forwarded hop: pass its status through
            context.abort(e.code(), e.details() or "forwarded query failed")
        except Exception as e:
            code, msg = to_status(e)
            if code is grpc.StatusCode.INTERNAL:
                log.exception("query failed")
            context.abort(code, msg)
        raise AssertionError("unreachable")

    def _get(self, request: pb.GetRequest) -> pb.GetReply:
        streams = self.streams
        if not request.store:
            raise ValueError("store must be given")
        store = request.store
        if request.raw_key:
            spec = streams.topology.stores.get(store)
            key = spec.key_serde.deserialize(request.raw_key) if spec else request.raw_key
        else:
            key = streams.parse_key(store, request.key)
        q = _Query.of(request, store)
        if request.forwarded:
            return self._answer_local(store, key, q, forwarded=True)
        return self._route(store, key, q, request)

    def _route(self, store: str, key: Any, q: _Query, request: pb.GetRequest) -> pb.GetReply:
        """Active first, then (allow_stale) standbys by lag; dead and too-lagging replicas are
        skipped; a failing candidate passes to the next; one hop at most."""
        streams = self.streams
        md = streams.query_metadata_for_key(store, key)  # raises for unknown store / not started
        sub, partition = streams.store_partition(store, key)
        tid = f"{sub}_{partition}"
        view = streams.view
        candidates: list[InstanceInfo] = []
        owner = view.owner(tid) if md.available else None
        if owner is not None:
            candidates.append(owner)
        if q.allow_stale:
            candidates += [i for i in view.standbys(tid) if i.instance_id not in
                           {c.instance_id for c in candidates}]
        if not candidates:
            reason = "REBALANCING" if streams.state is State.REBALANCING or view.instances() else "NOT_AVAILABLE"
            raise UnavailableError(reason, f"no live replica of {store!r} partition {partition} "
                                           f"(instance state {streams.state.name})")
        tried: list[str] = []
        reasons: list[str] = []
        for info in candidates:
            if q.max_lag is not None and task_lag(info, tid) > q.max_lag:
                reasons.append("NO_REPLICA_WITHIN_LAG")
                continue
            tried.append(info.instance_id)
            try:
                if info.instance_id == streams.instance_id:
                    return self._answer_local(store, key, q, forwarded=False)
                return self._forward(info.endpoint, request)
            except UnavailableError as e:
                reasons.append(e.reason)
        reason = next((r for r in _REASON_ORDER if r in reasons), "NOT_AVAILABLE")
        raise UnavailableError(reason, f"no replica of {store!r} partition {partition} could answer "
                                       f"({', '.join(reasons)})", tried=tried)

    def _forward(self, endpoint: str, request: pb.GetRequest) -> pb.GetReply:
        fwd = pb.GetRequest()
        fwd.CopyFrom(request)
        fwd.forwarded = True
        try:
            reply: pb.GetReply = self.pool.stub(endpoint).Get(fwd, timeout=5)
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                details = e.details() or ""
                reason = details.split(":", 1)[0] if details.split(":", 1)[0] in _REASON_ORDER else \
                    "NOT_AVAILABLE"
                raise UnavailableError(reason, f"{endpoint}: {details}") from e
            raise
        reply.metadata.forwarded = True
        return reply

    def _answer_local(self, store: str, key: Any, q: _Query, forwarded: bool) -> pb.GetReply:
        streams = self.streams
        try:
            read = streams.read_local(store, key)
        except InvalidStateStoreException as e:
            raise UnavailableError("NOT_ACTIVE", str(e)) from e
        if read.role == "STANDBY" and not q.allow_stale:
            raise UnavailableError("NOT_ACTIVE", f"only a standby of {store!r} partition {read.partition} "
                                                 f"is here and the query requires the active")
        if read.role == "RESTORING" and not q.allow_stale:
            raise UnavailableError("REBALANCING", f"store {store!r} partition {read.partition} is restoring "
                                                  f"(lag {read.lag})")
        if q.max_lag is not None and read.lag > q.max_lag:
            raise UnavailableError("NO_REPLICA_WITHIN_LAG", f"lag {read.lag} > max_lag {q.max_lag}")
        if q.bound is not None and q.bound.partition == read.partition and read.position < q.bound.offset:
            raise UnavailableError("NOT_UP_TO_BOUND", f"replica at {read.position}, bound {q.bound.offset}")
        running = streams.state is State.RUNNING
        meta = pb.ReadMetadata(
            served_by=streams.instance_id, endpoint=streams.config.application_server, role=read.role,
            instance_state=streams.state.name, partition=read.partition, position=read.position,
            end_offset=read.end_offset, lag=read.lag,
            stale=read.role != "ACTIVE" or not running or read.lag > 0, forwarded=forwarded,
            position_token=PositionToken(store, read.partition, read.position).encode())
        return pb.GetReply(found=read.found, value_json=value_to_json(read.value) if read.found else "",
                           metadata=meta)

    def Metadata(self, request: pb.MetadataRequest, context: grpc.ServicerContext) -> pb.MetadataReply:
        streams = self.streams
        now = int(time.time() * 1000)
        out = pb.MetadataReply(asked=streams.instance_id)
        for info in streams.metadata_for_all_streams_clients():
            out.instances.append(pb.InstanceMetadata(
                instance_id=info.instance_id, endpoint=info.endpoint, state=info.state,
                heartbeat_age_ms=now - info.heartbeat_ms, alive=streams.view.is_alive(info, now),
                active_tasks=list(info.active_tasks), standby_tasks=list(info.standby_tasks),
                restoring_tasks=list(info.restoring_tasks),
                stores=[pb.StorePartition(store=s.store, partition=s.partition, role=s.role,
                                          position=s.position, end_offset=s.end_offset, lag=s.lag)
                        for s in info.stores]))
        if streams.layout is not None:
            for store in streams.topology.stores:
                st = streams.topology.subtopology_of_store(store)
                out.store_partitions[store] = streams.layout.tasks_per_subtopology[st.id]
        return out


class QueryServer:
    """The gRPC server of one instance: InteractiveQuery plus the standard health service."""

    def __init__(self, streams: KafkaStreams, port: int, host: str = "0.0.0.0", workers: int = 16) -> None:
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
        self.servicer = QueryServicer(streams)
        pb_grpc.add_InteractiveQueryServicer_to_server(self.servicer, self.server)
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        self.port = self.server.add_insecure_port(f"{host}:{port}")
        if self.port == 0:
            raise OSError(f"cannot bind gRPC port {host}:{port}")
        self._streams = streams

    def start(self) -> None:
        self.server.start()
        self.set_serving(False)

    def set_serving(self, serving: bool) -> None:
        status = (health_pb2.HealthCheckResponse.SERVING if serving
                  else health_pb2.HealthCheckResponse.NOT_SERVING)
        self.health.set("", status)
        self.health.set("iqmesh.v1.InteractiveQuery", status)

    def stop(self, grace: float = 2.0) -> None:
        self.health.enter_graceful_shutdown()
        self.server.stop(grace).wait()
        self.servicer.pool.close()
