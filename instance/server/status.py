"""The one place where runtime and routing errors become gRPC statuses (code, details text and,
for a refusal, typed details: kernel/status_details.py)."""

from __future__ import annotations

import grpc

from instance.errors import (
    BadRequest,
    InvalidStateStoreException,
    StoreNotLoggedException,
    StreamsNotStartedException,
    TooManyWatchesException,
    UnknownStateStoreException,
)
from kernel.echo import clip
from kernel.status_details import RpcStatus, passed_on, refusal_status, refusal_text
from kernel.unavailable import FailureReason, UnavailableError


def to_status(exc: BaseException) -> RpcStatus:
    """The status ``exc`` ends a call with. Details are clipped: they travel in a header, which
    gRPC limits (a message that echoed a 1 MB input came back as RESOURCE_EXHAUSTED instead of
    its own status). A ValueError that is not a :class:`BadRequest` is a bug here: INTERNAL.
    A gRPC error from a forwarded hop passes on as it is."""
    if isinstance(exc, grpc.RpcError):
        return passed_on(exc, "forwarded query failed")
    refused = _refusal(exc)
    if refused is not None:
        return refusal_status(refused, clip(refusal_text(refused)))
    code, details = _status(exc)
    return RpcStatus(code, clip(details))


def _refusal(exc: BaseException) -> UnavailableError | None:
    if isinstance(exc, UnavailableError):
        return exc
    if isinstance(exc, StreamsNotStartedException):
        return UnavailableError(FailureReason.NOT_AVAILABLE, str(exc))
    if isinstance(exc, InvalidStateStoreException) and not isinstance(exc, UnknownStateStoreException):
        return UnavailableError(FailureReason.NOT_ACTIVE, str(exc))
    return None


def _status(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    if isinstance(exc, UnknownStateStoreException):
        return grpc.StatusCode.NOT_FOUND, str(exc)
    if isinstance(exc, StoreNotLoggedException):
        return grpc.StatusCode.FAILED_PRECONDITION, str(exc)
    if isinstance(exc, TooManyWatchesException):
        return grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc)
    if isinstance(exc, BadRequest):
        return grpc.StatusCode.INVALID_ARGUMENT, str(exc)
    return grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}"
