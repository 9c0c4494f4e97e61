"""The grpc.aio twin of :class:`router.client.QueryClient`: the same methods, awaited (scans are
iterated with ``async for``), the same routing and retry policy (:mod:`router.client_core`).
Use one instance per event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import grpc

from router.channels import AioChannelPool
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
    needs_refresh,
    parse_seeds,
    prepare_scan,
    result_of,
    routing_options,
    session_request,
    unavailable,
    window_request,
    windows_of,
)
from router.forward import refusal
from router.query_router import Candidate, QueryRouter
from router.routing_table import RoutingTable
from router.rpc import iqmesh_pb2 as pb
from router.rpc import iqmesh_pb2_grpc as pb_grpc
from router.scan_pages import AsyncScan
from router.scan_wire import ScanRequest, method_of
from router.security import NO_SECURITY, Security
from router.task_id import TaskId
from router.unavailable import UnavailableError, UnavailableReason
from router.watch_client import AsyncEndpoints, AsyncWatch, watch_request

T = TypeVar("T")


class AsyncQueryClient(ScanMethods[AsyncScan]):
    """``async with AsyncQueryClient("127.0.0.1:50051") as c: await c.get("counts", "kafka")``."""

    def __init__(self, target: str | Sequence[str], timeout: float = 10.0, *, security: Security = NO_SECURITY,
                 max_table_age: float = MAX_TABLE_AGE_S, application_id: str = "") -> None:
        self.seeds = parse_seeds(target)
        self.target = self.seeds[0]
        self.timeout = timeout
        self.max_table_age = max_table_age
        self._pool = AioChannelPool(security, application_id)
        self._entries = Entries(self.seeds)
        self._table: RoutingTable | None = None
        self._stale = False
        self._refreshing: asyncio.Lock | None = None

    @property
    def table(self) -> RoutingTable | None:
        return self._table

    async def get(self, store: str, key: KeyArg, allow_stale: bool = False, max_lag: int | None = None,
                  position: str = "", timeout: float | None = None) -> QueryResult:
        """As :meth:`router.client.QueryClient.get`."""
        deadline = Deadline.within(self.timeout if timeout is None else timeout)
        request = get_request(store, key, allow_stale, max_lag, position)
        options = routing_options(request)
        backoff = Backoff()
        while True:
            table = await self._fresh_table(deadline)
            task = table.task_of(store, key) if table is not None and options is not None else None
            try:
                if table is not None and table.is_global(store):
                    reply, asked = await self._ask_global(store, request, table, deadline)
                elif table is None or task is None or options is None:
                    reply, asked = await self._on_entry(lambda stub, t: stub.Get(request, timeout=t), deadline)
                else:
                    router = QueryRouter(table.view, None)
                    candidates, skipped = router.plan(store, task, options)
                    reply, asked = await self._ask_candidates(store, task, request, candidates, skipped, deadline,
                                                              allow_stale)
                return result_of(reply, table, store, asked)
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
            await asyncio.sleep(pause)

    async def _ask_candidates(self, store: str, task: TaskId, request: pb.GetRequest, candidates: list[Candidate],
                              skipped: list[UnavailableReason], deadline: Deadline,
                              allow_stale: bool) -> tuple[pb.GetReply, str]:
        """QueryRouter.route's loop, awaited: the first candidate that answers, and its endpoint."""
        direct = pb.GetRequest()
        direct.CopyFrom(request)
        direct.forwarded = True  # answer or refuse; never passed on
        tried: list[str] = []
        refused: list[UnavailableReason] = []
        for c in candidates:
            tried.append(c.instance_id)
            try:
                reply: pb.GetReply = await self._pool.stub(c.endpoint).Get(
                    direct, timeout=deadline.attempt_timeout(allow_stale))
                return reply, c.endpoint
            except grpc.RpcError as e:
                r = refusal(c.endpoint, e)
                if r is None:
                    raise
                refused.append(r.reason)
        raise QueryRouter.exhausted(store, task, refused + skipped, tried)

    async def _ask_global(self, store: str, request: pb.GetRequest, table: RoutingTable,
                          deadline: Deadline) -> tuple[pb.GetReply, str]:
        """As QueryClient._ask_global: the first instance that answers from its own copy, and its endpoint."""
        direct = pb.GetRequest()
        direct.CopyFrom(request)
        direct.forwarded = True  # answer or refuse; never passed on
        refused: list[UnavailableError] = []
        endpoints = self._entries.order(table)
        for endpoint in endpoints:
            try:
                reply: pb.GetReply = await self._pool.stub(endpoint).Get(direct, timeout=deadline.attempt_timeout(True))
            except grpc.RpcError as e:
                r = refusal(endpoint, e)
                if r is None:
                    raise
                refused.append(r)
                continue
            self._entries.answered(endpoint)
            return reply, endpoint
        raise global_exhausted(store, refused, endpoints)

    # -- window and session stores: asked of an entry instance, which routes the key ------------
    async def window_fetch(self, store: str, key: str, time_from: int, time_to: int, allow_stale: bool = False,
                           max_lag: int | None = None, position: str = "") -> WindowsResult:
        req = window_request(store, key, time_from, time_to, allow_stale, max_lag, position)
        return windows_of((await self._on_entry(lambda stub, t: stub.WindowFetch(req, timeout=t),
                                                Deadline.within(self.timeout)))[0])

    async def session_fetch(self, store: str, key: str, allow_stale: bool = False, max_lag: int | None = None,
                            position: str = "") -> WindowsResult:
        req = session_request(store, key, allow_stale, max_lag, position)
        return windows_of((await self._on_entry(lambda stub, t: stub.SessionFetch(req, timeout=t),
                                                Deadline.within(self.timeout)))[0])

    # -- scans (ScanMethods): iterated with ``async for`` ---------------------------------------
    def _scan(self, request: ScanRequest, opts: dict[str, Any]) -> AsyncScan:
        page_size, limit, page_token = prepare_scan(request, **opts)
        name = method_of(request)

        async def read(stub: pb_grpc.InteractiveQueryStub, t: float, r: ScanRequest) -> list[pb.ScanReply]:
            return [m async for m in getattr(stub, name)(r, timeout=t)]

        scans: list[AsyncScan] = []

        async def page(r: ScanRequest) -> list[pb.ScanReply]:
            replies, scans[0].asked = await self._on_entry(lambda stub, t: read(stub, t, r),
                                                           Deadline.within(self.timeout))
            return replies
        scans.append(AsyncScan(page, request, page_size, limit, page_token))
        return scans[0]

    def watch(self, store: str, key: KeyArg | None = None, *, prefix: KeyArg | None = None, all_keys: bool = False,
              resume_token: str = "", from_beginning: bool = False, with_json: bool = False,
              timeout: float | None = None) -> AsyncWatch:
        """As :meth:`router.client.QueryClient.watch`, iterated with ``async for``."""
        req = watch_request(store, key, prefix, all_keys, resume_token, from_beginning, with_json)
        stub = self._pool.stub
        return AsyncWatch(lambda endpoint, r, left: stub(endpoint).Watch(r, timeout=left),
                          AsyncEndpoints(stub, list(self.seeds), self.timeout), req, timeout,
                          start_timeout=self.timeout)

    async def metadata(self) -> pb.MetadataReply:
        reply, _ = await self._on_entry(lambda stub, t: stub.Metadata(pb.MetadataRequest(), timeout=t),
                                        Deadline.within(self.timeout))
        return reply

    async def describe(self) -> pb.DescribeReply:
        """As :meth:`router.client.QueryClient.describe`."""
        reply, _ = await self._on_entry(lambda stub, t: stub.Describe(pb.DescribeRequest(), timeout=t),
                                        Deadline.within(self.timeout))
        return reply

    async def refresh(self) -> RoutingTable:
        await self.metadata()
        assert self._table is not None
        return self._table

    # -- parts ---------------------------------------------------------------------------------
    async def _fresh_table(self, deadline: Deadline) -> RoutingTable | None:
        table = self._table
        if not needs_refresh(table, self._stale, self.max_table_age):
            return table
        if self._refreshing is None:
            self._refreshing = asyncio.Lock()
        async with self._refreshing:
            if self._table is not table:
                return self._table
            try:
                await self._on_entry(lambda stub, t: stub.Metadata(pb.MetadataRequest(), timeout=t), deadline)
            except grpc.RpcError:
                pass
            return self._table

    async def _on_entry(self, call: Callable[[pb_grpc.InteractiveQueryStub, float], Awaitable[T]],
                        deadline: Deadline) -> tuple[T, str]:
        last: grpc.RpcError | None = None
        for endpoint in self._entries.order(self._table):
            try:
                result = await call(self._pool.stub(endpoint), deadline.remaining())
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

    async def close(self) -> None:
        await self._pool.close()

    async def __aenter__(self) -> AsyncQueryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


__all__ = ["AsyncQueryClient", "AsyncScan", "QueryResult", "WindowsResult"]
