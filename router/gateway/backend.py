"""How the gateway asks the cluster: the query client's core (router.client.async_client), on the
gateway's own event loop, starting from the instances the discovery knows.

The gateway does no routing of its own: the client routes each key (straight to its owner, with
:class:`router.client.query_router.QueryRouter`) and asks an entry instance for the rest, moving on when
one cannot be reached and asking it last for a while, exactly as for any client. A refusal
(UNAVAILABLE with a reason), NOT_FOUND or INVALID_ARGUMENT is the cluster's answer; what is left
here is saying so when no instance could be reached at all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc

from kernel.channels import AioChannelPool
from kernel.security import NO_SECURITY, Security
from router.client.async_client import LAST_ENTRY, AsyncQueryClient
from router.gateway.discovery import Discovery
from router.gateway.errors import UNREACHABLE, is_refusal, unavailable

T = TypeVar("T")


class Backend:
    """``call(fn)`` awaits ``fn(client)`` (one :class:`AsyncQueryClient` for the whole gateway);
    ``timeout`` bounds each call, retries included (the instances carry it across their hop)."""

    def __init__(self, discovery: Discovery, timeout: float = 10.0, security: Security = NO_SECURITY) -> None:
        self.discovery = discovery
        self.timeout = timeout
        self.security = security
        self.client = AsyncQueryClient(discovery.endpoints, timeout, security=security)
        #: channels to one given instance (its own Metrics), without routing
        self.channels = AioChannelPool(security)

    def entries(self) -> list[str]:
        """Endpoints to try: the last one that answered first, those that failed lately last."""
        return self.client.entries()

    async def call(self, fn: Callable[[AsyncQueryClient], Awaitable[T]]) -> tuple[T, str]:
        """``fn(client)`` and the entry instance asked (``via``). Raises the cluster's gRPC error
        as it is, or ApiError 503 UNREACHABLE when no instance could be reached."""
        if not self.discovery.endpoints():
            raise unavailable(UNREACHABLE, self.nobody_known())
        LAST_ENTRY.set("")  # a keep-alive connection's requests share one task: not an earlier request's
        try:
            result = await fn(self.client)
        except grpc.RpcError as e:
            if e.code() is grpc.StatusCode.UNAVAILABLE and not is_refusal(e):
                raise unavailable(UNREACHABLE, f"no instance could be reached: {e.details()}") from None
            raise
        return result, LAST_ENTRY.get()

    def nobody_known(self) -> str:
        """Why no instance can be asked: what the discovery knows of it (a missing instances
        topic: check --application-id), else that it has found none yet."""
        return self.discovery.problem or "no instance known yet (discovery has found none)"

    async def close(self) -> None:
        await self.client.close()
        await self.channels.close()
