"""The query client on grpc.aio: the one core (router/client/client_steps.py: routing table, candidates
from QueryRouter, retries, suspects, deadline and backoff) driven with awaited calls. The REST
gateway uses it directly. Use one instance per event loop; scans are iterated with ``async for``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any, TypeVar

import grpc

from kernel.channels import AioChannelPool
from kernel.probe import nothing_listens
from kernel.rpc import iqmesh_pb2 as pb
from kernel.scan_wire import ScanRequest
from kernel.security import NO_SECURITY, Security
from router.client.client_core import KeyArg, QueryResult, ScanMethods, WindowsResult, is_unreachable, prepare_scan
from router.client.client_steps import (
    MAX_TABLE_AGE_S,
    ClientCore,
    Done,
    Driver,
    Pause,
    Probe,
    Refresh,
    Rpc,
    Step,
    Steps,
)
from router.client.forward_batch import GetBatcher
from router.client.routing_table import RoutingTable
from router.client.scan_pages import AsyncScan
from router.client.watch_client import AsyncWatch, watch_of

T = TypeVar("T")

#: the instance the last call of the current task was answered by, with a reply or an error status
#: ("" before one answered); the REST gateway reports it as ``via``
LAST_ENTRY: ContextVar[str] = ContextVar("iqmesh_last_entry", default="")


class AsyncQueryClient(ScanMethods[AsyncScan]):
    """``async with AsyncQueryClient("127.0.0.1:50051") as c: await c.get("counts", "kafka")``.
    ``target``: one or more seed instances (``"h1:p1,h2:p2"``, a list, or a function that gives
    them each time they are wanted, as the gateway's discovery does); ``timeout``: the default
    deadline of a call, retries included; ``security``: TLS and the bearer token. The methods are
    :class:`router.client.sync_client.QueryClient`'s, awaited."""

    def __init__(self, target: str | Sequence[str] | Callable[[], Sequence[str]], timeout: float = 10.0, *,
                 security: Security = NO_SECURITY, max_table_age: float = MAX_TABLE_AGE_S,
                 application_id: str = "") -> None:
        self._pool = AioChannelPool(security, application_id)
        #: the Gets sent straight to their replica, batched per replica while calls to it are in flight
        self._gets = GetBatcher(self._pool)
        self.core = ClientCore(target, timeout, max_table_age, self._pool)
        self.timeout = timeout
        self.max_table_age = max_table_age
        self._refreshing: asyncio.Lock | None = None

    @property
    def seeds(self) -> tuple[str, ...]:
        return self.core.seeds()

    @property
    def target(self) -> str:
        """The first seed ("" while a seed function gives none)."""
        return next(iter(self.core.seeds()), "")

    @property
    def table(self) -> RoutingTable | None:
        """The routing table in use (None before the first call)."""
        return self.core.table

    def entries(self) -> list[str]:
        """The entry instances in the order they are asked: the last one that answered first,
        those that could not be reached lately last."""
        return self.core.entries.order(self.core.table)

    async def get(self, store: str, key: KeyArg, allow_stale: bool = False, max_lag: int | None = None,
                  position: str = "", timeout: float | None = None) -> QueryResult:
        return await self._run(self.core.get(store, key, allow_stale, max_lag, position, timeout))

    async def window_fetch(self, store: str, key: str, time_from: int, time_to: int, allow_stale: bool = False,
                           max_lag: int | None = None, position: str = "") -> WindowsResult:
        return await self._run(self.core.window_fetch(store, key, time_from, time_to, allow_stale, max_lag, position))

    async def session_fetch(self, store: str, key: str, allow_stale: bool = False, max_lag: int | None = None,
                            position: str = "") -> WindowsResult:
        return await self._run(self.core.session_fetch(store, key, allow_stale, max_lag, position))

    def _scan(self, request: ScanRequest, opts: dict[str, Any]) -> AsyncScan:
        page_size, limit, page_token = prepare_scan(request, **opts)
        scans: list[AsyncScan] = []

        async def page(r: ScanRequest) -> list[pb.ScanReply]:
            replies, scans[0].asked = await self._run(self.core.scan_page(r))
            return replies
        scans.append(AsyncScan(page, request, page_size, limit, page_token))
        return scans[0]

    def watch(self, store: str, key: KeyArg | None = None, *, prefix: KeyArg | None = None, all_keys: bool = False,
              resume_token: str = "", from_beginning: bool = False, with_json: bool = False,
              timeout: float | None = None) -> AsyncWatch:
        """The committed changes of ``store`` as they happen (router/client/watch_client.py), iterated
        with ``async for``."""
        return watch_of(self._pool.stub, self.core.seeds, self.timeout, store, key, prefix, all_keys, resume_token,
                        from_beginning, with_json, timeout)

    async def metadata(self) -> pb.MetadataReply:
        return await self._run(self.core.metadata())

    async def describe(self) -> pb.DescribeReply:
        return await self._run(self.core.describe())

    async def refresh(self) -> RoutingTable:
        await self.metadata()
        assert self.core.table is not None
        return self.core.table

    async def _run(self, steps: Steps[T]) -> T:
        """Drive ``steps`` with awaited gRPC calls until they return."""
        driver = Driver(steps)
        step: Step | Done = driver.first()
        while not isinstance(step, Done):
            try:
                result = await self._do(step)
            except Exception as e:
                step = driver.throw(e)
            else:
                step = driver.send(result)
        return step.value  # type: ignore[no-any-return]

    async def _do(self, step: Step) -> Any:
        if isinstance(step, Rpc):
            call = getattr(self._pool.stub(step.endpoint), step.method)
            try:
                if step.stream:
                    return [m async for m in call(step.request, timeout=step.timeout)]
                if isinstance(step.request, pb.GetRequest) and step.request.forwarded:  # to its replica
                    reply = pb.GetReply.FromString(
                        await self._gets.call(step.endpoint, step.request.SerializeToString(), step.timeout))
                else:
                    reply = await call(step.request, timeout=step.timeout)
            except grpc.RpcError as e:
                if not is_unreachable(e):
                    LAST_ENTRY.set(step.endpoint)  # it answered, with an error status
                raise
            LAST_ENTRY.set(step.endpoint)
            return reply
        if isinstance(step, Pause):
            await asyncio.sleep(step.seconds)
            return None
        if isinstance(step, Probe):
            return await asyncio.to_thread(nothing_listens, step.endpoints)
        assert isinstance(step, Refresh)
        if self._refreshing is None:
            self._refreshing = asyncio.Lock()
        async with self._refreshing:
            if self.core.table is step.seen:
                await self._run(self.core.refresh(step.deadline))
        return None

    async def close(self) -> None:
        await self._pool.close()

    async def __aenter__(self) -> AsyncQueryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


__all__ = ["LAST_ENTRY", "AsyncQueryClient", "AsyncScan", "QueryResult", "WindowsResult"]
