"""Interactive queries on a global store (a GlobalKTable) through the mesh, on the dev broker: two
instances in this process, each with its own gRPC server. Every instance holds the whole store,
so whichever instance is asked answers from its own copy (role GLOBAL, never forwarded); scans
read that copy as one partition, in key order, page by page. The routing clients and the REST
gateway (a real ``iqmesh gateway`` process) reach it through any instance."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from instance.local.broker import free_port
from instance.local.cluster import ensure_topic, produce
from instance.local.gateway import GatewayProcess
from instance.runtime.kafka_streams import KafkaStreams
from instance.serde import StringSerde
from instance.server.servicer import QueryServer
from instance.topology import StreamsBuilder
from kernel.local_read import Role
from kernel.metadata import InstanceInfo
from kernel.rpc import iqmesh_pb2 as pb
from kernel.rpc import iqmesh_pb2_grpc as pb_grpc
from router.client.async_client import AsyncQueryClient
from router.client.sync_client import QueryClient
from tests.integration.helpers import wait_until

pytestmark = pytest.mark.integration

S = StringSerde()
STORE = "regions"
KEYS = 240
GLOBAL_PARTITIONS = 3


@dataclass
class Node:
    streams: KafkaStreams
    server: QueryServer
    endpoint: str
    channel: grpc.Channel

    @property
    def instance_id(self) -> str:
        return self.streams.instance_id

    @property
    def stub(self) -> pb_grpc.InteractiveQueryStub:
        return pb_grpc.InteractiveQueryStub(self.channel)


@dataclass
class GlobalCluster:
    nodes: list[Node]
    truth: dict[str, str]  # the topic's latest value per key (tombstoned keys left out)
    records: int           # records in the global topic (the sum of its end offsets)
    bootstrap: str
    topic: str


@pytest.fixture(scope="module")
def cluster(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GlobalCluster]:
    tmp = tmp_path_factory.mktemp("global-iq")
    unique = tmp.name.replace("_", "-")[-12:]
    stream_topic, global_topic = f"gqs-{unique}", f"gqt-{unique}"
    ensure_topic(bootstrap, stream_topic, 2)
    ensure_topic(bootstrap, global_topic, GLOBAL_PARTITIONS)
    rows = [(f"k{i:04d}", f"v{i}") for i in range(KEYS)]
    rows += [(f"k{i:04d}", f"w{i}") for i in range(0, KEYS, 7)]  # overwritten: the latest wins
    truth = dict(rows)
    records: list[tuple[bytes | None, bytes | None]] = [(k.encode(), v.encode()) for k, v in rows]
    for i in range(3, KEYS, 50):  # tombstones delete
        records.append((f"k{i:04d}".encode(), None))
        truth.pop(f"k{i:04d}")
    produce(bootstrap, global_topic, records)  # type: ignore[arg-type]  # None values are tombstones

    nodes: list[Node] = []
    try:
        for n in range(2):
            b = StreamsBuilder(default_key_serde=S, default_value_serde=S)
            table = b.global_table(global_topic, STORE)
            b.stream(stream_topic).left_join(table, lambda k, v: v, lambda v, row: f"{v}={row}").to(
                f"gqo-{unique}")
            port = free_port()
            endpoint = f"127.0.0.1:{port}"
            streams = KafkaStreams(b.build(), {
                "application.id": f"gq-{unique}", "bootstrap.servers": bootstrap, "client.id": f"g{n}",
                "application.server": endpoint, "state.dir": str(tmp / f"state{n}"),
                "commit.interval.ms": "200"})
            server = QueryServer(streams, port)
            server.start()
            nodes.append(Node(streams, server, endpoint, grpc.insecure_channel(endpoint)))
            streams.start()  # returns once the global store holds the whole topic
        # both instances see each other (the clients' routing tables list both)
        wait_until(lambda: all(len([i for i in n.streams.view.instances() if n.streams.view.is_alive(i)]) == 2
                               for n in nodes), 60, "both instances in each other's view")
        yield GlobalCluster(nodes, truth, len(records), bootstrap, global_topic)
    finally:
        for node in nodes:
            node.streams.close(30)
            node.server.stop(0)
            node.channel.close()


def test_get_through_each_instance_is_answered_by_that_instance(cluster: GlobalCluster) -> None:
    for node in cluster.nodes:
        for key in ("k0000", "k0001", "k0123", "k0239"):
            reply = node.stub.Get(pb.GetRequest(store=STORE, key=key), timeout=5)
            assert reply.found and reply.value.decode() == cluster.truth[key]
            md = reply.metadata
            assert (md.served_by, md.endpoint, md.role, md.partition) == (node.instance_id, node.endpoint,
                                                                          pb.ROLE_GLOBAL, 0)
            assert not md.forwarded
            assert md.position == md.end_offset == cluster.records and md.lag == 0 and not md.stale
        # a tombstoned key and one never written are not found
        for key in ("k0003", "nope"):
            assert not node.stub.Get(pb.GetRequest(store=STORE, key=key), timeout=5).found
        # answered here, not forwarded: counted as this instance's local Gets
        assert node.streams.query_counters.totals(0, {}).gets_forwarded == 0
        # Kafka Streams' answer for a global store: this host, partition -1
        md_key = node.streams.query_metadata_for_key(STORE, "k0000")
        assert (str(md_key.active_host), md_key.standby_hosts, md_key.partition) == (node.endpoint, (), -1)


def test_multi_get_and_scans_read_the_whole_store_in_key_order(cluster: GlobalCluster) -> None:
    node = cluster.nodes[1]
    truth = cluster.truth
    with QueryClient(node.endpoint, timeout=10) as client:
        # All, three pages of 100: exactly the topic's latest values, in key order
        scan = client.all(STORE, page_size=100)
        items = list(scan)
        assert [(i.key, i.value) for i in items] == sorted(truth.items())
        assert scan.pages == 3 and scan.complete and set(scan.partitions) == {0}
        status = scan.partitions[0]
        assert (status["served_by"], status["role"], status["stale"]) == (node.instance_id, Role.GLOBAL, False)
        # a limit stops mid-store; its token resumes right after the last key
        first = client.all(STORE, limit=150, page_size=64)
        head = [i.key for i in first]
        rest = [i.key for i in client.all(STORE, page_token=first.next_page_token)]
        assert head + rest == sorted(truth)
        assert [i.key for i in client.range(STORE, "k0100", "k0119")] == sorted(
            k for k in truth if "k0100" <= k <= "k0119")
        assert [i.key for i in client.prefix_scan(STORE, "k001")] == sorted(k for k in truth if k.startswith("k001"))
        got = list(client.multi_get(STORE, ["k0200", "k0003", "k0007", "zzz"]))
        assert [(i.key, i.value, i.found) for i in got] == [
            ("k0003", None, False), ("k0007", truth["k0007"], True), ("k0200", truth["k0200"], True),
            ("zzz", None, False)]


def test_routing_clients_catalog_and_errors(cluster: GlobalCluster) -> None:
    import asyncio

    for node in cluster.nodes:
        with QueryClient(node.endpoint, timeout=10) as client:
            r = client.get(STORE, "k0042")
            assert r.value == cluster.truth["k0042"] and r.metadata["served_by"] == node.instance_id
            table = client.table
            assert table is not None and table.is_global(STORE)
            routes = {s.store: s for s in client.metadata().store_routes}
            assert routes[STORE].global_store and routes[STORE].partitions == 0
            assert STORE not in client.metadata().store_partitions
            with pytest.raises(grpc.RpcError) as e:
                client.get("no-such-store", "k")
            assert e.value.code() is grpc.StatusCode.NOT_FOUND

    async def aget() -> Any:
        async with AsyncQueryClient([n.endpoint for n in cluster.nodes], timeout=10) as c:
            return await c.get(STORE, "k0050")
    r = asyncio.run(aget())
    assert r.value == cluster.truth["k0050"] and r.metadata["role"] is Role.GLOBAL

    # the published InstanceInfo lists the global store in the catalog and flags it
    info = InstanceInfo.from_json(cluster.nodes[0].streams.instance_info().to_json())
    assert info.global_stores == (STORE,)
    cat = {s.store: s for s in info.store_catalog}
    assert (cat[STORE].changelog, cat[STORE].partitions) == ("", 1)


def test_updates_reach_every_copy(cluster: GlobalCluster) -> None:
    produce(cluster.bootstrap, cluster.topic, [(b"k0001", b"updated")])
    for node in cluster.nodes:
        def seen(node: Node = node) -> bool:
            reply = node.stub.Get(pb.GetRequest(store=STORE, key="k0001"), timeout=5)
            return reply.value == b"updated" and reply.metadata.position == cluster.records + 1
        wait_until(seen, 60, f"{node.instance_id} to apply the update")
    cluster.truth["k0001"] = "updated"
    cluster.records += 1


def test_rest_gateway_answers_global_stores(cluster: GlobalCluster, tmp_path: Path) -> None:
    gw = GatewayProcess(cluster.bootstrap, "", tmp_path / "gateway.log", seeds=[n.endpoint for n in cluster.nodes])
    gw.start()
    try:
        gw.wait_ready(60)
        with urllib.request.urlopen(f"{gw.url}/v1/stores/{STORE}/keys/k0010", timeout=10) as r:
            body = json.loads(r.read())
        assert body["value"] == cluster.truth["k0010"] and body["metadata"]["role"] == "GLOBAL"
        assert body["metadata"]["served_by"] in {n.instance_id for n in cluster.nodes}

        def both_listed() -> dict[str, Any] | None:
            # the live instances: a heartbeat a busy machine delays past 3 s leaves one out for a
            # moment (both run in this process), so the list is read until it has both
            with urllib.request.urlopen(f"{gw.url}/v1/stores", timeout=10) as r:
                stores = {s["store"]: s for s in json.loads(r.read())["stores"]}
            return stores if sorted(stores[STORE]["instances"]) == ["g0", "g1"] else None
        stores = wait_until(both_listed, 60, "the gateway to list both instances for the global store", gw.logs)
        assert stores[STORE]["global"]
        with urllib.request.urlopen(f"{gw.url}/v1/stores/{STORE}/all", timeout=10) as r:
            lines = [json.loads(line) for line in r.read().splitlines() if line]
        assert [(e["key"], e["value"]) for e in lines[:-1]] == sorted(cluster.truth.items())
        assert lines[-1]["end"]["complete"]
    finally:
        gw.stop()
