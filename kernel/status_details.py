"""Typed details of a gRPC error status, so no caller parses a reason out of the details text.

A server that refuses a query puts a :class:`QueryRefusal` (reason, instance ids tried) in the
status's details (``grpc-status-details-bin``, google.rpc.Status's shape); a server of another
application puts a ``WrongApplication``. :func:`error_details` is the one reader on the client
side; :class:`RpcStatus` is what the servers abort with. The details text stays what people read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import grpc
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError, Message

from kernel.echo import clip
from kernel.rpc import iqmesh_pb2 as pb
from kernel.unavailable import STALE_HINT, FailureReason, UnavailableError
from kernel.wire_enums import reason_of, reason_pb

#: the trailing metadata key of a status's typed details (gRPC's own name for it)
DETAILS_KEY = "grpc-status-details-bin"

Trailer = tuple[tuple[str, str | bytes], ...]


@dataclass(frozen=True)
class Refusal:
    """An instance answered on purpose that no replica could: ``reason``; ``tried`` lists the
    instance ids asked, in order; ``message`` says what happened (without the other two)."""

    reason: FailureReason
    tried: tuple[str, ...] = ()
    message: str = ""
    #: a standby holds the partition: a stale read would be answered (UnavailableError's)
    standby_holds: bool = False


@dataclass(frozen=True)
class ErrorDetails:
    """What a status's typed details say: a refusal of a query, or a call meant for another
    application (neither: the transport failed, or a status that needs no details)."""

    refusal: Refusal | None = None
    wrong_application: bool = False


NO_DETAILS = ErrorDetails()


@dataclass(frozen=True)
class RpcStatus(grpc.Status):  # type: ignore[misc]
    """A status a servicer aborts with (``context.abort_with_status``): code, details text and
    the typed details in the trailing metadata."""

    code: grpc.StatusCode
    details: str
    trailing_metadata: Trailer = field(default=())


def details_trailer(code: grpc.StatusCode, message: str, *details: Message) -> Trailer:
    """The trailing metadata carrying ``details`` as google.rpc.Status (empty when none)."""
    if not details:
        return ()
    packed = []
    for d in details:
        a = any_pb2.Any()
        a.Pack(d)
        packed.append(a)
    status = pb.ErrorStatus(code=code.value[0], message=message, details=packed)
    return ((DETAILS_KEY, status.SerializeToString()),)


def refusal_status(e: UnavailableError, details: str) -> RpcStatus:
    """UNAVAILABLE with ``details`` as its text and the refusal's reason and tried ids typed."""
    refusal = pb.QueryRefusal(reason=reason_pb(e.reason), tried=list(e.tried),
                              message=clip(str(e)), standby_holds=e.standby_holds)
    code = grpc.StatusCode.UNAVAILABLE
    return RpcStatus(code, details, details_trailer(code, details, refusal))


def refusal_text(e: UnavailableError) -> str:
    """The details text of a refusal as people read it: the reason, the message, the hint, the
    ids tried."""
    tried = f" tried={','.join(e.tried)}" if e.tried else ""
    hint = f"; {STALE_HINT}" if e.standby_holds else ""
    return f"{e.reason.name}: {e}{hint}{tried}"


def error_details(e: BaseException) -> ErrorDetails:
    """The typed details of gRPC error ``e`` (sync or aio); NO_DETAILS when it carries none."""
    trailing = getattr(e, "trailing_metadata", None)
    try:
        pairs: Iterable[tuple[str, str | bytes]] | None = trailing() if callable(trailing) else None
    except Exception:  # a call that never started has no metadata
        pairs = None
    raw = next((v for k, v in pairs or () if k == DETAILS_KEY), None)
    if not isinstance(raw, bytes):
        return NO_DETAILS
    try:
        status = pb.ErrorStatus.FromString(raw)
    except DecodeError:
        return NO_DETAILS
    for a in status.details:
        if a.Is(pb.QueryRefusal.DESCRIPTOR):
            r = pb.QueryRefusal()
            a.Unpack(r)
            return ErrorDetails(refusal=Refusal(reason_of(r.reason), tuple(r.tried), r.message, r.standby_holds))
        if a.Is(pb.WrongApplication.DESCRIPTOR):
            return ErrorDetails(wrong_application=True)
    return NO_DETAILS


def refusal_of(e: BaseException) -> Refusal | None:
    """The refusal ``e`` carries: an instance's answer that no replica could (None: not one)."""
    return error_details(e).refusal


def wrong_application_status(message: str, serving: str, expected: str) -> RpcStatus:
    """FAILED_PRECONDITION for a call meant for application ``expected`` at a server of ``serving``."""
    code = grpc.StatusCode.FAILED_PRECONDITION
    return RpcStatus(code, message, details_trailer(code, message, pb.WrongApplication(serving=serving,
                                                                                          expected=expected)))


def passed_on(e: grpc.RpcError, default_details: str) -> RpcStatus:
    """A peer's error status as it is (code, text, typed details), to end this call with."""
    details_of = getattr(e, "details", None)  # grpc.Call and grpc.aio.AioRpcError (not a grpc.Call) have it
    details = (details_of() if callable(details_of) else "") or default_details
    trailing: Sequence[tuple[str, str | bytes]] = ()
    get = getattr(e, "trailing_metadata", None)
    if callable(get):
        trailing = tuple((k, v) for k, v in get() or () if k == DETAILS_KEY)
    return RpcStatus(e.code(), details, tuple(trailing))


def status_label(e: BaseException) -> str:
    """A short label of a gRPC error for counting failures: the code's name, then the refusal's
    reason (``UNAVAILABLE REBALANCING``) or ``WRONG_APPLICATION`` when its details give one."""
    code_of = getattr(e, "code", None)  # grpc.Call and grpc.aio.AioRpcError (not a grpc.Call) have it
    code = code_of() if callable(code_of) else None
    name = code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"
    details = error_details(e)
    if details.refusal is not None:
        return f"{name} {details.refusal.reason.name}"
    return f"{name} WRONG_APPLICATION" if details.wrong_application else name


def status_message(status: RpcStatus) -> pb.ErrorStatus:
    """``status`` as a message (one Get's outcome in a GetBatch): the typed details it carries,
    else its code and text."""
    typed = next((v for k, v in status.trailing_metadata if k == DETAILS_KEY), None)
    if isinstance(typed, bytes):
        return pb.ErrorStatus.FromString(typed)
    return pb.ErrorStatus(code=status.code.value[0], message=status.details)


def rpc_error(status: pb.ErrorStatus) -> grpc.aio.AioRpcError:
    """The error a call ended with ``status`` would have raised (its typed details in the trailer,
    where :func:`error_details` reads them): :func:`status_message` undone."""
    trailer = grpc.aio.Metadata((DETAILS_KEY, status.SerializeToString())) if status.details else grpc.aio.Metadata()
    return grpc.aio.AioRpcError(_CODES.get(status.code, grpc.StatusCode.UNKNOWN), grpc.aio.Metadata(), trailer,
                                status.message)


_CODES = {c.value[0]: c for c in grpc.StatusCode}
