"""How the gateway asks the cluster: the Python query client, on a thread pool, through any instance.

The gateway does no routing of its own: an instance it asks routes the key (or every partition of
a scan) with :class:`router.query_router.QueryRouter`, exactly as for a gRPC client. What is here
is only the choice of the instance to ask (the *entry*): the last one that answered, else the
others the discovery knows, moving on when one cannot be reached at all. A refusal (UNAVAILABLE
with a reason), NOT_FOUND or INVALID_ARGUMENT is the cluster's answer and is not retried.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import grpc

from router.channels import ChannelPool
from router.client import QueryClient
from router.gateway.discovery import Discovery
from router.gateway.errors import UNREACHABLE, is_refusal, unavailable
from router.security import NO_SECURITY, Security

T = TypeVar("T")

#: an entry that failed is asked after the others for this long (it may be down or hung)
SUSPECT_S = 10.0


class Backend:
    """``call(fn)`` runs ``fn(client)`` against an entry instance without blocking the event loop;
    ``timeout`` bounds each gRPC call (the instances carry it across their forwarding hop)."""

    def __init__(self, discovery: Discovery, timeout: float = 10.0, workers: int = 16,
                 security: Security = NO_SECURITY) -> None:
        self.discovery = discovery
        self.timeout = timeout
        self.security = security
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gateway-grpc")
        #: channels to one given instance (its own Metrics), without routing
        self.channels = ChannelPool(security)
        self._clients: dict[str, QueryClient] = {}
        self._lock = threading.Lock()
        self._preferred = ""
        #: endpoint -> when it last could not be reached or did not answer in time (monotonic)
        self._failed: dict[str, float] = {}

    def entries(self) -> list[str]:
        """Endpoints to try: the last one that answered first, those that failed lately last."""
        known = self.discovery.endpoints()
        if self._preferred in known:
            known.remove(self._preferred)
            known.insert(0, self._preferred)
        now = time.monotonic()

        def failed_lately(endpoint: str) -> bool:
            t = self._failed.get(endpoint)
            return t is not None and now - t < SUSPECT_S
        return sorted(known, key=failed_lately)  # stable: False (fine) before True (suspect)

    def _suspect(self, endpoint: str) -> None:
        self._failed[endpoint] = time.monotonic()
        if self._preferred == endpoint:
            self._preferred = ""

    def client(self, endpoint: str) -> QueryClient:
        with self._lock:
            c = self._clients.get(endpoint)
            if c is None:
                c = self._clients[endpoint] = QueryClient(endpoint, timeout=self.timeout, security=self.security)
            return c

    async def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the gRPC thread pool (for a call that already has its client, e.g. the next
        page of a streamed scan)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def call(self, fn: Callable[[QueryClient], T]) -> tuple[T, str]:
        """``fn`` on the first entry that can be reached, and that entry's endpoint. Raises the
        cluster's gRPC error as it is, or ApiError 503 UNREACHABLE when no entry answered."""
        failures: list[str] = []
        for endpoint in self.entries():
            try:
                result = await self.run(functools.partial(fn, self.client(endpoint)))
            except grpc.RpcError as e:
                if e.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
                    self._suspect(endpoint)  # hung or overloaded: others first next time; no time left now
                if e.code() is not grpc.StatusCode.UNAVAILABLE or is_refusal(e):
                    raise
                self._suspect(endpoint)
                failures.append(f"{endpoint}: {e.details()}")
                continue
            self._preferred = endpoint
            return result, endpoint
        if not failures:
            raise unavailable(UNREACHABLE, "no instance known yet (discovery has found none)")
        raise unavailable(UNREACHABLE, "no instance could be reached: " + "; ".join(failures))

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self.channels.close()
        with self._lock:
            for c in self._clients.values():
                c.close()
            self._clients.clear()
