"""The instance's server interceptors (the bearer token, the application guard) on a grpc.aio
server. They decide from the call's method and metadata alone and answer with the handler to run
(the one found, or one that refuses the call), so the same decision serves both kinds of server;
a refusing handler is a plain function, which the aio server runs on its thread pool."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import grpc


class AioInterceptor(grpc.aio.ServerInterceptor):
    """``sync``'s decision for a grpc.aio server."""

    def __init__(self, sync: grpc.ServerInterceptor) -> None:
        self.sync = sync

    async def intercept_service(
            self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
            details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        decided: grpc.RpcMethodHandler = self.sync.intercept_service(lambda _: handler, details)
        return decided
