"""Gets sent to the replica that answers them, batched: while calls to a replica are in flight,
the Gets for it wait and the next call carries all of them.

A Get sent to another instance costs the sender a client call and the replica a server call:
under load the call, not the read, is the cost. The forwarding hop of an instance and the routing
client of the gateway send their Gets here. While :data:`LANES_PER_REPLICA` calls to a replica are
in flight, the Gets for it wait, and the next call takes all of them at once (GetBatch, at most
:data:`MAX_BATCH`). A Get that finds a lane free goes alone (Get, bytes in and out): a quiet sender
waits for nothing. Each Get of a batch is answered or refused as it would have been alone; a
replica that does not know GetBatch (an older instance, in a rolling upgrade) gets them one by one.

Runs on one event loop (the query server's, or the gateway's); not thread-safe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field

import grpc

from kernel.channels import AioChannelPool
from kernel.rpc import iqmesh_pb2 as pb
from kernel.status_details import rpc_error

#: the Get and GetBatch methods' paths, called with bytes
GET_METHOD = "/iqmesh.v1.InteractiveQuery/Get"
GET_BATCH_METHOD = "/iqmesh.v1.InteractiveQuery/GetBatch"
#: calls in flight to one replica before Gets wait for the next batch
LANES_PER_REPLICA = 2
#: most Gets in one batch (a request of a few KiB)
MAX_BATCH = 64
#: GetBatchRequest.requests (field 1, length-delimited): a request's bytes framed as one element
_REQUESTS_TAG = b"\x0a"


@dataclass
class _Waiting:
    request: bytes
    timeout: float
    done: asyncio.Future[bytes]


@dataclass
class _Replica:
    """The calls to one endpoint: how many are in flight, the Gets waiting for the next."""

    in_flight: int = 0
    waiting: list[_Waiting] = field(default_factory=list)
    #: False once the replica answered GetBatch with UNIMPLEMENTED
    batches: bool = True


class GetBatcher:
    """Gets (their request bytes) sent to their replicas over ``pool``; those that find the
    replica's lanes busy wait and go together. Each returns its reply's bytes as the replica sent
    them or raises the ``grpc.RpcError`` a Get alone would have raised (the forwarding hop and the
    routing client read them as before)."""

    def __init__(self, pool: AioChannelPool) -> None:
        self.pool = pool
        self._replicas: dict[str, _Replica] = {}
        #: the batches in flight (the loop keeps only weak references to tasks)
        self._sending: set[asyncio.Task[None]] = set()
        #: calls sent, and Gets they carried (what batching saved: the difference)
        self.hops = 0
        self.gets = 0

    async def call(self, endpoint: str, request: bytes, timeout: float) -> bytes:
        """``endpoint``'s Get reply to ``request`` (a GetRequest's bytes)."""
        replica = self._replicas.get(endpoint)
        if replica is None:
            replica = self._replicas[endpoint] = _Replica()
        if replica.in_flight < LANES_PER_REPLICA and not replica.waiting:
            replica.in_flight += 1
            self.hops += 1
            self.gets += 1
            try:
                return await self._get(endpoint, request, timeout)
            finally:
                replica.in_flight -= 1
                self._next(endpoint, replica)
        waiting = _Waiting(request, timeout, asyncio.get_running_loop().create_future())
        replica.waiting.append(waiting)
        return await waiting.done

    def _next(self, endpoint: str, replica: _Replica) -> None:
        """A lane came free: the Gets waiting go in one call (their callers gone: left out)."""
        while replica.waiting:
            waiting = [w for w in replica.waiting[:MAX_BATCH] if not w.done.done()]
            del replica.waiting[:MAX_BATCH]
            if waiting:
                replica.in_flight += 1
                self.hops += 1
                self.gets += len(waiting)
                task = asyncio.get_running_loop().create_task(self._send(endpoint, replica, waiting))
                self._sending.add(task)
                task.add_done_callback(self._sending.discard)
                return

    async def _send(self, endpoint: str, replica: _Replica, waiting: list[_Waiting]) -> None:
        try:
            if len(waiting) == 1 or not replica.batches:
                await asyncio.gather(*(self._alone(endpoint, w) for w in waiting))
            else:
                await self._batch(endpoint, replica, waiting)
        finally:
            replica.in_flight -= 1
            self._next(endpoint, replica)

    def _get(self, endpoint: str, request: bytes, timeout: float) -> Awaitable[bytes]:
        return self.pool.bytes_call(endpoint, GET_METHOD)(request, timeout=timeout)

    async def _alone(self, endpoint: str, w: _Waiting) -> None:
        try:
            _settle(w, await self._get(endpoint, w.request, w.timeout))
        except grpc.RpcError as e:
            _fail(w, e)

    async def _batch(self, endpoint: str, replica: _Replica, waiting: list[_Waiting]) -> None:
        call = self.pool.bytes_call(endpoint, GET_BATCH_METHOD)
        try:
            reply = pb.GetBatchReply.FromString(await call(batch_request(w.request for w in waiting),
                                                           timeout=max(w.timeout for w in waiting)))
        except grpc.RpcError as e:
            if e.code() is grpc.StatusCode.UNIMPLEMENTED:  # a replica older than GetBatch
                replica.batches = False
                await asyncio.gather(*(self._alone(endpoint, w) for w in waiting))
                return
            for w in waiting:
                _fail(w, e)
            return
        if len(reply.outcomes) != len(waiting):
            broken = grpc.aio.AioRpcError(grpc.StatusCode.INTERNAL, grpc.aio.Metadata(), grpc.aio.Metadata(),
                                          f"{endpoint}: {len(reply.outcomes)} answers to {len(waiting)} Gets")
            for w in waiting:
                _fail(w, broken)
            return
        for w, outcome in zip(waiting, reply.outcomes, strict=True):
            if outcome.HasField("reply"):
                _settle(w, outcome.reply.SerializeToString())
            else:
                _fail(w, rpc_error(outcome.error))


def batch_request(requests: Iterable[bytes]) -> bytes:
    """A GetBatchRequest's bytes made of GetRequests' bytes, none of them parsed."""
    return b"".join(_REQUESTS_TAG + _varint(len(r)) + r for r in requests)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _settle(w: _Waiting, reply: bytes) -> None:
    if not w.done.done():
        w.done.set_result(reply)


def _fail(w: _Waiting, e: BaseException) -> None:
    if not w.done.done():
        w.done.set_exception(e)
