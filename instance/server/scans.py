"""The scan RPCs of one instance (MultiGet, Range, PrefixScan, All): one page per call.

Each partition is routed like a Get (router.client.query_router: candidates, lag and position bounds,
one hop), in parallel; the pages are merged by key (router.client.scatter). A forwarded scan names its
partitions and is answered from local replicas only, so a scan fans out once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Executor

from instance.errors import BadRequest, caller_input
from instance.runtime.kafka_streams import KafkaStreams
from instance.runtime.query import RangePageQuery
from instance.server.replies import ask_local, scan_entry
from kernel.channels import ChannelPool
from kernel.options import QueryOptions
from kernel.page_token import PageToken, resume_after
from kernel.partitioner import default_partition
from kernel.rpc import iqmesh_pb2 as pb
from kernel.scan_query import ScanKind
from kernel.scan_wire import ParsedScan, ScanRequest, build_request, parse_request
from kernel.task_id import TaskId
from kernel.unavailable import FailureReason, UnavailableError
from kernel.wire_enums import reason_of, reason_pb
from router.client.forward import forward_scan, hop_timeout
from router.client.query_router import QueryRouter
from router.client.scatter import MergedPage, PartitionFailure, PartitionPage, incomplete_error, merge, scatter

DEFAULT_LIMIT = 1000
MAX_LIMIT = 10_000
#: entries per stream message (fewer messages than one per entry), and a size that closes a
#: message early, well below gRPC's default 4 MiB limit whatever the values' size
ENTRIES_PER_MESSAGE = 256
BYTES_PER_MESSAGE = 1 << 20

Page = PartitionPage[pb.ScanEntry, pb.ReadMetadata]


def page_limit(requested: int) -> int:
    """The limit of a page: 0 means the default, more than MAX_LIMIT is cut to it."""
    if requested < 0:
        raise BadRequest(f"limit must not be negative, got {requested}")
    return min(requested or DEFAULT_LIMIT, MAX_LIMIT)


class ScanService:
    """Serves scan requests over ``streams``; ``pool`` reaches the other instances and
    ``executor`` reads partitions in parallel."""

    def __init__(self, streams: KafkaStreams, pool: ChannelPool, executor: Executor) -> None:
        self.streams = streams
        self.pool = pool
        self.executor = executor

    def page(self, request: ScanRequest, time_remaining: Callable[[], float | None]) -> list[pb.ScanReply]:
        """The whole reply stream of ``request``, built before anything is sent, so a failure is
        a status code rather than a stream cut short. Raises as :func:`instance.server.status.to_status`
        maps: BadRequest, UnknownStateStoreException, UnavailableError."""
        streams = self.streams
        with caller_input():
            parsed = parse_request(request, lambda text: streams.store_placement(request.store).key_of(text)[1])
        query = parsed.query
        store = query.store
        is_global = streams.is_global_store(store)
        spec = streams.store_spec(store)  # raises for an unknown store
        # a global store is one partition, answered here (refused as a whole while it loads)
        placement = streams.store_placement(store)  # raises when not started (a store with tasks)
        sub, n = (-1, 1) if is_global else (placement.subtopology, placement.partitions)
        if query.kind is ScanKind.MULTI_GET:
            for kb in query.keys:
                placement.key_of(raw=kb)  # a raw key must be a key of the store's serde
        partitions = self._partitions(parsed, n)
        limit = page_limit(parsed.scan.limit)
        with caller_input():
            after = resume_after(parsed.scan.page_token, query)
            o = parsed.options
            options = QueryOptions.parse(store, o.allow_stale, o.max_lag if o.HasField("max_lag") else None,
                                         o.position, n)
        router = QueryRouter(streams.view, streams.instance_id)
        local_state = streams.state
        page_query = RangePageQuery(query, after, limit, spec.key_serde,
                                    scan_entry(spec.value_serde, parsed.scan.with_json),
                                    (lambda kb: 0) if is_global else (lambda kb: default_partition(kb, n)))

        def read_local(p: int) -> Page:
            page, meta = ask_local(streams, placement, page_query, p, options)
            return PartitionPage(p, page.entries, page.more, meta)

        def read(p: int) -> Page:
            if is_global:
                return read_local(0)
            return router.route(store, TaskId(sub, p), options, lambda: read_local(p),
                                lambda endpoint: self._forward(endpoint, parsed, after, p, limit, time_remaining),
                                forwarded=parsed.forwarded, local_state=local_state)

        merged = merge(scatter(partitions, read, self.executor), limit)
        if parsed.scan.require_complete and merged.failures:
            raise incomplete_error(store, merged.failures)
        header = pb.ScanHeader(store=store, key_serde=spec.key_serde.name, value_serde=spec.value_serde.name,
                               partitions=n)
        token = "" if merged.resume_after is None else PageToken(query.fingerprint(), merged.resume_after).encode()
        return list(replies(header, merged, token))

    # -- parts ---------------------------------------------------------------------------------
    def _partitions(self, parsed: ParsedScan, n: int) -> list[int]:
        """The partitions this request covers: those named (a forwarded scan must name them), else
        all of the store's; a MULTI_GET only those holding one of its keys."""
        named = list(parsed.scan.partitions)
        if parsed.forwarded and not named:
            raise BadRequest("a forwarded scan must name its partitions")
        bad = [p for p in named if not 0 <= p < n]
        if bad:
            raise BadRequest(f"partitions {bad} out of range: store {parsed.query.store!r} has {n}")
        wanted = set(named) if named else set(range(n))
        if parsed.query.kind is ScanKind.MULTI_GET and not self.streams.is_global_store(parsed.query.store):
            wanted &= {default_partition(kb, n) for kb in parsed.query.keys}
        return sorted(wanted)

    def _forward(self, endpoint: str, parsed: ParsedScan, after: bytes | None, partition: int, limit: int,
                 time_remaining: Callable[[], float | None]) -> Page:
        """One partition's page from ``endpoint``: the same query for that partition only (a
        MULTI_GET with its keys only), resumed by a token of that query."""
        query = parsed.query
        if query.kind is ScanKind.MULTI_GET:
            n = self.streams.store_placement(query.store).partitions
            query = query.with_keys(k for k in query.keys if default_partition(k, n) == partition)
        token = "" if after is None else PageToken(query.fingerprint(), after).encode()
        scan = pb.ScanOptions(limit=limit, page_token=token, with_json=parsed.scan.with_json,
                              partitions=[partition])
        request = build_request(query, parsed.options, scan, forwarded=True)
        received = forward_scan(self.pool, endpoint, request, hop_timeout(time_remaining()))
        status = next((s for s in received.partitions if s.partition == partition), None)
        if status is None:
            raise UnavailableError(FailureReason.NOT_AVAILABLE, f"{endpoint}: no status for partition {partition}")
        if not status.available:
            raise UnavailableError(reason_of(status.reason), f"{endpoint}: {status.message}")
        assert received.end is not None  # read_stream guarantees it
        return PartitionPage(partition, received.entries, bool(received.end.next_page_token), status.metadata)


def replies(header: pb.ScanHeader, merged: MergedPage[pb.ScanEntry, pb.ReadMetadata],
            token: str) -> Iterator[pb.ScanReply]:
    """The reply stream of a page: header, one status per partition, entries in batches, end."""
    yield pb.ScanReply(header=header)
    for o in merged.outcomes:
        if isinstance(o, PartitionFailure):
            status = pb.PartitionStatus(partition=o.partition, available=False, reason=reason_pb(o.reason),
                                        message=o.message, tried=list(o.tried))
        else:
            status = pb.PartitionStatus(partition=o.partition, available=True, metadata=o.metadata)
        yield pb.ScanReply(partition=status)
    batch: list[pb.ScanEntry] = []
    size = 0
    for e in merged.entries:
        batch.append(e)
        size += e.ByteSize()
        if len(batch) == ENTRIES_PER_MESSAGE or size >= BYTES_PER_MESSAGE:
            yield pb.ScanReply(entries=pb.ScanEntries(entries=batch))
            batch, size = [], 0
    if batch:
        yield pb.ScanReply(entries=pb.ScanEntries(entries=batch))
    yield pb.ScanReply(end=pb.ScanEnd(next_page_token=token, complete=merged.complete, count=len(merged.entries)))

