"""A call cut off by an instance going away is treated as that instance being unreachable: routing
asks the key's next owner or standby within the caller's deadline, as for an UNAVAILABLE refusal,
instead of failing the query (a rolling update lost one to CANCELLED: a stream reset with CANCEL,
as a peer's transport reports a call it dropped)."""

from __future__ import annotations

import threading
from concurrent import futures

import grpc
import pytest

from kernel.rpc import iqmesh_pb2 as pb
from kernel.rpc import iqmesh_pb2_grpc as pb_grpc
from kernel.unavailable import FailureReason
from router.client.client_core import is_retryable, is_unreachable
from router.client.forward import refusal


class _Servicer(pb_grpc.InteractiveQueryServicer):
    def __init__(self, cut: bool) -> None:
        self.cut = cut
        self.entered = threading.Event()
        self.release = threading.Event()

    def Get(self, request: pb.GetRequest, context: grpc.ServicerContext) -> pb.GetReply:  # noqa: N802
        self.entered.set()
        if self.cut:
            context.abort(grpc.StatusCode.CANCELLED, "stream reset")
        self.release.wait(30)
        return pb.GetReply()


@pytest.mark.parametrize("how", ["server stopped mid-call", "stream cancelled by the peer"])
def test_a_call_cut_off_is_asked_elsewhere(how: str) -> None:
    servicer = _Servicer(cut=how == "stream cancelled by the peer")
    server = grpc.server(futures.ThreadPoolExecutor(2))
    pb_grpc.add_InteractiveQueryServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    endpoint = f"127.0.0.1:{port}"
    errors: list[grpc.RpcError] = []

    def call() -> None:
        with grpc.insecure_channel(endpoint) as ch:
            try:
                pb_grpc.InteractiveQueryStub(ch).Get(pb.GetRequest(store="counts"), timeout=30)
            except grpc.RpcError as e:
                errors.append(e)

    t = threading.Thread(target=call)
    t.start()
    try:
        assert servicer.entered.wait(10)
        if not servicer.cut:
            server.stop(0.1).wait()  # the grace ends with the call still in flight
    finally:
        servicer.release.set()
        t.join(10)
        server.stop(None)
    assert len(errors) == 1, errors
    e = errors[0]
    assert is_unreachable(e) and is_retryable(e), e
    refused = refusal(endpoint, e)
    assert refused is not None and refused.reason is FailureReason.NOT_AVAILABLE
