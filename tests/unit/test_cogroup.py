"""``KGroupedStream.cogroup`` (KIP-150) through the TopologyTestDriver; cases and expected
outputs (values and timestamps) from Kafka Streams' CogroupedKStreamImplTest (3.x)."""

from __future__ import annotations

from typing import Any

import pytest

from instance.errors import TopologyException
from instance.serde import LongSerde, StringSerde
from instance.testing import TopologyTestDriver
from instance.topology import Materialized, StreamsBuilder
from instance.topology.windows import SessionWindows, TimeWindows
from tests.unit.test_window_aggregate import _Capture

S = StringSerde()


def _builder() -> StreamsBuilder:
    return StreamsBuilder(default_key_serde=S, default_value_serde=S)


def _concat(k: Any, v: str, agg: str) -> str:
    return agg + v


def _read(d: TopologyTestDriver) -> list[tuple[Any, Any, int]]:
    return [(r.key, r.value, r.timestamp) for r in d.create_output_topic("out", S, S).read_records_to_list()]


def test_cogroup_with_three_grouped_streams() -> None:
    b = _builder()
    g1, g2, g3 = (b.stream(t).group_by_key() for t in ("one", "two", "three"))
    (g1.cogroup(_concat).cogroup(g2, _concat).cogroup(g3, _concat)
       .aggregate(lambda: "", Materialized(name="store", value_serde=S)).to_stream().to("out"))
    topology = b.build()
    assert topology.copartition_groups == [{"one", "two", "three"}]
    with TopologyTestDriver(topology) as d:
        one, two, three = (d.create_input_topic(t, S, S) for t in ("one", "two", "three"))
        for k, v, ts in [("k1", "A", 0), ("k2", "A", 1), ("k1", "A", 10), ("k2", "A", 100)]:
            one.pipe_input(k, v, ts)
        for k, v, ts in [("k2", "B", 100), ("k2", "B", 200), ("k1", "B", 1), ("k2", "B", 500)]:
            two.pipe_input(k, v, ts)
        for k, v, ts in [("k1", "B", 500), ("k2", "B", 500), ("k3", "B", 500), ("k2", "B", 100)]:
            three.pipe_input(k, v, ts)
        assert _read(d) == [("k1", "A", 0), ("k2", "A", 1), ("k1", "AA", 10), ("k2", "AA", 100),
                            ("k2", "AAB", 100), ("k2", "AABB", 200), ("k1", "AAB", 10), ("k2", "AABBB", 500),
                            ("k1", "AABB", 500), ("k2", "AABBBB", 500), ("k3", "B", 500),
                            ("k2", "AABBBBB", 500)]  # (Kafka's test stops asserting before this one)
        assert dict(d.get_key_value_store("store").all()) == {"k1": "AABB", "k2": "AABBBBB", "k3": "B"}


def test_cogroup_each_stream_with_its_own_aggregator() -> None:
    """testCogroupHandleNullValues-style adder and remover (MockAggregator.TOSTRING_*)."""
    b = _builder()
    g1, g2 = b.stream("one").group_by_key(), b.stream("two").group_by_key()
    (g1.cogroup(lambda k, v, a: f"{a}-{v}").cogroup(g2, lambda k, v, a: f"{a}+{v}")
       .aggregate(lambda: "0", Materialized(name="store1", value_serde=S)).to_stream().to("out"))
    with TopologyTestDriver(b.build()) as d:
        one, two = d.create_input_topic("one", S, S), d.create_input_topic("two", S, S)
        for k, ts in [("k1", 0), ("k2", 1), ("k1", 10), ("k2", 100)]:
            one.pipe_input(k, "1", ts)
        for k, ts in [("k1", 500), ("k2", 500), ("k1", 500), ("k2", 100)]:
            two.pipe_input(k, "2", ts)
        assert _read(d) == [("k1", "0-1", 0), ("k2", "0-1", 1), ("k1", "0-1-1", 10), ("k2", "0-1-1", 100),
                            ("k1", "0-1-1+2", 500), ("k2", "0-1-1+2", 500), ("k1", "0-1-1+2+2", 500),
                            ("k2", "0-1-1+2+2", 500)]


def test_cogroup_result_joins_like_any_table() -> None:
    """testCogroupWithKTableKTableInnerJoin: the join result has the larger timestamp of both sides."""
    b = _builder()
    g1, g2 = b.stream("one").group_by_key(), b.stream("two").group_by_key()
    table1 = g1.cogroup(_concat).cogroup(g2, _concat).aggregate(
        lambda: "", Materialized(name="store", value_serde=S), name="name")
    table2 = b.table("three")
    table1.join(table2, lambda a, c: f"{a}+{c}").to_stream().to("out")
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("one", S, S).pipe_input("k1", "A", 5)
        d.create_input_topic("two", S, S).pipe_input("k2", "B", 6)
        assert _read(d) == []
        three = d.create_input_topic("three", S, S)
        three.pipe_input("k1", "C", 0)
        three.pipe_input("k2", "D", 10)
        assert _read(d) == [("k1", "A+C", 5), ("k2", "B+D", 10)]


def test_cogroup_repartitions_a_stream_whose_key_changed() -> None:
    b = _builder()
    by_value = b.stream("one").group_by(lambda k, v: v)
    by_key = b.stream("two").group_by_key()
    (by_value.cogroup(lambda k, v, a: a + 1).cogroup(by_key, lambda k, v, a: a + 10)
       .aggregate(lambda: 0, Materialized(name="counts", value_serde=LongSerde())))
    topology = b.build()
    assert any(t.endswith("-repartition") for t in topology.internal_topics)
    with TopologyTestDriver(topology) as d:
        d.create_input_topic("one", S, S).pipe_key_value_list([("x", "a"), ("y", "a"), ("z", "b")])
        d.create_input_topic("two", S, S).pipe_key_value_list([("a", "-"), ("c", "-")])
        assert dict(d.get_key_value_store("counts").all()) == {"a": 12, "b": 1, "c": 10}


def test_cogroup_needs_a_value_serde_and_distinct_streams() -> None:
    b = _builder()
    g1 = b.stream("one").group_by_key()
    with pytest.raises(TopologyException, match="value_serde"):
        g1.cogroup(_concat).aggregate(lambda: "")
    with pytest.raises(TopologyException, match="already cogrouped"):
        g1.cogroup(_concat).cogroup(g1, _concat)


def test_time_windowed_cogroup_aggregates_per_window_across_streams() -> None:
    b = _builder()
    g1, g2 = b.stream("one").group_by_key(), b.stream("two").group_by_key()
    table = (g1.cogroup(lambda k, v, a: f"{a}+{v}").cogroup(g2, lambda k, v, a: f"{a}-{v}")
             .windowed_by(TimeWindows.of_size_with_no_grace(10))
             .aggregate(lambda: "0", Materialized(name="w", value_serde=S)))
    out: list[tuple[Any, Any, int]] = []
    table.to_stream().process(lambda: _Capture(out))
    with TopologyTestDriver(b.build()) as d:
        one, two = d.create_input_topic("one", S, S), d.create_input_topic("two", S, S)
        one.pipe_input("k", "a", 1)
        two.pipe_input("k", "b", 5)
        one.pipe_input("k", "c", 12)
        two.pipe_input("j", "d", 13)
        one.pipe_input("k", "e", 3)  # still within window [0, 10): no grace, stream time 13 > 10 -> dropped
        assert [(w.key, w.window.start, v, ts) for w, v, ts in out] == [
            ("k", 0, "0+a", 1), ("k", 0, "0+a-b", 5), ("k", 10, "0+c", 12), ("j", 10, "0-d", 13)]
        assert d.get_window_store("w").fetch("k", 10) == "0+c"  # [0, 10) is past its retention


def test_session_windowed_cogroup_merges_sessions_with_the_merger() -> None:
    b = _builder()
    g1, g2 = b.stream("one").group_by_key(), b.stream("two").group_by_key()
    (g1.cogroup(lambda k, v, a: a + v).cogroup(g2, lambda k, v, a: a + v.upper())
       .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 6))  # retention 11 keeps [0, 0] at 10
       .aggregate(lambda: "", lambda k, a1, a2: a1 + a2, Materialized(name="s", value_serde=S)))
    with TopologyTestDriver(b.build()) as d:
        one, two = d.create_input_topic("one", S, S), d.create_input_topic("two", S, S)
        one.pipe_input("k", "a", 0)
        one.pipe_input("k", "c", 10)
        two.pipe_input("k", "b", 5)  # joins both sessions into [0, 10]
        sessions = d.get_session_store("s").fetch("k")
    assert [(w.window.start, w.window.end, v) for w, v in sessions] == [(0, 10, "acB")]  # merged, then added


def test_session_windowed_cogroup_needs_a_merger() -> None:
    b = _builder()
    g1 = b.stream("one").group_by_key()
    with pytest.raises(TopologyException, match="merger"):
        g1.cogroup(_concat).windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(5)).aggregate(
            lambda: "", Materialized(name="s", value_serde=S))
