"""The Python query client for code without an event loop: the one core (router/client/client_steps.py:
routing table, candidates from QueryRouter, retries, suspects, deadline and backoff) driven with
blocking gRPC calls, so a Get costs what one blocking call costs. Thread-safe. Watches run the
one watch loop (router.client.watch_client.AsyncWatch) on an event loop thread the client starts for the
first of them."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any, TypeVar

from kernel.channels import AioChannelPool, ChannelPool
from kernel.event_loop import LoopThread
from kernel.probe import nothing_listens
from kernel.rpc import iqmesh_pb2 as pb
from kernel.scan_wire import ScanRequest
from kernel.security import NO_SECURITY, Security
from router.client.client_core import (
    KeyArg,
    QueryResult,
    ScanMethods,
    WindowsResult,
    metadata_to_dict,
    prepare_scan,
    routing_table_to_dict,
)
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
from router.client.routing_table import RoutingTable
from router.client.scan_pages import Scan, ScanItem
from router.client.watch_client import Watch, watch_of

T = TypeVar("T")


class QueryClient(ScanMethods[Scan]):
    """``QueryClient("127.0.0.1:50051").get("counts", "kafka")``. ``target``: one or more seed
    instances (``"h1:p1,h2:p2"`` or a list); ``timeout``: the default deadline of a call, retries
    included; ``security``: TLS and the bearer token (kernel.security). The methods are
    :class:`router.client.async_client.AsyncQueryClient`'s; scans and watches are plain iterators."""

    def __init__(self, target: str | Sequence[str], timeout: float = 10.0, *, security: Security = NO_SECURITY,
                 max_table_age: float = MAX_TABLE_AGE_S, application_id: str = "") -> None:
        self._pool = ChannelPool(security, application_id)
        self.core = ClientCore(target, timeout, max_table_age, self._pool)
        self.seeds = self.core.seeds()
        self.target = self.seeds[0]
        self.timeout = timeout
        self.max_table_age = max_table_age
        self._security = security
        self._lock = threading.Lock()
        self._watches: tuple[LoopThread, AioChannelPool] | None = None

    @property
    def table(self) -> RoutingTable | None:
        """The routing table in use (None before the first call)."""
        return self.core.table

    def get(self, store: str, key: KeyArg, allow_stale: bool = False, max_lag: int | None = None,
            position: str = "", timeout: float | None = None) -> QueryResult:
        """The value of ``key`` (router.client.client_steps.ClientCore.get)."""
        return self._run(self.core.get(store, key, allow_stale, max_lag, position, timeout))

    def window_fetch(self, store: str, key: str, time_from: int, time_to: int, allow_stale: bool = False,
                     max_lag: int | None = None, position: str = "") -> WindowsResult:
        """The key's windows starting in ``[time_from, time_to]`` (ms) of a window store."""
        return self._run(self.core.window_fetch(store, key, time_from, time_to, allow_stale, max_lag, position))

    def session_fetch(self, store: str, key: str, allow_stale: bool = False, max_lag: int | None = None,
                      position: str = "") -> WindowsResult:
        """The key's sessions of a session store."""
        return self._run(self.core.session_fetch(store, key, allow_stale, max_lag, position))

    # -- scans (ScanMethods): iterators over every partition of a store, paging transparently --
    def _scan(self, request: ScanRequest, opts: dict[str, Any]) -> Scan:
        page_size, limit, page_token = prepare_scan(request, **opts)
        return self._paged(request, page_size, limit, page_token)

    def scan_partition(self, store: str, partition: int, *, allow_stale: bool = False, position: str = "",
                       page_size: int = 0) -> Scan:
        """Every entry of one partition of ``store``, keys and values as bytes; each page is
        bounded by the position the page before reported (the partition never goes back in time
        while paged); UNAVAILABLE rather than a page without it. ``Scan.reports`` says who served
        it, where it stood on the first and the last page (what the snapshot job records)."""
        request = pb.AllRequest(store=store, scan=pb.ScanOptions(partitions=[partition]))
        page_size, limit, page_token = prepare_scan(request, page_size=page_size, allow_stale=allow_stale,
                                                    position=position, require_complete=True)
        return self._paged(request, page_size, limit, page_token, raw=True, follow_position=True)

    def _paged(self, request: ScanRequest, page_size: int, limit: int | None, page_token: str,
               **how: bool) -> Scan:
        """A Scan whose pages are asked of entry instances (``how``: Scan's raw, follow_position)."""
        scans: list[Scan] = []

        def page(r: ScanRequest) -> list[pb.ScanReply]:
            replies, scans[0].asked = self._run(self.core.scan_page(r))
            return replies
        scans.append(Scan(page, request, page_size, limit, page_token, **how))
        return scans[0]

    def watch(self, store: str, key: KeyArg | None = None, *, prefix: KeyArg | None = None, all_keys: bool = False,
              resume_token: str = "", from_beginning: bool = False, with_json: bool = False,
              timeout: float | None = None) -> Watch:
        """The committed changes of one key, a prefix or every key of ``store`` as they happen
        (router/client/watch_client.py); ``timeout``: stop after that many seconds (None: never)."""
        loop, pool = self._watching()
        watch = watch_of(pool.stub, self.core.seeds, self.timeout, store, key, prefix, all_keys, resume_token,
                         from_beginning, with_json, timeout)
        return Watch(watch, loop.run, loop.call_soon)

    def metadata(self) -> pb.MetadataReply:
        """The routing table as the entry instance (the first seed that answers) sees it."""
        return self._run(self.core.metadata())

    def describe(self) -> pb.DescribeReply:
        """The topology as the entry instance runs it, and the processing lag of every input
        partition (the group's committed offset against the end offset)."""
        return self._run(self.core.describe())

    def refresh(self) -> RoutingTable:
        """Fetch the routing table now."""
        self.metadata()
        assert self.core.table is not None
        return self.core.table

    # -- the driver ------------------------------------------------------------------------------
    def _run(self, steps: Steps[T]) -> T:
        """Drive ``steps`` with blocking gRPC calls until they return."""
        driver = Driver(steps)
        step: Step | Done = driver.first()
        while not isinstance(step, Done):
            try:
                result = self._do(step)
            except Exception as e:
                step = driver.throw(e)
            else:
                step = driver.send(result)
        return step.value  # type: ignore[no-any-return]

    def _do(self, step: Step) -> Any:
        if isinstance(step, Rpc):
            call = getattr(self._pool.stub(step.endpoint), step.method)
            if step.stream:
                return list(call(step.request, timeout=step.timeout))
            return call(step.request, timeout=step.timeout)
        if isinstance(step, Pause):
            time.sleep(step.seconds)
            return None
        if isinstance(step, Probe):
            return nothing_listens(step.endpoints)
        assert isinstance(step, Refresh)
        with self._lock:  # one thread fetches; the others use what it fetched
            if self.core.table is step.seen:
                self._run(self.core.refresh(step.deadline))
        return None

    def _watching(self) -> tuple[LoopThread, AioChannelPool]:
        """The watches' event loop thread and channels (started with the first watch)."""
        with self._lock:
            if self._watches is None:
                self._watches = LoopThread("iqmesh-watch"), AioChannelPool(self._security, self._pool.application_id)
            return self._watches

    def close(self) -> None:
        self._pool.close()
        if self._watches is not None:
            loop, pool = self._watches
            loop.run(pool.close())
            loop.close()

    def __enter__(self) -> QueryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["ChannelPool", "QueryClient", "QueryResult", "Scan", "ScanItem", "Watch", "WindowsResult",
           "metadata_to_dict", "routing_table_to_dict"]
