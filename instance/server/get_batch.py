"""GetBatch as the owner answers it: each Get another instance forwarded in one hop
(router/client/forward_batch.py) answered as a forwarded Get alone would be, or with the status it
would have ended with, typed details included."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kernel.rpc import iqmesh_pb2 as pb
from kernel.status_details import DETAILS_KEY, RpcStatus


def answer_batch(requests: Iterable[pb.GetRequest], answer: Callable[[pb.GetRequest], pb.GetReply],
                 status_of: Callable[[Exception], RpcStatus]) -> pb.GetBatchReply:
    """The outcome of each request in order: ``answer(request)`` (the request marked forwarded:
    never passed on), or the status ``status_of`` gives what it raised."""
    reply = pb.GetBatchReply()
    for request in requests:
        request.forwarded = True
        outcome = reply.outcomes.add()
        try:
            outcome.reply.CopyFrom(answer(request))
        except Exception as e:  # noqa: BLE001 - becomes this Get's status, as it would alone
            outcome.error.CopyFrom(error_status(status_of(e)))
    return reply


def error_status(status: RpcStatus) -> pb.ErrorStatus:
    """``status`` as one Get's outcome: the typed details it carries, else its code and text."""
    typed = next((v for k, v in status.trailing_metadata if k == DETAILS_KEY), None)
    if isinstance(typed, bytes):
        return pb.ErrorStatus.FromString(typed)
    return pb.ErrorStatus(code=status.code.value[0], message=status.details)
