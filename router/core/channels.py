"""gRPC channels by endpoint, dialled with the transport security of :mod:`router.core.security`; every
call names the application it is meant for once the pool knows it (router/core/application_guard.py)."""

from __future__ import annotations

import threading

import grpc

from router.core.application_guard import APPLICATION_HEADER
from router.core.security import NO_SECURITY, Security
from router.rpc import iqmesh_pb2_grpc as pb_grpc


class _Application:
    """The application calls are meant for: given, or learned from the first Metadata reply."""

    application_id: str

    def _application_metadata(self) -> tuple[tuple[str, str], ...]:
        app = self.application_id
        return ((APPLICATION_HEADER, app),) if app else ()


class ChannelPool(_Application):
    """One gRPC channel per endpoint, shared by threads (channels are thread-safe).
    ``application_id``: sent with every call (empty: none yet; it may be set later)."""

    def __init__(self, security: Security = NO_SECURITY, application_id: str = "") -> None:
        self.security = security
        self.application_id = application_id
        self._stubs: dict[str, pb_grpc.InteractiveQueryStub] = {}
        self._channels: dict[str, grpc.Channel] = {}
        self._lock = threading.Lock()

    def stub(self, endpoint: str) -> pb_grpc.InteractiveQueryStub:
        s = self._stubs.get(endpoint)
        if s is None:
            with self._lock:
                s = self._stubs.get(endpoint)
                if s is None:
                    ch = self.security.channel(endpoint, self._application_metadata)
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


class AioChannelPool(_Application):
    """The same for grpc.aio, used from one event loop."""

    def __init__(self, security: Security = NO_SECURITY, application_id: str = "") -> None:
        self.security = security
        self.application_id = application_id
        self._stubs: dict[str, pb_grpc.InteractiveQueryStub] = {}
        self._channels: dict[str, grpc.aio.Channel] = {}

    def stub(self, endpoint: str) -> pb_grpc.InteractiveQueryStub:
        s = self._stubs.get(endpoint)
        if s is None:
            ch = self._channels[endpoint] = self.security.aio_channel(endpoint, self._application_metadata)
            s = self._stubs[endpoint] = pb_grpc.InteractiveQueryStub(ch)
        return s

    async def close(self) -> None:
        channels = list(self._channels.values())
        self._channels.clear()
        self._stubs.clear()
        for ch in channels:
            await ch.close()
