"""The Python query client: bootstraps a routing table from seed instances and sends each key
straight to its owner (no hop while the table is fresh); scans go through an entry instance,
which scatters them over every partition's owner and merges the answers. The retry and routing
policy is in :mod:`router.client_core`; :mod:`router.async_client` is the grpc.aio twin."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import grpc

from router.channels import ChannelPool
from router.client_core import (
    MAX_TABLE_AGE_S,
    RETRY_REASONS,
    Backoff,
    Deadline,
    Entries,
    KeyArg,
    QueryResult,
    ScanMethods,
    WindowsResult,
    get_request,
    get_retryable,
    global_exhausted,
    is_unreachable,
    learn_application,
    metadata_to_dict,
    needs_refresh,
    never_local,
    parse_seeds,
    prepare_scan,
    result_of,
    routing_options,
    routing_table_to_dict,
    session_request,
    unavailable,
    window_request,
    windows_of,
)
from router.forward import ask_get
from router.query_router import QueryRouter
from router.routing_table import RoutingTable
from router.rpc import iqmesh_pb2 as pb
from router.rpc import iqmesh_pb2_grpc as pb_grpc
from router.scan_pages import Scan, ScanItem
from router.scan_wire import ScanRequest, method_of
from router.security import NO_SECURITY, Security
from router.unavailable import UnavailableError
from router.watch_client import Endpoints, Watch, watch_request

T = TypeVar("T")


class QueryClient(ScanMethods[Scan]):
    """``QueryClient("127.0.0.1:50051").get("counts", "kafka")``. ``target``: one or more seed
    instances (``"h1:p1,h2:p2"`` or a list); ``timeout``: the default deadline of a call, retries
    included; ``security``: TLS and the bearer token (router.security). Thread-safe."""

    def __init__(self, target: str | Sequence[str], timeout: float = 10.0, *, security: Security = NO_SECURITY,
                 max_table_age: float = MAX_TABLE_AGE_S, application_id: str = "") -> None:
        self.seeds = parse_seeds(target)
        self.target = self.seeds[0]
        self.timeout = timeout
        self.max_table_age = max_table_age
        self._pool = ChannelPool(security, application_id)
        self._entries = Entries(self.seeds)
        self._table: RoutingTable | None = None
        self._stale = False
        self._lock = threading.Lock()

    @property
    def table(self) -> RoutingTable | None:
        """The routing table in use (None before the first call)."""
        return self._table

    def get(self, store: str, key: KeyArg, allow_stale: bool = False, max_lag: int | None = None,
            position: str = "", timeout: float | None = None) -> QueryResult:
        """The value of ``key``, from its active (or, with ``allow_stale``, a standby) replica.
        Raises ``grpc.RpcError``: NOT_FOUND (unknown store), INVALID_ARGUMENT, UNAVAILABLE (details
        start with the reason: REBALANCING, NOT_ACTIVE, NOT_UP_TO_BOUND, NO_REPLICA_WITHIN_LAG,
        NOT_AVAILABLE) once the deadline leaves no time to retry."""
        deadline = Deadline.within(self.timeout if timeout is None else timeout)
        request = get_request(store, key, allow_stale, max_lag, position)
        options = routing_options(request)
        backoff = Backoff()
        asked = [""]  # the endpoint asked last: the one that answered
        while True:
            table = self._fresh_table(deadline)
            task = table.task_of(store, key) if table is not None and options is not None else None
            try:
                if table is not None and table.is_global(store):
                    reply, asked[0] = self._ask_global(store, request, table, deadline)
                elif table is None or task is None or options is None:
                    reply, asked[0] = self._on_entry(lambda stub, t: stub.Get(request, timeout=t), deadline)
                else:
                    def ask(endpoint: str) -> pb.GetReply:
                        asked[0] = endpoint
                        return ask_get(self._pool, endpoint, request, deadline.attempt_timeout(allow_stale))
                    reply = QueryRouter(table.view, None).route(store, task, options, never_local, ask)
                return result_of(reply, table, store, asked[0])
            except UnavailableError as e:
                self._stale = True
                pause = backoff.pause(deadline) if e.reason in RETRY_REASONS else None
                if pause is None:
                    raise unavailable(e) from None
            except grpc.RpcError as e:
                pause = backoff.pause(deadline) if get_retryable(e, table) else None
                if pause is None:
                    raise
                self._stale = True
            time.sleep(pause)

    # -- window and session stores: asked of an entry instance, which routes the key ------------
    def window_fetch(self, store: str, key: str, time_from: int, time_to: int, allow_stale: bool = False,
                     max_lag: int | None = None, position: str = "") -> WindowsResult:
        """The key's windows starting in ``[time_from, time_to]`` (ms) of a window store."""
        req = window_request(store, key, time_from, time_to, allow_stale, max_lag, position)
        return windows_of(self._on_entry(lambda stub, t: stub.WindowFetch(req, timeout=t),
                                         Deadline.within(self.timeout))[0])

    def session_fetch(self, store: str, key: str, allow_stale: bool = False, max_lag: int | None = None,
                      position: str = "") -> WindowsResult:
        """The key's sessions of a session store."""
        req = session_request(store, key, allow_stale, max_lag, position)
        return windows_of(self._on_entry(lambda stub, t: stub.SessionFetch(req, timeout=t),
                                         Deadline.within(self.timeout))[0])

    # -- scans (ScanMethods): iterators over every partition of a store, paging transparently --
    def _scan(self, request: ScanRequest, opts: dict[str, Any]) -> Scan:
        page_size, limit, page_token = prepare_scan(request, **opts)
        name = method_of(request)

        scans: list[Scan] = []

        def page(r: ScanRequest) -> list[pb.ScanReply]:
            replies, scans[0].asked = self._on_entry(lambda stub, t: list(getattr(stub, name)(r, timeout=t)),
                                                     Deadline.within(self.timeout))
            return replies
        scans.append(Scan(page, request, page_size, limit, page_token))
        return scans[0]

    def watch(self, store: str, key: KeyArg | None = None, *, prefix: KeyArg | None = None, all_keys: bool = False,
              resume_token: str = "", from_beginning: bool = False, with_json: bool = False,
              timeout: float | None = None) -> Watch:
        """The committed changes of one key, a prefix or every key of ``store`` as they happen
        (router/watch_client.py); ``timeout``: stop after that many seconds (None: never)."""
        req = watch_request(store, key, prefix, all_keys, resume_token, from_beginning, with_json)
        stub = self._pool.stub
        return Watch(lambda endpoint, r, left: stub(endpoint).Watch(r, timeout=left),
                     Endpoints(stub, list(self.seeds), self.timeout), req, timeout, start_timeout=self.timeout)

    def metadata(self) -> pb.MetadataReply:
        """The routing table as the entry instance (the first seed that answers) sees it."""
        reply, _ = self._on_entry(lambda stub, t: stub.Metadata(pb.MetadataRequest(), timeout=t),
                                  Deadline.within(self.timeout))
        return reply

    def describe(self) -> pb.DescribeReply:
        """The topology as the entry instance runs it, and the processing lag of every input
        partition (the group's committed offset against the end offset)."""
        reply, _ = self._on_entry(lambda stub, t: stub.Describe(pb.DescribeRequest(), timeout=t),
                                  Deadline.within(self.timeout))
        return reply

    def refresh(self) -> RoutingTable:
        """Fetch the routing table now."""
        self.metadata()
        assert self._table is not None
        return self._table

    # -- parts ---------------------------------------------------------------------------------
    def _ask_global(self, store: str, request: pb.GetRequest, table: RoutingTable,
                    deadline: Deadline) -> tuple[pb.GetReply, str]:
        """A Get of a global store: the first instance that answers from its own copy (entry
        order); one still loading it, or unreachable, passes to the next."""
        refused: list[UnavailableError] = []
        endpoints = self._entries.order(table)
        for endpoint in endpoints:
            try:
                reply = ask_get(self._pool, endpoint, request, deadline.attempt_timeout(True))
            except UnavailableError as e:
                refused.append(e)
                continue
            self._entries.answered(endpoint)
            return reply, endpoint
        raise global_exhausted(store, refused, endpoints)

    def _fresh_table(self, deadline: Deadline) -> RoutingTable | None:
        """The table, fetched again first when missing, too old or marked stale by a routing
        failure (by one thread; the others use what it fetched). An unreachable cluster leaves
        the old table (or None)."""
        table = self._table
        if not needs_refresh(table, self._stale, self.max_table_age):
            return table
        with self._lock:
            if self._table is not table:
                return self._table
            try:
                self._on_entry(lambda stub, t: stub.Metadata(pb.MetadataRequest(), timeout=t), deadline)
            except grpc.RpcError:
                pass
            return self._table

    def _on_entry(self, call: Callable[[pb_grpc.InteractiveQueryStub, float], T],
                  deadline: Deadline) -> tuple[T, str]:
        """``call(stub, timeout)`` on the first entry instance that can be reached; a Metadata
        reply becomes the routing table. Raises the instance's gRPC error as it is, or the last
        transport error when none could be reached."""
        last: grpc.RpcError | None = None
        for endpoint in self._entries.order(self._table):
            try:
                result = call(self._pool.stub(endpoint), deadline.remaining())
            except grpc.RpcError as e:
                if not is_unreachable(e) or deadline.remaining() <= 0:
                    raise
                self._entries.unreachable(endpoint)
                last = e
                continue
            self._entries.answered(endpoint)
            if isinstance(result, pb.MetadataReply):
                learn_application(self._pool, result)
                self._table, self._stale = RoutingTable(result), False
            return result, endpoint
        assert last is not None
        raise last

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> QueryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["ChannelPool", "QueryClient", "QueryResult", "Scan", "ScanItem", "Watch", "WindowsResult",
           "metadata_to_dict", "routing_table_to_dict"]
