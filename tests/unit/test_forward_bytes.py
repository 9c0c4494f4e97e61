"""The forwarding hop on bytes (router/client/forward.py ``forward_get_bytes``): the request passed
on with ``forwarded=true`` appended, the reply passed back with ``metadata { forwarded: true }``
appended, checked against the generated classes; over real gRPC servers on loopback, the same
answers and the same errors as the hop on messages (``forward_get``), and a grpc.aio server passing
replies through as the query server does."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from instance.server.status import to_status
from instance.server.strict_handlers import add_strict_handlers
from kernel.application_guard import ApplicationInterceptor
from kernel.channels import AioChannelPool, ChannelPool
from kernel.rpc import iqmesh_pb2 as pb
from kernel.rpc import iqmesh_pb2_grpc as pb_grpc
from kernel.unavailable import FailureReason, UnavailableError
from router.client.forward import FORWARDED_REPLY, FORWARDED_REQUEST, forward_get, forward_get_bytes
from router.client.forward_batch import GET_METHOD, GetBatcher

SERVICE = pb.DESCRIPTOR.services_by_name["InteractiveQuery"]

REQUESTS = [
    pb.GetRequest(),
    pb.GetRequest(store="counts", key="alice"),
    pb.GetRequest(store="counts", raw_key=b"\x00\x01\xff", forwarded=True),
    pb.GetRequest(store="s" * 300, key="k" * 5000,
                  options=pb.QueryOptions(allow_stale=True, max_lag=0, position="tok")),
    pb.GetRequest(store="s", key="k", options=pb.QueryOptions(max_lag=-7), forwarded=False),
]

META = pb.ReadMetadata(served_by="i-1", endpoint="h:9", role=pb.ROLE_STANDBY, instance_state=pb.INSTANCE_STATE_RUNNING,
                       partition=5, position=123456789012, end_offset=-1, lag=-1, stale=True,
                       position_token="counts:5:123")
REPLIES = [
    pb.GetReply(),
    pb.GetReply(found=False, metadata=pb.ReadMetadata(served_by="i-2"), value_serde="long"),
    pb.GetReply(found=True, value_json='{"a":[1,2]}', metadata=META, value=b"\x00" * 70000, value_serde="json"),
    pb.GetReply(found=True, metadata=pb.ReadMetadata(forwarded=True, partition=2), value=b"v"),
]


def _marked(request: pb.GetRequest) -> pb.GetRequest:
    out = pb.GetRequest()
    out.CopyFrom(request)
    out.forwarded = True
    return out


@pytest.mark.parametrize("request_", REQUESTS)
def test_the_appended_field_marks_a_request_forwarded_and_keeps_every_other_field(request_: pb.GetRequest) -> None:
    got = pb.GetRequest.FromString(request_.SerializeToString() + FORWARDED_REQUEST)
    assert got.forwarded
    assert (got.store, got.key, got.raw_key) == (request_.store, request_.key, request_.raw_key)
    assert got.HasField("options") == request_.HasField("options")
    assert got.options == request_.options
    assert got.options.HasField("max_lag") == request_.options.HasField("max_lag")
    assert got == _marked(request_)


@pytest.mark.parametrize("reply", REPLIES)
def test_the_appended_metadata_marks_a_reply_forwarded_and_keeps_every_other_field(reply: pb.GetReply) -> None:
    got = pb.GetReply.FromString(reply.SerializeToString() + FORWARDED_REPLY)
    assert got.metadata.forwarded
    assert (got.found, got.value_json, got.value, got.value_serde) == (
        reply.found, reply.value_json, reply.value, reply.value_serde)
    expected_meta = pb.ReadMetadata()
    expected_meta.CopyFrom(reply.metadata)
    expected_meta.forwarded = True
    assert got.metadata == expected_meta  # served_by, role, position... all kept
    expected = pb.GetReply()
    expected.CopyFrom(reply)
    expected.metadata.forwarded = True  # what the hop on messages does
    assert got == expected


class Owner(pb_grpc.InteractiveQueryServicer):
    """The replica asked: records what it received; answers ``REPLIES[i]`` for key ``str(i)``,
    refuses or fails for the keys of ``errors``."""

    errors = {
        "bound": UnavailableError(FailureReason.NOT_UP_TO_BOUND, "replica at 3, bound 9", tried=["a"]),
        "moved": UnavailableError(FailureReason.NOT_ACTIVE, "standby now", standby_holds=True),
    }

    def __init__(self) -> None:
        self.received: list[pb.GetRequest] = []

    def Get(self, request: pb.GetRequest, context: grpc.ServicerContext) -> pb.GetReply:
        self.received.append(request)
        if request.key in self.errors:
            context.abort_with_status(to_status(self.errors[request.key]))
        if request.key == "missing-store":
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown store 'x'")
        if request.key == "bad":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "key 'bad' is not a valid long key")
        return REPLIES[int(request.key)]


class Front(pb_grpc.InteractiveQueryServicer):
    """An instance that forwards every Get to ``owner`` as bytes, served as the query server serves
    (a coroutine on a grpc.aio server)."""

    WITH_BYTES = frozenset({"Get"})

    def __init__(self, pool: AioChannelPool, owner: str) -> None:
        self.pool, self.owner, self.gets = pool, owner, GetBatcher(pool)

    async def Get(self, request: pb.GetRequest, context: grpc.aio.ServicerContext,  # type: ignore[override]
                  data: bytes | None = None) -> pb.GetReply | bytes:
        assert data is not None and pb.GetRequest.FromString(data) == request
        return await forward_get_bytes(self.gets, self.owner, data, 5)


def _server(servicer: object) -> tuple[grpc.Server, str]:
    server = grpc.server(futures.ThreadPoolExecutor(4), interceptors=[ApplicationInterceptor("app")])
    pb_grpc.add_InteractiveQueryServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"


@pytest.fixture
def owner() -> Iterator[tuple[Owner, str]]:
    servicer = Owner()
    server, endpoint = _server(servicer)
    try:
        yield servicer, endpoint
    finally:
        server.stop(0)


@pytest.fixture
def pool() -> Iterator[ChannelPool]:
    p = ChannelPool(application_id="app")
    try:
        yield p
    finally:
        p.close()


def _hop(endpoint: str, request: bytes, timeout: float = 5) -> bytes:
    """One hop on bytes from a pool of its own, on a loop of its own (grpc.aio channels belong to one)."""
    async def hop() -> bytes:
        pool = AioChannelPool(application_id="app")
        try:
            return await forward_get_bytes(GetBatcher(pool), endpoint, request, timeout)
        finally:
            await pool.close()
    return asyncio.run(hop())


@pytest.mark.parametrize("i", range(len(REPLIES)))
def test_the_hop_on_bytes_answers_as_the_hop_on_messages(owner: tuple[Owner, str], pool: ChannelPool,
                                                          i: int) -> None:
    servicer, endpoint = owner
    request = pb.GetRequest(store="counts", key=str(i), options=pb.QueryOptions(allow_stale=True, max_lag=3))
    as_message = forward_get(pool, endpoint, request, 5)
    as_bytes = pb.GetReply.FromString(_hop(endpoint, request.SerializeToString()))
    assert as_bytes == as_message
    assert as_bytes.metadata.forwarded
    assert servicer.received == [_marked(request), _marked(request)]  # the replica sees the same request


@pytest.mark.parametrize("key", ["bound", "moved"])
def test_a_refusal_through_the_hop_on_bytes_is_the_same_unavailable_error(owner: tuple[Owner, str],
                                                                            pool: ChannelPool, key: str) -> None:
    _, endpoint = owner
    request = pb.GetRequest(store="counts", key=key)
    errors = []
    for ask in (lambda: forward_get(pool, endpoint, request, 5),
                lambda: _hop(endpoint, request.SerializeToString())):
        with pytest.raises(UnavailableError) as e:
            ask()
        errors.append((e.value.reason, str(e.value), e.value.standby_holds))
    assert errors[0] == errors[1]
    assert errors[0][0] is Owner.errors[key].reason
    assert errors[0][2] is Owner.errors[key].standby_holds


@pytest.mark.parametrize(("key", "code"), [("missing-store", grpc.StatusCode.NOT_FOUND),
                                           ("bad", grpc.StatusCode.INVALID_ARGUMENT)])
def test_other_errors_pass_through_the_hop_on_bytes_as_they_are(owner: tuple[Owner, str],
                                                                key: str, code: grpc.StatusCode) -> None:
    _, endpoint = owner
    with pytest.raises(grpc.RpcError) as e:
        _hop(endpoint, pb.GetRequest(store="counts", key=key).SerializeToString())
    assert not isinstance(e.value, UnavailableError)
    assert e.value.code() is code
    assert to_status(e.value).details == e.value.details() == (
        "unknown store 'x'" if key == "missing-store" else "key 'bad' is not a valid long key")


def test_an_unreachable_replica_is_not_available_either_way(pool: ChannelPool) -> None:
    with socket.socket() as s:  # a port nobody listens at
        s.bind(("127.0.0.1", 0))
        endpoint = f"127.0.0.1:{s.getsockname()[1]}"
    request = pb.GetRequest(store="counts", key="0")
    reasons = []
    for ask in (lambda: forward_get(pool, endpoint, request, 2),
                lambda: _hop(endpoint, request.SerializeToString(), 2)):
        with pytest.raises(UnavailableError) as e:
            ask()
        reasons.append(e.value.reason)
    assert reasons == [FailureReason.NOT_AVAILABLE, FailureReason.NOT_AVAILABLE]


def test_a_server_passes_a_reply_through_as_bytes_and_keeps_refusing_bad_bodies(owner: tuple[Owner, str]) -> None:
    _, owner_endpoint = owner

    async def run() -> None:
        pool = AioChannelPool(application_id="app")
        server = grpc.aio.server()
        add_strict_handlers(server, Front(pool, owner_endpoint), SERVICE)
        front = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
        await server.start()
        try:
            async with grpc.aio.insecure_channel(front) as ch:
                reply = await pb_grpc.InteractiveQueryStub(ch).Get(pb.GetRequest(store="counts", key="2"), timeout=5)
                expected = pb.GetReply()
                expected.CopyFrom(REPLIES[2])
                expected.metadata.forwarded = True
                assert reply == expected
                with pytest.raises(grpc.RpcError) as e:
                    await ch.unary_unary(GET_METHOD)(b"\xff\xff\xff", timeout=5)
                assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT
                call = pool.bytes_call(owner_endpoint, GET_METHOD)
                for i in range(5):  # the hop's channel is opened once and kept
                    request = pb.GetRequest(store="s", key=str(i % len(REPLIES)))
                    await Front(pool, owner_endpoint).Get(request, None, request.SerializeToString())  # type: ignore[arg-type]
                assert pool.bytes_call(owner_endpoint, GET_METHOD) is call
                assert pool.open_endpoints() == [owner_endpoint]
        finally:
            await server.stop(0)
            await pool.close()
    asyncio.run(run())
