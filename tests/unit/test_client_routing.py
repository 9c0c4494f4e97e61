"""The routing client's transport-free parts: the table it builds from a Metadata reply places
keys exactly as the instances do, keeps liveness as the reply judged it, and lets an instance
route what it cannot place; values decode with the store's serde; the security settings are
validated with messages that say what to fix, and decide where the query server binds."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from instance.config import StreamsConfig
from instance.errors import ConfigException
from instance.serde import JsonSerde, LongSerde
from kernel.options import QueryOptions
from kernel.partitioner import default_partition
from kernel.rpc import iqmesh_pb2 as pb
from kernel.task_id import TaskId
from router.client.query_router import QueryRouter
from router.client.routing_table import RoutingTable, decode_value

BASE = {"application.id": "my-app", "bootstrap.servers": "127.0.0.1:9092"}


def reply() -> pb.MetadataReply:
    out = pb.MetadataReply(asked="a")
    out.store_routes.extend([
        pb.StoreRoute(store="counts", subtopology=1, partitions=6, key_serde="string", value_serde="long"),
        pb.StoreRoute(store="by-id", subtopology=0, partitions=4, key_serde="long", value_serde="json"),
        pb.StoreRoute(store="custom", subtopology=2, partitions=4, key_serde="my-serde", value_serde="my-serde"),
    ])
    out.instances.extend([
        pb.InstanceMetadata(instance_id="a", endpoint="a:1", state=pb.INSTANCE_STATE_RUNNING, alive=True,
                            active_tasks=["1_0", "1_1", "1_2"], standby_tasks=["1_3"],
                            stores=[pb.StorePartition(store="counts", partition=3, role=pb.ROLE_STANDBY, position=7,
                                                      end_offset=10, lag=3)]),
        pb.InstanceMetadata(instance_id="b", endpoint="b:1", state=pb.INSTANCE_STATE_RUNNING, alive=True,
                            active_tasks=["1_3", "1_4", "1_5"]),
        pb.InstanceMetadata(instance_id="c", endpoint="c:1", state=pb.INSTANCE_STATE_RUNNING, alive=False,
                            active_tasks=["1_0"], assigned_at_ms=10**15),  # missed its heartbeats
    ])
    return out


def test_keys_are_placed_as_the_instances_place_them() -> None:
    t = RoutingTable(reply())
    for word in ("kafka", "stream", "ünïcode", ""):
        assert t.task_of("counts", word) == TaskId(1, default_partition(word.encode(), 6))
    assert t.task_of("counts", b"kafka") == TaskId(1, default_partition(b"kafka", 6))
    long_key = TaskId(0, default_partition(LongSerde().serialize(42) or b"", 4))
    assert t.task_of("by-id", 42) == t.task_of("by-id", "42") == long_key
    # what the table cannot place goes to an instance, which says precisely what is wrong
    assert t.task_of("nope", "x") is None
    assert t.task_of("custom", "x") is None
    assert t.task_of("by-id", "not a number") is None


def test_liveness_is_the_replys_and_routing_is_the_query_routers() -> None:
    t = RoutingTable(reply(), fetched_at=time.monotonic() - 3600)  # an old table keeps its owners
    router = QueryRouter(t.view, None)
    assert [c.endpoint for c in router.candidates(TaskId(1, 0), QueryOptions())] == ["a:1"]  # not dead c
    assert [c.endpoint for c in router.candidates(TaskId(1, 3), QueryOptions(allow_stale=True))] == ["b:1", "a:1"]
    assert [(c.endpoint, c.lag) for c in router.candidates(TaskId(1, 3), QueryOptions(allow_stale=True))][1] == \
        ("a:1", 3)
    assert sorted(t.endpoints()) == ["a:1", "b:1"]
    assert t.age() >= 3600


def test_values_decode_with_the_stores_serde() -> None:
    t = RoutingTable(reply())
    r = pb.GetReply(found=True, value=LongSerde().serialize(386) or b"", value_serde="long", value_json="386")
    assert decode_value(r, t.value_serde("counts")) == 386
    j = pb.GetReply(found=True, value=JsonSerde().serialize({"a": [1]}) or b"", value_serde="json",
                    value_json='{"a":[1]}')
    assert decode_value(j, t.value_serde("by-id")) == {"a": [1]}
    custom = pb.GetReply(found=True, value=b"\x00", value_serde="my-serde", value_json='"x"')
    assert decode_value(custom, t.value_serde("custom")) == "x"  # unknown serde: the JSON text
    assert decode_value(pb.GetReply(found=False), None) is None


def _pem(path: Path, marker: str) -> str:
    path.write_text(f"-----BEGIN {marker}-----\nAAAA\n-----END {marker}-----\n")
    return str(path)


def test_security_settings_are_validated_with_what_to_fix(tmp_path: Path) -> None:
    cert, key = _pem(tmp_path / "c.pem", "CERTIFICATE"), _pem(tmp_path / "k.pem", "PRIVATE KEY")
    ok = StreamsConfig.from_properties({**BASE, "iqmesh.tls.cert.file": cert, "iqmesh.tls.key.file": key,
                                        "iqmesh.tls.ca.file": cert, "iqmesh.auth.token": "t0ken"})
    assert ok.security.server_tls and ok.security.dial_tls and ok.security.token == "t0ken"
    assert "t0ken" not in repr(ok)
    cases = {
        "iqmesh.tls.cert.file and iqmesh.tls.key.file go together": {"iqmesh.tls.cert.file": cert},
        "iqmesh.tls.key.file: cannot read": {"iqmesh.tls.cert.file": cert,
                                             "iqmesh.tls.key.file": str(tmp_path / "missing.pem")},
        "iqmesh.tls.ca.file: ": {"iqmesh.tls.ca.file": key},  # a key is not a CA certificate
        "iqmesh.auth.token must be printable": {"iqmesh.auth.token": "two words"},
    }
    for message, settings in cases.items():
        with pytest.raises(ConfigException) as e:
            StreamsConfig.from_properties({**BASE, **settings})
        assert message in str(e.value), str(e.value)


def test_where_the_query_server_binds() -> None:
    def host(**props: str) -> str:
        return StreamsConfig.from_properties({**BASE, **props}).listen_host
    assert host() == "127.0.0.1"
    assert host(**{"application.server": "127.0.0.1:9090"}) == "127.0.0.1"
    assert host(**{"application.server": "localhost:9090"}) == "127.0.0.1"
    # a StatefulSet pod advertises its DNS name: peers must reach it
    assert host(**{"application.server": "wc-0.wc.default.svc:9090"}) == "0.0.0.0"
    assert host(**{"application.server": "wc-0.wc:9090", "iqmesh.listen.host": "10.0.0.5"}) == "10.0.0.5"
