"""Every DSL operation, run through the TopologyTestDriver (no broker).

Expected outputs and store contents are computed independently of the runtime, from random
input with a fixed seed.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from instance.errors import TopologyException
from instance.serde import IntSerde, JsonSerde, LongSerde, Serde, StringSerde
from instance.state import origins
from instance.testing import TopologyTestDriver
from instance.topology import BaseProcessor, Materialized, StreamsBuilder

S = StringSerde()
L = LongSerde()
J = JsonSerde()

WORDS = ["apple", "banana", "cherry", "date", "elder", "fig", "grape"]


def _builder() -> StreamsBuilder:
    return StreamsBuilder(default_key_serde=S, default_value_serde=S)


def _kv_records(seed: int, n: int = 200, keys: list[str] | None = None) -> list[tuple[str, int]]:
    rnd = random.Random(seed)
    ks = keys or WORDS
    return [(rnd.choice(ks), rnd.randint(-1000, 1000)) for _ in range(n)]


def _read_internal(d: TopologyTestDriver, topic: str, ks: Serde, vs: Serde) -> list[tuple[Any, Any]]:
    """Take what an internal topic received, as keys and values: its values' trailer (origin and
    flag, instance/state/origins.py) taken off first."""
    out = []
    while (m := d.read_output(topic)) is not None:
        out.append((ks.deserialize(m.key()), vs.deserialize(origins.unseal(m.value())[0])))
    return out


def _lines(seed: int, n: int = 100) -> list[str]:
    rnd = random.Random(seed)
    return [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(0, 8))) for _ in range(n)]


def _store_dict(driver: TopologyTestDriver, name: str) -> dict[Any, Any]:
    return dict(driver.get_key_value_store(name).all())


class _TopicRecorder(BaseProcessor):
    """Records (topic, key, value) of what it sees, and forwards."""

    def __init__(self, seen: list[tuple[str | None, Any, Any]]) -> None:
        self.seen = seen

    def process(self, key: Any, value: Any) -> None:
        self.seen.append((self.context.topic, key, value))
        self.forward(key, value)


# -- stateless ------------------------------------------------------------------------------


def test_stream_to_passes_records_and_timestamps_through() -> None:
    b = _builder()
    b.stream("in", value_serde=L).to("out", value_serde=L)
    recs = _kv_records(1)
    with TopologyTestDriver(b.build()) as d:
        inp = d.create_input_topic("in", S, L)
        for i, (k, v) in enumerate(recs):
            inp.pipe_input(k, v, timestamp=1000 + i)
        out = d.create_output_topic("out", S, L)
        got = [out.read_record() for _ in recs]
        assert out.is_empty()
    assert got == [(k, v, 1000 + i) for i, (k, v) in enumerate(recs)]


def test_stream_from_several_topics() -> None:
    b = _builder()
    b.stream("a", "b").to("out")
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("a", S, S).pipe_input("k1", "from-a")
        d.create_input_topic("b", S, S).pipe_input("k2", "from-b")
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == [
            ("k1", "from-a"), ("k2", "from-b")]


def test_filter_and_filter_not_partition_the_input() -> None:
    b = _builder()
    src = b.stream("in", value_serde=L)
    src.filter(lambda k, v: v % 3 == 0).to("div3", value_serde=L)
    src.filter_not(lambda k, v: v % 3 == 0).to("rest", value_serde=L)
    recs = _kv_records(2)
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, L).pipe_key_value_list(recs)
        div3 = d.create_output_topic("div3", S, L).read_key_values_to_list()
        rest = d.create_output_topic("rest", S, L).read_key_values_to_list()
    assert div3 == [(k, v) for k, v in recs if v % 3 == 0]
    assert rest == [(k, v) for k, v in recs if v % 3 != 0]
    assert div3 and rest


def test_filter_predicate_sees_key_and_value() -> None:
    b = _builder()
    b.stream("in").filter(lambda k, v: k == v).to("out")
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, S).pipe_key_value_list([("a", "a"), ("a", "b"), ("c", "c")])
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == [("a", "a"), ("c", "c")]


def test_map_changes_key_and_value() -> None:
    b = _builder()
    b.stream("in", value_serde=L).map(lambda k, v: (v, k.upper())).to("out", key_serde=L)
    recs = _kv_records(3)
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, L).pipe_key_value_list(recs)
        got = d.create_output_topic("out", L, S).read_key_values_to_list()
    assert got == [(v, k.upper()) for k, v in recs]


def test_map_values_keeps_key() -> None:
    b = _builder()
    b.stream("in", value_serde=L).map_values(lambda v: v * v).to("out", value_serde=L)
    recs = _kv_records(4)
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, L).pipe_key_value_list(recs)
        got = d.create_output_topic("out", S, L).read_key_values_to_list()
    assert got == [(k, v * v) for k, v in recs]


def test_flat_map_emits_zero_or_more_pairs() -> None:
    b = _builder()
    b.stream("in").flat_map(lambda k, line: [(w, k) for w in line.split()]).to("out")
    lines = _lines(5)
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, S).pipe_key_value_list(
            [(f"line{i}", line) for i, line in enumerate(lines)])
        got = d.create_output_topic("out", S, S).read_key_values_to_list()
    assert got == [(w, f"line{i}") for i, line in enumerate(lines) for w in line.split()]
    assert any(not line for line in lines)  # empty lines produce nothing


def test_flat_map_values_keeps_key() -> None:
    b = _builder()
    b.stream("in").flat_map_values(str.split).to("out")
    lines = _lines(6)
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, S).pipe_key_value_list(
            [(f"k{i % 3}", line) for i, line in enumerate(lines)])
        got = d.create_output_topic("out", S, S).read_key_values_to_list()
    assert got == [(f"k{i % 3}", w) for i, line in enumerate(lines) for w in line.split()]


def test_select_key_keeps_value() -> None:
    b = _builder()
    b.stream("in", value_serde=L).select_key(lambda k, v: f"{k}:{v % 2}").to("out", value_serde=L)
    recs = _kv_records(7)
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, L).pipe_key_value_list(recs)
        got = d.create_output_topic("out", S, L).read_key_values_to_list()
    assert got == [(f"{k}:{v % 2}", v) for k, v in recs]


def test_peek_sees_every_record_and_forwards_it() -> None:
    seen: list[tuple[str, int]] = []
    b = _builder()
    b.stream("in", value_serde=L).peek(lambda k, v: seen.append((k, v))).to("out", value_serde=L)
    recs = _kv_records(8)
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, L).pipe_key_value_list(recs)
        got = d.create_output_topic("out", S, L).read_key_values_to_list()
    assert seen == recs
    assert got == recs


def test_foreach_is_terminal_and_sees_every_record() -> None:
    seen: list[tuple[str, int]] = []
    b = _builder()
    b.stream("in", value_serde=L).foreach(lambda k, v: seen.append((k, v)))
    topology = b.build()
    assert topology.subtopologies()[0].sink_topics == []
    recs = _kv_records(9)
    with TopologyTestDriver(topology) as d:
        d.create_input_topic("in", S, L).pipe_key_value_list(recs)
    assert seen == recs


def test_split_first_matching_predicate_wins_and_default_gets_the_rest() -> None:
    b = _builder()
    branches = (b.stream("in", value_serde=L).split(name="s-")
                .branch(lambda k, v: v % 2 == 0, name="even")
                .branch(lambda k, v: v % 3 == 0, name="div3")
                .default_branch(name="other"))
    assert sorted(branches) == ["s-div3", "s-even", "s-other"]
    for name, stream in branches.items():
        stream.to(name, value_serde=L)
    recs = _kv_records(10, n=300)
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, L).pipe_key_value_list(recs)
        got = {n: d.create_output_topic(n, S, L).read_key_values_to_list() for n in branches}
    # 6, 12... match both predicates: the first one (even) wins
    assert got["s-even"] == [(k, v) for k, v in recs if v % 2 == 0]
    assert got["s-div3"] == [(k, v) for k, v in recs if v % 2 != 0 and v % 3 == 0]
    assert got["s-other"] == [(k, v) for k, v in recs if v % 2 != 0 and v % 3 != 0]
    assert sum(len(x) for x in got.values()) == len(recs)
    assert any(v % 6 == 0 for _, v in recs)


def test_split_unnamed_branches_are_numbered_from_one_default_zero() -> None:
    b = _builder()
    branches = b.stream("in").split().branch(lambda k, v: True).branch(lambda k, v: True).default_branch()
    assert sorted(branches) == ["KSTREAM-BRANCH-00000000010", "KSTREAM-BRANCH-00000000011",
                                "KSTREAM-BRANCH-00000000012"]


def test_split_no_default_branch_drops_unmatched() -> None:
    b = _builder()
    branches = (b.stream("in", value_serde=L).split(name="s-")
                .branch(lambda k, v: v > 500, name="big")
                .branch(lambda k, v: v < -500, name="small")
                .no_default_branch())
    assert sorted(branches) == ["s-big", "s-small"]
    for name, stream in branches.items():
        stream.to(name, value_serde=L)
    recs = _kv_records(11)
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, L).pipe_key_value_list(recs)
        big = d.create_output_topic("s-big", S, L).read_key_values_to_list()
        small = d.create_output_topic("s-small", S, L).read_key_values_to_list()
    assert big == [(k, v) for k, v in recs if v > 500]
    assert small == [(k, v) for k, v in recs if v < -500]
    assert len(big) + len(small) < len(recs)


def test_split_cannot_branch_after_it_ended() -> None:
    b = _builder()
    split = b.stream("in").split()
    split.branch(lambda k, v: True)
    split.no_default_branch()
    with pytest.raises(TopologyException):
        split.branch(lambda k, v: True)


def test_merge_interleaves_both_streams_in_arrival_order() -> None:
    b = _builder()
    left = b.stream("left", value_serde=L)
    right = b.stream("right", value_serde=L).map_values(lambda v: -v)
    left.merge(right).to("out", value_serde=L)
    rnd = random.Random(12)
    inputs = [(rnd.choice(["left", "right"]), k, v) for k, v in _kv_records(12)]
    with TopologyTestDriver(b.build()) as d:
        topics = {"left": d.create_input_topic("left", S, L), "right": d.create_input_topic("right", S, L)}
        for t, k, v in inputs:
            topics[t].pipe_input(k, v)
        got = d.create_output_topic("out", S, L).read_key_values_to_list()
    assert got == [(k, v if t == "left" else -v) for t, k, v in inputs]


def test_to_uses_the_given_serdes() -> None:
    b = _builder()
    b.stream("in", key_serde=IntSerde(), value_serde=J).to("out", key_serde=L, value_serde=S)
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", IntSerde(), J).pipe_input(7, "x")
        m = d.read_output("out")
    assert m is not None
    assert m.key() == b"\x00" * 7 + b"\x07"
    assert m.value() == b"x"


def test_same_topic_can_be_written_and_read() -> None:
    """Like Kafka Streams' driver: a record to a topic the topology reads is both captured as
    output and piped back in."""
    b = _builder()
    b.stream("in").map_values(str.upper).to("middle")
    b.stream("middle").map_values(lambda v: v + "!").to("out")
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, S).pipe_key_value_list([("a", "x"), ("b", "y")])
        assert d.create_output_topic("middle", S, S).read_key_values_to_list() == [("a", "X"), ("b", "Y")]
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == [("a", "X!"), ("b", "Y!")]


# -- repartition ----------------------------------------------------------------------------


def test_repartition_goes_through_the_internal_topic_and_comes_back() -> None:
    seen: list[tuple[str | None, Any, Any]] = []
    b = _builder()
    (b.stream("in", value_serde=L)
      .select_key(lambda k, v: k[0])
      .repartition(name="by-initial")
      .process(lambda: _TopicRecorder(seen))
      .to("out", value_serde=L))
    topology = b.build()
    assert len(topology.subtopologies()) == 2
    assert "by-initial-repartition" in topology.internal_topics
    recs = _kv_records(13)
    expected = [(k[0], v) for k, v in recs]
    with TopologyTestDriver(topology, {"application.id": "my-app"}) as d:
        d.create_input_topic("in", S, L).pipe_key_value_list(recs)
        through = _read_internal(d, "my-app-by-initial-repartition", S, L)
        got = d.create_output_topic("out", S, L).read_key_values_to_list()
    assert through == expected
    assert got == expected
    assert seen == [("my-app-by-initial-repartition", k, v) for k, v in expected]


def test_repartition_unnamed_uses_a_generated_topic_name() -> None:
    seen: list[tuple[str | None, Any, Any]] = []
    b = _builder()
    b.stream("in").repartition().process(lambda: _TopicRecorder(seen)).to("out")
    topology = b.build()
    assert list(topology.internal_topics) == ["KSTREAM-REPARTITION-0000000001-repartition"]
    with TopologyTestDriver(topology) as d:
        d.create_input_topic("in", S, S).pipe_input("k", "v")
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == [("k", "v")]
    assert seen == [("test-driver-KSTREAM-REPARTITION-0000000001-repartition", "k", "v")]


def test_repartition_num_partitions_is_recorded() -> None:
    b = _builder()
    b.stream("in").repartition(name="rp", num_partitions=6).to("out")
    assert b.build().internal_topics["rp-repartition"].num_partitions == 6


# -- grouping and aggregation ---------------------------------------------------------------


def test_group_by_key_count_matches_counter() -> None:
    b = _builder()
    b.stream("in", value_serde=L).group_by_key().count("counts").to_stream().to("out", value_serde=L)
    topology = b.build()
    assert len(topology.subtopologies()) == 1  # no key change: no repartition
    assert topology.internal_topics == {}
    recs = _kv_records(14, n=500)
    running: Counter[str] = Counter()
    expected = []
    for k, _ in recs:
        running[k] += 1
        expected.append((k, running[k]))
    with TopologyTestDriver(topology) as d:
        d.create_input_topic("in", S, L).pipe_key_value_list(recs)
        got = d.create_output_topic("out", S, L).read_key_values_to_list()
        store = _store_dict(d, "counts")
    # the driver commits after every record: each update reaches the output
    assert got == expected
    assert store == Counter(k for k, _ in recs)


def test_group_by_count_repartitions_by_the_new_key() -> None:
    b = _builder()
    (b.stream("in").flat_map_values(str.split)
      .group_by(lambda k, w: w)
      .count(Materialized.as_("word-counts"))
      .to_stream().to("out", value_serde=L))
    topology = b.build()
    assert len(topology.subtopologies()) == 2
    assert list(topology.internal_topics) == ["word-counts-repartition"]
    lines = _lines(15, n=200)
    words = [w for line in lines for w in line.split()]
    with TopologyTestDriver(topology) as d:
        d.create_input_topic("in", S, S).pipe_value_list(lines)
        through = _read_internal(d, "test-driver-word-counts-repartition", S, S)
        out = d.create_output_topic("out", S, L).read_key_values_to_list()
        store = _store_dict(d, "word-counts")
    assert through == [(w, w) for w in words]
    assert store == Counter(words)
    # the last value written per word is its total
    assert dict(out) == Counter(words)


def test_group_by_key_after_key_change_inserts_repartition() -> None:
    b = _builder()
    b.stream("in").map(lambda k, v: (v, k)).group_by_key().count("c")
    topology = b.build()
    assert len(topology.subtopologies()) == 2
    assert list(topology.internal_topics) == ["c-repartition"]
    with TopologyTestDriver(topology) as d:
        d.create_input_topic("in", S, S).pipe_key_value_list([("a", "x"), ("b", "x"), ("c", "y")])
        assert _store_dict(d, "c") == {"x": 2, "y": 1}


def test_reduce_sums_values_per_key() -> None:
    b = _builder()
    (b.stream("in", value_serde=L).group_by_key()
      .reduce(lambda a, v: a + v, Materialized(name="sums"))
      .to_stream().to("out", value_serde=L))
    recs = _kv_records(16, n=400)
    sums: dict[str, int] = {}
    expected = []
    for k, v in recs:
        sums[k] = sums.get(k, 0) + v
        expected.append((k, sums[k]))
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, L).pipe_key_value_list(recs)
        got = d.create_output_topic("out", S, L).read_key_values_to_list()
        store = _store_dict(d, "sums")
    assert got == expected
    assert store == sums


def test_reduce_first_value_is_not_reduced() -> None:
    calls: list[tuple[str, str]] = []

    def concat(a: str, v: str) -> str:
        calls.append((a, v))
        return a + v

    b = _builder()
    b.stream("in").group_by_key().reduce(concat, "r")
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, S).pipe_key_value_list([("k", "a"), ("k", "b"), ("k", "c")])
        assert _store_dict(d, "r") == {"k": "abc"}
    assert calls == [("a", "b"), ("ab", "c")]


def test_aggregate_into_named_store() -> None:
    b = _builder()
    table = (b.stream("in", value_serde=L).group_by_key()
             .aggregate(lambda: {"n": 0, "sum": 0, "max": None},
                        lambda k, v, agg: {"n": agg["n"] + 1, "sum": agg["sum"] + v,
                                           "max": v if agg["max"] is None else max(v, agg["max"])},
                        Materialized(name="stats", value_serde=J)))
    assert table.queryable_store_name == "stats"
    table.to_stream().to("out", value_serde=J)
    recs = _kv_records(17, n=400)
    expected: dict[str, dict[str, int]] = {}
    for k, v in recs:
        e = expected.setdefault(k, {"n": 0, "sum": 0, "max": v})
        e["n"] += 1
        e["sum"] += v
        e["max"] = max(e["max"], v)
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, L).pipe_key_value_list(recs)
        store = d.get_key_value_store("stats")
        assert dict(store.all()) == expected
        for k, e in expected.items():
            assert store.get(k) == e
            assert store.query_get(k) == e
        out = d.create_output_topic("out", S, J).read_key_values_to_list()
    assert len(out) == len(recs)
    assert dict(out) == expected


def test_aggregate_needs_a_value_serde() -> None:
    b = _builder()
    with pytest.raises(TopologyException, match="value_serde"):
        b.stream("in").group_by_key().aggregate(lambda: 0, lambda k, v, a: a + 1, "agg")


def test_aggregations_drop_null_keys_and_null_values() -> None:
    b = _builder()
    src = b.stream("in", value_serde=L)
    src.group_by_key().count(Materialized(name="by-key", caching_enabled=False)).to_stream().to(
        "by-key-out", value_serde=L)
    # group_by to a null key: dropped before the repartition topic
    src.group_by(lambda k, v: None if v is None or v < 0 else k).count("by-sign")
    src.group_by_key().reduce(lambda a, v: a + v, "sums")
    rnd = random.Random(18)
    recs: list[tuple[str | None, int | None]] = [
        (rnd.choice([*WORDS, None]), rnd.choice([None, rnd.randint(-100, 100)])) for _ in range(400)]
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, L).pipe_key_value_list(recs)
        out = d.create_output_topic("by-key-out", S, L).read_key_values_to_list()
        by_key = _store_dict(d, "by-key")
        by_sign = _store_dict(d, "by-sign")
        sums = _store_dict(d, "sums")
        through = _read_internal(d, "test-driver-by-sign-repartition", S, L)
    kept = [(k, v) for k, v in recs if k is not None and v is not None]
    assert any(k is None for k, _ in recs) and any(v is None for _, v in recs)
    assert by_key == Counter(k for k, _ in kept)
    assert all(k is not None for k, _ in out)
    assert len(out) == len(kept)
    expected_sums: dict[str, int] = {}
    for k, v in kept:
        expected_sums[k] = expected_sums.get(k, 0) + v  # type: ignore[operator]
    assert sums == expected_sums
    by_sign_expected = Counter(k for k, v in recs if v is not None and v >= 0 and k is not None)
    assert by_sign == by_sign_expected
    assert all(k is not None for k, _ in through)


def test_caching_off_forwards_every_update_caching_on_the_latest_per_commit() -> None:
    """One piped line updates its key once per word before the driver's commit: without caching
    every update is forwarded, with caching only the value at the commit."""
    b = _builder()
    grouped = b.stream("in").flat_map_values(str.split).group_by_key()
    grouped.count(Materialized(name="uncached", caching_enabled=False)).to_stream().to(
        "every", value_serde=L)
    grouped.count(Materialized(name="cached")).to_stream().to("latest", value_serde=L)
    assert len(b.build().subtopologies()) == 1
    rnd = random.Random(19)
    recs = [(rnd.choice(["k1", "k2", "k3"]), line) for line in _lines(19, n=200)]

    running: Counter[str] = Counter()
    every, latest = [], []
    for k, line in recs:
        for _ in line.split():
            running[k] += 1
            every.append((k, running[k]))
        if line.split():
            latest.append((k, running[k]))
    assert len(every) > len(latest) > 0

    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, S).pipe_key_value_list(recs)
        assert d.create_output_topic("every", S, L).read_key_values_to_list() == every
        assert d.create_output_topic("latest", S, L).read_key_values_to_list() == latest
        assert _store_dict(d, "uncached") == running
        assert _store_dict(d, "cached") == running


def test_cache_disabled_by_zero_cache_size() -> None:
    b = _builder()
    b.stream("in").flat_map_values(str.split).group_by_key().count("c").to_stream().to(
        "out", value_serde=L)
    with TopologyTestDriver(b.build(), {"statestore.cache.max.bytes": "0"}) as d:
        d.create_input_topic("in", S, S).pipe_input("k", "a b c")
        assert d.create_output_topic("out", S, L).read_key_values_to_list() == [
            ("k", 1), ("k", 2), ("k", 3)]


# -- tables ---------------------------------------------------------------------------------


def test_table_materializes_latest_value_and_null_deletes() -> None:
    b = _builder()
    table = b.table("t", Materialized.as_("t-store"))
    assert table.queryable_store_name == "t-store"
    table.to_stream().to("changes")
    rnd = random.Random(21)
    recs: list[tuple[str, str | None]] = [
        (rnd.choice(WORDS), rnd.choice([None, None, "v1", "v2", "v3", "v4"])) for _ in range(300)]
    model: dict[str, str] = {}
    expected = []  # with caching (the default), a delete of a key the table does not hold is not a change
    for k, v in recs:
        if v is not None or k in model:
            expected.append((k, v))
        if v is None:
            model.pop(k, None)
        else:
            model[k] = v
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("t", S, S).pipe_key_value_list(recs)
        store = d.get_key_value_store("t-store")
        assert dict(store.all()) == model
        for w in WORDS:
            assert store.get(w) == model.get(w)
        changes = d.create_output_topic("changes", S, S).read_key_values_to_list()
    # every change is forwarded, deletes as tombstones (null value)
    assert changes == expected
    assert any(v is None for _, v in changes) and len(expected) < len(recs)


def test_table_delete_of_a_flushed_key() -> None:
    b = _builder()
    b.table("t", Materialized(name="s", caching_enabled=False))
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("t", S, S)
        t.pipe_input("a", "1")
        t.pipe_input("b", "2")
        t.pipe_input("a", None)
        assert _store_dict(d, "s") == {"b": "2"}
        assert d.get_key_value_store("s").get("a") is None


def test_table_ignores_null_keys() -> None:
    b = _builder()
    b.table("t", "s")
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("t", S, S).pipe_key_value_list([(None, "x"), ("a", "y")])
        assert _store_dict(d, "s") == {"a": "y"}


def test_table_unnamed_store_name() -> None:
    b = _builder()
    table = b.table("t")
    assert table.queryable_store_name == "t-STATE-STORE-0000000000"
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("t", S, S).pipe_input("a", "1")
        assert _store_dict(d, "t-STATE-STORE-0000000000") == {"a": "1"}


def test_to_stream_of_a_count_forwards_changes_downstream() -> None:
    b = _builder()
    (b.stream("in").group_by_key().count("c").to_stream()
      .filter(lambda k, n: n % 2 == 0)
      .map_values(lambda n: n * 10)
      .to("out", value_serde=L))
    recs = [(k, "x") for k, _ in _kv_records(22, n=300)]
    running: Counter[str] = Counter()
    expected = []
    for k, _ in recs:
        running[k] += 1
        if running[k] % 2 == 0:
            expected.append((k, running[k] * 10))
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, S).pipe_key_value_list(recs)
        assert d.create_output_topic("out", S, L).read_key_values_to_list() == expected


def test_unnamed_count_store_is_queryable_by_its_generated_name() -> None:
    b = _builder()
    table = b.stream("in").group_by_key().count()
    assert table.queryable_store_name == "KSTREAM-AGGREGATE-STATE-STORE-0000000001"
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, S).pipe_key_value_list([("a", "1"), ("a", "2"), ("b", "3")])
        assert _store_dict(d, table.queryable_store_name) == {"a": 2, "b": 1}


def test_count_changelog_is_written() -> None:
    b = _builder()
    b.stream("in").group_by_key().count("c")
    with TopologyTestDriver(b.build(), {"application.id": "app"}) as d:
        d.create_input_topic("in", S, S).pipe_key_value_list([("a", "1"), ("a", "2")])
        assert d.create_output_topic("app-c-changelog", S, L).read_key_values_to_list() == [
            ("a", 1), ("a", 2)]
