"""Typed error details end to end: what a server aborts with is what the one reader returns,
over a real gRPC call on loopback; a bug's ValueError is INTERNAL, the caller's BadRequest is
INVALID_ARGUMENT."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from instance.errors import BadRequest, InvalidStateStoreException, StreamsNotStartedException, caller_input
from instance.server.status import to_status
from kernel.application_guard import ApplicationInterceptor, is_wrong_application
from kernel.rpc import iqmesh_pb2 as pb
from kernel.rpc import iqmesh_pb2_grpc as pb_grpc
from kernel.status_details import Refusal, error_details, refusal_of, refusal_status, status_label
from kernel.unavailable import FailureReason, UnavailableError
from router.client.client_core import ClientError, as_call, is_retryable, is_unreachable, unavailable
from router.client.forward import refusal
from router.gateway.errors import from_rpc_error

R = FailureReason


class Refusing(pb_grpc.InteractiveQueryServicer):
    """Ends each Get with the status ``to_status`` maps the exception of the key's name to."""

    errors = {
        "bound": UnavailableError(R.NOT_UP_TO_BOUND, "replica at 3, bound 9", tried=["a", "b"]),
        "strict": UnavailableError(R.REBALANCING, "no live replica", tried=["a"], standby_holds=True),
        "not-started": StreamsNotStartedException("KafkaStreams is not started"),
        "moved": InvalidStateStoreException("the store moved"),
        "bad": BadRequest("key 'x' is not a valid long key"),
        "bug": ValueError("a bug"),
    }

    def Get(self, request: pb.GetRequest, context: grpc.ServicerContext) -> pb.GetReply:
        context.abort_with_status(to_status(self.errors[request.key]))
        raise AssertionError("unreachable")


@pytest.fixture
def stub() -> Iterator[pb_grpc.InteractiveQueryStub]:
    server = grpc.server(futures.ThreadPoolExecutor(2), interceptors=[ApplicationInterceptor("app")])
    pb_grpc.add_InteractiveQueryServicer_to_server(Refusing(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield pb_grpc.InteractiveQueryStub(channel)
    finally:
        channel.close()
        server.stop(0)


def _error(stub: pb_grpc.InteractiveQueryStub, key: str, application: str = "") -> grpc.RpcError:
    md = (("iqmesh-application", application),) if application else None
    with pytest.raises(grpc.RpcError) as e:
        stub.Get(pb.GetRequest(store="s", key=key), timeout=5, metadata=md)
    return e.value


def test_a_refusal_travels_typed_and_the_text_stays_for_people(stub: pb_grpc.InteractiveQueryStub) -> None:
    e = _error(stub, "bound")
    assert e.code() is grpc.StatusCode.UNAVAILABLE
    assert e.details() == "NOT_UP_TO_BOUND: replica at 3, bound 9 tried=a,b"
    refused = refusal_of(e)
    assert refused is not None
    assert (refused.reason, refused.tried, refused.message) == (R.NOT_UP_TO_BOUND, ("a", "b"), "replica at 3, bound 9")
    assert not is_unreachable(e) and not is_retryable(e)  # the caller's own bound: no retry
    for key, reason in (("not-started", R.NOT_AVAILABLE), ("moved", R.NOT_ACTIVE)):
        e = _error(stub, key)
        assert getattr(refusal_of(e), "reason", None) is reason and is_retryable(e)
        assert e.details().startswith(f"{reason.name}: ")
        assert getattr(refusal("h:1", e), "reason", None) is reason  # what the forwarding hop reads


def test_the_stale_read_hint_travels_typed_through_a_forwarding_hop(stub: pb_grpc.InteractiveQueryStub) -> None:
    e = _error(stub, "strict")
    refused = refusal_of(e)
    assert refused is not None and refused.standby_holds and refused.message == "no live replica"
    assert "allow stale reads" in e.details()  # and said to people in the text
    hop = refusal("h:1", e)
    assert hop is not None and hop.standby_holds and hop.reason is R.REBALANCING
    assert not refusal_of(_error(stub, "bound")).standby_holds  # type: ignore[union-attr]
    api = from_rpc_error(e)
    assert api.extra == {"reason": "REBALANCING", "tried": ["a"], "standby_holds": True}
    assert "allow_stale=true" in api.message


def test_bad_input_is_invalid_argument_and_a_bug_is_internal(stub: pb_grpc.InteractiveQueryStub) -> None:
    e = _error(stub, "bad")
    assert (e.code(), e.details(), refusal_of(e)) == (grpc.StatusCode.INVALID_ARGUMENT,
                                                      "key 'x' is not a valid long key", None)
    e = _error(stub, "bug")
    assert e.code() is grpc.StatusCode.INTERNAL and e.details() == "ValueError: a bug"
    with pytest.raises(BadRequest, match="not a number"):
        with caller_input():
            raise ValueError("not a number")


def test_another_applications_server_is_recognised_by_its_details(stub: pb_grpc.InteractiveQueryStub) -> None:
    e = _error(stub, "bound", application="other")
    assert e.code() is grpc.StatusCode.FAILED_PRECONDITION and e.details().startswith("WRONG_APPLICATION")
    assert is_wrong_application(e) and error_details(e).refusal is None
    assert is_unreachable(e)  # not the instance wanted: as if nothing answered there
    assert getattr(refusal("h:1", e), "reason", None) is R.NOT_AVAILABLE


def test_text_alone_is_not_a_refusal() -> None:
    """A transport error whose text happens to start with a reason's name is still the transport."""
    e = ClientError(grpc.StatusCode.UNAVAILABLE, "REBALANCING: connection reset")
    assert refusal_of(e) is None and is_unreachable(e)
    assert not is_wrong_application(ClientError(grpc.StatusCode.FAILED_PRECONDITION, "WRONG_APPLICATION: x"))
    client_side = unavailable(UnavailableError(R.REBALANCING, "no live replica", tried=["a"]))
    assert client_side.details() == "REBALANCING: no live replica tried=a"
    assert refusal_of(client_side) == Refusal(R.REBALANCING, ("a",), "no live replica")


def test_an_aio_error_becomes_a_finished_call_with_its_typed_details() -> None:
    """What the sync watch raises of its grpc.aio loop: a ``grpc.Call``, as blocking calls raise."""
    status = refusal_status(UnavailableError(R.REBALANCING, "moving", tried=["a"]), "REBALANCING: moving tried=a")
    aio = grpc.aio.AioRpcError(status.code, grpc.aio.Metadata(), grpc.aio.Metadata(*status.trailing_metadata),
                               status.details)
    assert not isinstance(aio, grpc.Call)
    call = as_call(aio)
    assert isinstance(call, grpc.Call) and (call.code(), call.details()) == (status.code, status.details)
    assert refusal_of(call) == refusal_of(aio) == Refusal(R.REBALANCING, ("a",), "moving")


def test_an_aio_error_is_labelled_by_its_code() -> None:
    """grpc.aio's errors are no grpc.Call: the load tests counted them as UNKNOWN."""
    e = grpc.aio.AioRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, grpc.aio.Metadata(), grpc.aio.Metadata(), "late")
    assert status_label(e) == "DEADLINE_EXCEEDED"
    assert status_label(ValueError("not grpc")) == "UNKNOWN"
