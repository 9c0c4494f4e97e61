"""Queries of a global store without a broker: the statuses a real gRPC server answers before the
global thread has loaded the store, the GLOBAL replica's freshness rules, and how the routing
table, the catalog and /v1/stores carry the global flag."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from instance.runtime.kafka_streams import KafkaStreams
from instance.runtime.states import State
from instance.serde import StringSerde
from instance.server.servicer import QueryServer
from instance.topology import StreamsBuilder
from kernel.local_read import LocalReplica, Role
from kernel.metadata import InstanceInfo
from kernel.rpc import iqmesh_pb2 as pb
from kernel.rpc import iqmesh_pb2_grpc as pb_grpc
from kernel.status_details import refusal_of
from kernel.unavailable import FailureReason, UnavailableError
from router.client.routing_table import RoutingTable
from router.gateway.snapshot import store_replicas

S = StringSerde()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[KafkaStreams, pb_grpc.InteractiveQueryStub]]:
    """An instance with a global store "lookup" (never started) behind a real gRPC server."""
    b = StreamsBuilder(default_key_serde=S, default_value_serde=S)
    table = b.global_table("lookup-topic", "lookup")
    b.stream("in").left_join(table, lambda k, v: v, lambda v, row: f"{v}={row}").to("out")
    streams = KafkaStreams(b.build(), {"application.id": "gq-unit", "bootstrap.servers": "127.0.0.1:1",
                                       "state.dir": str(tmp_path)})
    server = QueryServer(streams, 0, host="127.0.0.1")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        yield streams, pb_grpc.InteractiveQueryStub(channel)
    finally:
        channel.close()
        server.stop(0)


def _status(call: object) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as e:
        call()  # type: ignore[operator]
    return e.value


def test_before_start_and_while_loading_a_global_store_is_unavailable(
        served: tuple[KafkaStreams, pb_grpc.InteractiveQueryStub]) -> None:
    streams, stub = served
    get = pb.GetRequest(store="lookup", key="k")
    e = _status(lambda: stub.Get(get, timeout=5))
    assert e.code() is grpc.StatusCode.UNAVAILABLE
    assert e.details().startswith("NOT_AVAILABLE: KafkaStreams is not started")
    refused = refusal_of(e)  # the reason is typed in the status's details, not read from the text
    assert refused is not None and refused.reason is FailureReason.NOT_AVAILABLE
    # start() has begun (REBALANCING) but the global thread has not finished loading the store
    streams._sm.set(State.REBALANCING)
    assert streams.global_thread is None
    for call in (lambda: stub.Get(get, timeout=5),
                 lambda: list(stub.All(pb.AllRequest(store="lookup"), timeout=5)),
                 lambda: list(stub.MultiGet(pb.MultiGetRequest(store="lookup", keys=[pb.Key(text="k")]), timeout=5))):
        e = _status(call)
        assert e.code() is grpc.StatusCode.UNAVAILABLE
        assert e.details().startswith("NOT_AVAILABLE: global store 'lookup' is not queryable yet"), e.details()
        assert getattr(refusal_of(e), "reason", None) is FailureReason.NOT_AVAILABLE
    # an unknown store is still NOT_FOUND, naming the global store among the known ones
    e = _status(lambda: stub.Get(pb.GetRequest(store="nope", key="k"), timeout=5))
    assert e.code() is grpc.StatusCode.NOT_FOUND and "lookup" in e.details() and refusal_of(e) is None
    e = _status(lambda: list(stub.All(pb.AllRequest(store="nope"), timeout=5)))
    assert e.code() is grpc.StatusCode.NOT_FOUND
    # a global store is a key-value store: no window fetch; and it has no changelog to watch
    e = _status(lambda: stub.WindowFetch(pb.WindowFetchRequest(store="lookup", key="k"), timeout=5))
    assert e.code() is grpc.StatusCode.INVALID_ARGUMENT
    e = _status(lambda: list(stub.Watch(pb.WatchRequest(store="lookup", all=True), timeout=5)))
    assert e.code() is grpc.StatusCode.FAILED_PRECONDITION and "global store" in e.details()


def test_a_global_copy_is_stale_only_when_behind() -> None:
    """(That it answers without allow_stale, with the bounds applied: tests/unit/test_state_query.py.)"""
    fresh = LocalReplica(Role.GLOBAL, 0, 120, 120)
    behind = LocalReplica(Role.GLOBAL, 0, 100, 120)
    assert not fresh.is_stale(State.REBALANCING) and not fresh.is_stale(State.RUNNING)
    assert behind.is_stale(State.RUNNING) and behind.lag == 20


def test_routing_table_and_catalog_carry_the_global_flag() -> None:
    reply = pb.MetadataReply(asked="a", store_partitions={"counts": 4}, store_routes=[
        pb.StoreRoute(store="counts", subtopology=0, partitions=4, key_serde="string", value_serde="long"),
        pb.StoreRoute(store="lookup", subtopology=-1, partitions=0, key_serde="string", value_serde="string",
                      global_store=True)],
        instances=[pb.InstanceMetadata(instance_id="a", endpoint="h:1", state=pb.INSTANCE_STATE_RUNNING, alive=True,
                                       active_tasks=["0_0"])])
    table = RoutingTable(reply)
    assert table.is_global("lookup") and not table.is_global("counts")
    assert table.task_of("lookup", "k") is None  # asked of any instance, which answers itself
    assert table.task_of("counts", "k") is not None
    assert table.value_serde("lookup") is not None
    from router.client.client_core import routing_table_to_dict
    md = routing_table_to_dict(reply)
    assert md["global_stores"] == ["lookup"]
    stores = {s["store"]: s for s in store_replicas(md)}
    assert stores["lookup"] == {"store": "lookup", "partitions": 1, "global": True, "replicas": [], "instances": ["a"]}
    assert stores["counts"]["global"] is False and len(stores["counts"]["replicas"]) == 4


def test_instance_info_json_stays_compatible() -> None:
    doc = json.loads(InstanceInfo("a", "h:1", State.RUNNING, global_stores=("lookup",)).to_json())
    assert doc["global_stores"] == ["lookup"]
    # an older writer (no global_stores) and a newer one (extra catalog fields) both parse
    doc.pop("global_stores")
    doc["store_catalog"] = [{"store": "lookup", "changelog": "", "key_serde": "string", "value_serde": "string",
                             "partitions": 1, "some_future_field": 1}]
    info = InstanceInfo.from_json(json.dumps(doc).encode())
    assert info.global_stores == () and info.store_catalog[0].store == "lookup"


def test_client_passes_a_global_get_to_the_next_instance_when_one_refuses() -> None:
    """An instance still loading the global store refuses (UNAVAILABLE NOT_AVAILABLE): the routing
    client asks the next live instance instead of retrying the same one."""
    from router.client.client_core import unavailable
    from router.client.sync_client import QueryClient

    reply = pb.MetadataReply(asked="a", store_routes=[
        pb.StoreRoute(store="lookup", subtopology=-1, partitions=0, key_serde="string", value_serde="string",
                      global_store=True)],
        instances=[pb.InstanceMetadata(instance_id=i, endpoint=f"h:{n}", state=pb.INSTANCE_STATE_RUNNING, alive=True)
                   for n, i in ((1, "a"), (2, "b"))])
    asked: list[str] = []

    class Stub:
        def __init__(self, endpoint: str) -> None:
            self.endpoint = endpoint

        def Get(self, request: pb.GetRequest, timeout: float) -> pb.GetReply:  # noqa: N802 - gRPC's name
            asked.append(self.endpoint)
            if self.endpoint == "h:1":
                raise unavailable(UnavailableError(FailureReason.NOT_AVAILABLE,
                                                   "global store 'lookup' is not queryable yet"))
            return pb.GetReply(found=True, value=b"v", value_json='"v"', value_serde="string",
                               metadata=pb.ReadMetadata(served_by="b", role=pb.ROLE_GLOBAL))

    class Pool:
        def stub(self, endpoint: str) -> Stub:
            return Stub(endpoint)

    client = QueryClient("h:1", timeout=5)
    client._pool = Pool()  # type: ignore[assignment]  # the fake transport at the sync driver's pool
    client.core.table = RoutingTable(reply)
    r = client.get("lookup", "k")
    assert (r.value, r.metadata["served_by"], asked) == ("v", "b", ["h:1", "h:2"])
    # the one that answered is asked first next time
    asked.clear()
    client.get("lookup", "k")
    assert asked == ["h:2"]
