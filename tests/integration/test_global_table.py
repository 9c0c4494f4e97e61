"""A GlobalKTable on the dev broker: ``KafkaStreams.start`` returns only once the global store
holds its whole topic, so the very first stream records already join; later updates of the topic
reach the store through the global thread. Two stores of different partition counts (the stream
topic has 3 partitions, the global topic 5): a global table needs no co-partitioning."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer

from instance.local.cluster import ensure_topic, produce
from instance.runtime.kafka_streams import KafkaStreams
from instance.runtime.states import State
from instance.serde import StringSerde
from instance.topology import StreamsBuilder
from tests.integration.helpers import wait_until

pytestmark = pytest.mark.integration

S = StringSerde()
ROWS = 3000


def test_global_table_is_bootstrapped_before_processing(bootstrap: str, tmp_path: Path, unique: str) -> None:
    stream_topic, global_topic, out = f"gs-{unique}", f"gt-{unique}", f"go-{unique}"
    ensure_topic(bootstrap, stream_topic, 3)
    ensure_topic(bootstrap, global_topic, 5)
    ensure_topic(bootstrap, out, 3)
    produce(bootstrap, global_topic, ((f"k{i}".encode(), f"v{i}".encode()) for i in range(ROWS)))
    # the stream is there before the application starts: it is processed at once
    produce(bootstrap, stream_topic, ((f"s{i}".encode(), f"k{i}".encode()) for i in range(ROWS)))

    b = StreamsBuilder(default_key_serde=S, default_value_serde=S)
    table = b.global_table(global_topic, "lookup")
    b.stream(stream_topic).left_join(table, lambda k, v: v, lambda v, row: f"{v}={row}").to(out)
    streams = KafkaStreams(b.build(), {"application.id": f"gapp-{unique}", "bootstrap.servers": bootstrap,
                                       "state.dir": str(tmp_path / "state"), "commit.interval.ms": "200"})
    streams.start()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{unique}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        assert streams.global_thread is not None
        store = streams.global_thread.stores["lookup"]
        # start() returned: the store already holds the whole topic
        assert sum(1 for _ in store.all()) == ROWS
        consumer.subscribe([out])
        results: dict[str, str] = {}

        def all_joined() -> bool:
            for m in consumer.consume(num_messages=1000, timeout=0.2):
                if m.error() is None:
                    results[m.key().decode()] = m.value().decode()
            return len(results) >= ROWS

        wait_until(all_joined, 120, "every stream record joined")
        assert results == {f"s{i}": f"k{i}=v{i}" for i in range(ROWS)}  # no k=None: loaded first

        # an update of the topic reaches the store through the global thread
        produce(bootstrap, global_topic, [(b"k1", b"changed"), (b"new", b"row")])
        wait_until(lambda: store.query_get("k1") == "changed" and store.query_get("new") == "row", 60,
              "the global thread to apply updates")
        produce(bootstrap, stream_topic, [(b"late", b"new")])
        wait_until(lambda: (all_joined(), "late" in results)[1], 60, "the join of a new stream record")
        assert results["late"] == "new=row"
        assert streams.state in (State.RUNNING, State.REBALANCING)
    finally:
        consumer.close()
        assert streams.close(60)
    # a clean close leaves a checkpoint for the global store
    assert (tmp_path / "state" / f"gapp-{unique}" / "global" / ".checkpoint").exists()
