"""KTable change propagation, KTable filter/map_values and KGroupedTable aggregations, through the
TopologyTestDriver. Cases and expected outputs follow Kafka Streams' own tests
(KTableFilterTest, KTableMapValuesTest, KTableAggregateTest, 3.x), re-derived here."""

from __future__ import annotations

import heapq
import random
from collections import Counter
from typing import Any

import pytest

from instance.serde import IntSerde, JsonSerde, LongSerde, StringSerde
from instance.state.change import Change
from instance.testing import TopologyTestDriver
from instance.topology import BaseProcessor, KTable, Materialized, StreamsBuilder
from instance.topology.change_serde import ChangeSerde

S = StringSerde()
L = LongSerde()
I = IntSerde()  # noqa: E741
J = JsonSerde()


def _builder() -> StreamsBuilder:
    return StreamsBuilder(default_key_serde=S, default_value_serde=S)


class Capture(BaseProcessor):
    """What a KTable node forwards: (key, Change, timestamp)."""

    def __init__(self, seen: list[tuple[Any, Any, int]]) -> None:
        self.seen = seen

    def process(self, key: Any, value: Any) -> None:
        self.seen.append((key, value, self.context.timestamp))


def capture(b: StreamsBuilder, table: KTable, name: str = "capture") -> list[tuple[Any, Any, int]]:
    seen: list[tuple[Any, Any, int]] = []
    b.topology.add_processor(name, lambda: Capture(seen), table.node)
    return seen


def _values(seen: list[tuple[Any, Any, int]]) -> list[tuple[Any, Any]]:
    return [(k, v) for k, v, _ in seen]


# -- Change(new, old) --------------------------------------------------------------------------


def test_change_serde_round_trips_every_shape() -> None:
    cs = ChangeSerde(S)
    for change in (Change("n", "o"), Change("n", None), Change(None, "o"), Change("", ""), Change(None, None)):
        assert cs.deserialize(cs.serialize(change)) == change
    assert cs.serialize(None) is None


@pytest.mark.parametrize("caching", [True, False])
def test_source_table_forwards_changes_without_old_values_unless_asked(caching: bool) -> None:
    b = _builder()
    table = b.table("t", Materialized(name="s", caching_enabled=caching))
    seen = capture(b, table)
    with TopologyTestDriver(b.build()) as d:
        inp = d.create_input_topic("t", S, S)
        inp.pipe_input("a", "1", 5)
        inp.pipe_input("a", "2", 6)
        inp.pipe_input("a", None, 7)
    assert seen == [("a", Change("1", None), 5), ("a", Change("2", None), 6), ("a", Change(None, None), 7)]


@pytest.mark.parametrize("caching", [True, False])
def test_source_table_sends_old_values_once_a_downstream_operator_needs_them(caching: bool) -> None:
    b = _builder()
    table = b.table("t", Materialized(name="s", caching_enabled=caching))
    seen = capture(b, table)
    table.group_by(lambda k, v: (k, v)).count()
    assert table.old_values.enabled
    with TopologyTestDriver(b.build()) as d:
        inp = d.create_input_topic("t", S, S)
        inp.pipe_input("a", "1", 5)
        inp.pipe_input("a", "2", 6)
        inp.pipe_input("a", None, 7)
    assert seen == [("a", Change("1", None), 5), ("a", Change("2", "1"), 6), ("a", Change(None, "2"), 7)]


def test_count_of_a_stream_forwards_old_values_to_a_regrouping() -> None:
    b = _builder()
    counts = b.stream("in").group_by_key().count("c")
    seen = capture(b, counts)
    counts.group_by(lambda k, n: ("all", n), value_serde=L).reduce(lambda a, v: a + v, lambda a, v: a - v,
                                                                    "total")
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, S).pipe_key_value_list([("a", "x"), ("b", "x"), ("a", "x")])
        assert dict(d.get_key_value_store("total").all()) == {"all": 3}
    assert _values(seen) == [("a", Change(1, None)), ("b", Change(1, None)), ("a", Change(2, 1))]


# -- KTable filter / map_values / to_stream ------------------------------------------------------

FILTER_INPUT = [("A", 1), ("B", 2), ("C", 3), ("D", 4), ("A", None), ("B", None)]


def _pipe(d: TopologyTestDriver, topic: str, records: list[tuple[Any, Any]], serde: Any = I) -> None:
    inp = d.create_input_topic(topic, S, serde)
    for i, (k, v) in enumerate(records):
        inp.pipe_input(k, v, i)


def test_filter_and_filter_not_forward_tombstones_without_old_values() -> None:
    b = _builder()
    table = b.table("t", value_serde=I)
    even = capture(b, table.filter(lambda k, v: v % 2 == 0), "even")
    odd = capture(b, table.filter_not(lambda k, v: v % 2 == 0), "odd")
    with TopologyTestDriver(b.build()) as d:
        _pipe(d, "t", FILTER_INPUT)
    # KTableFilterTest.doTestKTable
    assert [(k, c.new_value) for k, c, _ in even] == [
        ("A", None), ("B", 2), ("C", None), ("D", 4), ("A", None), ("B", None)]
    assert [(k, c.new_value) for k, c, _ in odd] == [
        ("A", 1), ("B", None), ("C", 3), ("D", None), ("A", None), ("B", None)]


def test_filter_with_old_values_drops_changes_that_stay_filtered_out() -> None:
    b = _builder()
    table = b.table("t", value_serde=I)
    even = table.filter(lambda k, v: v % 2 == 0)
    seen = capture(b, even)
    even.enable_send_old_values()
    assert table.old_values.enabled  # an unmaterialized filter asks its parent
    with TopologyTestDriver(b.build()) as d:
        _pipe(d, "t", FILTER_INPUT)
    # KTableFilterTest.doTestSendingOldValue
    assert _values(seen) == [("B", Change(2, None)), ("D", Change(4, None)), ("B", Change(None, 2))]


@pytest.mark.parametrize("caching", [True, False])
def test_materialized_filter_is_queryable_and_skips_absent_deletes_when_caching(caching: bool) -> None:
    """KTableFilterTest: with caching off, a filtered-out record of a key the table never held is
    forwarded as a delete (``Change(None, None)``); a caching store ignores such a delete."""
    b = _builder()
    table = b.table("t", value_serde=I)
    even = table.filter(lambda k, v: v % 2 == 0,
                        Materialized(name="even", value_serde=I, caching_enabled=caching))
    even.to_stream().to("out", value_serde=I)
    assert even.queryable_store_name == "even"
    with TopologyTestDriver(b.build()) as d:
        _pipe(d, "t", FILTER_INPUT)
        expected = [("B", 2), ("D", 4), ("B", None)] if caching else [
            ("A", None), ("B", 2), ("C", None), ("D", 4), ("A", None), ("B", None)]
        assert d.create_output_topic("out", S, I).read_key_values_to_list() == expected
        assert dict(d.get_key_value_store("even").all()) == {"D": 4}


def test_map_values_chains_and_to_stream() -> None:
    b = _builder()
    table = b.table("t", value_serde=I)
    table.map_values(lambda v: v * 10).filter(lambda k, v: v > 10).to_stream().to("out", value_serde=I)
    with TopologyTestDriver(b.build()) as d:
        _pipe(d, "t", [("A", 1), ("B", 2), ("A", 3), ("B", None)])
        assert d.create_output_topic("out", S, I).read_key_values_to_list() == [
            ("A", None), ("B", 20), ("A", 30), ("B", None)]


# -- KGroupedTable ---------------------------------------------------------------------------


def _adder(k: Any, v: Any, agg: str) -> str:
    return f"{agg}+{v}"


def _remover(k: Any, v: Any, agg: str) -> str:
    return f"{agg}-{v}"


@pytest.mark.parametrize("caching", [True, False])
def test_aggregate_same_group_subtracts_then_adds_in_one_update(caching: bool) -> None:
    """KTableAggregateTest.testAggBasic (3.x, KAFKA-12446): the key is kept, so each update is one
    record through the repartition topic and one result."""
    b = _builder()
    (b.table("topic1", Materialized(name="anyStoreName", caching_enabled=caching))
      .group_by(lambda k, v: (k, v))
      .aggregate(lambda: "0", _adder, _remover,
                 Materialized(name="topic1-Canonized", value_serde=S, caching_enabled=caching))
      .to_stream().to("out"))
    inputs = [("A", "1", 10), ("B", "2", 15), ("A", "3", 20), ("B", "4", 18), ("C", "5", 5),
              ("D", "6", 25), ("B", "7", 15), ("C", "8", 10)]
    with TopologyTestDriver(b.build()) as d:
        inp = d.create_input_topic("topic1", S, S)
        for k, v, ts in inputs:
            inp.pipe_input(k, v, ts)
        out = d.create_output_topic("out", S, S)
        got = []
        while not out.is_empty():
            got.append(out.read_record())
    assert got == [("A", "0+1", 10), ("B", "0+2", 15), ("A", "0+1-1+3", 20), ("B", "0+2-2+4", 18),
                   ("C", "0+5", 5), ("D", "0+6", 25), ("B", "0+2-2+4-4+7", 18), ("C", "0+5-5+8", 10)]


def test_aggregate_regrouping_and_null_groups() -> None:
    """KTableAggregateTest.testAggRepartition: a None key or None pair selects nothing."""
    b = _builder()

    def select(key: str, value: str) -> tuple[Any, Any] | None:
        if key == "null":
            return None, value
        if key == "NULL":
            return None
        return value, value

    (b.table("topic1", "anyStoreName").group_by(select)
      .aggregate(lambda: "0", _adder, _remover, Materialized(name="agg", value_serde=S))
      .to_stream().to("out"))
    with TopologyTestDriver(b.build(), {"application.id": "app"}) as d:
        d.create_input_topic("topic1", S, S).pipe_key_value_list([
            ("A", "1"), ("A", None), ("A", "1"), ("B", "2"), ("null", "3"), ("B", "4"), ("NULL", "5"),
            ("B", "7")])
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == [
            ("1", "0+1"), ("1", "0+1-1"), ("1", "0+1-1+1"), ("2", "0+2"), ("2", "0+2-2"), ("4", "0+4"),
            ("4", "0+4-4"), ("7", "0+7")]
        # the repartition topic is internal, named after the store
        assert not d.create_output_topic("app-agg-repartition", S, ChangeSerde(S)).is_empty()


@pytest.mark.parametrize("named", [True, False])
def test_count_of_a_regrouped_table(named: bool) -> None:
    """KTableAggregateTest.testCount / testCountWithInternalStore."""
    b = _builder()
    counts = b.table("in", "anyStoreName").group_by(lambda k, v: (v, v)).count("count" if named else None)
    counts.to_stream().to("out", value_serde=L)
    if not named:
        # source, table source, select, then the store (before the repartition nodes)
        assert counts.queryable_store_name == "KTABLE-AGGREGATE-STATE-STORE-0000000003"
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, S).pipe_key_value_list([
            ("A", "green"), ("B", "green"), ("A", "blue"), ("C", "yellow"), ("D", "green")])
        assert d.create_output_topic("out", S, L).read_key_values_to_list() == [
            ("green", 1), ("green", 2), ("green", 1), ("blue", 1), ("yellow", 1), ("green", 2)]
        assert dict(d.get_key_value_store(counts.queryable_store_name).all()) == {
            "green": 2, "blue": 1, "yellow": 1}


def test_remove_old_before_add_new() -> None:
    """KTableAggregateTest.testRemoveOldBeforeAddNew."""
    b = _builder()
    (b.table("in", "anyStoreName")
      .group_by(lambda k, v: (k[0], k[1]))
      .aggregate(lambda: "", lambda k, v, agg: agg + v, lambda k, v, agg: agg.replace(v, ""),
                 Materialized(name="someStore", value_serde=S))
      .to_stream().to("out"))
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, S).pipe_key_value_list([("11", "A"), ("12", "B"), ("11", None),
                                                               ("12", "C")])
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == [
            ("1", "1"), ("1", "12"), ("1", "2"), ("1", "2")]


@pytest.mark.parametrize("caching", [True, False])
def test_reduce_of_a_regrouped_table_tracks_moves_exactly(caching: bool) -> None:
    """Random updates and deletes moving keys between groups: the per-group sum always equals a
    recomputation from the table's current contents."""
    b = _builder()
    (b.table("in", Materialized(name="src", value_serde=I, caching_enabled=caching), value_serde=I)
      .group_by(lambda k, v: (f"g{v % 5}", v), value_serde=I)
      .reduce(lambda a, v: a + v, lambda a, v: a - v,
              Materialized(name="sums", value_serde=I, caching_enabled=caching)))
    rnd = random.Random(7)
    table: dict[str, int] = {}
    with TopologyTestDriver(b.build()) as d:
        inp = d.create_input_topic("in", S, I)
        for _ in range(400):
            k = f"k{rnd.randint(0, 30)}"
            v = None if rnd.random() < 0.2 else rnd.randint(0, 1000)
            inp.pipe_input(k, v)
            if v is None:
                table.pop(k, None)
            else:
                table[k] = v
        sums: Counter[str] = Counter()
        for v in table.values():
            sums[f"g{v % 5}"] += v
        got = {g: s for g, s in d.get_key_value_store("sums").all() if s != 0}
        assert got == {g: s for g, s in sums.items() if s != 0}


def test_top_n_share_volume_by_industry() -> None:
    """The seeds' example: rolling share volume per symbol (a reduce of a stream), regrouped by
    industry into a top-N with an adder and a subtractor; an update of a symbol replaces its old
    volume in the ranking."""
    n = 3
    b = StreamsBuilder(default_key_serde=S, default_value_serde=J)
    volume = (b.stream("trades", value_serde=J)
              .group_by_key()
              .reduce(lambda a, t: {**t, "shares": a["shares"] + t["shares"]},
                      Materialized(name="share-volume", value_serde=J)))

    def add(industry: str, sv: dict[str, Any], top: dict[str, int]) -> dict[str, int]:
        return {**top, sv["symbol"]: sv["shares"]}

    def remove(industry: str, sv: dict[str, Any], top: dict[str, int]) -> dict[str, int]:
        return {s: v for s, v in top.items() if s != sv["symbol"]}

    (volume.group_by(lambda symbol, sv: (sv["industry"], sv))
           .aggregate(dict, add, remove, Materialized(name="by-industry", value_serde=J))
           .map_values(lambda top: [s for _, s in heapq.nlargest(n, ((v, s) for s, v in top.items()))])
           .to_stream().to("top-n", value_serde=J))
    rnd = random.Random(3)
    symbols = {f"S{i}": rnd.choice(["tech", "energy", "banks"]) for i in range(12)}
    totals: Counter[str] = Counter()
    with TopologyTestDriver(b.build()) as d:
        inp = d.create_input_topic("trades", S, J)
        for _ in range(300):
            s = rnd.choice(sorted(symbols))
            shares = rnd.randint(1, 500)
            totals[s] += shares
            inp.pipe_input(s, {"symbol": s, "industry": symbols[s], "shares": shares})
        latest = d.create_output_topic("top-n", S, J).read_key_values_to_map()
    for industry in set(symbols.values()):
        ranked = sorted((s for s in symbols if symbols[s] == industry and s in totals),
                        key=lambda s: (totals[s], s), reverse=True)
        assert latest[industry] == ranked[:n]


@pytest.mark.parametrize("op", ["count", "reduce", "aggregate"])
def test_stream_aggregate_result_keeps_the_latest_timestamp_of_its_key(op: str) -> None:
    """Kafka Streams' KStreamAggregate/KStreamReduce stamp an updated aggregate with the larger of
    the record's and the aggregate's timestamps: an out-of-order record does not move the result
    back in time, also after the store restarted from its changelog."""
    def topology() -> Any:
        b = _builder()
        grouped = b.stream("in").group_by_key()
        m = Materialized(name="agg", value_serde=L if op == "count" else S, caching_enabled=False)
        table = {"count": lambda: grouped.count(m),
                 "reduce": lambda: grouped.reduce(lambda a, v: a + v, m),
                 "aggregate": lambda: grouped.aggregate(lambda: "", lambda k, v, a: a + v, m)}[op]()
        table.to_stream().to("out", value_serde=L if op == "count" else S)
        return b.build()
    records = [("A", "1", 10), ("A", "2", 5), ("B", "3", 3), ("A", "4", 12), ("A", "5", 7)]
    with TopologyTestDriver(topology(), {"application.id": "app"}) as d:
        inp = d.create_input_topic("in", S, S)
        for k, v, ts in records[:4]:
            inp.pipe_input(k, v, ts)
        out = d.create_output_topic("out", S, L if op == "count" else S)
        assert [(r.key, r.timestamp) for r in out.read_records_to_list()] == [
            ("A", 10), ("A", 10), ("B", 3), ("A", 12)]
        log = []
        while (m := d.read_output("app-agg-changelog")) is not None:
            log.append((m.key(), m.value(), m.timestamp()[1]))
    with TopologyTestDriver(topology(), {"application.id": "app"}) as d2:  # the store moved
        d2.get_key_value_store("agg").restore_batch(log)
        d2.create_input_topic("in", S, S).pipe_input(*records[4])
        assert [(r.key, r.timestamp) for r in d2.create_output_topic("out", S, S).read_records_to_list()] == [
            ("A", 12)]
