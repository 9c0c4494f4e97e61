"""Schema Registry serdes against a real registry (issue 31, point 1).

Apicurio Registry, built from Maven Central and started as the project starts Apache Kafka
(instance/local/schema_registry.py), answers Confluent's API. A Java program on Apache Avro writes
records in the Confluent wire format; an iqmesh application counts them with ``AvroSerde`` and
answers Gets (the Avro store's value decoded); the Avro records iqmesh writes are read back by the
Java program. A record whose schema id the registry does not know goes to the deserialization
exception handler, named by its offset.
"""

from __future__ import annotations

import json
import struct
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Producer

from instance.local.cluster import LocalCluster, ensure_topic
from instance.local.schema_registry import RegistryHandle
from instance.serde.schema_registry import AvroSerde
from router.client.sync_client import QueryClient
from tests.integration.schema_registry_fixtures import build_peer, java_consume, java_produce

pytestmark = pytest.mark.integration

APP = str(Path(__file__).resolve().parent / "apps" / "avro_counts.py")
SCHEMA = """{"type": "record", "name": "WordEvent", "namespace": "iqmesh.test",
 "fields": [{"name": "word", "type": "string"}, {"name": "user", "type": "string"}]}"""
EVENTS = [
    {"word": "kafka", "user": "alice"}, {"word": "streams", "user": "bob"},
    {"word": "kafka", "user": "bob"}, {"word": "avro", "user": "carol"},
    {"word": "kafka", "user": "alice"}, {"word": "streams", "user": "alice"},
]


@pytest.fixture(scope="module")
def peer() -> str:
    return build_peer()


def _latest_id(registry: RegistryHandle, subject: str) -> int:
    with urllib.request.urlopen(f"{registry.url}/subjects/{subject}/versions/latest", timeout=10) as r:
        return int(json.loads(r.read())["id"])


def _wait_get(q: QueryClient, store: str, key: str, expected: object, cluster: LocalCluster,
              timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while (got := q.get(store, key).value) != expected:
        assert time.monotonic() < deadline, f"{store}[{key}] = {got!r}, never {expected!r}\n{cluster.logs()}"
        time.sleep(0.2)


def test_java_avro_is_counted_served_decoded_and_iqmesh_avro_is_read_by_java(
        bootstrap: str, registry: RegistryHandle, peer: str, tmp_path: Path, unique: str) -> None:
    topic, out = f"avro-in-{unique}", f"avro-out-{unique}"
    ensure_topic(bootstrap, topic, 3)
    ensure_topic(bootstrap, out, 1)
    schema_id = java_produce(peer, bootstrap, registry.url, topic, SCHEMA, EVENTS)
    assert _latest_id(registry, f"{topic}-value") == schema_id  # TopicNameStrategy's subject
    cluster = LocalCluster(bootstrap, APP, f"avro-{unique}", tmp_path, size=1,
                           env={"AVRO_INPUT_TOPIC": topic, "AVRO_OUTPUT_TOPIC": out},
                           extra_config=[f"schema.registry.url={registry.url}"])
    cluster.start()
    try:
        cluster.wait_running(90)
        with QueryClient(cluster.instances[0].target) as q:
            _wait_get(q, "counts", "kafka", 3, cluster)
            _wait_get(q, "counts", "streams", 2, cluster)
            assert q.get("counts", "avro").value == 1
            # the Avro store's value, decoded: the answer is the record as a JSON object
            _wait_get(q, "latest", "alice", {"word": "streams", "user": "alice"}, cluster)
            assert q.get("latest", "carol").value == {"word": "avro", "user": "carol"}
    finally:
        cluster.stop()
    read = java_consume(peer, bootstrap, registry.url, out, len(EVENTS))
    assert sorted((r["value"]["word"], r["value"]["user"]) for r in read) == sorted(
        (e["word"].upper(), e["user"]) for e in EVENTS)
    # iqmesh registered the output's schema under <out>-value, and its records carry that id
    assert {r["schema_id"] for r in read} == {_latest_id(registry, f"{out}-value")}


def _produce(bootstrap: str, topic: str, partition: int, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, v, partition=partition)
    assert p.flush(30) == 0


def test_a_record_whose_schema_cannot_be_fetched_goes_to_the_handler_with_its_offset(
        bootstrap: str, registry: RegistryHandle, tmp_path: Path, unique: str) -> None:
    topic = f"avro-in-{unique}"
    ensure_topic(bootstrap, topic, 3)
    serde = AvroSerde({"schema.registry.url": registry.url}, topic=topic, schema=SCHEMA)
    good = serde.serialize({"word": "alpha", "user": "dan"})
    assert good is not None
    unknown = b"\x00" + struct.pack(">i", 987_654) + good[5:]  # a schema id the registry never gave
    _produce(bootstrap, topic, 2, [good, unknown, good])
    cluster = LocalCluster(bootstrap, APP, f"avro-bad-{unique}", tmp_path, size=1,
                           env={"AVRO_INPUT_TOPIC": topic, "AVRO_OUTPUT_TOPIC": f"avro-out-{unique}"},
                           extra_config=["default.deserialization.exception.handler=log-and-continue",
                                         f"schema.registry.url={registry.url}"])
    cluster.start()
    try:
        cluster.wait_running(90)
        with QueryClient(cluster.instances[0].target) as q:
            _wait_get(q, "counts", "alpha", 2, cluster)
    finally:
        cluster.stop()
    log = cluster.logs()
    assert f"topic={topic} partition=2 offset=1" in log, log
    assert "987654" in log, log  # the error names the schema id that could not be fetched
