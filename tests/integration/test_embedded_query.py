"""A Python program embedding KafkaStreams queries its state in process through the one entry
point, ``KafkaStreams.query(StateQueryRequest(...))`` (IQv2's shape), on the session's broker and
real RocksDB stores: key queries land on the key's partition, range queries read every partition
held here, bounds refuse with a typed reason per partition, and request-level errors raise."""

from __future__ import annotations

import collections
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from instance.errors import UnknownStateStoreException
from instance.local.cluster import ensure_topic, produce
from instance.runtime.kafka_streams import KafkaStreams, State
from instance.runtime.query import (
    FailureReason,
    KeyQuery,
    PositionBound,
    RangeQuery,
    StateQueryRequest,
    WindowKeyQuery,
)
from instance.serde import StringSerde
from instance.topology import StreamsBuilder
from instance.topology.processor import ContextualProcessor, Record
from kernel.local_read import Role
from kernel.partitioner import default_partition
from tests.integration.helpers import wait_until

pytestmark = pytest.mark.integration

STORE = "counts"
PARTITIONS = 3
S = StringSerde()


@pytest.fixture
def counted(bootstrap: str, tmp_path: Path, unique: str) -> Iterator[tuple[KafkaStreams, dict[str, int]]]:
    """One embedded instance counting keys of a fresh topic, and the counts it must reach."""
    topic = f"eq-{unique}"
    ensure_topic(bootstrap, topic, PARTITIONS)
    b = StreamsBuilder(default_key_serde=S, default_value_serde=S)
    b.stream(topic).group_by_key().count(STORE)
    streams = KafkaStreams(b.build(), {"application.id": f"eq-{unique}", "bootstrap.servers": bootstrap,
                                       "client.id": "embedded", "state.dir": str(tmp_path / "state"),
                                       "commit.interval.ms": "200"})
    rnd = random.Random(3)
    keys = [f"k{rnd.randrange(40):02d}" for _ in range(400)]
    produce(bootstrap, topic, [(k.encode(), b"x") for k in keys])
    streams.start()
    try:
        assert streams.wait_for_state({State.RUNNING}, 60), streams.state
        yield streams, dict(collections.Counter(keys))
    finally:
        streams.close(30)


def test_key_and_range_queries_answer_from_the_local_replicas(
        counted: tuple[KafkaStreams, dict[str, int]]) -> None:
    streams, truth = counted

    def count(key: str) -> int | None:
        r = streams.query(StateQueryRequest(STORE, KeyQuery(key))).only_partition_result()
        return r.result if r.is_success else None

    wait_until(lambda: all(count(k) == n for k, n in truth.items()), 60, "every count")
    for key, n in truth.items():
        result = streams.query(StateQueryRequest(STORE, KeyQuery(key)))
        (p,) = result.partition_results  # the key's partition only, hashed as the producers do
        assert p == default_partition(S.serialize(key) or b"", PARTITIONS)
        r = result.partition_results[p]
        assert r.is_success and r.result == n and r.replica is not None
        assert r.replica.role is Role.ACTIVE and r.replica.partition == p and r.position >= 0
    assert streams.query(StateQueryRequest(STORE, KeyQuery("never-written"))).only_partition_result().result is None

    everything = streams.query(StateQueryRequest(STORE, RangeQuery()))
    assert sorted(everything.partition_results) == list(range(PARTITIONS))  # every partition is held here
    assert all(r.is_success for r in everything.partition_results.values())
    got = {k: v for r in everything.partition_results.values() for k, v in r.result or []}
    assert got == truth
    assert set(everything.position) == set(range(PARTITIONS))
    lower = streams.query(StateQueryRequest(STORE, RangeQuery("k00", "k09")))
    assert {k for r in lower.partition_results.values() for k, _ in r.result or []} == \
        {k for k in truth if k <= "k09"}


def test_bounds_and_missing_partitions_fail_per_partition_with_a_reason(
        counted: tuple[KafkaStreams, dict[str, int]]) -> None:
    streams, truth = counted
    key = next(iter(truth))
    wait_until(lambda: streams.query(StateQueryRequest(STORE, KeyQuery(key))).only_partition_result().result,
               60, "the first count")
    r = streams.query(StateQueryRequest(STORE, KeyQuery(key))).only_partition_result()
    p, position = r.partition, r.position
    ahead = StateQueryRequest(STORE, KeyQuery(key)).with_position_bound(PositionBound.at({p: position + 10_000}))
    refused = streams.query(ahead).only_partition_result()
    assert refused.failure is FailureReason.NOT_UP_TO_BOUND and str(position + 10_000) in refused.message
    reached = ahead.with_position_bound(PositionBound.at({p: position}))
    assert streams.query(reached).only_partition_result().is_success
    assert streams.query(StateQueryRequest(STORE, KeyQuery(key), max_lag=0)).only_partition_result().is_success
    # a partition this instance holds no replica of (the store has 3)
    missing = streams.query(StateQueryRequest(STORE, RangeQuery(), partitions=(1, 7)))
    assert missing.partition_results[1].is_success
    assert missing.partition_results[7].failure is FailureReason.NOT_ACTIVE
    # the request as a whole: an unknown store, a query the store cannot answer
    with pytest.raises(UnknownStateStoreException):
        streams.query(StateQueryRequest("nope", KeyQuery(key)))
    with pytest.raises(ValueError, match="not a window store"):
        streams.query(StateQueryRequest(STORE, WindowKeyQuery(key, 0, 10)))


class _CommitOnRequest(ContextualProcessor):
    """Asks for a commit when it sees the value ``commit``: the test decides when the transaction
    commits (the commit interval is too long to reach)."""

    def process(self, record: Record) -> None:
        if record.value == "commit":
            self.context().commit()


def test_exactly_once_queries_read_only_committed_state(bootstrap: str, tmp_path: Path, unique: str) -> None:
    """Under exactly-once a query reads what the last transaction committed (KIP-892's
    read-committed queries): counts processed, sent and not committed yet are not answered, since a
    crash would abort them and the next owner would answer less without a stale flag. Over a
    thousand keys make the store write a batch below before the commit, so RocksDB holds
    uncommitted counts when the queries come."""
    topic, out = f"ec-{unique}", f"ec-out-{unique}"
    ensure_topic(bootstrap, topic, 1)
    ensure_topic(bootstrap, out, 1)
    b = StreamsBuilder(default_key_serde=S, default_value_serde=S)
    stream = b.stream(topic)
    stream.process(_CommitOnRequest)
    stream.group_by_key().count(STORE).to_stream().map_values(str).to(out)
    streams = KafkaStreams(b.build(), {"application.id": f"ec-{unique}", "bootstrap.servers": bootstrap,
                                       "state.dir": str(tmp_path / "state"), "processing.guarantee": "exactly_once_v2",
                                       "commit.interval.ms": "600000", "statestore.cache.max.bytes": "0"})
    words = [f"w{i:04d}" for i in range(1500)]
    streams.start()
    try:
        assert streams.wait_for_state({State.RUNNING}, 60), streams.state
        produce(bootstrap, topic, [(w.encode(), b"x") for w in words] + [(b"a", b"x")] * 3)
        # processed: every count is on the output topic, in the open transaction
        wait_until(lambda: _uncommitted_latest(bootstrap, out).get("a") == "3", 60,
                   "the counts in the open transaction")

        def answer(key: str) -> tuple[int | None, int]:
            r = streams.query(StateQueryRequest(STORE, KeyQuery(key))).only_partition_result()
            assert r.is_success, r
            return r.result, r.position
        assert answer("a") == (None, 0) and answer(words[0]) == (None, 0) and answer(words[-1]) == (None, 0)
        assert streams.query(StateQueryRequest(STORE, RangeQuery())).only_partition_result().result == []
        produce(bootstrap, topic, [(b"a", b"commit")])
        wait_until(lambda: answer("a")[0] == 4, 60, "the committed count")
        assert answer(words[0])[0] == 1 and answer("a")[1] > 0
        assert len(streams.query(StateQueryRequest(STORE, RangeQuery())).only_partition_result().result) == 1501
    finally:
        streams.close(30)


def _uncommitted_latest(bootstrap: str, topic: str) -> dict[str, str]:
    """The latest value of each key in partition 0 of ``topic``, transactions open or not."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"peek-{topic}", "enable.auto.commit": False,
                  "isolation.level": "read_uncommitted", "auto.offset.reset": "earliest"})
    try:
        high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
        c.assign([TopicPartition(topic, 0, 0)])
        latest: dict[str, str] = {}
        position, deadline = 0, time.monotonic() + 20
        while position < high and time.monotonic() < deadline:
            for m in c.consume(1000, 1.0):
                if m.error() is None:
                    position = m.offset() + 1
                    if m.key() is not None and m.value() is not None:
                        latest[m.key().decode()] = m.value().decode()
        return latest
    finally:
        c.close()
