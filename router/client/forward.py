"""The one hop: a query passed to another instance over gRPC, marked so it is not passed on."""

from __future__ import annotations

from typing import NoReturn

import grpc

from kernel.application_guard import is_wrong_application
from kernel.channels import ChannelPool
from kernel.rpc import iqmesh_pb2 as pb
from kernel.scan_wire import ReceivedPage, ScanRequest, method_of, read_stream
from kernel.status_details import refusal_of
from kernel.unavailable import FailureReason, UnavailableError
from router.client.forward_batch import GetBatcher

FORWARD_TIMEOUT_S = 5.0
#: kept from the caller's remaining time for the answer's way back (at most a fifth of it)
_RETURN_MARGIN_S = 0.5
#: codes meaning "this replica cannot answer now": routing moves on to the next candidate
#: (CANCELLED: an instance shutting down cuts the calls still in flight once its grace is over)
_TRY_NEXT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED)


def hop_timeout(time_remaining: float | None) -> float:
    """The deadline of a forwarded call: within the caller's own (``time_remaining``, None when
    the caller set none), never more than FORWARD_TIMEOUT_S, so a hung replica leaves time to
    ask the next candidate."""
    if time_remaining is None:
        return FORWARD_TIMEOUT_S
    return max(0.0, min(FORWARD_TIMEOUT_S, time_remaining - min(_RETURN_MARGIN_S, time_remaining / 5)))


def refusal(endpoint: str, e: grpc.RpcError) -> UnavailableError | None:
    """The UnavailableError of a gRPC error that means "ask the next candidate" (None: another
    error, e.g. NOT_FOUND or INVALID_ARGUMENT, for the caller to pass through). A server of
    another application at ``endpoint`` is not the replica wanted: NOT_AVAILABLE too."""
    if is_wrong_application(e):
        return UnavailableError(FailureReason.NOT_AVAILABLE, f"{endpoint}: {e.details()}")
    if e.code() not in _TRY_NEXT:
        return None
    refused = refusal_of(e)
    if refused is None:
        return UnavailableError(FailureReason.NOT_AVAILABLE, f"{endpoint}: {e.details() or ''}")
    return UnavailableError(refused.reason, f"{endpoint}: {refused.message}", standby_holds=refused.standby_holds)


def raise_refusal(endpoint: str, e: grpc.RpcError) -> NoReturn:
    """Raise the UnavailableError ``e`` means (:func:`refusal`), else ``e`` itself."""
    refused = refusal(endpoint, e)
    if refused is None:
        raise e
    raise refused from e


def ask_get(pool: ChannelPool, endpoint: str, request: pb.GetRequest, timeout: float) -> pb.GetReply:
    """Ask ``endpoint`` to answer ``request`` itself (marked forwarded: it answers from its own
    replica or refuses, never passes it on). An unreachable or refusing instance raises
    UnavailableError with the reason its typed details carry; other gRPC errors (NOT_FOUND,
    INVALID_ARGUMENT...) propagate as ``grpc.RpcError`` for the caller to pass through."""
    try:
        reply: pb.GetReply = pool.stub(endpoint).Get(direct(request), timeout=timeout)
    except grpc.RpcError as e:
        raise_refusal(endpoint, e)
    return reply


def direct(request: pb.GetRequest) -> pb.GetRequest:
    """``request`` marked forwarded: the instance asked answers from its own replica or refuses."""
    fwd = pb.GetRequest()
    fwd.CopyFrom(request)
    fwd.forwarded = True
    return fwd


def forward_get(pool: ChannelPool, endpoint: str, request: pb.GetRequest,
                timeout: float = FORWARD_TIMEOUT_S) -> pb.GetReply:
    """The one hop: :func:`ask_get`, the reply marked as answered by another instance."""
    reply = ask_get(pool, endpoint, request, timeout)
    reply.metadata.forwarded = True
    return reply


#: ``forwarded: true`` as encoded in a GetRequest (field 5, varint 1). Appended to a request's
#: bytes it sets the field whatever they held: the last value of a scalar field wins.
FORWARDED_REQUEST = b"\x28\x01"
#: ``metadata { forwarded: true }`` as encoded in a GetReply (field 3, length 2, holding
#: ReadMetadata's field 10, varint 1). Appended to a reply's bytes it sets metadata.forwarded and
#: keeps every other field of the metadata: occurrences of a message field are merged.
FORWARDED_REPLY = b"\x1a\x02\x50\x01"


async def forward_get_bytes(gets: GetBatcher, endpoint: str, request: bytes,
                            timeout: float = FORWARD_TIMEOUT_S) -> bytes:
    """:func:`forward_get` on serialized messages, awaited on grpc.aio (the query server's Get
    runs on its event loop), with the other Gets for ``endpoint`` (router/client/forward_batch.py):
    ``request`` (a GetRequest's bytes, as the caller sent them) passed on marked forwarded, and the
    reply's bytes returned marked as answered by another instance, neither parsed nor encoded
    again. Errors as :func:`ask_get`."""
    try:
        reply = await gets.call(endpoint, request + FORWARDED_REQUEST, timeout)
    except grpc.RpcError as e:
        raise_refusal(endpoint, e)
    return reply + FORWARDED_REPLY


def forward_fetch(pool: ChannelPool, endpoint: str, request: pb.WindowFetchRequest | pb.SessionFetchRequest,
                  timeout: float = FORWARD_TIMEOUT_S) -> pb.WindowFetchReply:
    """``forward_get`` for WindowFetch and SessionFetch."""
    fwd = type(request)()
    fwd.CopyFrom(request)
    fwd.forwarded = True
    stub = pool.stub(endpoint)
    call = stub.WindowFetch if isinstance(request, pb.WindowFetchRequest) else stub.SessionFetch
    try:
        reply: pb.WindowFetchReply = call(fwd, timeout=timeout)
    except grpc.RpcError as e:
        raise_refusal(endpoint, e)
    reply.metadata.forwarded = True
    return reply


def forward_scan(pool: ChannelPool, endpoint: str, request: ScanRequest,
                 timeout: float = FORWARD_TIMEOUT_S) -> ReceivedPage:
    """Ask ``endpoint`` for one page of a scan it answers itself (``request.forwarded`` set, its
    partitions named). Errors as :func:`forward_get`; a stream cut short is a refusal too."""
    if not request.forwarded or not request.scan.partitions:
        raise ValueError("a forwarded scan must be marked forwarded and name its partitions")
    call = getattr(pool.stub(endpoint), method_of(request))
    try:
        page = read_stream(call(request, timeout=timeout))
    except grpc.RpcError as e:
        raise_refusal(endpoint, e)
    except ValueError as e:
        raise UnavailableError(FailureReason.NOT_AVAILABLE, f"{endpoint}: {e}") from e
    for status in page.partitions:
        status.metadata.forwarded = True
    return page
