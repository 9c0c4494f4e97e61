"""Stream-table and table-table joins through the TopologyTestDriver, with the cases and expected
values of Kafka Streams' KStreamKTableJoinTest, KStreamKTableLeftJoinTest and
KTableKTable{Inner,Left,Outer}JoinTest (values; see table_joins.py for timestamps), and the
co-partitioning checks done at start-up."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from instance.errors import TopologyException
from instance.runtime.internal_topics import plan
from instance.serde import IntSerde, StringSerde
from instance.state.change import Change, ValueAndTimestamp
from instance.testing import TopologyTestDriver
from instance.topology import Joined, KTable, Materialized, StreamsBuilder
from instance.topology.table_processors import StreamTableJoinProcessor
from tests.unit.test_ktable import capture

S = StringSerde()
I = IntSerde()  # noqa: E741
KEYS = [0, 1, 2, 3]


def joiner(a: Any, b: Any) -> str:
    """Kafka's MockValueJoiner.TOSTRING_JOINER, with Java's ``null``."""
    return f"{'null' if a is None else a}+{'null' if b is None else b}"


def _builder() -> StreamsBuilder:
    return StreamsBuilder(default_key_serde=I, default_value_serde=S)


def _read(d: TopologyTestDriver, topic: str = "output") -> list[tuple[Any, Any]]:
    return d.create_output_topic(topic, I, S).read_key_values_to_list()


# -- stream-table --------------------------------------------------------------------------------


def _stream_table(left: bool, caching: bool) -> tuple[StreamsBuilder, KTable]:
    b = _builder()
    stream = b.stream("streamTopic")
    table = b.table("tableTopic", Materialized(name="table-store", caching_enabled=caching))
    joined = stream.left_join(table, joiner) if left else stream.join(table, joiner)
    joined.to("output")
    return b, table


def _push(d: TopologyTestDriver, topic: str, n: int, prefix: str, ts: int = 0) -> None:
    inp = d.create_input_topic(topic, I, S)
    for k in KEYS[:n]:
        inp.pipe_input(k, f"{prefix}{k}", ts + k)


@pytest.mark.parametrize("caching", [True, False])
def test_stream_table_inner_join(caching: bool) -> None:
    b, _ = _stream_table(False, caching)
    topology = b.build()
    assert topology.copartition_groups == [{"streamTopic", "tableTopic"}]
    with TopologyTestDriver(topology) as d:
        _push(d, "streamTopic", 2, "X")          # table empty: nothing
        assert _read(d) == []
        _push(d, "tableTopic", 2, "Y")           # table updates never trigger a join
        assert _read(d) == []
        _push(d, "streamTopic", 4, "X")
        assert _read(d) == [(0, "X0+Y0"), (1, "X1+Y1")]
        _push(d, "tableTopic", 4, "YY")
        _push(d, "streamTopic", 4, "X")
        assert _read(d) == [(0, "X0+YY0"), (1, "X1+YY1"), (2, "X2+YY2"), (3, "X3+YY3")]
        tbl = d.create_input_topic("tableTopic", I, S)
        tbl.pipe_input(0, None)
        tbl.pipe_input(1, None)
        _push(d, "streamTopic", 4, "XX")
        assert _read(d) == [(2, "XX2+YY2"), (3, "XX3+YY3")]


@pytest.mark.parametrize("caching", [True, False])
def test_stream_table_left_join(caching: bool) -> None:
    b, _ = _stream_table(True, caching)
    with TopologyTestDriver(b.build()) as d:
        _push(d, "streamTopic", 2, "X")
        assert _read(d) == [(0, "X0+null"), (1, "X1+null")]
        _push(d, "tableTopic", 2, "Y")
        assert _read(d) == []
        _push(d, "streamTopic", 4, "X")
        assert _read(d) == [(0, "X0+Y0"), (1, "X1+Y1"), (2, "X2+null"), (3, "X3+null")]
        d.create_input_topic("tableTopic", I, S).pipe_input(1, None)
        _push(d, "streamTopic", 2, "XX")
        assert _read(d) == [(0, "XX0+Y0"), (1, "XX1+null")]


@pytest.mark.parametrize("left", [True, False])
def test_stream_records_with_null_key_or_value_are_dropped_and_counted(left: bool) -> None:
    b, _ = _stream_table(left, True)
    with TopologyTestDriver(b.build()) as d:
        _push(d, "tableTopic", 1, "Y")
        inp = d.create_input_topic("streamTopic", I, S)
        inp.pipe_input(None, "A")
        inp.pipe_input(0, None)
        inp.pipe_input(0, "B")
        # a left join joins a None key with no table value (KIP-962; Kafka Streams 4.4.0, tests/oracle)
        assert _read(d) == ([(None, "A+null"), (0, "B+Y0")] if left else [(0, "B+Y0")])
        procs = [p for t in d.tasks for p in t._processors if isinstance(p, StreamTableJoinProcessor)]
        assert [p.dropped_records for p in procs] == [1 if left else 2]


def test_stream_table_join_after_a_key_change_repartitions_the_stream() -> None:
    b = _builder()
    table = b.table("tableTopic", "table-store")
    (b.stream("streamTopic", key_serde=S)
      .select_key(lambda k, v: int(k))
      .join(table, joiner, Joined.with_(I, S))
      .to("output"))
    topology = b.build()
    assert topology.internal_topics  # one repartition topic before the join
    (repartition,) = topology.internal_topics
    assert {repartition, "tableTopic"} in topology.copartition_groups
    with TopologyTestDriver(topology) as d:
        _push(d, "tableTopic", 2, "Y")
        d.create_input_topic("streamTopic", S, S).pipe_key_value_list([("1", "a"), ("5", "b"), ("0", "c")])
        assert _read(d) == [(1, "a+Y1"), (0, "c+Y0")]


def test_copartitioning_is_checked_at_start_up() -> None:
    b, _ = _stream_table(False, True)
    topology = b.build()
    with pytest.raises(TopologyException, match="co-partitioned"):
        plan(topology, "app", {"streamTopic": 4, "tableTopic": 6})
    layout, _ = plan(topology, "app", {"streamTopic": 6, "tableTopic": 6})
    assert set(layout.tasks_per_subtopology.values()) == {6}


def test_a_repartitioned_stream_takes_the_partition_count_of_the_table_it_joins() -> None:
    b = _builder()
    table = b.table("tableTopic", "table-store")
    b.stream("streamTopic").select_key(lambda k, v: k).join(table, joiner).to("output")
    topology = b.build()
    layout, to_create = plan(topology, "app", {"streamTopic": 2, "tableTopic": 5})
    (repartition,) = [t for t in to_create if t.topic.endswith("-repartition")]
    assert repartition.num_partitions == 5


# -- table-table ----------------------------------------------------------------------------------


def _table_table(kind: str, caching: bool, materialized: bool) -> StreamsBuilder:
    b = _builder()
    t1 = b.table("topic1", Materialized(name="t1", caching_enabled=caching))
    t2 = b.table("topic2", Materialized(name="t2", caching_enabled=caching))
    m = Materialized(name="joined", value_serde=S, caching_enabled=caching) if materialized else None
    joined = getattr(t1, kind)(t2, joiner, m)
    joined.to_stream().to("output")
    return b


def _scenario(d: TopologyTestDriver, collect: Callable[[], list[tuple[Any, Any]]] | None = None
              ) -> list[list[tuple[Any, Any]]]:
    """The input sequence of Kafka's KTableKTable*JoinTest.testJoin; after each step, what
    ``collect`` returns (default: the records of the output topic)."""
    after = collect or (lambda: _read(d))
    t1 = d.create_input_topic("topic1", I, S)
    t2 = d.create_input_topic("topic2", I, S)
    steps: list[list[tuple[Any, Any]]] = []
    for k in KEYS[:2]:
        t1.pipe_input(k, f"X{k}", 5 + k)
    t1.pipe_input(None, "SomeVal", 42)  # a null key is dropped
    steps.append(after())
    for k in KEYS[:2]:
        t2.pipe_input(k, f"Y{k}", 10 * k)
    t2.pipe_input(None, "AnotherVal", 73)
    steps.append(after())
    for k in KEYS:
        t1.pipe_input(k, f"XX{k}", 7)
    steps.append(after())
    for k in KEYS:
        t2.pipe_input(k, f"YY{k}", k * 5)
    steps.append(after())
    for k in KEYS:
        t1.pipe_input(k, f"XXX{k}", 6)
    steps.append(after())
    t2.pipe_input(0, None, 5)
    t2.pipe_input(1, None, 7)
    steps.append(after())
    for k in KEYS:
        t1.pipe_input(k, f"XXXX{k}", 13)
    steps.append(after())
    for k, ts in zip(KEYS, [0, 42, 5, 20], strict=True):
        t1.pipe_input(k, None, ts)
    steps.append(after())
    return steps


def _changes(seen: list[tuple[Any, Any, int]]) -> Callable[[], list[tuple[Any, Any]]]:
    """Collects the changes a captured node forwarded since the last call."""
    done = 0

    def collect() -> list[tuple[Any, Any]]:
        nonlocal done
        new = [(k, c) for k, c, _ in seen[done:]]
        done = len(seen)
        return new
    return collect


EXPECTED = {
    "join": [
        [],
        [(0, "X0+Y0"), (1, "X1+Y1")],
        [(0, "XX0+Y0"), (1, "XX1+Y1")],
        [(0, "XX0+YY0"), (1, "XX1+YY1"), (2, "XX2+YY2"), (3, "XX3+YY3")],
        [(0, "XXX0+YY0"), (1, "XXX1+YY1"), (2, "XXX2+YY2"), (3, "XXX3+YY3")],
        [(0, None), (1, None)],
        [(2, "XXXX2+YY2"), (3, "XXXX3+YY3")],
        [(2, None), (3, None)],
    ],
    "left_join": [
        [(0, "X0+null"), (1, "X1+null")],
        [(0, "X0+Y0"), (1, "X1+Y1")],
        [(0, "XX0+Y0"), (1, "XX1+Y1"), (2, "XX2+null"), (3, "XX3+null")],
        [(0, "XX0+YY0"), (1, "XX1+YY1"), (2, "XX2+YY2"), (3, "XX3+YY3")],
        [(0, "XXX0+YY0"), (1, "XXX1+YY1"), (2, "XXX2+YY2"), (3, "XXX3+YY3")],
        [(0, "XXX0+null"), (1, "XXX1+null")],
        [(0, "XXXX0+null"), (1, "XXXX1+null"), (2, "XXXX2+YY2"), (3, "XXXX3+YY3")],
        [(0, None), (1, None), (2, None), (3, None)],
    ],
    "outer_join": [
        [(0, "X0+null"), (1, "X1+null")],
        [(0, "X0+Y0"), (1, "X1+Y1")],
        [(0, "XX0+Y0"), (1, "XX1+Y1"), (2, "XX2+null"), (3, "XX3+null")],
        [(0, "XX0+YY0"), (1, "XX1+YY1"), (2, "XX2+YY2"), (3, "XX3+YY3")],
        [(0, "XXX0+YY0"), (1, "XXX1+YY1"), (2, "XXX2+YY2"), (3, "XXX3+YY3")],
        [(0, "XXX0+null"), (1, "XXX1+null")],
        [(0, "XXXX0+null"), (1, "XXXX1+null"), (2, "XXXX2+YY2"), (3, "XXXX3+YY3")],
        [(0, None), (1, None), (2, "null+YY2"), (3, "null+YY3")],
    ],
}


@pytest.mark.parametrize("materialized", [False, True])
@pytest.mark.parametrize("caching", [True, False])
@pytest.mark.parametrize("kind", ["join", "left_join", "outer_join"])
def test_table_table_join(kind: str, caching: bool, materialized: bool) -> None:
    b = _table_table(kind, caching, materialized)
    topology = b.build()
    assert topology.copartition_groups == [{"topic1", "topic2"}]
    with TopologyTestDriver(topology) as d:
        steps = _scenario(d)
        final = dict(d.get_key_value_store("joined").all()) if materialized else None
    assert steps == EXPECTED[kind]
    if materialized:
        assert final == {"join": {}, "left_join": {}, "outer_join": {2: "null+YY2", 3: "null+YY3"}}[kind]


#: the result timestamps of Kafka's KTableKTable{Inner,Left,Outer}JoinTest.testJoin, step by step:
#: the larger timestamp of both sides (the other side's when it has the key)
EXPECTED_TIMESTAMPS = {
    "join": [[], [5, 10], [7, 10], [7, 7, 10, 15], [6, 6, 10, 15], [6, 7], [13, 15], [10, 20]],
    "left_join": [[5, 6], [5, 10], [7, 10, 7, 7], [7, 7, 10, 15], [6, 6, 10, 15], [6, 7],
                  [13, 13, 13, 15], [0, 42, 10, 20]],
}
EXPECTED_TIMESTAMPS["outer_join"] = EXPECTED_TIMESTAMPS["left_join"]


@pytest.mark.parametrize("materialized", [False, True])
@pytest.mark.parametrize("caching", [True, False])
@pytest.mark.parametrize("kind", ["join", "left_join", "outer_join"])
def test_table_table_join_result_has_the_larger_timestamp_of_both_sides(kind: str, caching: bool,
                                                                        materialized: bool) -> None:
    """Each side's store keeps the timestamp of its latest update (a timestamped store), so the
    result is stamped as Kafka Streams stamps it, also when the other side's update came first."""
    b = _table_table(kind, caching, materialized)
    with TopologyTestDriver(b.build()) as d:
        out = d.create_output_topic("output", I, S)

        def stamped() -> list[tuple[Any, Any]]:
            return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]
        steps = _scenario(d, stamped)
        if materialized:  # the result's store keeps each result's timestamp
            assert d.get_timestamped_key_value_store("joined").all() == {
                "join": [], "left_join": [],
                "outer_join": [(2, ValueAndTimestamp("null+YY2", 10)), (3, ValueAndTimestamp("null+YY3", 20))]}[kind]
    assert [[(k, v) for k, v, _ in step] for step in steps] == EXPECTED[kind]
    assert [[ts for _, _, ts in step] for step in steps] == EXPECTED_TIMESTAMPS[kind]


@pytest.mark.parametrize("kind", ["join", "left_join", "outer_join"])
def test_unmaterialized_join_result_is_readable_through_a_downstream_join(kind: str) -> None:
    """The value getter of an unmaterialized join result computes it from both tables."""
    b = _builder()
    t1, t2 = b.table("topic1", "t1"), b.table("topic2", "t2")
    joined = getattr(t1, kind)(t2, joiner)
    b.stream("probe").left_join(joined, lambda v, r: f"{v}={r}").to("output")
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("topic1", I, S).pipe_key_value_list([(0, "a"), (1, "b")])
        d.create_input_topic("topic2", I, S).pipe_key_value_list([(1, "B"), (2, "C")])
        d.create_input_topic("probe", I, S).pipe_key_value_list([(0, "p"), (1, "p"), (2, "p"), (3, "p")])
        got = _read(d)
    expected = {"join": [(0, "p=None"), (1, "p=b+B"), (2, "p=None"), (3, "p=None")],
                "left_join": [(0, "p=a+null"), (1, "p=b+B"), (2, "p=None"), (3, "p=None")],
                "outer_join": [(0, "p=a+null"), (1, "p=b+B"), (2, "p=null+C"), (3, "p=None")]}[kind]
    assert got == expected


@pytest.mark.parametrize("kind", ["join", "left_join", "outer_join"])
def test_join_result_sends_old_values_when_regrouped(kind: str) -> None:
    """A join result feeding a group_by sends old values, computed from both tables' old values,
    so the downstream count stays exact."""
    b = _builder()
    t1, t2 = b.table("topic1", "t1"), b.table("topic2", "t2")
    joined = getattr(t1, kind)(t2, joiner)
    seen = capture(b, joined)
    joined.group_by(lambda k, v: (v.split("+")[1], v), key_serde=S).count("by-right")
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("topic1", I, S).pipe_key_value_list([(0, "a"), (1, "b"), (0, "c")])
        d.create_input_topic("topic2", I, S).pipe_key_value_list([(0, "R"), (1, "R"), (0, None)])
        counts = {k: n for k, n in d.get_key_value_store("by-right").all() if n}
    assert all(isinstance(c, Change) for _, c, _ in seen)
    expected = {"join": {"R": 1}, "left_join": {"R": 1, "null": 1}, "outer_join": {"R": 1, "null": 1}}[kind]
    assert counts == expected


@pytest.mark.parametrize("caching", [True, False])
def test_join_of_a_cached_table_emits_the_latest_result_per_key_per_commit(caching: bool) -> None:
    """One input record updates a count three times: with caching the join (and a regrouping
    after it) sees only the commit's latest value, without caching every change; the final
    results are the same."""
    b = _builder()
    counts = (b.stream("words").flat_map_values(str.split).group_by_key()
              .count(Materialized(name="counts", caching_enabled=caching)))
    names = b.table("names", Materialized(name="names", caching_enabled=caching))
    joined = counts.join(names, lambda n, name: f"{name}:{n}",
                         Materialized(name="joined", value_serde=S, caching_enabled=caching))
    joined.to_stream().to("output")
    (joined.group_by(lambda k, v: (v.split(":")[0], v), key_serde=S)
           .count(Materialized(name="per-name", caching_enabled=caching)))
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("names", I, S).pipe_key_value_list([(1, "one"), (2, "two")])
        d.create_input_topic("words", I, S).pipe_key_value_list([(1, "a b c"), (2, "x"), (1, "d")])
        got = _read(d)
        per_name = dict(d.get_key_value_store("per-name").all())
    if caching:
        assert got == [(1, "one:3"), (2, "two:1"), (1, "one:4")]
    else:
        assert got == [(1, "one:1"), (1, "one:2"), (1, "one:3"), (2, "two:1"), (1, "one:4")]
    assert per_name == {"one": 1, "two": 1}


def test_inner_join_sending_old_values() -> None:
    """KTableKTableInnerJoinTest.testSendingOldValues: with old values enabled downstream, each
    result carries the previous one; the request reaches both tables."""
    b = _builder()
    t1, t2 = b.table("topic1", "t1"), b.table("topic2", "t2")
    joined = t1.join(t2, joiner)
    seen = capture(b, joined)
    assert not (t1.old_values.enabled or t2.old_values.enabled)  # an inner join needs none itself
    joined.enable_send_old_values()
    assert t1.old_values.enabled and t2.old_values.enabled and joined.old_values.enabled
    with TopologyTestDriver(b.build()) as d:
        steps = _scenario(d, _changes(seen))
    assert steps == [
        [],
        [(0, Change("X0+Y0", None)), (1, Change("X1+Y1", None))],
        [(0, Change("XX0+Y0", "X0+Y0")), (1, Change("XX1+Y1", "X1+Y1"))],
        [(0, Change("XX0+YY0", "XX0+Y0")), (1, Change("XX1+YY1", "XX1+Y1")), (2, Change("XX2+YY2", None)),
         (3, Change("XX3+YY3", None))],
        [(k, Change(f"XXX{k}+YY{k}", f"XX{k}+YY{k}")) for k in KEYS],
        [(0, Change(None, "XXX0+YY0")), (1, Change(None, "XXX1+YY1"))],
        [(2, Change("XXXX2+YY2", "XXX2+YY2")), (3, Change("XXXX3+YY3", "XXX3+YY3"))],
        [(2, Change(None, "XXXX2+YY2")), (3, Change(None, "XXXX3+YY3"))],
    ]


@pytest.mark.parametrize(("kind", "left_old", "right_old"),
                         [("join", False, False), ("left_join", True, False), ("outer_join", True, True)])
def test_which_tables_send_old_values_for_a_join(kind: str, left_old: bool, right_old: bool) -> None:
    """KTableKTable*JoinTest.testNotSendingOldValue: a left join needs the left table's old
    values, an outer join both; the join result sends none unless asked, so its changes carry
    None as the old value."""
    b = _builder()
    t1, t2 = b.table("topic1", "t1"), b.table("topic2", "t2")
    joined = getattr(t1, kind)(t2, joiner)
    seen = capture(b, joined)
    assert (t1.old_values.enabled, t2.old_values.enabled, joined.old_values.enabled) == (
        left_old, right_old, False)
    with TopologyTestDriver(b.build()) as d:
        steps = _scenario(d, _changes(seen))
    assert [[(k, c.new_value) for k, c in step] for step in steps] == EXPECTED[kind]
    assert all(c.old_value is None for step in steps for _, c in step)



def test_a_task_waits_for_an_input_not_caught_up_before_joining() -> None:
    """KIP-695 (``max.task.idle.ms = 0``): stream records fetched before the table's are held
    while the table partition's lag is unknown or above zero, then joined in timestamp order."""
    from instance.testing.driver import _Msg

    b, _ = _stream_table(False, caching=False)
    with TopologyTestDriver(b.build()) as d:
        task = d.tasks[0]
        table_caught_up = False
        task.caught_up = lambda topic: topic != "tableTopic" or table_caught_up
        task.add_records("streamTopic", [_Msg("streamTopic", 0, k, 10 + k, I.serialize(k),
                                              S.serialize(f"X{k}")) for k in (0, 1)])
        assert task.process() == 0 and task.has_buffered  # the table may hold earlier rows
        table_caught_up = True
        task.add_records("tableTopic", [_Msg("tableTopic", 0, 0, 5, I.serialize(0), S.serialize("Y0")),
                                        _Msg("tableTopic", 0, 1, 9, I.serialize(1), S.serialize("Y1"))])
        assert task.process() == 4 and not task.has_buffered
        d._commit()
        assert _read(d) == [(0, "X0+Y0"), (1, "X1+Y1")]  # the rows (ts 5, 9) went first
        task.caught_up = lambda topic: False
        task.add_records("streamTopic", [_Msg("streamTopic", 0, 2, 20, I.serialize(0), S.serialize("X"))])
        assert task.process() == 0  # lag unknown again: held
        task.caught_up = None  # the driver's default: never wait
        assert task.process() == 1
