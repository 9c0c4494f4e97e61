"""Pins a dev-broker defect that read_committed readers of changelogs (watches, standbys, restores)
run into: once a producer aborted a transaction, a read_committed consumer that fetches past the
abort marker no longer sees that producer's later committed records.

noida-db 0.2.3 sends, with every fetch, the aborted transactions that ended *before* the fetch
offset too; librdkafka then hides the producer's records until it meets an abort marker it never
sees (Apache Kafka sends only the aborted transactions that overlap the fetched range). Measured:
a consumer that follows the partition live misses every later commit of that producer, also after
the producer was fenced and re-initialised (the producer id stays, only the epoch moves); records
of other producers stay visible.

On the dev broker this test asserts the defect, so a fixed broker makes it fail and says so; on
any other broker (``IQMESH_BOOTSTRAP``) it asserts Kafka's behaviour.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.conformance.test_broker import ON_DEV_BROKER, TIMEOUT, create_topics

pytestmark = pytest.mark.integration


def _read(consumer: Consumer, topic: str, end: int) -> list[bytes]:
    """Values until the consumer's position reaches ``end`` (markers have offsets too)."""
    out: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    tp = TopicPartition(topic, 0)
    while time.monotonic() < deadline:
        out += [m.value() for m in consumer.consume(100, 0.2) if m.error() is None and m.value() is not None]
        if consumer.position([tp])[0].offset >= end:
            return out
    pytest.fail(f"read_committed consumer did not reach offset {end}")


def test_a_live_read_committed_reader_after_an_abort(bootstrap: str, admin: object, unique: str) -> None:
    topic = f"abort-{unique}"
    create_topics(admin, {topic: 1})  # type: ignore[arg-type]
    first = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{unique}"})
    other = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx2-{unique}"})
    first.init_transactions(TIMEOUT)
    other.init_transactions(TIMEOUT)

    def txn(p: Producer, value: bytes, commit: bool = True) -> None:
        p.begin_transaction()
        p.produce(topic, key=b"k", value=value, partition=0)
        assert p.flush(TIMEOUT) == 0
        (p.commit_transaction if commit else p.abort_transaction)(TIMEOUT)

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{unique}", "enable.auto.commit": False,
                       "isolation.level": "read_committed"})
    try:
        reader.assign([TopicPartition(topic, 0, 0)])
        txn(first, b"before")
        assert _read(reader, topic, reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)[1]) == [
            b"before"]
        txn(first, b"aborted", commit=False)
        txn(first, b"after")
        txn(other, b"other")
        end = reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)[1]
        seen = _read(reader, topic, end)
        if ON_DEV_BROKER:
            assert seen == [b"other"], f"the dev broker no longer hides records after an abort: {seen}"
        else:
            assert seen == [b"after", b"other"]
    finally:
        reader.close()
