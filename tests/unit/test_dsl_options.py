"""``Consumed``, ``Produced``, ``Grouped`` and the ``Materialized`` builder chain: a Java topology
ported line by line behaves as the keyword form does, names what Kafka Streams' options name
(source and sink nodes, the repartition topic), and refuses what it cannot honour."""

from __future__ import annotations

from datetime import timedelta

import pytest

from instance.errors import TopologyException
from instance.serde import LongSerde, StringSerde
from instance.testing import TopologyTestDriver
from instance.topology import (
    Consumed,
    Grouped,
    Materialized,
    Produced,
    StreamsBuilder,
    TimeWindows,
)

S, L = StringSerde(), LongSerde()


def _wordcount(materialized: Materialized) -> StreamsBuilder:
    """Kafka Streams' WordCountDemo, one Java line per line."""
    b = StreamsBuilder()
    source = b.stream("plaintext-input", Consumed.with_(S, S).with_name("lines"))
    counts = (source.flat_map_values(lambda v: v.lower().split())
                    .group_by(lambda k, v: v, Grouped.with_(S, S).with_name("words"))
                    .count(materialized))
    counts.to_stream().to("wordcount-output", Produced.with_(S, L).with_name("counts-out"))
    return b


def test_java_wordcount_ports_line_by_line() -> None:
    m = Materialized.as_("counts").with_key_serde(S).with_value_serde(L).with_caching_disabled()
    topology = _wordcount(m).build()
    assert "lines" in topology.nodes and "counts-out" in topology.nodes
    assert set(topology.internal_topics) == {"words-repartition"}  # Grouped's name, not the store's
    with TopologyTestDriver(topology) as d:
        d.create_input_topic("plaintext-input", S, S).pipe_input(None, "a b a", 5)
        out = d.create_output_topic("wordcount-output", S, L)
        # caching off: every update is forwarded
        assert out.read_key_values_to_list() == [("a", 1), ("b", 1), ("a", 2)]
        assert d.get_key_value_store("counts").get("a") == 2


def test_caching_chain_sets_the_store() -> None:
    on = _wordcount(Materialized.as_("counts").with_caching_disabled().with_caching_enabled()).build()
    off = _wordcount(Materialized.as_("counts").with_caching_disabled()).build()
    assert on.stores["counts"].caching_enabled and not off.stores["counts"].caching_enabled


def test_materialized_chain_sets_the_store() -> None:
    base = Materialized.as_("s")
    assert base.with_logging_disabled().logging_enabled is False
    assert base.with_logging_disabled().with_logging_enabled().logging_enabled is True
    assert base.with_store_type("in_memory").in_memory is True
    assert base.with_store_type("ROCKS_DB").in_memory is False
    assert base.with_retention(timedelta(minutes=2)).retention_ms == 120_000
    assert base.with_retention(500).retention_ms == 500
    assert Materialized.with_(S, L) == Materialized(key_serde=S, value_serde=L)
    assert base.name == "s" and base.retention_ms is None  # copies: the original is unchanged

    b = StreamsBuilder(default_key_serde=S, default_value_serde=S)
    (b.stream("in").group_by_key()
      .windowed_by(TimeWindows.of_size_and_grace(1000, 0))
      .count(Materialized.as_("w").with_retention(timedelta(seconds=5)).with_logging_disabled()
             .with_store_type("in_memory")))
    spec = b.build().stores["w"]
    assert spec.retention_ms == 5000 and not spec.logging_enabled and spec.in_memory


def test_bad_options_are_clear_errors() -> None:
    with pytest.raises(TopologyException, match="store type"):
        Materialized.as_("s").with_store_type("lmdb")
    with pytest.raises(TopologyException, match="retention"):
        Materialized.as_("s").with_retention(-1)
    with pytest.raises(TopologyException, match="not supported"):
        Materialized.as_("s").with_logging_enabled({"retention.ms": "1"})
    b = StreamsBuilder()
    with pytest.raises(TopologyException, match="Consumed given twice"):
        b.stream("a", Consumed.with_(S, S), consumed=Consumed.with_(S, S))
    with pytest.raises(TopologyException, match="topic name"):
        b.stream("a", 5)  # type: ignore[arg-type]
    with pytest.raises(TopologyException, match="Produced given twice"):
        b.stream("x").to("out", Produced.with_(S, S), produced=Produced.with_(S, S))
    with pytest.raises(TopologyException, match="expected Grouped"):
        b.stream("y").group_by_key(grouped=Produced.with_(S, S))  # type: ignore[arg-type]
    with pytest.raises(TopologyException, match="extract"):
        Consumed.with_(S, S, timestamp_extractor=42)


def test_table_takes_consumed_and_materialized_as_in_java() -> None:
    b = StreamsBuilder()  # bytes by default: the serdes must come from the options
    table = b.table("t", Consumed.with_(S, S).with_name("t-src"), Materialized.as_("t-store"))
    table.to_stream().to("out", Produced.with_(S, S))
    topology = b.build()
    assert {"t-src", "t-src-table-source"} <= set(topology.nodes)
    with TopologyTestDriver(topology) as d:
        d.create_input_topic("t", S, S).pipe_input("k", "v", 1)
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == [("k", "v")]
        assert d.get_key_value_store("t-store").get("k") == "v"


def test_consumed_timestamp_extractor_stamps_the_records() -> None:
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S).with_timestamp_extractor(
        lambda record, partition_time: int(record.value))).to("out", Produced.with_(S, S))
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, S).pipe_input("k", "1234", 1)
        assert d.create_output_topic("out", S, S).read_record().timestamp == 1234


def test_table_group_by_takes_grouped() -> None:
    b = StreamsBuilder(default_key_serde=S, default_value_serde=S)
    (b.table("users", "users").group_by(lambda user, region: (region, user), Grouped.as_("by-region"))
      .count(Materialized.as_("per-region").with_value_serde(L)))
    topology = b.build()
    assert set(topology.internal_topics) == {"by-region-repartition"}
    with TopologyTestDriver(topology) as d:
        users = d.create_input_topic("users", S, S)
        users.pipe_input("u1", "north", 1)
        users.pipe_input("u2", "north", 2)
        users.pipe_input("u1", "south", 3)
        store = d.get_key_value_store("per-region")
        assert (store.get("north"), store.get("south")) == (1, 1)
