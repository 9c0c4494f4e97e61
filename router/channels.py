"""gRPC channels by endpoint, dialled with the transport security of :mod:`router.security`."""

from __future__ import annotations

import threading

import grpc

from router.rpc import iqmesh_pb2_grpc as pb_grpc
from router.security import NO_SECURITY, Security


class ChannelPool:
    """One gRPC channel per endpoint, shared by threads (channels are thread-safe)."""

    def __init__(self, security: Security = NO_SECURITY) -> None:
        self.security = security
        self._stubs: dict[str, pb_grpc.InteractiveQueryStub] = {}
        self._channels: dict[str, grpc.Channel] = {}
        self._lock = threading.Lock()

    def stub(self, endpoint: str) -> pb_grpc.InteractiveQueryStub:
        s = self._stubs.get(endpoint)
        if s is None:
            with self._lock:
                s = self._stubs.get(endpoint)
                if s is None:
                    ch = self.security.channel(endpoint)
                    self._channels[endpoint] = ch
                    s = pb_grpc.InteractiveQueryStub(ch)
                    self._stubs[endpoint] = s
        return s

    def close(self) -> None:
        with self._lock:
            for ch in self._channels.values():
                ch.close()
            self._channels.clear()
            self._stubs.clear()


class AioChannelPool:
    """The same for grpc.aio, used from one event loop."""

    def __init__(self, security: Security = NO_SECURITY) -> None:
        self.security = security
        self._stubs: dict[str, pb_grpc.InteractiveQueryStub] = {}
        self._channels: dict[str, grpc.aio.Channel] = {}

    def stub(self, endpoint: str) -> pb_grpc.InteractiveQueryStub:
        s = self._stubs.get(endpoint)
        if s is None:
            ch = self._channels[endpoint] = self.security.aio_channel(endpoint)
            s = self._stubs[endpoint] = pb_grpc.InteractiveQueryStub(ch)
        return s

    async def close(self) -> None:
        channels = list(self._channels.values())
        self._channels.clear()
        self._stubs.clear()
        for ch in channels:
            await ch.close()
