"""Versioned tables (KIP-889/914/923) through the TopologyTestDriver: the store's as-of reads and
retention, a versioned source table that ignores out-of-order updates downstream, a stream-table
join looked up as of the stream record's timestamp, and the join's grace period."""

from __future__ import annotations

from typing import Any

import pytest

from instance.errors import TopologyException
from instance.serde import StringSerde
from instance.state.versioned_store import HistorySerde, Stores
from instance.testing import TopologyTestDriver
from instance.topology import Joined, Materialized, StreamsBuilder
from tests.unit.test_ktable import capture

S = StringSerde()


def joiner(a: Any, b: Any) -> str:
    return f"{'null' if a is None else a}+{'null' if b is None else b}"


def test_history_serde_round_trips() -> None:
    hs = HistorySerde(S)
    for history in ([], [(1, "a")], [(1, "a"), (5, None), (9, "")]):
        assert hs.deserialize(hs.serialize(history)) == history


def _versioned_builder(retention: int = 100) -> tuple[StreamsBuilder, Any]:
    b = StreamsBuilder(default_key_serde=S, default_value_serde=S)
    table = b.table("table", Materialized.as_(Stores.persistent_versioned_key_value_store("vs", retention)))
    return b, table


def test_versioned_store_answers_as_of_a_timestamp_within_its_retention() -> None:
    b, table = _versioned_builder(retention=100)
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("table", S, S)
        t.pipe_input("k", "A", 10)
        t.pipe_input("k", "B", 20)
        t.pipe_input("k", "A2", 15)   # out of order: goes into the history
        t.pipe_input("k", None, 30)
        store = d.get_key_value_store("vs")
        view = store.versioned_view
        assert [view.get_as_of("k", ts) for ts in (5, 10, 14, 15, 19, 20, 29, 30, 99)] == [
            None, "A", "A", "A2", "A2", "B", "B", None, None]
        assert view.get("k") is None
        t.pipe_input("k", "C", 200)   # stream time 200: versions before 100 fall out
        assert view.get_as_of("k", 150) is None and view.get_as_of("k", 200) == "C"
        t.pipe_input("k", "old", 50)  # older than the retention: not stored
        assert store.get("k") == [(30, None), (200, "C")]  # the version valid at the horizon stays


def test_versioned_table_does_not_forward_out_of_order_updates() -> None:
    b, table = _versioned_builder()
    seen = capture(b, table)
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("table", S, S)
        t.pipe_input("k", "A", 10)
        t.pipe_input("k", "B", 20)
        t.pipe_input("k", "old", 15)
        t.pipe_input("k", "C", 20)
    assert [(k, c.new_value, ts) for k, c, ts in seen] == [("k", "A", 10), ("k", "B", 20), ("k", "C", 20)]


@pytest.mark.parametrize("left", [False, True])
def test_stream_table_join_looks_the_versioned_table_up_as_of_the_stream_record(left: bool) -> None:
    b, table = _versioned_builder()
    stream = b.stream("stream")
    (stream.left_join(table, joiner) if left else stream.join(table, joiner)).to("out")
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("table", S, S)
        t.pipe_input("k", "A", 10)
        t.pipe_input("k", "B", 20)
        s = d.create_input_topic("stream", S, S)
        for v, ts in (("s15", 15), ("s25", 25), ("s5", 5), ("s10", 10)):
            s.pipe_input("k", v, ts)
        got = d.create_output_topic("out", S, S).read_key_values_to_list()
    expected = [("k", "s15+A"), ("k", "s25+B"), ("k", "s5+null"), ("k", "s10+A")]
    assert got == (expected if left else [kv for kv in expected if not kv[1].endswith("null")])


def test_grace_period_holds_stream_records_until_late_table_updates_arrive() -> None:
    b, table = _versioned_builder()
    b.stream("stream").join(table, joiner, Joined().with_grace_period(10)).to("out")
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("table", S, S)
        s = d.create_input_topic("stream", S, S)
        out = d.create_output_topic("out", S, S)
        t.pipe_input("k", "A", 10)
        s.pipe_input("k", "s30", 30)       # held: stream time 30, released at 40
        t.pipe_input("k", "B", 28)         # arrives late, but within the grace period
        s.pipe_input("k", "s35", 35)
        assert out.is_empty()
        s.pipe_input("k", "s45", 45)       # stream time 45: releases s30 and s35 (<= 35), in order
        assert [out.read_record() for _ in range(2)] == [("k", "s30+B", 30), ("k", "s35+B", 35)]
        s.pipe_input("k", "s12", 12)       # later than the grace period: joined at once
        assert out.read_record() == ("k", "s12+A", 12)
        assert out.is_empty()


def test_grace_period_needs_a_versioned_table_with_enough_history() -> None:
    b = StreamsBuilder(default_key_serde=S, default_value_serde=S)
    plain = b.table("plain", "p")
    with pytest.raises(TopologyException, match="versioned"):
        b.stream("s1").join(plain, joiner, Joined().with_grace_period(5))
    b2, versioned = _versioned_builder(retention=50)
    with pytest.raises(TopologyException, match="history retention"):
        b2.stream("s2").join(versioned, joiner, Joined().with_grace_period(60))


def _grace_topology() -> Any:
    b, table = _versioned_builder()
    b.stream("stream").join(table, joiner, Joined.as_("j").with_grace_period(10)).to("out")
    return b.build()


def _changelog(d: TopologyTestDriver, topic: str) -> list[tuple[Any, Any, int]]:
    out = []
    while (m := d.read_output(topic)) is not None:
        out.append((m.key(), m.value(), m.timestamp()[1]))
    return out


def test_grace_buffer_is_a_logged_store_restored_after_a_move() -> None:
    """Records held across a commit are in the buffer's changelog; a new owner that restores it
    (as the changelog reader does) releases them with their own timestamps."""
    with TopologyTestDriver(_grace_topology(), {"application.id": "app"}) as d:
        d.create_input_topic("table", S, S).pipe_input("k", "A", 10)
        s = d.create_input_topic("stream", S, S)
        s.pipe_input("k", "s30", 30)
        s.pipe_input("k", "s33", 33)
        assert len(list(d.get_key_value_store("j-grace-buffer").all())) == 2
        table_log, buffer_log = _changelog(d, "app-vs-changelog"), _changelog(d, "app-j-grace-buffer-changelog")
        assert len(buffer_log) == 2 and d.create_output_topic("out", S, S).is_empty()
    with TopologyTestDriver(_grace_topology(), {"application.id": "app"}) as d2:
        d2.get_key_value_store("vs").restore_batch(table_log)
        d2.get_key_value_store("j-grace-buffer").restore_batch(buffer_log)
        d2.create_input_topic("stream", S, S).pipe_input("k", "s50", 50)
        out = d2.create_output_topic("out", S, S)
        assert [out.read_record() for _ in range(2)] == [("k", "s30+A", 30), ("k", "s33+A", 33)]
        assert out.is_empty()
        assert len(list(d2.get_key_value_store("j-grace-buffer").all())) == 1  # s50 is held


def test_observed_stream_time_survives_a_move() -> None:
    """The versioned store restored from its changelog knows the stream time it had observed:
    a lookup older than that minus the history retention finds nothing, as before the move."""
    b, table = _versioned_builder(retention=10)
    b.stream("stream").left_join(table, joiner).to("out")
    with TopologyTestDriver(b.build(), {"application.id": "app"}) as d:
        t = d.create_input_topic("table", S, S)
        t.pipe_input("k", "A", 80)
        t.pipe_input("k", "B", 100)
        d.create_input_topic("stream", S, S).pipe_input("k", "s", 85)  # 85 < 100 - 10
        before = d.create_output_topic("out", S, S).read_key_values_to_list()
        log = _changelog(d, "app-vs-changelog")
    assert before == [("k", "s+null")]
    with TopologyTestDriver(b.build(), {"application.id": "app"}) as d2:
        d2.get_key_value_store("vs").restore_batch(log)
        s = d2.create_input_topic("stream", S, S)
        s.pipe_input("k", "s", 85)
        s.pipe_input("k", "t", 95)
        assert d2.create_output_topic("out", S, S).read_key_values_to_list() == [("k", "s+null"), ("k", "t+A")]
