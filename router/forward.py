"""The one hop: a query passed to another instance over gRPC, marked so it is not passed on."""

from __future__ import annotations

import grpc

from router.client import ChannelPool
from router.rpc import iqmesh_pb2 as pb
from router.unavailable import UnavailableError, UnavailableReason

FORWARD_TIMEOUT_S = 5.0
#: codes meaning "this replica cannot answer now": routing moves on to the next candidate
_TRY_NEXT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def forward_get(pool: ChannelPool, endpoint: str, request: pb.GetRequest,
                timeout: float = FORWARD_TIMEOUT_S) -> pb.GetReply:
    """Ask ``endpoint`` to answer ``request`` itself. An unreachable or refusing instance raises
    UnavailableError with the reason its details start with; other gRPC errors (NOT_FOUND,
    INVALID_ARGUMENT...) propagate as ``grpc.RpcError`` for the caller to pass through."""
    fwd = pb.GetRequest()
    fwd.CopyFrom(request)
    fwd.forwarded = True
    try:
        reply: pb.GetReply = pool.stub(endpoint).Get(fwd, timeout=timeout)
    except grpc.RpcError as e:
        if e.code() in _TRY_NEXT:
            details = e.details() or ""
            raise UnavailableError(UnavailableReason.from_details(details), f"{endpoint}: {details}") from e
        raise
    reply.metadata.forwarded = True
    return reply
