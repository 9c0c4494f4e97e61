"""gRPC InteractiveQuery service of one instance: parses a request, lets the router pick who
answers (here, or one hop away), builds the reply. Scans are served by :mod:`instance.server.scans`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from concurrent import futures
from typing import Any, NoReturn

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from instance.config import LISTEN_HOST
from instance.errors import BadRequest, caller_input
from instance.runtime.kafka_streams import KafkaStreams
from instance.runtime.query import KeyQuery, WindowKeyQuery, WindowRangeQuery
from instance.runtime.query.execute import ask
from instance.runtime.query.request import StorePlacement, check_store_kind
from instance.runtime.query_counters import QuerySlot
from instance.server.aio_interceptors import AioInterceptor
from instance.server.describe import InputLagReader, topology_reply
from instance.server.get_batch import answer_batch
from instance.server.replies import ask_local, read_metadata
from instance.server.scans import ScanService
from instance.server.status import to_status
from instance.server.strict_handlers import add_strict_handlers
from instance.server.watch import MAX_WATCHES, WatchService
from kernel.application_guard import ApplicationInterceptor
from kernel.channels import AioChannelPool, ChannelPool
from kernel.event_loop import LoopThread
from kernel.metadata import InstanceCounters
from kernel.options import QueryOptions
from kernel.ports import PortInUseError, check_port_free
from kernel.query_keys import MAX_QUERY_KEY_BYTES, check_query_key
from kernel.rpc import iqmesh_pb2 as pb
from kernel.rpc import iqmesh_pb2_grpc as pb_grpc
from kernel.scan_wire import ScanRequest
from kernel.security import AUTH_TOKEN, TLS_CERT_FILE, TLS_KEY_FILE, Security, is_loopback
from kernel.serdes import value_to_json
from kernel.status_details import RpcStatus
from kernel.task_id import TaskId
from kernel.unavailable import UnavailableError
from kernel.wire_enums import role_pb, state_pb
from router.client.forward import forward_fetch, forward_get_bytes, hop_timeout
from router.client.forward_batch import GetBatcher
from router.client.query_router import QueryRouter

log = logging.getLogger(__name__)
#: threads reading the partitions of scans in parallel (locally or one hop away)
SCATTER_THREADS = 16
_SERVICE = pb.DESCRIPTOR.services_by_name["InteractiveQuery"]

__all__ = ["QueryServer", "QueryServicer"]


_DEFAULT_OPTIONS = QueryOptions()


def _options_of(request: pb.GetRequest, partitions: int) -> QueryOptions:
    """The request's routing options; BadRequest for a malformed position token or one naming a
    partition beyond the store's ``partitions``."""
    o = request.options
    if not (o.allow_stale or o.position or o.HasField("max_lag")):
        return _DEFAULT_OPTIONS  # nothing to parse
    with caller_input():
        return QueryOptions.parse(request.store, o.allow_stale, o.max_lag if o.HasField("max_lag") else None,
                                  o.position, partitions)


class QueryServicer(pb_grpc.InteractiveQueryServicer):
    """Get: the key's replica answers, chosen by :class:`QueryRouter`; the scans: every partition's
    replica answers, merged by key; Metadata: the cluster view."""

    def __init__(self, streams: KafkaStreams, security: Security | None = None) -> None:
        self.streams = streams
        security = streams.config.security if security is None else security
        #: the hops of the methods run on the server's thread pool (scans, window fetches)
        self.pool = ChannelPool(security, streams.config.application_id)
        #: the hops of Get, run on the server's event loop (and only there)
        self.aio_pool = AioChannelPool(security, streams.config.application_id)
        #: the Gets sent there, batched per replica while calls to it are in flight
        self.gets = GetBatcher(self.aio_pool)
        self.executor = futures.ThreadPoolExecutor(max_workers=SCATTER_THREADS, thread_name_prefix="scatter")
        self.scans = ScanService(streams, self.pool, self.executor)
        self.watches = WatchService(streams)
        #: a thread per open watch (its reads wait for records), one more to refuse the next
        self.watch_reads = futures.ThreadPoolExecutor(max_workers=MAX_WATCHES + 1, thread_name_prefix="watch")
        self.counters = streams.query_counters
        self.input_lag = InputLagReader(streams)
        self.router = QueryRouter(streams.view, streams.instance_id)

    #: called with the request's bytes too (instance/server/strict_handlers.py): a Get another
    #: instance answers is passed on as bytes, its reply passed back as bytes
    WITH_BYTES = frozenset({"Get"})

    async def Get(self, request: pb.GetRequest, context: grpc.aio.ServicerContext,
                  data: bytes | None = None) -> pb.GetReply | bytes:
        """Run on the server's event loop: a local read does not wait (the stores' locks are held
        for a write batch at most) and a forward is awaited. ``data``: the request as received (a
        forward passes it on without encoding it again, and returns the reply's bytes as they came)."""
        slot = self.counters.local.slot
        start = time.perf_counter()
        try:
            return await self._get(request, context.time_remaining, slot, data)
        except Exception as e:
            await _abort_async(context, e, slot)
        finally:
            slot.get_seconds += time.perf_counter() - start

    async def GetBatch(self, request: pb.GetBatchRequest, context: grpc.aio.ServicerContext) -> pb.GetBatchReply:
        """Gets another instance forwarded together (router/client/forward_batch.py), each
        answered from this instance's replica as a forwarded Get alone would be, or with the
        status it would have ended with. Nothing here awaits: a forwarded Get is never passed on."""
        slot = self.counters.local.slot
        start = time.perf_counter()
        try:
            return answer_batch(request.requests, lambda r: self._get_forwarded(r, slot),
                                lambda e: _status_of(e, slot))
        finally:
            slot.get_seconds += time.perf_counter() - start

    def MultiGet(self, request: pb.MultiGetRequest, context: grpc.ServicerContext) -> Iterator[pb.ScanReply]:
        return self._scan(request, context)

    def Range(self, request: pb.RangeRequest, context: grpc.ServicerContext) -> Iterator[pb.ScanReply]:
        return self._scan(request, context)

    def PrefixScan(self, request: pb.PrefixScanRequest, context: grpc.ServicerContext) -> Iterator[pb.ScanReply]:
        return self._scan(request, context)

    def All(self, request: pb.AllRequest, context: grpc.ServicerContext) -> Iterator[pb.ScanReply]:
        return self._scan(request, context)

    def _scan(self, request: ScanRequest, context: grpc.ServicerContext) -> Iterator[pb.ScanReply]:
        slot = self.counters.local.slot
        try:
            replies = self.scans.page(request, context.time_remaining)
        except Exception as e:
            _abort(context, e, slot)
        slot.scans += 1
        if replies and replies[-1].HasField("end"):
            slot.scan_entries += replies[-1].end.count
        return iter(replies)

    async def Watch(self, request: pb.WatchRequest,
                    context: grpc.aio.ServicerContext) -> AsyncIterator[pb.WatchReply]:
        """The changes of a store from its changelog (instance/server/watch.py), read on threads of
        the watches' own (a read waits for records). The consumer is closed as soon as the call
        ends, however it ends: the server cancels this generator then."""
        loop = asyncio.get_running_loop()
        try:
            stream = await loop.run_in_executor(self.watch_reads, self.watches.open, request)
        except Exception as e:
            await _abort_async(context, e)
        replies = stream.replies()
        try:
            while (reply := await loop.run_in_executor(self.watch_reads, next, replies, None)) is not None:
                yield reply
        except Exception as e:
            await _abort_async(context, e)
        finally:
            loop.run_in_executor(self.watch_reads, stream.close)  # waits for a read in progress: not here

    async def _get(self, request: pb.GetRequest, time_remaining: Callable[[], float | None],
                   slot: QuerySlot, data: bytes | None = None) -> pb.GetReply | bytes:
        """A key's value, top to bottom (docs/architecture.md, "Get path"): the request read
        (:meth:`_locate`); the router picks the replica; this instance's is read by
        runtime/query/execute.py (the hot path: one local read, no hop, nothing awaited); another
        instance's is asked with the request's bytes (router/client/forward_batch.py), and its
        reply's bytes are returned."""
        placement, key, task, options = self._locate(request)
        forwarded = request.forwarded
        if task is None or forwarded:
            return self._get_local(placement, key, 0 if task is None else task.partition, options, forwarded, slot)
        store, partition = request.store, task.partition
        local_state = self.streams.state

        def asking(endpoint: str | None) -> Generator[str, bytes, pb.GetReply | bytes]:
            if endpoint is None:
                return self._get_local(placement, key, partition, options, forwarded, slot)
            return (yield endpoint)  # the driver below asks it

        body = request.SerializeToString() if data is None else data
        steps = self.router.route_steps(store, task, options, asking, local_state=local_state)
        try:
            endpoint = next(steps)
            while True:
                try:
                    reply = await forward_get_bytes(self.gets, endpoint, body, hop_timeout(time_remaining()))
                except UnavailableError as e:
                    endpoint = steps.throw(e)
                else:
                    slot.gets_forwarded += 1
                    endpoint = steps.send(reply)
        except StopIteration as answered:
            result: pb.GetReply | bytes = answered.value
            return result

    def _get_forwarded(self, request: pb.GetRequest, slot: QuerySlot) -> pb.GetReply:
        """A Get another instance forwarded: answered from this instance's replica or refused."""
        placement, key, task, options = self._locate(request)
        return self._get_local(placement, key, 0 if task is None else task.partition, options, True, slot)

    def _locate(self, request: pb.GetRequest) -> tuple[StorePlacement, Any, TaskId | None, QueryOptions]:
        """The store's placement, the key (parsed, serialized and hashed once:
        ``StorePlacement.locate``), its task (None for a global store: every instance holds it
        whole, so it is answered here) and the routing options. Raises BadRequest or the store's
        errors."""
        store = request.store
        if not store:
            raise BadRequest("store must be given")
        query_key = request.raw_key or request.key
        if len(query_key) > MAX_QUERY_KEY_BYTES:  # checked only then: a context manager per Get shows in profiles
            with caller_input():
                check_query_key(query_key)
        placement = self.streams.store_placement(store)  # raises for an unknown store / not started
        if placement.is_global:
            return placement, placement.key_of(request.key, request.raw_key)[0], None, _options_of(request, 1)
        key, task = placement.locate(request.key, request.raw_key)
        o = request.options
        options = (_options_of(request, placement.partitions) if o.allow_stale or o.position or o.HasField("max_lag")
                   else _DEFAULT_OPTIONS)  # most queries: nothing to parse, no call
        return placement, key, task, options

    def _get_local(self, placement: StorePlacement, key: Any, partition: int, options: QueryOptions,
                   forwarded: bool, slot: QuerySlot) -> pb.GetReply:
        """``key`` from this instance's replica of ``partition`` (runtime/query/execute.py), or
        UnavailableError; the reply's value serialized and shown as JSON by the kernel's serdes."""
        streams = self.streams
        value, replica = ask(streams, placement, KeyQuery(key), partition, options)
        meta = read_metadata(placement.store, replica, streams.instance_id, streams.config.application_server,
                             streams.state)  # cached per replica state: no call on a hit
        if forwarded:
            slot.gets_routed += 1
        else:
            slot.gets_local += 1
        value_serde = placement.spec.value_serde
        if value is None:
            return pb.GetReply(found=False, metadata=meta, value_serde=value_serde.name)
        return pb.GetReply(found=True, metadata=meta, value_serde=value_serde.name, value_json=value_to_json(value),
                           value=value_serde.serialize(value))

    def WindowFetch(self, request: pb.WindowFetchRequest, context: grpc.ServicerContext) -> pb.WindowFetchReply:
        try:
            return self._fetch(request, context.time_remaining)
        except Exception as e:
            _abort(context, e)

    def SessionFetch(self, request: pb.SessionFetchRequest, context: grpc.ServicerContext) -> pb.WindowFetchReply:
        try:
            return self._fetch(request, context.time_remaining)
        except Exception as e:
            _abort(context, e)

    def _fetch(self, request: pb.WindowFetchRequest | pb.SessionFetchRequest,
               time_remaining: Callable[[], float | None]) -> pb.WindowFetchReply:
        """WindowFetch / SessionFetch: routed by key exactly like Get."""
        streams = self.streams
        if not request.store:
            raise BadRequest("store must be given")
        store = request.store
        query: WindowKeyQuery | WindowRangeQuery
        window = isinstance(request, pb.WindowFetchRequest)
        check_store_kind(store, streams.store_spec(store), "window" if window else "session")  # never global
        placement = streams.store_placement(store)
        key, key_bytes = placement.key_of(request.key, request.raw_key)
        task = placement.task_of(key_bytes)
        if isinstance(request, pb.WindowFetchRequest):
            query = WindowKeyQuery(key, request.time_from, request.time_to)
        else:
            query = WindowRangeQuery(key)
        options = _options_of(request, placement.partitions)  # type: ignore[arg-type]  # the same fields as GetRequest's

        def answer_local() -> pb.WindowFetchReply:
            windows, meta = ask_local(streams, placement, query, task.partition, options)
            vs = streams.topology.stores[store].value_serde
            return pb.WindowFetchReply(
                windows=[pb.WindowEntry(start=s, end=e, value=vs.serialize(v) or b"", value_json=value_to_json(v))
                         for s, e, v in windows],
                metadata=meta, value_serde=vs.name)

        def forward(endpoint: str) -> pb.WindowFetchReply:
            return forward_fetch(self.pool, endpoint, request, hop_timeout(time_remaining()))

        return self.router.route(store, None if request.forwarded else task, options, answer_local, forward,
                                 forwarded=request.forwarded, local_state=streams.state)

    def Metrics(self, request: pb.MetricsRequest, context: grpc.ServicerContext) -> pb.MetricsReply:
        streams = self.streams
        return pb.MetricsReply(instance_id=streams.instance_id, metrics=[
            pb.Metric(name=m.name, group=m.group, tags=dict(m.tags), value=v, description=m.description)
            for m, v in streams.metrics().items()])

    def Metadata(self, request: pb.MetadataRequest, context: grpc.ServicerContext) -> pb.MetadataReply:
        streams = self.streams
        now = int(time.time() * 1000)
        out = pb.MetadataReply(asked=streams.instance_id, application_id=streams.config.application_id)
        for info in streams.metadata_for_all_streams_clients():
            out.instances.append(pb.InstanceMetadata(
                instance_id=info.instance_id, endpoint=info.endpoint, state=state_pb(info.state),
                heartbeat_age_ms=now - info.heartbeat_ms, alive=streams.view.is_alive(info, now),
                active_tasks=[str(t) for t in info.active_tasks], standby_tasks=[str(t) for t in info.standby_tasks],
                restoring_tasks=[str(t) for t in info.restoring_tasks], assigned_at_ms=info.assigned_at_ms,
                counters=_counters_pb(info.counters), heartbeat_interval_ms=info.heartbeat_interval_ms,
                session_timeout_ms=info.session_timeout_ms,
                stores=[pb.StorePartition(store=s.store, partition=s.partition, role=role_pb(s.role),
                                          position=s.position, end_offset=s.end_offset, lag=s.lag)
                        for s in info.stores]))
        if streams.layout is not None:
            for store, spec in streams.topology.stores.items():
                st = streams.topology.subtopology_of_store(store)
                n = streams.layout.tasks_per_subtopology[st.id]
                out.store_partitions[store] = n
                out.store_routes.append(pb.StoreRoute(store=store, subtopology=st.id, partitions=n,
                                                      key_serde=spec.key_serde.name,
                                                      value_serde=spec.value_serde.name))
            # partitions 0: a client (even one older than global_store) asks any instance
            for store, g in streams.topology.global_stores.items():
                out.store_routes.append(pb.StoreRoute(store=store, subtopology=-1, partitions=0, global_store=True,
                                                      key_serde=g.spec.key_serde.name,
                                                      value_serde=g.spec.value_serde.name))
        return out

    def Describe(self, request: pb.DescribeRequest, context: grpc.ServicerContext) -> pb.DescribeReply:
        reply = topology_reply(self.streams)
        self.input_lag.read(reply)
        return reply


def _counters_pb(c: InstanceCounters) -> pb.InstanceCounters:
    return pb.InstanceCounters(
        records_processed=c.records_processed, gets_local=c.gets_local, gets_routed=c.gets_routed,
        gets_forwarded=c.gets_forwarded, get_seconds=c.get_seconds, scans=c.scans, scan_entries=c.scan_entries,
        query_errors=dict(c.query_errors), dropped_records=dict(c.dropped_records), dirty_closes=c.dirty_closes)


def _status_of(e: Exception, slot: QuerySlot | None = None) -> RpcStatus:
    """The status ``e`` ends a call with (counted in ``slot``); a gRPC error from the forwarded
    hop passes through with its own status."""
    status = to_status(e)
    if slot is not None:
        slot.errors[status.code.name] += 1
    if status.code is grpc.StatusCode.INTERNAL and not isinstance(e, grpc.RpcError):
        log.error("query failed", exc_info=e)
    return status


async def _abort_async(context: grpc.aio.ServicerContext, e: Exception, slot: QuerySlot | None = None) -> NoReturn:
    """End the call (a coroutine run on the server's loop) with the status of ``e``."""
    status = _status_of(e, slot)
    await context.abort(status.code, status.details, status.trailing_metadata)
    raise AssertionError("unreachable")


def _abort(context: grpc.ServicerContext, e: Exception, slot: QuerySlot | None = None) -> NoReturn:
    """End the call (a handler run on the server's thread pool) with the status of ``e``."""
    status = _status_of(e, slot)
    context.abort(status.code, status.details, status.trailing_metadata)  # type: ignore[call-arg]  # aio's sync context
    raise AssertionError("unreachable")


#: health service name of the liveness check (Kubernetes' livenessProbe); "" is readiness
LIVENESS = "iqmesh.liveness"


class QueryServer:
    """The gRPC server of one instance: InteractiveQuery, the standard health service (SERVING
    only while the instance is RUNNING, see :meth:`set_serving`) and server reflection; TLS and
    the bearer token as ``security`` says (default: the instance's settings). ``host``: the
    address to bind (default: ``config.listen_host``, loopback unless application.server is not).

    A grpc.aio server on an event loop of its own: Get, the hot path, runs on the loop (no hand-off
    to a thread per call, and its hop to another instance is awaited); every other method is a
    plain function run on the server's pool of ``workers`` threads."""

    def __init__(self, streams: KafkaStreams, port: int, host: str | None = None, workers: int = 16,
                 security: Security | None = None) -> None:
        security = streams.config.security if security is None else security
        host = streams.config.listen_host if host is None else host
        address = f"{host}:{port}"
        check_port_free(host, port)
        self.servicer = QueryServicer(streams, security)
        #: the statuses, read in-process by the health port (instance/server/health_http.py)
        self.health = health.HealthServicer()
        #: the same statuses served over gRPC: grpcio's threaded servicer would hold a thread per
        #: Watch that no end of the call releases on a grpc.aio server
        self._aio_health = health.aio.HealthServicer()
        self._pool = futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="query")
        self._loop = LoopThread("query-server")
        try:
            self.server, self.port = self._loop.run(self._build(streams, security, address))
        except BaseException:
            self._loop.close()
            self._pool.shutdown(wait=False)
            raise
        if not is_loopback(host) and not security.protected:
            log.warning("the query server listens on %s without TLS or a token: anyone who can reach it can read "
                        "every store. Set %s and %s (and %s), or %s=127.0.0.1 to keep it local",
                        address, TLS_CERT_FILE, TLS_KEY_FILE, AUTH_TOKEN, LISTEN_HOST)
        self._streams = streams
        self.set_serving(False)
        self.set_live(True)

    async def _build(self, streams: KafkaStreams, security: Security, address: str) -> tuple[grpc.aio.Server, int]:
        """The server, bound (built on the loop: a grpc.aio server belongs to the loop it is made on)."""
        interceptors = [*security.server_interceptors(), ApplicationInterceptor(streams.config.application_id)]
        # gRPC sets SO_REUSEPORT by default on Linux: a second server would share the port and
        # answer some of the first one's calls
        server = grpc.aio.server(migration_thread_pool=self._pool,
                                 interceptors=[AioInterceptor(i) for i in interceptors],
                                 options=[("grpc.so_reuseport", 0)])
        add_strict_handlers(server, self.servicer, _SERVICE)
        health_pb2_grpc.add_HealthServicer_to_server(self._aio_health, server)
        reflection.enable_server_reflection(
            (_SERVICE.full_name, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
        try:
            port = (server.add_secure_port(address, security.server_credentials()) if security.server_tls
                    else server.add_insecure_port(address))
        except RuntimeError as e:  # grpcio reports a failed bind so
            raise PortInUseError(address) from e
        if port == 0:
            raise PortInUseError(address)
        return server, port

    def start(self) -> None:
        self._loop.run(self.server.start())

    def set_live(self, live: bool) -> None:
        """The liveness service (:data:`LIVENESS`): SERVING unless the instance needs a restart
        (in ERROR, or a stream thread stuck: ``KafkaStreams.is_live``). Unlike the readiness
        status it stays SERVING through rebalances and restores; a stopped process does not
        answer it at all, which a gRPC liveness probe also counts as a failure."""
        self._set_health(LIVENESS, health_pb2.HealthCheckResponse.SERVING if live
                         else health_pb2.HealthCheckResponse.NOT_SERVING)

    def set_serving(self, serving: bool) -> None:
        status = (health_pb2.HealthCheckResponse.SERVING if serving
                  else health_pb2.HealthCheckResponse.NOT_SERVING)
        self._set_health("", status)
        self._set_health(_SERVICE.full_name, status)

    def _set_health(self, service: str, status: health_pb2.HealthCheckResponse.ServingStatus) -> None:
        self.health.set(service, status)
        self._loop.submit(self._aio_health.set(service, status))

    def stop(self, grace: float = 2.0) -> None:
        self.health.enter_graceful_shutdown()
        self._loop.submit(self._aio_health.enter_graceful_shutdown())
        try:
            self._loop.run(self._stop(grace))
        finally:
            self._loop.close()
            self._pool.shutdown(wait=False, cancel_futures=True)
            self.servicer.executor.shutdown(wait=False, cancel_futures=True)
            self.servicer.watch_reads.shutdown(wait=False)
            self.servicer.pool.close()
            self.servicer.input_lag.close()

    async def _stop(self, grace: float) -> None:
        await self.server.stop(grace)
        await self.servicer.aio_pool.close()
