"""The one place where runtime and routing errors become gRPC status codes."""

from __future__ import annotations

import grpc

from instance.errors import (
    InvalidStateStoreException,
    StoreNotLoggedException,
    StreamsNotStartedException,
    TooManyWatchesException,
    UnknownStateStoreException,
)
from router.echo import clip
from router.unavailable import UnavailableError, UnavailableReason


def to_status(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    """Code and details for ``exc``; UNAVAILABLE details start with the reason's name. Details
    are clipped: they travel in a header, which gRPC limits (a message that echoed a 1 MB input
    came back as RESOURCE_EXHAUSTED instead of its own status)."""
    code, details = _status(exc)
    return code, clip(details)


def _status(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    if isinstance(exc, UnknownStateStoreException):
        return grpc.StatusCode.NOT_FOUND, str(exc)
    if isinstance(exc, StoreNotLoggedException):
        return grpc.StatusCode.FAILED_PRECONDITION, str(exc)
    if isinstance(exc, TooManyWatchesException):
        return grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc)
    if isinstance(exc, UnavailableError):
        tried = f" tried={','.join(exc.tried)}" if exc.tried else ""
        return grpc.StatusCode.UNAVAILABLE, f"{exc.reason.name}: {exc}{tried}"
    if isinstance(exc, StreamsNotStartedException):
        return grpc.StatusCode.UNAVAILABLE, f"{UnavailableReason.NOT_AVAILABLE.name}: {exc}"
    if isinstance(exc, InvalidStateStoreException):
        return grpc.StatusCode.UNAVAILABLE, f"{UnavailableReason.NOT_ACTIVE.name}: {exc}"
    if isinstance(exc, ValueError):
        return grpc.StatusCode.INVALID_ARGUMENT, str(exc)
    return grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}"
