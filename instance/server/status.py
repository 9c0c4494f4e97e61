"""The one place where runtime errors become gRPC status codes."""

from __future__ import annotations

import grpc

from instance.errors import (
    InvalidStateStoreException,
    StreamsException,
    StreamsNotStartedException,
    UnknownStateStoreException,
)


class UnavailableError(StreamsException):
    """No replica can answer now; ``reason`` is machine-readable (REBALANCING, NOT_ACTIVE...)."""

    def __init__(self, reason: str, message: str, tried: list[str] | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.tried = tried or []


def to_status(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    if isinstance(exc, UnknownStateStoreException):
        return grpc.StatusCode.NOT_FOUND, str(exc)
    if isinstance(exc, UnavailableError):
        tried = f" tried={','.join(exc.tried)}" if exc.tried else ""
        return grpc.StatusCode.UNAVAILABLE, f"{exc.reason}: {exc}{tried}"
    if isinstance(exc, StreamsNotStartedException):
        return grpc.StatusCode.UNAVAILABLE, f"NOT_AVAILABLE: {exc}"
    if isinstance(exc, InvalidStateStoreException):
        return grpc.StatusCode.UNAVAILABLE, f"NOT_ACTIVE: {exc}"
    if isinstance(exc, ValueError):
        return grpc.StatusCode.INVALID_ARGUMENT, str(exc)
    return grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}"
