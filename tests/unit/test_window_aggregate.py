"""Windowed aggregations through the TopologyTestDriver, with the cases and expected outputs of
Kafka Streams' KStreamWindowAggregateTest, KStreamSessionWindowAggregateProcessorTest and
KStreamSlidingWindowAggregateTest (rewritten; results record for record)."""

from __future__ import annotations

from typing import Any

import pytest

from instance.errors import TopologyException
from instance.serde import LongSerde, StringSerde
from instance.serde.windowed import SessionWindow, TimeWindow, Windowed, WindowedSerdes
from instance.testing import TopologyTestDriver
from instance.topology import BaseProcessor, Materialized, StreamsBuilder
from instance.topology.windows import EmitStrategy, SessionWindows, SlidingWindows, TimeWindows

S, L = StringSerde(), LongSerde()
DAY = 24 * 3600 * 1000


def _concat(key: Any, value: Any, agg: Any) -> Any:
    return f"{agg}+{value}"


class _Capture(BaseProcessor):
    def __init__(self, out: list[tuple[Any, Any, int]]) -> None:
        self.out = out

    def process(self, key: Any, value: Any) -> None:
        self.out.append((key, value, self.context.timestamp))


def _tw(key: str, start: int, end: int) -> Windowed:
    return Windowed(key, TimeWindow(start, end))


def test_hopping_window_aggregate_kafka_agg_basic() -> None:
    """KStreamWindowAggregateTest.testAggBasic: size 10, advance 5, late records still in grace."""
    b = StreamsBuilder(S, S)
    out: list[tuple[Any, Any, int]] = []
    (b.stream("topic1").group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(10, DAY).advance_by(5))
     .aggregate(lambda: "0", _concat, Materialized(name="topic1-Canonized", value_serde=S))
     .to_stream().process(lambda: _Capture(out)))
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("topic1", S, S)
        for k, v, ts in [("A", "1", 0), ("B", "2", 1), ("C", "3", 2), ("D", "4", 3), ("A", "1", 4),
                         ("A", "1", 5), ("B", "2", 6), ("D", "4", 7), ("B", "2", 8), ("C", "3", 9),
                         ("A", "1", 10), ("B", "2", 11), ("D", "4", 12), ("B", "2", 13), ("C", "3", 14),
                         ("B", "1", 3), ("B", "2", 2), ("B", "3", 9)]:
            t.pipe_input(k, v, ts)
        assert out == [
            (_tw("A", 0, 10), "0+1", 0), (_tw("B", 0, 10), "0+2", 1), (_tw("C", 0, 10), "0+3", 2),
            (_tw("D", 0, 10), "0+4", 3), (_tw("A", 0, 10), "0+1+1", 4),
            (_tw("A", 0, 10), "0+1+1+1", 5), (_tw("A", 5, 15), "0+1", 5),
            (_tw("B", 0, 10), "0+2+2", 6), (_tw("B", 5, 15), "0+2", 6),
            (_tw("D", 0, 10), "0+4+4", 7), (_tw("D", 5, 15), "0+4", 7),
            (_tw("B", 0, 10), "0+2+2+2", 8), (_tw("B", 5, 15), "0+2+2", 8),
            (_tw("C", 0, 10), "0+3+3", 9), (_tw("C", 5, 15), "0+3", 9),
            (_tw("A", 5, 15), "0+1+1", 10), (_tw("A", 10, 20), "0+1", 10),
            (_tw("B", 5, 15), "0+2+2+2", 11), (_tw("B", 10, 20), "0+2", 11),
            (_tw("D", 5, 15), "0+4+4", 12), (_tw("D", 10, 20), "0+4", 12),
            (_tw("B", 5, 15), "0+2+2+2+2", 13), (_tw("B", 10, 20), "0+2+2", 13),
            (_tw("C", 5, 15), "0+3+3", 14), (_tw("C", 10, 20), "0+3", 14),
            (_tw("B", 0, 10), "0+2+2+2+1", 8), (_tw("B", 0, 10), "0+2+2+2+1+2", 8),
            (_tw("B", 0, 10), "0+2+2+2+1+2+3", 9), (_tw("B", 5, 15), "0+2+2+2+2+3", 13)]
        ws = d.get_window_store("topic1-Canonized")
        assert ws.fetch("B", 0, 10) == [(0, "0+2+2+2+1+2+3"), (5, "0+2+2+2+2+3"), (10, "0+2+2")]
        assert ws.fetch("A", 5) == "0+1+1"


def _late_topology(windows: TimeWindows) -> StreamsBuilder:
    b = StreamsBuilder(S, S)
    (b.stream("topic").group_by_key().windowed_by(windows)
     .aggregate(lambda: "", _concat, Materialized(name="store", value_serde=S, caching_enabled=False,
                                                 logging_enabled=False))
     .to_stream().map(lambda k, v: (str(k), v)).to("output"))
    return b


def test_records_past_the_grace_period_are_dropped_and_counted() -> None:
    """shouldLogAndMeterWhenSkippingExpiredWindow: size 10, advance 5, grace 90."""
    b = _late_topology(TimeWindows.of_size_and_grace(10, 90).advance_by(5))
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("topic", S, S)
        t.pipe_input("k", "100", 100)
        for i in range(7):
            t.pipe_input("k", str(i), i)
        o = d.create_output_topic("output", S, S)
        assert [o.read_record() for _ in range(4)] == [
            ("[k@95/105]", "+100", 100), ("[k@100/110]", "+100", 100),
            ("[k@5/15]", "+5", 5), ("[k@5/15]", "+5+6", 6)]
        assert o.is_empty()
        assert d.dropped_records_total() == 7


def test_tumbling_window_drops_by_grace() -> None:
    """shouldLogAndMeterWhenSkippingExpiredWindowByGrace: size 10, grace 90."""
    b = _late_topology(TimeWindows.of_size_and_grace(10, 90))
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("topic", S, S)
        for v, ts in [("100", 200), ("0", 100), ("1", 101), ("2", 102), ("3", 103), ("4", 104),
                      ("5", 105), ("6", 6)]:
            t.pipe_input("k", v, ts)
        o = d.create_output_topic("output", S, S)
        assert o.read_record() == ("[k@200/210]", "+100", 200)
        assert o.is_empty()
        assert d.dropped_records_total() == 7


def test_windowed_count_to_a_topic_read_with_the_public_windowed_serde() -> None:
    b = StreamsBuilder(S, S)
    (b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(60_000))
     .count(Materialized.as_("counts")).to_stream().to("out"))
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("in", S, S)
        for k, ts in [("a", 1_000), ("a", 59_999), ("b", 60_000), ("a", 60_001), ("a", 30_000)]:
            t.pipe_input(k, "x", ts)
        o = d.create_output_topic("out", WindowedSerdes.time_windowed(S, 60_000), L)
        assert o.read_key_values_to_list() == [
            (_tw("a", 0, 60_000), 1), (_tw("a", 0, 60_000), 2), (_tw("b", 60_000, 120_000), 1),
            (_tw("a", 60_000, 120_000), 1)]  # a@30000 is late: window [0, 60000) closed at 60000
        assert d.dropped_records_total() == 1
        # retention = size + grace: at stream time 60001 the window starting at 0 is gone
        assert d.get_window_store("counts").fetch_all(0, 60_000) == [
            (_tw("a", 60_000, 120_000), 1), (_tw("b", 60_000, 120_000), 1)]


def test_emit_on_window_close_forwards_each_window_once_when_stream_time_closes_it() -> None:
    b = StreamsBuilder(S, S)
    out: list[tuple[Any, Any, int]] = []
    (b.stream("in").group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(10, 5)).emit_strategy(EmitStrategy.on_window_close())
     .count().to_stream().process(lambda: _Capture(out)))
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("in", S, S)
        t.pipe_input("a", "x", 1)
        t.pipe_input("b", "x", 3)
        t.pipe_input("a", "x", 9)
        t.pipe_input("a", "x", 12)
        assert out == []
        t.pipe_input("a", "x", 14)  # close time 9: nothing ended yet
        assert out == []
        t.pipe_input("b", "x", 15)  # close time 10: [0, 10) closes
        assert out == [(_tw("a", 0, 10), 2, 9), (_tw("b", 0, 10), 1, 3)]
        t.pipe_input("a", "x", 6)  # late: dropped
        t.pipe_input("c", "x", 30)  # close 25: [10, 20) closes
        assert out[2:] == [(_tw("a", 10, 20), 2, 14), (_tw("b", 10, 20), 1, 15)]
        assert d.dropped_records_total() == 1


def test_windowed_retention_shorter_than_the_window_is_rejected() -> None:
    b = StreamsBuilder(S, S)
    with pytest.raises(TopologyException, match="retention"):
        (b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_and_grace(100, 10))
         .count(Materialized(name="c", retention_ms=50)))


# -- session windows ---------------------------------------------------------------------------

GAP = 5 * 60 * 1000


def _sw(key: str, start: int, end: int) -> Windowed:
    return Windowed(key, SessionWindow(start, end))


SESSIONS = SessionWindows.of_inactivity_gap_and_grace(GAP, DAY)


def _session_count(caching: bool, windows: SessionWindows = SESSIONS
                   ) -> tuple[StreamsBuilder, list[tuple[Any, Any, int]]]:
    b = StreamsBuilder(S, S)
    out: list[tuple[Any, Any, int]] = []
    (b.stream("in").group_by_key().windowed_by(windows)
     .count(Materialized(name="sessions", caching_enabled=caching))
     .to_stream().process(lambda: _Capture(out)))
    return b, out


def test_sessions_merge_and_forward_tombstones_for_the_merged_ones() -> None:
    """shouldHandleMultipleSessionsAndMerging, committed after each record (as the driver does)."""
    b, out = _session_count(caching=True)
    g = GAP
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("in", S, S)
        for k, ts in [("a", 0), ("b", 0), ("c", 0), ("d", 0), ("d", g // 2), ("a", g + 1), ("b", g + 1),
                      ("a", g + 1 + g // 2), ("c", g + 1 + g // 2)]:
            t.pipe_input(k, "1", ts)
        assert out == [
            (_sw("a", 0, 0), 1, 0), (_sw("b", 0, 0), 1, 0), (_sw("c", 0, 0), 1, 0), (_sw("d", 0, 0), 1, 0),
            (_sw("d", 0, 0), None, 0), (_sw("d", 0, g // 2), 2, g // 2),
            (_sw("a", g + 1, g + 1), 1, g + 1), (_sw("b", g + 1, g + 1), 1, g + 1),
            (_sw("a", g + 1, g + 1), None, g + 1), (_sw("a", g + 1, g + 1 + g // 2), 2, g + 1 + g // 2),
            (_sw("c", g + 1 + g // 2, g + 1 + g // 2), 1, g + 1 + g // 2)]
        store = d.get_session_store("sessions")
        assert store.fetch("a") == [(_sw("a", 0, 0), 1), (_sw("a", g + 1, g + 1 + g // 2), 2)]
        assert store.find_sessions("d", 0, g) == [(_sw("d", 0, g // 2), 2)]


def test_uncached_session_merge_forwards_the_removed_session_at_once() -> None:
    """shouldImmediatelyForwardRemovedSessionsWhenMerging."""
    b, out = _session_count(caching=False)
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("in", S, S)
        t.pipe_input("a", "1", 0)
        t.pipe_input("a", "1", 5)
        assert out == [(_sw("a", 0, 0), 1, 0), (_sw("a", 0, 0), None, 0), (_sw("a", 0, 5), 2, 5)]


@pytest.mark.parametrize(("grace", "dropped"), [(0, ["Late1"]), (1, ["Late1"])])
def test_late_session_records_are_dropped_after_gap_plus_grace(grace: int, dropped: list[str]) -> None:
    """shouldLogAndMeterWhenSkippingLateRecordWith{Zero,Nonzero}Grace (gap 10)."""
    b, out = _session_count(False, SessionWindows.of_inactivity_gap_and_grace(10, grace))
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("in", S, S)
        t.pipe_input("dummy", "dummy", 0)
        t.pipe_input("OnTime1", "1", 0)
        t.pipe_input("dummy", "dummy", 11)
        if grace:
            t.pipe_input("OnTime2", "1", 0)  # stream time 11, grace 1: still on time
            t.pipe_input("dummy", "dummy", 12)
        t.pipe_input("Late1", "1", 0)
        keys = {w.key for w, _, _ in out}
        assert "Late1" not in keys and "OnTime1" in keys and (not grace or "OnTime2" in keys)
        assert d.dropped_records_total() == 1


def _session_concat(grace: int) -> list[tuple[Any, Any]]:
    b = StreamsBuilder(S, S)
    (b.stream("in").group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(10, grace))
     .aggregate(lambda: "", lambda k, v, agg: agg + v, lambda k, a1, a2: a1 + a2,
                Materialized(name="s", value_serde=S, caching_enabled=False))
     .to_stream().to("out"))
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("in", S, S)
        t.pipe_input("k", "a", 0)
        t.pipe_input("k", "c", 20)
        t.pipe_input("k", "b", 10)  # within the gap of both sessions
        o = d.create_output_topic("out", WindowedSerdes.session_windowed(S), S)
        return o.read_key_values_to_list()


def test_session_aggregate_with_merger_to_a_topic_read_with_the_session_serde() -> None:
    # retention (gap + grace = 21) still holds the session [0, 0] at stream time 20: "b" bridges both
    assert _session_concat(11) == [
        (_sw("k", 0, 0), "a"), (_sw("k", 20, 20), "c"),
        (_sw("k", 0, 0), None), (_sw("k", 20, 20), None), (_sw("k", 0, 20), "acb")]


def test_a_session_past_retention_is_not_merged() -> None:
    """Kafka Streams 4.4.0 (tests/oracle): at stream time 20 with retention 10 (gap, no grace) the
    session [0, 0] has expired, though its segment is still there: "b" at 10 merges only with
    [20, 20]."""
    assert _session_concat(0) == [
        (_sw("k", 0, 0), "a"), (_sw("k", 20, 20), "c"), (_sw("k", 20, 20), None), (_sw("k", 10, 20), "cb")]


# -- sliding windows ---------------------------------------------------------------------------


def _sliding(diff: int, grace: int, reduce: bool = False) -> tuple[StreamsBuilder, list[tuple[Any, Any, int]]]:
    b = StreamsBuilder(S, S)
    out: list[tuple[Any, Any, int]] = []
    w = b.stream("topic").group_by_key().windowed_by(SlidingWindows.of_time_difference_and_grace(diff, grace))
    table = (w.reduce(lambda a, v: f"{a}+{v}", Materialized(name="sliding")) if reduce else
             w.aggregate(lambda: "0", _concat, Materialized(name="sliding", value_serde=S)))
    table.to_stream().process(lambda: _Capture(out))
    return b, out


def _run(b: StreamsBuilder, records: list[tuple[str, str, int]]) -> None:
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("topic", S, S)
        for k, v, ts in records:
            t.pipe_input(k, v, ts)


def _latest_by_start(out: list[tuple[Any, Any, int]]) -> dict[int, tuple[Any, int]]:
    return {w.window.start: (v, ts) for w, v, ts in out}


def test_sliding_aggregate_small_input() -> None:
    """KStreamSlidingWindowAggregateTest.testAggregateSmallInput (difference 10, grace 50)."""
    b, out = _sliding(10, 50)
    _run(b, [("A", "1", 10), ("A", "2", 15), ("A", "3", 20), ("A", "4", 22), ("A", "5", 30)])
    assert _latest_by_start(out) == {
        0: ("0+1", 10), 5: ("0+1+2", 15), 10: ("0+1+2+3", 20), 11: ("0+2+3", 20), 12: ("0+2+3+4", 22),
        16: ("0+3+4", 22), 20: ("0+3+4+5", 30), 21: ("0+4+5", 30), 23: ("0+5", 30)}
    assert all(w.window.end == w.window.start + 10 for w, _, _ in out)


def test_sliding_reduce_small_input() -> None:
    """testReduceSmallInput."""
    b, out = _sliding(10, 50, reduce=True)
    _run(b, [("A", "1", 10), ("A", "2", 14), ("A", "3", 15), ("A", "4", 22), ("A", "5", 26), ("A", "6", 30)])
    assert _latest_by_start(out) == {
        0: ("1", 10), 4: ("1+2", 14), 5: ("1+2+3", 15), 11: ("2+3", 15), 12: ("2+3+4", 22), 15: ("3+4", 22),
        16: ("4+5", 26), 20: ("4+5+6", 30), 23: ("5+6", 30), 27: ("6", 30)}


def test_sliding_aggregate_large_out_of_order_input() -> None:
    """testAggregateLargeInput: every update, sorted by key then window start (stable)."""
    b, out = _sliding(10, 50)
    _run(b, [("A", "1", 10), ("A", "2", 20), ("A", "3", 22), ("A", "4", 15),
             ("B", "1", 12), ("B", "2", 13), ("B", "3", 18), ("B", "4", 19), ("B", "5", 25), ("B", "6", 14),
             ("C", "1", 11), ("C", "2", 15), ("C", "3", 16), ("C", "4", 21), ("C", "5", 23),
             ("D", "4", 11), ("D", "2", 12), ("D", "3", 29), ("D", "5", 16)])
    got = [(w.key, w.window.start, v, ts) for w, v, ts in sorted(out, key=lambda e: (e[0].key, e[0].window.start))]
    assert got == [
        ("A", 0, "0+1", 10), ("A", 5, "0+1+4", 15), ("A", 10, "0+1+2", 20), ("A", 10, "0+1+2+4", 20),
        ("A", 11, "0+2", 20), ("A", 11, "0+2+4", 20), ("A", 12, "0+2+3", 22), ("A", 12, "0+2+3+4", 22),
        ("A", 16, "0+2+3", 22), ("A", 21, "0+3", 22),
        ("B", 2, "0+1", 12), ("B", 3, "0+1+2", 13), ("B", 4, "0+1+2+6", 14), ("B", 8, "0+1+2+3", 18),
        ("B", 8, "0+1+2+3+6", 18), ("B", 9, "0+1+2+3+4", 19), ("B", 9, "0+1+2+3+4+6", 19),
        ("B", 13, "0+2", 13), ("B", 13, "0+2+3", 18), ("B", 13, "0+2+3+4", 19), ("B", 13, "0+2+3+4+6", 19),
        ("B", 14, "0+3", 18), ("B", 14, "0+3+4", 19), ("B", 14, "0+3+4+6", 19), ("B", 15, "0+3+4+5", 25),
        ("B", 19, "0+4", 19), ("B", 19, "0+4+5", 25), ("B", 20, "0+5", 25),
        ("C", 1, "0+1", 11), ("C", 5, "0+1+2", 15), ("C", 6, "0+1+2+3", 16), ("C", 11, "0+1+2+3+4", 21),
        ("C", 12, "0+2", 15), ("C", 12, "0+2+3", 16), ("C", 12, "0+2+3+4", 21), ("C", 13, "0+2+3+4+5", 23),
        ("C", 16, "0+3", 16), ("C", 16, "0+3+4", 21), ("C", 16, "0+3+4+5", 23), ("C", 17, "0+4", 21),
        ("C", 17, "0+4+5", 23), ("C", 22, "0+5", 23),
        ("D", 1, "0+4", 11), ("D", 2, "0+4+2", 12), ("D", 6, "0+4+2+5", 16), ("D", 12, "0+2", 12),
        ("D", 12, "0+2+5", 16), ("D", 13, "0+5", 16), ("D", 19, "0+3", 29)]


def test_sliding_early_records() -> None:
    """testEarlyRecordsSmallInput and testEarlyRecordsRepeatedInput: records before the time
    difference share the window [0, diff]."""
    b, out = _sliding(50, 200)
    _run(b, [("A", "1", 0), ("A", "2", 5), ("A", "3", 6), ("A", "4", 3), ("A", "5", 13), ("A", "6", 10)])
    assert _latest_by_start(out) == {
        0: ("0+1+2+3+4+5+6", 13), 1: ("0+2+3+4+5+6", 13), 4: ("0+2+3+5+6", 13), 6: ("0+3+5+6", 13),
        7: ("0+5+6", 13), 11: ("0+5", 13)}
    b, out = _sliding(5, 20)
    _run(b, [("A", "1", 0), ("A", "2", 2), ("A", "3", 4), ("A", "4", 0), ("A", "5", 2), ("A", "6", 2),
             ("A", "7", 0)])
    assert _latest_by_start(out) == {0: ("0+1+2+3+4+5+6+7", 4), 1: ("0+2+3+5+6", 4), 3: ("0+3", 4)}


def test_session_and_sliding_emit_on_window_close() -> None:
    b = StreamsBuilder(S, S)
    sessions: list[tuple[Any, Any, int]] = []
    sliding: list[tuple[Any, Any, int]] = []
    g = b.stream("in").group_by_key()
    (g.windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 2)).emit_strategy(EmitStrategy.on_window_close())
     .count(Materialized(name="s")).to_stream().process(lambda: _Capture(sessions)))
    (g.windowed_by(SlidingWindows.of_time_difference_and_grace(5, 0)).emit_strategy(EmitStrategy.on_window_close())
     .count(Materialized(name="w")).to_stream().process(lambda: _Capture(sliding)))
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("in", S, S)
        for k, ts in [("a", 0), ("a", 3), ("b", 4), ("a", 9)]:
            t.pipe_input(k, "x", ts)
        assert sessions == []  # a [0, 3] closes once stream time passes 3 + gap 5 + grace 2
        t.pipe_input("c", "x", 12)
        assert sessions == [(_sw("a", 0, 3), 2, 3), (_sw("b", 4, 4), 1, 4)]
        t.pipe_input("c", "x", 17)
        assert sessions[2:] == [(_sw("a", 9, 9), 1, 9)]
        # sliding, difference 5: windows close once their (inclusive) end is before stream time
        # sliding, difference 5: a window closes once its (inclusive) end is before stream time
        assert [(w.key, w.window.start, v, ts) for w, v, ts in sliding] == [
            ("a", 0, 2, 3), ("b", 0, 1, 4), ("a", 1, 1, 3),  # at a@9
            ("a", 4, 1, 9),  # at c@12
            ("c", 7, 1, 12)]  # at c@17


def test_hopping_emit_on_close_forwards_each_window_once() -> None:
    b = StreamsBuilder(S, S)
    out: list[tuple[Any, Any, int]] = []
    (b.stream("in").group_by_key()
     .windowed_by(TimeWindows.of_size_with_no_grace(10).advance_by(5)).emit_strategy(EmitStrategy.on_window_close())
     .count().to_stream().process(lambda: _Capture(out)))
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("in", S, S)
        for ts in (1, 6):
            t.pipe_input("a", "x", ts)
        assert out == []
        t.pipe_input("a", "x", 12)
        assert out == [(_tw("a", 0, 10), 2, 6)]
        t.pipe_input("a", "x", 16)
        assert out[1:] == [(_tw("a", 5, 15), 2, 12)]
        t.pipe_input("b", "x", 25)
        assert out[2:] == [(_tw("a", 10, 20), 2, 16), (_tw("a", 15, 25), 1, 16)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_session_emit_on_close_matches_a_model_with_merges_and_out_of_order_records(seed: int) -> None:
    """Every session that closes is emitted once, with its final count, ordered by end, start, key;
    sessions merged away are never emitted (the emit reads only the sessions that may close)."""
    import random
    rnd = random.Random(seed)
    gap, grace = 5, 3
    b = StreamsBuilder(S, S)
    out: list[tuple[Any, Any, int]] = []
    (b.stream("in").group_by_key()
     .windowed_by(SessionWindows.of_inactivity_gap_and_grace(gap, grace)).emit_strategy(EmitStrategy.on_window_close())
     .count(Materialized(name="s")).to_stream().process(lambda: _Capture(out)))
    records = []
    t = 0
    for _ in range(400):
        t += rnd.choice([0, 1, 2, 7])
        records.append((rnd.choice("abcde"), max(0, t - rnd.choice([0, 0, 0, 2, 4]))))
    # the model: sessions per key from the records not dropped as late, merged within the gap
    sessions: dict[str, list[list[int]]] = {}
    stream_time = -1
    emitted: list[tuple[int, str, int, int]] = []
    closed_upto = -1
    store_time = -1  # the store's: the latest session end put; a session ending before
    # store_time - retention + 1 is gone, as in Kafka Streams 4.4.0 (tests/oracle)
    for k, ts in records:
        stream_time = max(stream_time, ts)
        close = stream_time - gap - grace
        mine = sessions.setdefault(k, [])
        live = store_time - (gap + grace) + 1
        near = [s for s in mine if s[1] >= max(ts - gap, live) and s[0] <= ts + gap]
        start, end = min([ts] + [s[0] for s in near]), max([ts] + [s[1] for s in near])
        if end >= close:
            for s in near:
                mine.remove(s)
            mine.append([start, end, 1 + sum(s[2] for s in near)])
            store_time = max(store_time, end, *(s[1] for s in near))
        if close > closed_upto:
            emitted += sorted((s[1], s[0], key, s[2]) for key, ss in sessions.items() for s in ss
                              if closed_upto <= s[1] < close)
            closed_upto = close
    with TopologyTestDriver(b.build()) as d:
        inp = d.create_input_topic("in", S, S)
        for k, ts in records:
            inp.pipe_input(k, "x", ts)
    assert [(w.window.end, w.window.start, w.key, n) for w, n, _ in out] == emitted
    assert len(emitted) > 20


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_sliding_emit_on_close_emits_each_closed_window_once_with_its_final_value(seed: int) -> None:
    """on_window_close forwards windows on_window_update ended with (late records change nothing
    once a window closed), once each, by end then key; not a window stream time jumped past its
    close and its retention at once (Kafka Streams 4.4.0 never emits those: tests/oracle, which
    checks these very records against it)."""
    import random
    rnd = random.Random(seed)
    diff, grace = 10, 5
    records, t = [], 0
    for _ in range(300):
        t += rnd.choice([0, 1, 3, 8, 40])
        records.append((rnd.choice("abcd"), str(len(records)), max(0, t - rnd.choice([0, 0, 2, 9]))))

    def run(strategy: Any) -> list[tuple[Any, Any, int]]:
        b = StreamsBuilder(S, S)
        out: list[tuple[Any, Any, int]] = []
        (b.stream("topic").group_by_key().windowed_by(SlidingWindows.of_time_difference_and_grace(diff, grace))
         .emit_strategy(strategy).count(Materialized(name="w")).to_stream().process(lambda: _Capture(out)))
        _run(b, records)
        return out
    on_close, on_update = run(EmitStrategy.on_window_close()), run(EmitStrategy.on_window_update())
    close_time = max(ts for _, _, ts in records) - grace
    final = {(w.key, w.window.start): (n, ts) for w, n, ts in on_update if n is not None}
    expected = sorted((s + diff, k, s, n, ts) for (k, s), (n, ts) in final.items() if s + diff < close_time)
    got = [(w.window.end, w.key, w.window.start, n, ts) for w, n, ts in on_close]
    assert sorted(set(got)) == got and set(got) <= set(expected) and len(got) > 30
    # what is missing expired before it closed: its start is below the store's stream time
    # (latest window start) - retention at the record that closed it; here, after a jump
    jumped = {ts for _, _, ts in records}
    assert all(any(t > e[0] + grace + diff + diff for t in jumped) for e in set(expected) - set(got))


@pytest.mark.parametrize("old_values", [False, True])
def test_a_windowed_aggregation_forwards_old_values_only_when_downstream_asks(old_values: bool) -> None:
    """Kafka Streams forwards ``Change(new, None)`` from a windowed aggregation unless an operator
    downstream enabled sending old values."""
    b = StreamsBuilder(S, S)
    table = (b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10))
             .count(Materialized(name="c", caching_enabled=False)))
    if old_values:
        table.enable_send_old_values()
    out: list[tuple[Any, Any, int]] = []
    b.topology.add_processor("capture", lambda: _Capture(out), table.node)
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("in", S, S)
        t.pipe_input("k", "x", 1)
        t.pipe_input("k", "y", 2)
    assert [tuple(v) for _, v, _ in out] == ([(1, None), (2, 1)] if old_values else [(1, None), (2, None)])
