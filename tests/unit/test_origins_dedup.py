"""Record origins on internal topics (instance/state/origins.py): under at-least-once a downstream
task skips what an upstream task writes again after starting over from its last commit.

Through the TopologyTestDriver, an upstream restart is simulated by re-delivering to the downstream
task every record written so far to each internal topic it reads (repartition, foreign-key
subscription and response topics), with the same key, value, timestamp and headers and new offsets,
as the broker would give them. Nothing may change: stores, stream time, dropped records, and what
any topic received; the skip counter grows by the number re-delivered. Then new input must still
be applied. Expected results are computed from the input, not from the runtime.

The last tests are of the high-water's persistence in the state manager (changelog record,
restore, checkpoint) with a real RocksDB store.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from instance.config import StreamsConfig
from instance.runtime.handlers import ErrorHandling
from instance.runtime.state_manager import ProcessorStateManager
from instance.runtime.task import StreamTask
from instance.serde import LongSerde, StringSerde
from instance.serde.windowed import SessionWindow, TimeWindow, Windowed
from instance.state import origins
from instance.state.checkpoint import read_checkpoint, read_origins, write_checkpoint
from instance.state.kv_store import ChangelogSend
from instance.state.spec import StoreSpec
from instance.state.windowed_base import WindowedStoreBase
from instance.testing import TopologyTestDriver
from instance.topology import Materialized, StreamsBuilder
from instance.topology.stream_joins import StreamJoined
from instance.topology.suppress import BufferConfig, Suppressed
from instance.topology.topology import Topology
from instance.topology.windows import JoinWindows, SessionWindows, TimeWindows
from router.core.task_id import TaskId

S, L = StringSerde(), LongSerde()
WORDS = ["apple", "banana", "cherry", "date", "elder"]
NO_CACHE = {"statestore.cache.max.bytes": 0}
EOS = {"processing.guarantee": "exactly_once_v2"}


# -- helpers -------------------------------------------------------------------------------------


def _internal_inputs(d: TopologyTestDriver) -> list[str]:
    """The internal topics a task of the driver reads (repartition, FK subscription / response),
    as written (resolved names)."""
    internal = {d._resolve(t) for t in d.topology.internal_topics}
    return sorted(t for t in d._by_topic if t in internal)


def _origin_headers(msg: Any) -> list[bytes | None]:
    return [v for name, v in (msg.headers() or ()) if name == origins.HEADER]


def _state(d: TopologyTestDriver) -> dict[str, Any]:
    """Every store of every task (key-value stores with their timestamps), and each task's stream
    time."""
    out: dict[str, Any] = {}
    for t in d.tasks:
        out[f"stream-time {t.id}"] = t.stream_time
        for name, store in t.stores.items():
            if isinstance(store, WindowedStoreBase):
                out[name] = list(store.all())
            else:
                out[name] = [(k, v, store.timestamp_of(k)) for k, v in store.all()]
    return out


def _written(d: TopologyTestDriver) -> dict[str, int]:
    """How many records each topic received (user outputs, internal topics, changelogs)."""
    return {t: len(q) for t, q in d._outputs.items()}


def _skipped(d: TopologyTestDriver) -> int:
    return sum(t.duplicates_skipped for t in d.tasks)


def _redeliver(d: TopologyTestDriver) -> int:
    """An upstream restart from before its first commit: every record written so far to each
    internal topic goes to the downstream task again (same key, value, timestamp and headers, new
    offsets). Returns how many."""
    again = [(t, m) for t in _internal_inputs(d) for m in list(d._outputs.get(t, ()))]
    for t, m in again:
        d.pipe_raw(t, m.key(), m.value(), m.timestamp()[1], m.headers() or ())
    return len(again)


def _assert_redelivery_changes_nothing(d: TopologyTestDriver, topics: int = 1) -> int:
    """Re-deliver (see :func:`_redeliver`) and check that nothing changed; ``topics``: how many
    internal topics must have had records. Then that each re-delivered record carried exactly one
    origin. Returns how many were re-delivered."""
    written = {t: list(d._outputs.get(t, ())) for t in _internal_inputs(d)}
    assert sum(1 for msgs in written.values() if msgs) >= topics, written.keys()
    state, counts, skipped, dropped = _state(d), _written(d), _skipped(d), d.dropped_records_total()
    n = _redeliver(d)
    assert n == sum(len(msgs) for msgs in written.values()) > 0
    assert _state(d) == state
    assert _written(d) == counts  # no output, no changelog write (not even a new high-water)
    assert d.dropped_records_total() == dropped
    assert _skipped(d) - skipped == n
    for t, msgs in written.items():
        for m in msgs:
            assert len(_origin_headers(m)) == 1, (t, m.offset(), m.headers())
    return n


def _values(d: TopologyTestDriver, topic: str, serde: Any = S) -> list[tuple[Any, Any]]:
    """What ``topic`` received so far, without taking it (keys as strings)."""
    return [(S.deserialize(m.key()), serde.deserialize(m.value())) for m in d._outputs.get(topic, ())]


def _no_origin_outside(d: TopologyTestDriver) -> None:
    internal = set(_internal_inputs(d))
    for t, q in d._outputs.items():
        if t not in internal:
            for m in q:
                assert _origin_headers(m) == [], (t, m.offset(), m.headers())


def _words(seed: int, n: int) -> list[tuple[str, str]]:
    rnd = random.Random(seed)
    return [(f"k{rnd.randint(0, 9)}", rnd.choice(WORDS)) for _ in range(n)]


# -- group_by + count (key-value store) -------------------------------------------------------------


def _word_count() -> Topology:
    b = StreamsBuilder(S, S)
    (b.stream("in").group_by(lambda k, v: v).count("counts")
     .to_stream().to("out", value_serde=L))
    return b.build()


@pytest.mark.parametrize("config", [{}, NO_CACHE], ids=["cache-on", "cache-off"])
def test_group_by_count_skips_a_redelivered_repartition_topic(config: dict[str, Any]) -> None:
    recs = _words(1, 60)
    with TopologyTestDriver(_word_count(), config) as d:
        t = d.create_input_topic("in", S, S)
        for i, (k, v) in enumerate(recs):
            t.pipe_input(k, v, 1000 + i)
        counts = Counter(v for _, v in recs)
        assert dict(d.get_key_value_store("counts").all()) == counts
        out = len(d._outputs["out"])
        assert _assert_redelivery_changes_nothing(d) == len(recs)
        assert dict(d.get_key_value_store("counts").all()) == counts
        assert len(d._outputs["out"]) == out
        # and a second restart, after the first
        assert _assert_redelivery_changes_nothing(d) == len(recs)
        assert _skipped(d) == 2 * len(recs)


@pytest.mark.parametrize("config", [{}, NO_CACHE], ids=["cache-on", "cache-off"])
def test_new_records_after_a_redelivery_are_applied(config: dict[str, Any]) -> None:
    first, then = _words(2, 40), _words(3, 40)
    with TopologyTestDriver(_word_count(), config) as d:
        t = d.create_input_topic("in", S, S)
        for i, (k, v) in enumerate(first):
            t.pipe_input(k, v, i)
        _assert_redelivery_changes_nothing(d)
        out = len(d._outputs["out"])
        for i, (k, v) in enumerate(then):
            t.pipe_input(k, v, 100 + i)
        assert dict(d.get_key_value_store("counts").all()) == Counter(v for _, v in first + then)
        # every new record counted once, in order: the last output per word is its count
        new = _values(d, "out", L)[out:]
        assert len(new) == len(then)
        final = Counter(v for _, v in first + then)
        assert dict(new) == {v: final[v] for _, v in then}
        assert _skipped(d) == len(first)


def test_a_record_written_after_the_last_one_applied_is_not_skipped() -> None:
    """The high-water is per origin partition and compares in processing order: a record the
    upstream writes later (a higher origin) is applied even if it arrives among re-deliveries."""
    with TopologyTestDriver(_word_count(), NO_CACHE) as d:
        t = d.create_input_topic("in", S, S)
        for i, w in enumerate(["apple", "banana", "apple"]):
            t.pipe_input(f"k{i}", w, i)
        topic = _internal_inputs(d)[0]
        old = list(d._outputs[topic])
        # a record the upstream has not written yet: the input offset after the last one
        prefix = origins.partition_prefix("in", 0)
        later = prefix + (3).to_bytes(8, "big") + (0).to_bytes(4, "big")
        for m in old[:2]:
            d.pipe_raw(topic, m.key(), m.value(), m.timestamp()[1], m.headers() or ())
        d.pipe_raw(topic, S.serialize("cherry"), S.serialize("cherry"), 3, [(origins.HEADER, later)])
        d.pipe_raw(topic, old[2].key(), old[2].value(), 2, old[2].headers() or ())  # below it now
        assert dict(d.get_key_value_store("counts").all()) == {"apple": 2, "banana": 1, "cherry": 1}
        assert _skipped(d) == 3


def test_a_record_without_origin_is_always_applied() -> None:
    """A record with no origin (a wall-clock punctuation's, or written before this mechanism) is
    never taken for a duplicate: the counter proves the check is on the origin, not the content."""
    with TopologyTestDriver(_word_count(), NO_CACHE) as d:
        t = d.create_input_topic("in", S, S)
        t.pipe_input("k", "apple", 1)
        topic = _internal_inputs(d)[0]
        m = d._outputs[topic][0]
        d.pipe_raw(topic, m.key(), m.value(), 1, [("trace", b"x")])
        assert dict(d.get_key_value_store("counts").all()) == {"apple": 2}
        assert _skipped(d) == 0


@pytest.mark.parametrize("config", [
    pytest.param({}, id="cache-on"),
    pytest.param(NO_CACHE, id="cache-off")])
def test_table_group_by_count_skips_a_redelivered_repartition_topic(config: dict[str, Any]) -> None:
    """A KTable regrouped: each update writes the old row's subtraction and the new row's addition
    (two records of one input record, origin index 0 and 1)."""
    b = StreamsBuilder(S, S)
    (b.table("in", "rows").group_by(lambda k, v: (v, v)).count("by-value")
     .to_stream().to("out", value_serde=L))
    recs = _words(11, 50)
    with TopologyTestDriver(b.build(), config) as d:
        t = d.create_input_topic("in", S, S)
        for i, (k, v) in enumerate(recs):
            t.pipe_input(k, v, i)
        rows = dict(recs)
        expected = Counter(rows.values())
        assert {k: n for k, n in d.get_key_value_store("by-value").all() if n} == expected
        _assert_redelivery_changes_nothing(d)
        t.pipe_input("k-new", "fig", 100)
        assert {k: n for k, n in d.get_key_value_store("by-value").all() if n} == expected + Counter({"fig": 1})


# -- windows -------------------------------------------------------------------------------------------


def test_tumbling_windowed_count_skips_a_redelivered_repartition_topic() -> None:
    b = StreamsBuilder(S, S)
    (b.stream("in").group_by(lambda k, v: v).windowed_by(TimeWindows.of_size_and_grace(100, 1000))
     .count("wcounts").to_stream().map(lambda k, v: (str(k), v)).to("out", value_serde=L))
    rnd = random.Random(4)
    recs = [(f"k{i}", rnd.choice(WORDS), rnd.randint(0, 450)) for i in range(60)]
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("in", S, S)
        for k, v, ts in recs:
            t.pipe_input(k, v, ts)
        expected = Counter(Windowed(v, TimeWindow(ts // 100 * 100, ts // 100 * 100 + 100)) for _, v, ts in recs)
        assert dict(d.get_window_store("wcounts").all()) == expected
        assert _assert_redelivery_changes_nothing(d) == len(recs)
        assert dict(d.get_window_store("wcounts").all()) == expected
        t.pipe_input("x", "apple", 450)
        w = Windowed("apple", TimeWindow(400, 500))
        assert dict(d.get_window_store("wcounts").all())[w] == expected[w] + 1


def _sessions(times: list[tuple[str, int]], gap: int) -> Counter[Windowed]:
    """Session counts by hand: per key, times within ``gap`` of each other are one session."""
    out: Counter[Windowed] = Counter()
    by_key: dict[str, list[int]] = {}
    for k, ts in times:
        by_key.setdefault(k, []).append(ts)
    for k, tss in by_key.items():
        tss.sort()
        start = prev = tss[0]
        n = 0
        for ts in tss:
            if ts - prev > gap:
                out[Windowed(k, SessionWindow(start, prev))] = n
                start, n = ts, 0
            prev = ts
            n += 1
        out[Windowed(k, SessionWindow(start, prev))] = n
    return out


def test_session_windowed_count_skips_a_redelivered_repartition_topic() -> None:
    b = StreamsBuilder(S, S)
    (b.stream("in").group_by(lambda k, v: v).windowed_by(SessionWindows.of_inactivity_gap_and_grace(10, 10_000))
     .count("scounts").to_stream().map(lambda k, v: (str(k), v)).to("out", value_serde=L))
    rnd = random.Random(5)
    recs = [(f"k{i}", rnd.choice(WORDS[:3]), rnd.randint(0, 300)) for i in range(50)]
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("in", S, S)
        for k, v, ts in recs:
            t.pipe_input(k, v, ts)
        expected = _sessions([(v, ts) for _, v, ts in recs], 10)
        assert dict(d.get_session_store("scounts").all()) == expected
        assert _assert_redelivery_changes_nothing(d) == len(recs)
        assert dict(d.get_session_store("scounts").all()) == expected
        t.pipe_input("x", "zebra", 1000)
        t.pipe_input("y", "zebra", 1005)
        assert dict(d.get_session_store("scounts").all()) == expected + Counter(
            {Windowed("zebra", SessionWindow(1000, 1005)): 2})


# -- stream-stream join after a key change on both sides --------------------------------------------------


def test_stream_stream_join_after_select_key_skips_redelivered_repartition_topics() -> None:
    b = StreamsBuilder(S, S)
    left = b.stream("left").select_key(lambda k, v: v.split(":")[0])
    right = b.stream("right").select_key(lambda k, v: v.split(":")[0])
    (left.join(right, lambda lv, rv: f"{lv}+{rv}", JoinWindows.of_time_difference_and_grace(50, 1000),
               StreamJoined.with_(S, S, S))
     .to("out"))
    rnd = random.Random(6)
    lrecs = [(f"l{i}", f"{rnd.choice(WORDS)}:L{i}", rnd.randint(0, 300)) for i in range(30)]
    rrecs = [(f"r{i}", f"{rnd.choice(WORDS)}:R{i}", rnd.randint(0, 300)) for i in range(30)]
    with TopologyTestDriver(b.build()) as d:
        lt, rt = d.create_input_topic("left", S, S), d.create_input_topic("right", S, S)
        arrived: list[tuple[str, str, int]] = []
        for (lk, lv, lts), (rk, rv, rts) in zip(lrecs, rrecs, strict=True):
            lt.pipe_input(lk, lv, lts)
            arrived.append(("L", lv, lts))
            rt.pipe_input(rk, rv, rts)
            arrived.append(("R", rv, rts))
        # each pair joins once, when its later record arrives (within 50 ms, grace long enough)
        expected: Counter[tuple[str, str]] = Counter()
        for i, (side, v, ts) in enumerate(arrived):
            for oside, ov, ots in arrived[:i]:
                if oside != side and ov.split(":")[0] == v.split(":")[0] and abs(ots - ts) <= 50:
                    lv, rv = (v, ov) if side == "L" else (ov, v)
                    expected[(v.split(":")[0], f"{lv}+{rv}")] += 1
        assert Counter(_values(d, "out")) == expected and expected
        assert _assert_redelivery_changes_nothing(d, topics=2) == 60
        assert Counter(_values(d, "out")) == expected
        # a new pair still joins, once
        lt.pipe_input("n1", "fig:L", 200)
        rt.pipe_input("n2", "fig:R", 210)
        assert Counter(_values(d, "out")) - expected == Counter({("fig", "fig:L+fig:R"): 1})


# -- suppression downstream of a repartition ------------------------------------------------------------


def test_suppress_until_window_closes_after_a_repartition_emits_each_window_once() -> None:
    b = StreamsBuilder(S, S)
    (b.stream("in").group_by(lambda k, v: v).windowed_by(TimeWindows.of_size_and_grace(10, 5))
     .count(Materialized(name="counts", caching_enabled=False))
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream().map(lambda k, v: (str(k), v)).to("final", value_serde=L))
    rnd = random.Random(7)
    times = sorted(rnd.randint(0, 60) for _ in range(40))
    recs = [(rnd.choice(WORDS[:3]), ts) for ts in times]
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("in", S, S)
        for i, (v, ts) in enumerate(recs):
            t.pipe_input(f"k{i}", v, ts)
        stream_time = recs[-1][1]

        def closed(end: int) -> Counter[str]:
            return Counter(f"[{v}@{ts // 10 * 10}/{ts // 10 * 10 + 10}]" for v, ts in recs
                           if ts // 10 * 10 + 10 <= end)
        # windows closed at stream time: end + grace <= stream time
        expected = closed(stream_time - 5)
        assert Counter(dict(_values(d, "final", L))) == expected and len(_values(d, "final", L)) == len(expected)
        assert _assert_redelivery_changes_nothing(d) == len(recs)
        assert len(_values(d, "final", L)) == len(expected)  # nothing emitted again
        # stream time moves on: the remaining windows close, each emitted once with its count
        t.pipe_input("x", "zebra", stream_time + 100)
        final = _values(d, "final", L)
        assert len(final) == len(closed(stream_time + 100 - 5)) > len(expected)
        assert dict(final) == closed(stream_time + 100 - 5)


# -- foreign-key table-table join -----------------------------------------------------------------------


@pytest.mark.parametrize("config", [
    pytest.param({}, id="cache-on"),
    pytest.param(NO_CACHE, id="cache-off")])
def test_foreign_key_join_skips_redelivered_subscription_and_response_topics(config: dict[str, Any]) -> None:
    b = StreamsBuilder(S, S)
    orders = b.table("orders", "orders-store")
    customers = b.table("customers", "customers-store")
    (orders.join(customers, lambda order: order.split(":")[0], lambda o, c: f"{o}/{c}", Materialized.as_("joined"))
     .to_stream().to("out"))
    with TopologyTestDriver(b.build(), config) as d:
        o, c = d.create_input_topic("orders", S, S), d.create_input_topic("customers", S, S)
        c.pipe_input("c1", "Ann", 1)
        o.pipe_input("o1", "c1:pen", 2)
        o.pipe_input("o2", "c2:ink", 3)
        c.pipe_input("c2", "Bob", 4)
        o.pipe_input("o3", "c1:cup", 5)
        c.pipe_input("c1", "Ann B", 6)
        o.pipe_input("o2", "c1:ink", 7)  # a foreign-key change: unsubscribe c2, subscribe c1
        expected = {"o1": "c1:pen/Ann B", "o2": "c1:ink/Ann B", "o3": "c1:cup/Ann B"}
        assert dict(d.get_key_value_store("joined").all()) == expected
        out = _values(d, "out")
        names = _internal_inputs(d)
        assert any("SUBSCRIPTION-REGISTRATION" in n for n in names)
        assert any("SUBSCRIPTION-RESPONSE" in n for n in names)
        _assert_redelivery_changes_nothing(d, topics=2)
        assert _values(d, "out") == out
        c.pipe_input("c1", "Ann C", 8)
        assert dict(d.get_key_value_store("joined").all()) == {k: v.replace("Ann B", "Ann C")
                                                                for k, v in expected.items()}
        assert _values(d, "out")[len(out):] and all(v.endswith("Ann C") for _, v in _values(d, "out")[len(out):])


# -- a chain of two repartitions ------------------------------------------------------------------------


def _chain(caching: bool) -> Topology:
    b = StreamsBuilder(S, S)
    (b.stream("in").group_by(lambda k, v: v).count(Materialized(name="by-word", caching_enabled=caching))
     .to_stream().group_by(lambda word, n: str(n), value_serde=L)
     .count(Materialized(name="by-count", caching_enabled=caching))
     .to_stream().to("out", value_serde=L))
    return b.build()


def _chain_expected(words: list[str]) -> dict[str, int]:
    """How many times each count value was reached by some word (the second count sees one
    record per update of the first)."""
    seen: Counter[str] = Counter()
    reached: Counter[str] = Counter()
    for w in words:
        seen[w] += 1
        reached[str(seen[w])] += 1
    return dict(reached)


def test_chain_of_two_repartitions_replaces_the_origin_and_skips_both() -> None:
    words = [v for _, v in _words(8, 40)]
    with TopologyTestDriver(_chain(caching=False)) as d:
        t = d.create_input_topic("in", S, S)
        for i, w in enumerate(words):
            t.pipe_input(f"k{i}", w, i)
        topics = _internal_inputs(d)
        assert len(topics) == 2
        first_topic = next(t for t in topics if "by-word" in t)
        second_topic = next(t for t in topics if "by-count" in t)
        assert len(d._outputs[second_topic]) == len(words)
        for m in d._outputs[second_topic]:
            # one origin, the middle task's (its input: the first repartition topic), not the source's
            (origin,) = _origin_headers(m)
            assert origin is not None and origin.startswith(origins.partition_prefix(first_topic, 0))
        assert dict(d.get_key_value_store("by-count").all()) == _chain_expected(words)
        assert _assert_redelivery_changes_nothing(d, topics=2) == 2 * len(words)
        t.pipe_input("z", "zebra", 100)
        assert dict(d.get_key_value_store("by-count").all()) == _chain_expected(words + ["zebra"])


def test_chain_of_two_repartitions_with_caching_skips_both() -> None:
    words = [v for _, v in _words(9, 40)]
    with TopologyTestDriver(_chain(caching=True)) as d:
        t = d.create_input_topic("in", S, S)
        for i, w in enumerate(words):
            t.pipe_input(f"k{i}", w, i)
        assert dict(d.get_key_value_store("by-count").all()) == _chain_expected(words)
        _assert_redelivery_changes_nothing(d, topics=2)
        assert dict(d.get_key_value_store("by-count").all()) == _chain_expected(words)


# -- headers ---------------------------------------------------------------------------------------------


def test_user_topics_carry_no_origin_and_keep_the_input_headers() -> None:
    """Through two repartitions and a stream-stream join: the origin never reaches a user topic
    (nor a changelog), while the input record's own headers still do, as in Kafka Streams."""
    b = StreamsBuilder(S, S)
    src = b.stream("in")
    src.group_by(lambda k, v: v).count(Materialized(name="c", caching_enabled=False)).to_stream().to(
        "counts", value_serde=L)
    src.select_key(lambda k, v: v).to("rekeyed")
    keyed = src.select_key(lambda k, v: v)
    keyed.join(b.stream("other").select_key(lambda k, v: v), lambda a, c: f"{a}+{c}",
               JoinWindows.of_time_difference_and_grace(100, 100), StreamJoined.with_(S, S, S)).to("joined")
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("in", S, S)
        for i, w in enumerate(["apple", "banana", "apple"]):
            t.pipe_input(f"k{i}", w, i, headers=[("trace", f"t{i}".encode())])
        d.create_input_topic("other", S, S).pipe_input("x", "apple", 5, headers=[("trace", b"o")])
        assert all(_origin_headers(m) for tp in _internal_inputs(d) for m in d._outputs[tp])
        _no_origin_outside(d)
        for topic in ("counts", "rekeyed", "joined"):
            assert d._outputs[topic], topic
            for m in d._outputs[topic]:
                names = [n for n, _ in m.headers() or ()]
                assert names.count("trace") == 1, (topic, m.headers())
        assert [h for m in d._outputs["counts"] for h in m.headers() or ()] == [
            ("trace", b"t0"), ("trace", b"t1"), ("trace", b"t2")]


def test_an_origin_header_on_the_input_never_leaves_or_misleads() -> None:
    """A producer outside the application may send a header named ``iqmesh.org``: it is replaced on
    internal topics (so it cannot make the downstream skip) and dropped on user topics."""
    forged = origins.partition_prefix("in", 0) + b"\xff" * origins.TAIL_BYTES
    with TopologyTestDriver(_word_count(), NO_CACHE) as d:
        t = d.create_input_topic("in", S, S)
        t.pipe_input("k0", "apple", 0, headers=[(origins.HEADER, forged)])
        t.pipe_input("k1", "apple", 1, headers=[(origins.HEADER, forged)])
        topic = _internal_inputs(d)[0]
        assert [_origin_headers(m) for m in d._outputs[topic]] == [
            [origins.partition_prefix("in", 0) + (i).to_bytes(8, "big") + (0).to_bytes(4, "big")] for i in (0, 1)]
        assert dict(d.get_key_value_store("counts").all()) == {"apple": 2}
        _no_origin_outside(d)


def _captured_headers(eos: bool) -> list[list[Any]]:
    """The headers a real StreamTask (state manager under ``eos`` or at-least-once, as the runtime's
    ActiveTaskCreator builds it) writes to the group_by's repartition topic."""
    topology = _word_count()
    app = "app"
    cfg = StreamsConfig.from_properties({"application.id": app, "bootstrap.servers": "dummy:1234",
                                         **(EOS if eos else {})})
    internal = set(topology.internal_topics)
    sent: list[tuple[str, Any]] = []

    def send(topic: str, key: bytes | None, value: bytes | None, ts: int, partition: int, headers: Any) -> None:
        sent.append((topic, headers))

    def changelog(topic: str, partition: int, task: Any) -> ChangelogSend:
        return lambda batch: None

    st = next(s for s in topology.subtopologies() if any(n.name.startswith("KSTREAM-SOURCE") for n in s.nodes))
    tid = TaskId(st.id, 0)
    task = StreamTask(tid, topology, st, app, lambda t: f"{app}-{t}" if t in internal else t, send, changelog,
                      ProcessorStateManager(tid, None, app, eos=cfg.eos), 0, True, ErrorHandling(cfg.to_properties()))

    class Msg:
        def __init__(self, offset: int) -> None:
            self._o = offset

        def topic(self) -> str:
            return "in"

        def partition(self) -> int:
            return 0

        def offset(self) -> int:
            return self._o

        def timestamp(self) -> tuple[int, int]:
            return (1, self._o)

        def key(self) -> bytes:
            return b"k"

        def value(self) -> bytes:
            return b"apple"

        def headers(self) -> list[tuple[str, bytes]]:
            return [("trace", b"t")]

    try:
        task.add_records("in", [Msg(0), Msg(1)])
        assert task.process() == 2
        task.flush()
    finally:
        task.close()
    assert [t for t, _ in sent] == [f"{app}-counts-repartition"] * 2
    return [list(h or ()) for _, h in sent]


def test_exactly_once_task_writes_no_origin() -> None:
    assert _captured_headers(eos=True) == [[("trace", b"t")], [("trace", b"t")]]
    # the same task under at-least-once does
    alos = _captured_headers(eos=False)
    assert [[n for n, _ in h] for h in alos] == [["trace", origins.HEADER]] * 2


@pytest.mark.xfail(strict=True, reason=(
    "defect (TopologyTestDriver): the driver builds every StreamTask with ProcessorStateManager(eos=False) "
    "(StreamTask's default when state is None), whatever processing.guarantee says, so under exactly_once_v2 "
    "its tasks stamp iqmesh.org on internal topics and skip by high-water as under at-least-once; the runtime "
    "(ActiveTaskCreator) passes eos=config.eos and writes none (test_exactly_once_task_writes_no_origin)"))
def test_exactly_once_in_the_driver_writes_no_origin() -> None:
    with TopologyTestDriver(_word_count(), EOS) as d:
        t = d.create_input_topic("in", S, S)
        for i, w in enumerate(["apple", "banana", "apple"]):
            t.pipe_input(f"k{i}", w, i)
        topic = _internal_inputs(d)[0]
        assert len(d._outputs[topic]) == 3
        assert all(_origin_headers(m) == [] for m in d._outputs[topic])
        assert all(t.origin is None for t in d.tasks)


# -- the high-water across a restart of the downstream task ------------------------------------------------


def test_a_downstream_task_restored_from_its_changelog_skips_what_it_had_applied() -> None:
    """The downstream restarts too: a new driver's task restored from the first one's changelog
    (reserved high-water records included) skips the re-delivered records, and its store holds no
    reserved key."""
    words = [v for _, v in _words(10, 30)]
    with TopologyTestDriver(_word_count(), NO_CACHE) as d1:
        t = d1.create_input_topic("in", S, S)
        for i, w in enumerate(words):
            t.pipe_input(f"k{i}", w, i)
        changelog = "test-driver-counts-changelog"
        logged = [(m.key() or b"", m.value(), m.timestamp()[1]) for m in d1._outputs[changelog]]
        assert any(k == origins.RESERVED_KEY for k, _, _ in logged)
        topic = _internal_inputs(d1)[0]
        again = list(d1._outputs[topic])
        with TopologyTestDriver(_word_count(), NO_CACHE) as d2:
            task = d2._by_topic[topic]
            task.state.restore((changelog, 0), logged, len(logged))
            assert task.state.origins.snapshot() == next(
                x for x in d1.tasks if x.id == task.id).state.origins.snapshot() != {}
            assert dict(d2.get_key_value_store("counts").all()) == Counter(words)
            for m in again:
                d2.pipe_raw(topic, m.key(), m.value(), m.timestamp()[1], m.headers() or ())
            assert dict(d2.get_key_value_store("counts").all()) == Counter(words)
            assert task.duplicates_skipped == len(words)
            assert changelog not in d2._outputs  # nothing applied, not even a new high-water


# -- the state manager: changelog record, restore, checkpoint ------------------------------------------------

APP = "app"
TID = TaskId(1, 2)
SPEC = StoreSpec("counts", S, S)
TP = ("app-counts-changelog", 2)
REPART = "app-words-repartition"
MARKS = {REPART: {origins.partition_prefix("in", 2): origins.partition_prefix("in", 2) + b"\x00" * 7 + b"\x09"
                  + b"\x00\x00\x00\x01"}}


def _open(state_dir: Path, sent: list[tuple[bytes, bytes | None, int]], *, eos: bool = False
          ) -> ProcessorStateManager:
    sm = ProcessorStateManager(TID, state_dir, APP, eos=eos)

    def changelog_for(spec: StoreSpec) -> ChangelogSend:
        tp = (spec.changelog_topic(APP), TID.partition)

        def send(batch: list[tuple[bytes, bytes | None, int]]) -> None:
            sent.extend(batch)
            sm.logged(tp, len(batch))
        return send
    sm.register_stores([SPEC], in_memory=False, cache_max_entries=100, changelog_for=changelog_for)
    return sm


def _set_marks(sm: ProcessorStateManager, marks: dict[str, dict[bytes, bytes]]) -> None:
    for topic, m in marks.items():
        sm.origins.topic(topic).update(m)


def test_a_flush_sends_the_high_water_through_the_changelog_when_it_moved(tmp_path: Path) -> None:
    sent: list[tuple[bytes, bytes | None, int]] = []
    sm = _open(tmp_path, sent)
    try:
        sm.stores["counts"].put("a", "1")
        sm.flush()
        assert [k for k, _, _ in sent] == [S.serialize("a")]  # no mark yet: no reserved record
        _set_marks(sm, MARKS)
        sm.stores["counts"].put("b", "2")
        sm.flush()
        assert [k for k, _, _ in sent[1:]] == [S.serialize("b"), origins.RESERVED_KEY]
        assert origins.from_record(sent[-1][1]) == MARKS
        assert sm.changelog_offsets == {TP: 3}  # the reserved record takes an offset
        sm.flush()
        assert len(sent) == 3  # unchanged marks: not sent again
        sm.checkpoint()
        assert read_checkpoint(tmp_path / str(TID)) == {TP: 3}
        assert read_origins(tmp_path / str(TID)) == MARKS
    finally:
        sm.close(checkpoint=False)


def test_under_exactly_once_no_high_water_is_sent(tmp_path: Path) -> None:
    sent: list[tuple[bytes, bytes | None, int]] = []
    sm = _open(tmp_path, sent, eos=True)
    try:
        _set_marks(sm, MARKS)
        sm.stores["counts"].put("a", "1")
        sm.flush()
        assert [k for k, _, _ in sent] == [S.serialize("a")]
    finally:
        sm.close(checkpoint=False)


def test_restore_loads_the_high_water_and_never_applies_the_reserved_record(tmp_path: Path) -> None:
    sent: list[tuple[bytes, bytes | None, int]] = []
    sm = _open(tmp_path, sent)
    try:
        older = {REPART: {k: v[:-1] + b"\x00" for k, v in MARKS[REPART].items()}}
        batch: list[tuple[bytes, bytes | None, int]] = [
            (b"a", b"1", 5), (origins.RESERVED_KEY, origins.record_value(older), 6),
            (b"b", b"2", 7), (origins.RESERVED_KEY, origins.record_value(MARKS), 8)]
        sm.restore(TP, batch, 4)
        assert sm.origins.snapshot() == MARKS  # the last one of the batch
        assert list(sm.stores["counts"].all()) == [("a", "1"), ("b", "2")]
        assert sm.stores["counts"].approximate_num_entries() == 2
        assert sm.changelog_offsets == {TP: 4}
        assert not sm.origins.changed()  # restored marks are not written again at the next flush
        # a source holding its topic's dict sees the restored marks (load keeps the dicts)
        held = sm.origins.topic(REPART)
        sm.restore(TP, [(origins.RESERVED_KEY, origins.record_value(older), 9)], 5)
        assert held == older[REPART]
        sm.flush()
        assert sent == []
    finally:
        sm.close(checkpoint=False)


def test_the_checkpoint_keeps_the_marks_and_a_reopened_task_loads_them(tmp_path: Path) -> None:
    raw = tmp_path / "raw" / str(TID)
    write_checkpoint(raw, {TP: 7}, MARKS)
    assert read_checkpoint(raw) == {TP: 7}
    assert read_origins(raw) == MARKS
    write_checkpoint(raw, {TP: 7})
    assert read_origins(raw) == {}  # no marks written: none read
    # through the state manager: a commit and a clean close, then a reopen trusting the checkpoint
    task_dir = tmp_path / str(TID)
    sm = _open(tmp_path, [])
    sm.stores["counts"].put("a", "1")
    _set_marks(sm, MARKS)
    sm.flush()
    sm.checkpoint()
    sm.close(checkpoint=True)
    assert read_checkpoint(task_dir) == {TP: 2}  # the put and the high-water record
    assert read_origins(task_dir) == MARKS
    sent: list[tuple[bytes, bytes | None, int]] = []
    sm = _open(tmp_path, sent)
    try:
        assert sm.checkpointed == {TP: 2} and sm.stores["counts"].get("a") == "1"
        assert sm.origins.snapshot() == MARKS
        assert not sm.origins.changed()
        sm.flush()
        assert sent == []  # loaded marks are not written again
    finally:
        sm.close(checkpoint=False)
    # a checkpoint not trusted (the store missing from it): its marks are not taken either
    write_checkpoint(task_dir, {("app-other-changelog", 2): 1}, MARKS)
    sm = _open(tmp_path, [])
    try:
        assert sm.checkpointed == {} and sm.origins.snapshot() == {}
    finally:
        sm.close(checkpoint=False)
