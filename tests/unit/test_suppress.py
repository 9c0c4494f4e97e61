"""KTable.suppress through the TopologyTestDriver, with the cases and expected outputs of Kafka
Streams' SuppressScenarioTest (final results for time, sliding and session windows) and time-limit
suppression with a record bound."""

from __future__ import annotations

from typing import Any

import pytest

from instance.errors import TopologyException
from instance.serde import LongSerde, StringSerde
from instance.testing import TopologyTestDriver
from instance.topology import Materialized, StreamsBuilder
from instance.topology.suppress import BufferConfig, Suppressed
from instance.topology.windows import SessionWindows, SlidingWindows, TimeWindows

S, L = StringSerde(), LongSerde()


def _topology(windows: Any, suppressed: Suppressed) -> StreamsBuilder:
    b = StreamsBuilder(S, S)
    counts = (b.stream("input").group_by(lambda k, v: k).windowed_by(windows)
              .count(Materialized(name="counts", caching_enabled=False)))
    counts.suppress(suppressed).to_stream().map(lambda k, v: (str(k), v)).to("output-suppressed",
                                                                          value_serde=L)
    counts.to_stream().map(lambda k, v: (str(k), v)).to("output-raw", value_serde=L)
    return b


def _drain(d: TopologyTestDriver, topic: str) -> list[tuple[Any, Any, int]]:
    o = d.create_output_topic(topic, S, L)
    out = []
    while not o.is_empty():
        out.append(o.read_record())
    return out


def _pipe(d: TopologyTestDriver, records: list[tuple[str, int]]) -> None:
    t = d.create_input_topic("input", S, S)
    for k, ts in records:
        t.pipe_input(k, "v1", ts)


FINAL = Suppressed.until_window_closes(BufferConfig.unbounded())


def test_final_results_for_time_windows() -> None:
    """shouldSupportFinalResultsForTimeWindows: size 2, grace 1."""
    with TopologyTestDriver(_topology(TimeWindows.of_size_and_grace(2, 1), FINAL).build()) as d:
        _pipe(d, [("k1", 0), ("k1", 1), ("k1", 2), ("k1", 1), ("k1", 0), ("k1", 5), ("k1", 0)])
        assert _drain(d, "output-raw") == [
            ("[k1@0/2]", 1, 0), ("[k1@0/2]", 2, 1), ("[k1@2/4]", 1, 2), ("[k1@0/2]", 3, 1),
            ("[k1@0/2]", 4, 1), ("[k1@4/6]", 1, 5)]
        assert _drain(d, "output-suppressed") == [("[k1@0/2]", 4, 1), ("[k1@2/4]", 1, 2)]


def test_final_results_for_time_windows_with_a_large_jump() -> None:
    """shouldSupportFinalResultsForTimeWindowsWithLargeJump: size 2, grace 2."""
    with TopologyTestDriver(_topology(TimeWindows.of_size_and_grace(2, 2), FINAL).build()) as d:
        _pipe(d, [("k1", 0), ("k1", 1), ("k1", 2), ("k1", 0), ("k1", 3), ("k1", 0), ("k1", 4), ("k1", 0),
                  ("k1", 30)])
        assert _drain(d, "output-raw") == [
            ("[k1@0/2]", 1, 0), ("[k1@0/2]", 2, 1), ("[k1@2/4]", 1, 2), ("[k1@0/2]", 3, 1),
            ("[k1@2/4]", 2, 3), ("[k1@0/2]", 4, 1), ("[k1@4/6]", 1, 4), ("[k1@30/32]", 1, 30)]
        assert _drain(d, "output-suppressed") == [("[k1@0/2]", 4, 1), ("[k1@2/4]", 2, 3), ("[k1@4/6]", 1, 4)]


def test_final_results_for_sliding_windows() -> None:
    """shouldSupportFinalResultsForSlidingWindows: difference 5, grace 15."""
    topo = _topology(SlidingWindows.of_time_difference_and_grace(5, 15), FINAL).build()
    with TopologyTestDriver(topo) as d:
        _pipe(d, [("k1", 10), ("k1", 11), ("k1", 10), ("k1", 13), ("k1", 10), ("k1", 24), ("k1", 5),
                  ("k1", 7), ("k1", 90)])
        raw = sorted(_drain(d, "output-raw"), key=lambda r: (r[0], r[2]))
        assert raw == [
            ("[k1@11/16]", 1, 11), ("[k1@11/16]", 2, 13), ("[k1@12/17]", 1, 13), ("[k1@19/24]", 1, 24),
            ("[k1@5/10]", 1, 10), ("[k1@5/10]", 2, 10), ("[k1@5/10]", 3, 10), ("[k1@5/10]", 4, 10),
            ("[k1@5/10]", 5, 10), ("[k1@6/11]", 2, 11), ("[k1@6/11]", 3, 11), ("[k1@6/11]", 4, 11),
            ("[k1@6/11]", 5, 11), ("[k1@8/13]", 4, 13), ("[k1@8/13]", 5, 13), ("[k1@85/90]", 1, 90)]
        assert _drain(d, "output-suppressed") == [
            ("[k1@5/10]", 5, 10), ("[k1@6/11]", 5, 11), ("[k1@8/13]", 5, 13), ("[k1@11/16]", 2, 13),
            ("[k1@12/17]", 1, 13), ("[k1@19/24]", 1, 24)]


def test_final_results_for_session_windows_drop_tombstones() -> None:
    """shouldSupportFinalResultsForSessionWindows: gap 5, no grace."""
    topo = _topology(SessionWindows.of_inactivity_gap_with_no_grace(5), FINAL).build()
    with TopologyTestDriver(topo) as d:
        _pipe(d, [("k1", 0), ("k1", 5), ("k1", 1), ("k2", 11), ("k1", 5), ("k1", 30)])
        assert _drain(d, "output-raw") == [
            ("[k1@0/0]", 1, 0), ("[k1@0/0]", None, 0), ("[k1@0/5]", 2, 5), ("[k1@0/5]", None, 5),
            ("[k1@0/5]", 3, 5), ("[k2@11/11]", 1, 11), ("[k1@30/30]", 1, 30)]
        assert _drain(d, "output-suppressed") == [("[k1@0/5]", 3, 5), ("[k2@11/11]", 1, 11)]


def test_time_limit_emits_the_latest_update_per_key_and_early_when_full() -> None:
    b = StreamsBuilder(S, S)
    counts = (b.stream("input").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(100))
              .count(Materialized(name="counts", caching_enabled=False)))
    (counts.suppress(Suppressed.until_time_limit(10, BufferConfig.max_records(2)))
     .to_stream().map(lambda k, v: (str(k), v)).to("out", value_serde=L))
    with TopologyTestDriver(b.build()) as d:
        _pipe(d, [("a", 1), ("a", 2), ("b", 3)])
        assert _drain(d, "out") == []  # a first buffered at 1: waits until stream time 11
        _pipe(d, [("a", 11)])
        assert _drain(d, "out") == [("[a@0/100]", 3, 11)]
        _pipe(d, [("c", 12)])
        assert _drain(d, "out") == []
        _pipe(d, [("d", 13)])  # b (buffered at 3) is due: 3 <= 13 - 10
        assert _drain(d, "out") == [("[b@0/100]", 1, 3)]
        _pipe(d, [("e", 14)])  # three waiting > 2: the oldest (c) leaves early
        assert _drain(d, "out") == [("[c@0/100]", 1, 12)]
        name = next(s for s in d.topology.stores if s.startswith("KTABLE-SUPPRESS"))
        buffer = dict(d.get_key_value_store(name).all())
        assert sorted(str(k) for k in buffer) == ["[d@0/100]", "[e@0/100]"]  # the buffer is a store


def test_suppress_until_window_closes_needs_windows_and_a_strict_buffer() -> None:
    b = StreamsBuilder(S, S)
    table = b.stream("in").group_by_key().count()
    with pytest.raises(TopologyException, match="windowed KTable"):
        table.suppress(FINAL)
    with pytest.raises(ValueError, match="strict"):
        Suppressed.until_window_closes(BufferConfig.max_records(3))


def test_a_new_owner_picks_up_what_waited_in_the_buffer_store() -> None:
    """The buffer lives in a logged store: a processor that finds entries there (restored from the
    changelog after a move) emits them when they are due."""
    from instance.serde.windowed import TimeWindow, TimeWindowedSerde, Windowed
    from instance.state.bytes_store import InMemoryBytesStore
    from instance.state.change import Change
    from instance.state.store_builder import build_key_value_store
    from instance.topology.processor import ProcessorContext, RecordContext
    from instance.topology.suppress import SuppressProcessor, buffer_spec

    spec = buffer_spec("buf", TimeWindowedSerde(S, 10), L)
    store = build_key_value_store(spec, InMemoryBytesStore("buf"), None, 0)
    waiting = Windowed("k", TimeWindow(0, 10))
    store.put(waiting, (10, 7, 3), 7)  # (window end, latest record timestamp, count)
    store.flush()
    out: list[tuple[Any, Any, int]] = []
    rc = RecordContext()
    ctx = ProcessorContext("0_0", "suppress", rc, [lambda k, v: out.append((k, v, rc.timestamp))],
                           {"buf": store}, "app")
    p = SuppressProcessor("buf", FINAL, 0)
    p.init(ctx)
    rc.timestamp = 10
    p.process(Windowed("k", TimeWindow(10, 20)), Change(1, None))
    assert out == [(waiting, Change(3, None), 7)]
    assert [k for k, _ in store.all()] == [Windowed("k", TimeWindow(10, 20))]


def test_windowed_tables_and_suppressed_tables_take_table_operations() -> None:
    """A windowed count and a suppressed table forward changes like any KTable, so the table
    operations (filter, map_values) work after them."""
    b = StreamsBuilder(S, S)
    grouped = b.stream("input").group_by_key()
    counts = grouped.windowed_by(TimeWindows.of_size_with_no_grace(10)).count(
        Materialized(name="counts", caching_enabled=False))
    (counts.filter(lambda k, v: v >= 2).map_values(lambda v: v * 10).to_stream()
     .map(lambda k, v: (f"{k.key}@{k.window.start}", v)).to("big", value_serde=L))
    totals = grouped.count(Materialized(name="totals", caching_enabled=False))
    (totals.suppress(Suppressed.until_time_limit(5, BufferConfig.unbounded())).map_values(lambda v: -v)
     .to_stream().to("late", value_serde=L))
    with TopologyTestDriver(b.build()) as driver:
        inp = driver.create_input_topic("input", S, S)
        for ts in (0, 1, 3, 12):
            inp.pipe_input("a", "x", ts)
        big = driver.create_output_topic("big", S, L).read_key_values_to_list()
        late = driver.create_output_topic("late", S, L).read_key_values_to_list()
    assert [kv for kv in big if kv[1] is not None] == [("a@0", 20), ("a@0", 30)]
    # "a" keeps its first buffer time (0): stream time 12 passes 0 + 5, the latest count goes out
    assert late == [("a", -4)]
