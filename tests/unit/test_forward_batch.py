"""Batched Gets (router/client/forward_batch.py) against real gRPC servers on loopback, through
the forwarding hop (router/client/forward.py ``forward_get_bytes``): Gets that find the owner's
lanes busy go in one GetBatch, answered as the owner answers it (instance/server/get_batch.py);
each gets the reply, refusal or error it would have got alone; an owner without GetBatch gets them
one by one; a caller that gave up is left out."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from instance.server.get_batch import answer_batch
from instance.server.status import to_status
from kernel.application_guard import ApplicationInterceptor
from kernel.channels import AioChannelPool
from kernel.rpc import iqmesh_pb2 as pb
from kernel.rpc import iqmesh_pb2_grpc as pb_grpc
from kernel.unavailable import FailureReason, UnavailableError
from router.client.forward import forward_get_bytes
from router.client.forward_batch import LANES_PER_REPLICA, GetBatcher, batch_request
from tests.unit.test_forward_bytes import REPLIES, Owner


class SlowOwner(Owner):
    """:class:`Owner`, whose Gets of key "slow" wait until ``release`` is set; GetBatch answered
    as the query server answers it (``batches`` False: an owner older than GetBatch)."""

    def __init__(self, batches: bool = True) -> None:
        super().__init__()
        self.release = threading.Event()
        self.slow_started = threading.Semaphore(0)
        self.batches_received: list[list[pb.GetRequest]] = []
        self.batches = batches

    def Get(self, request: pb.GetRequest, context: grpc.ServicerContext) -> pb.GetReply:
        if request.key == "slow":
            self.received.append(request)
            self.slow_started.release()
            self.release.wait(10)
            return REPLIES[1]
        return super().Get(request, context)

    def GetBatch(self, request: pb.GetBatchRequest, context: grpc.ServicerContext) -> pb.GetBatchReply:
        if not self.batches:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
        self.batches_received.append(list(request.requests))
        return answer_batch(request.requests, _answer, to_status)


def _answer(request: pb.GetRequest) -> pb.GetReply:
    error = Owner.errors.get(request.key)
    if error is not None:
        raise error
    if request.key == "bad":
        raise ValueError("a bug")  # INTERNAL, as the query server maps it
    return REPLIES[int(request.key)]


@pytest.fixture(params=[True, False], ids=["owner-with-GetBatch", "owner-without"])
def slow_owner(request: pytest.FixtureRequest) -> Iterator[tuple[SlowOwner, str]]:
    servicer = SlowOwner(batches=request.param)
    server = grpc.server(futures.ThreadPoolExecutor(8), interceptors=[ApplicationInterceptor("app")])
    pb_grpc.add_InteractiveQueryServicer_to_server(servicer, server)
    endpoint = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    server.start()
    try:
        yield servicer, endpoint
    finally:
        servicer.release.set()
        server.stop(0)


def _get(key: str) -> bytes:
    return pb.GetRequest(store="counts", key=key).SerializeToString()


def test_a_batch_request_is_the_requests_as_they_came() -> None:
    requests = [pb.GetRequest(store="s", key=str(i) * (i * 70)) for i in range(5)]
    parsed = pb.GetBatchRequest.FromString(batch_request(r.SerializeToString() for r in requests))
    assert list(parsed.requests) == requests


def test_gets_that_find_the_lanes_busy_go_together_each_answered_as_alone(slow_owner: tuple[SlowOwner, str]) -> None:
    owner, endpoint = slow_owner
    waiting_keys = ["0", "2", "bound", "moved", "3", "bad", "1"]

    async def run() -> tuple[list[bytes | BaseException], list[bytes | BaseException], GetBatcher]:
        pool = AioChannelPool(application_id="app")
        gets = GetBatcher(pool)

        def hop(key: str) -> asyncio.Future[bytes]:
            return asyncio.ensure_future(forward_get_bytes(gets, endpoint, _get(key), 10))
        try:
            slow = [hop("slow") for _ in range(LANES_PER_REPLICA)]
            for _ in slow:  # both lanes are in flight at the owner
                await asyncio.to_thread(owner.slow_started.acquire, True, 10)
            queued = [hop(k) for k in waiting_keys]
            given_up = hop("0")
            await asyncio.sleep(0.05)
            given_up.cancel()
            owner.release.set()
            answers = await asyncio.gather(*queued, return_exceptions=True)
            return await asyncio.gather(*slow, return_exceptions=True), answers, gets
        finally:
            await pool.close()

    slow_answers, answers, gets = asyncio.run(run())
    assert all(isinstance(a, bytes) and pb.GetReply.FromString(a).metadata.forwarded for a in slow_answers)
    if owner.batches:
        assert [[r.key for r in b] for b in owner.batches_received] == [waiting_keys]  # one hop, the cancelled left out
        assert all(r.forwarded for r in owner.batches_received[0])
        assert (gets.hops, gets.gets) == (LANES_PER_REPLICA + 1, LANES_PER_REPLICA + len(waiting_keys))
    else:  # one by one after the owner said UNIMPLEMENTED
        assert sorted(r.key for r in owner.received if r.key != "slow") == sorted(waiting_keys)
    by_key = dict(zip(waiting_keys, answers, strict=True))
    for key in ("0", "2", "3", "1"):
        reply = by_key[key]
        assert isinstance(reply, bytes)
        expected = pb.GetReply()
        expected.CopyFrom(REPLIES[int(key)])
        expected.metadata.forwarded = True
        assert pb.GetReply.FromString(reply) == expected
    for key in ("bound", "moved"):
        refused = by_key[key]
        assert isinstance(refused, UnavailableError)
        assert refused.reason is Owner.errors[key].reason
        assert refused.standby_holds is Owner.errors[key].standby_holds
        assert refused.reason is not FailureReason.NOT_AVAILABLE
    bad = by_key["bad"]
    assert isinstance(bad, grpc.RpcError) and not isinstance(bad, UnavailableError)
    if owner.batches:
        assert bad.code() is grpc.StatusCode.INTERNAL and "a bug" in (bad.details() or "")
    else:  # the stub owner alone: INVALID_ARGUMENT for "bad"; either way passed through as it is
        assert bad.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_a_quiet_owner_gets_each_get_alone(slow_owner: tuple[SlowOwner, str]) -> None:
    owner, endpoint = slow_owner

    async def run() -> GetBatcher:
        pool = AioChannelPool(application_id="app")
        gets = GetBatcher(pool)
        try:
            for i in range(len(REPLIES)):
                assert pb.GetReply.FromString(await gets.call(endpoint, _get(str(i)), 5)) == REPLIES[i]
            return gets
        finally:
            await pool.close()

    gets = asyncio.run(run())
    assert owner.batches_received == [] and gets.hops == gets.gets == len(REPLIES)
