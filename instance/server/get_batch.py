"""GetBatch as the owner answers it: each Get another instance forwarded in one hop
(router/client/forward_batch.py) answered as a forwarded Get alone would be, or with the status it
would have ended with, typed details included."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kernel.rpc import iqmesh_pb2 as pb
from kernel.status_details import RpcStatus, status_message


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
            outcome.error.CopyFrom(status_message(status_of(e)))
    return reply

