"""Record origins on internal topics (instance/state/origins.py): under at-least-once a downstream
task skips what an upstream task writes again after starting over from its last commit.

The origin travels at the end of the value of a record written to an internal topic:
``<payload> <origin: 18 bytes> <flag: 1 byte>`` (``origins.seal`` / ``origins.unseal``); no header
is added or removed by the runtime.

Through the TopologyTestDriver, an upstream restart is simulated by re-delivering to the downstream
task every record written so far to each internal topic it reads (repartition, foreign-key
subscription and response topics), with the same key, value (its origin included), timestamp and
headers and new offsets, as the broker would give them. Nothing may change: stores, stream time,
dropped records, and what any topic received; the skip counter grows by the number re-delivered.
Then new input must still be applied. Expected results are computed from the input, not from the
runtime.

The last tests are of the high-water's persistence in the state manager (changelog record,
restore, checkpoint) with a real RocksDB store.
"""

from __future__ import annotations

import random
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from instance.config import StreamsConfig
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
from instance.topology.handlers import ErrorHandling
from instance.topology.stream_joins import StreamJoined
from instance.topology.suppress import BufferConfig, Suppressed
from instance.topology.topology import SourceNode, Topology
from instance.topology.windows import JoinWindows, SessionWindows, TimeWindows
from kernel.task_id import TaskId

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


def _origin(msg: Any) -> bytes | None:
    """The origin in the trailer of a record's value (None: none; the flag says so)."""
    return origins.unseal(msg.value())[1]


def _payload(msg: Any) -> bytes | None:
    """A record's value without its trailer."""
    return origins.unseal(msg.value())[0]


def _ids(topology: Topology, resolve: Any) -> dict[str, int]:
    """The topic ids of origins, as every task of ``topology`` computes them: its source topics,
    resolved, sorted."""
    return origins.topic_ids(resolve(t) for n in topology.nodes.values() if isinstance(n, SourceNode)
                             for t in n.topics)


def _partition(d: TopologyTestDriver, topic: str, partition: int = 0) -> bytes:
    """The origin partition part of origins of records processed from ``topic`` (resolved)."""
    return struct.pack(">HI", _ids(d.topology, d._resolve)[topic], partition)


def _at(d: TopologyTestDriver, topic: str, offset: int, index: int = 0) -> bytes:
    """The origin of the ``index``-th internal record written while processing ``topic``/``offset``."""
    return _partition(d, topic) + struct.pack(">QI", offset, index)


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
    partitions = {struct.pack(">HI", i, 0) for i in _ids(d.topology, d._resolve).values()}
    for t, msgs in written.items():
        for m in msgs:
            origin = _origin(m)
            assert (m.value() or b"")[-1:] in (origins.WITH_ORIGIN, origins.WITH_ORIGIN_NULL), (t, m.offset())
            assert origin is not None and origin[:origins.PARTITION_BYTES] in partitions, (t, m.offset(), m.value())
            assert not m.headers(), (t, m.offset(), m.headers())  # none on the input, none added
    return n


def _values(d: TopologyTestDriver, topic: str, serde: Any = S) -> list[tuple[Any, Any]]:
    """What ``topic`` received so far, without taking it (keys as strings)."""
    return [(S.deserialize(m.key()), serde.deserialize(m.value())) for m in d._outputs.get(topic, ())]


def _no_trailer_outside(d: TopologyTestDriver) -> None:
    """No value of a user topic or a changelog ends with a trailer that an internal topic's value
    carried (their values are the plain serialized ones)."""
    internal = set(_internal_inputs(d))
    trailers = {(m.value() or b"")[-origins.TRAILER_BYTES:] for t in internal for m in d._outputs.get(t, ())
                if _origin(m) is not None}
    assert trailers
    for t, q in d._outputs.items():
        if t not in internal:
            for m in q:
                v = m.value() or b""
                assert not any(v.endswith(x) for x in trailers), (t, m.offset(), v)


def _words(seed: int, n: int) -> list[tuple[str, str]]:
    rnd = random.Random(seed)
    return [(f"k{rnd.randint(0, 9)}", rnd.choice(WORDS)) for _ in range(n)]


# -- the format: seal / unseal, origins in processing order ---------------------------------------------


def test_seal_and_unseal_round_trip() -> None:
    origin = struct.pack(">HI", 3, 7) + struct.pack(">QI", 2**40 + 5, 70)
    assert len(origin) == origins.ORIGIN_BYTES == 18 and origins.PARTITION_BYTES == 6
    assert origins.TRAILER_BYTES == 19
    # the layout: <payload> <origin> <flag>
    assert origins.seal(b"v", origin) == b"v" + origin + origins.WITH_ORIGIN
    assert origins.seal(None, origin) == origin + origins.WITH_ORIGIN_NULL
    assert origins.seal(b"v", None) == b"v" + origins.NO_ORIGIN
    assert origins.seal(None, None) == origins.NO_ORIGIN_NULL
    # payloads that end like a trailer, or are one, come back as they went
    payloads: list[bytes | None] = [None, b"", b"v", b"\x00", b"\x01", b"\x02", b"\x03", bytes(range(256)),
                                    origins.seal(b"inner", origin), origins.seal(None, None), b"\x00" * 40]
    rnd = random.Random(12)
    payloads += [rnd.randbytes(rnd.randint(0, 64)) for _ in range(50)]
    for payload in payloads:
        for o in (None, origin, b"\x00" * origins.ORIGIN_BYTES, b"\xff" * origins.ORIGIN_BYTES):
            sealed = origins.seal(payload, o)
            assert len(sealed) == len(payload or b"") + (1 if o is None else origins.TRAILER_BYTES)
            assert origins.unseal(sealed) == (payload, o), (payload, o)
    # a value without a trailer (null or empty): a null payload without origin
    assert origins.unseal(None) == origins.unseal(b"") == (None, None)


def test_origins_of_one_origin_partition_compare_as_bytes_in_processing_order() -> None:
    """Offset first, then the index among one input record's outputs (past the cached indexes
    too), flushes and stream-time punctuations continuing the index of the input record processed
    last; a wall-clock punctuation's records have none."""
    ids = origins.topic_ids(["b", "a", "c", "a"])
    assert ids == {"a": 0, "b": 1, "c": 2}
    stamp = origins.OriginStamp(5, ids)
    written: list[bytes] = []
    expected: list[tuple[int, int]] = []
    for offset, outputs in [(0, 1), (1, 3), (255, 1), (256, 70), (2**32, 2), (2**32 + 1, 1)]:
        for i in range(outputs):
            o = stamp.value("b", offset)
            assert o is not None
            written.append(o)
            expected.append((offset, i))
        if offset == 1:  # a flush after it: its outputs continue the index
            for i in range(outputs, outputs + 2):
                o = stamp.value(None, -1)
                assert o is not None
                written.append(o)
                expected.append((offset, i))
    assert written == [struct.pack(">HI", 1, 5) + struct.pack(">QI", off, i) for off, i in expected]
    assert all(len(o) == origins.ORIGIN_BYTES for o in written)
    assert written == sorted(written) and len(set(written)) == len(written)
    assert all(a < b for a, b in zip(written, written[1:], strict=False))
    # a record processed without output, then a flush: the flush's record is its index 0
    stamp.at("b", 2**32 + 9)
    assert stamp.value(None, -1) == struct.pack(">HI", 1, 5) + struct.pack(">QI", 2**32 + 9, 0)
    # another source topic: another origin partition
    assert (stamp.value("c", 0) or b"")[:origins.PARTITION_BYTES] == struct.pack(">HI", 2, 5)
    stamp.wall_clock = True
    assert stamp.value(None, -1) is None


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
        assert [_origin(m) for m in old] == [_at(d, "in", i) for i in range(3)]
        # a record the upstream has not written yet: the input offset after the last one
        later = _at(d, "in", 3)
        for m in old[:2]:
            d.pipe_raw(topic, m.key(), m.value(), m.timestamp()[1], m.headers() or ())
        d.pipe_raw(topic, S.serialize("cherry"), origins.seal(S.serialize("cherry"), later), 3)
        d.pipe_raw(topic, old[2].key(), old[2].value(), 2, old[2].headers() or ())  # below it now
        assert dict(d.get_key_value_store("counts").all()) == {"apple": 2, "banana": 1, "cherry": 1}
        assert _skipped(d) == 3


def test_a_record_without_origin_is_always_applied() -> None:
    """A record with no origin (flag NO_ORIGIN: a wall-clock punctuation's, or an exactly-once
    task's) is never taken for a duplicate, however often it comes: the check is on the origin, not
    the content."""
    with TopologyTestDriver(_word_count(), NO_CACHE) as d:
        t = d.create_input_topic("in", S, S)
        t.pipe_input("k", "apple", 1)
        topic = _internal_inputs(d)[0]
        m = d._outputs[topic][0]
        assert _origin(m) == _at(d, "in", 0)
        bare = origins.seal(_payload(m), None)
        assert bare == b"apple" + origins.NO_ORIGIN
        d.pipe_raw(topic, m.key(), bare, 1, [("trace", b"x")])
        d.pipe_raw(topic, m.key(), bare, 1, [("trace", b"x")])
        assert dict(d.get_key_value_store("counts").all()) == {"apple": 3}
        # nor is a null payload without origin (the count ignores a null value)
        d.pipe_raw(topic, m.key(), origins.seal(None, None), 1)
        assert dict(d.get_key_value_store("counts").all()) == {"apple": 3}
        assert _skipped(d) == 0
        # the record with its origin is still a duplicate
        d.pipe_raw(topic, m.key(), m.value(), 1)
        assert dict(d.get_key_value_store("counts").all()) == {"apple": 3}
        assert _skipped(d) == 1


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
        assert [_origin(m) for m in d._outputs[first_topic]] == [_at(d, "in", i) for i in range(len(words))]
        # one trailer, whose origin is the middle task's (its input: the first repartition topic),
        # not the source's: the payload is the bare 8-byte count, each word's running count
        seen: Counter[str] = Counter()
        running = []
        for w in words:
            seen[w] += 1
            running.append(seen[w])
        second = list(d._outputs[second_topic])
        assert [_origin(m) for m in second] == [_at(d, first_topic, i) for i in range(len(words))]
        assert [_payload(m) for m in second] == [L.serialize(n) for n in running]
        assert all(len(m.value() or b"") == 8 + origins.TRAILER_BYTES for m in second)
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
    nor a changelog (their values are the plain serialized ones), while the input record's own
    headers reach every topic, internal ones included, unchanged, as in Kafka Streams."""
    b = StreamsBuilder(S, S)
    src = b.stream("in")
    src.group_by(lambda k, v: v).count(Materialized(name="c", caching_enabled=False)).to_stream().to(
        "counts", value_serde=L)
    src.select_key(lambda k, v: v).to("rekeyed")
    keyed = src.select_key(lambda k, v: v)
    keyed.join(b.stream("other").select_key(lambda k, v: v), lambda a, c: f"{a}+{c}",
               JoinWindows.of_time_difference_and_grace(100, 100), StreamJoined.with_(S, S, S)).to("joined")
    words = ["apple", "banana", "apple"]
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("in", S, S)
        for i, w in enumerate(words):
            t.pipe_input(f"k{i}", w, i, headers=[("trace", f"t{i}".encode())])
        d.create_input_topic("other", S, S).pipe_input("x", "apple", 5, headers=[("trace", b"o")])
        internal = _internal_inputs(d)
        assert len(internal) == 3
        assert all(_origin(m) is not None for tp in internal for m in d._outputs[tp])
        _no_trailer_outside(d)
        # internal topics: the payload is the plain serialized value; headers the input's
        by_word = next(tp for tp in internal if tp.endswith("c-repartition"))
        assert [_payload(m) for m in d._outputs[by_word]] == [S.serialize(w) for w in words]
        assert [m.headers() for m in d._outputs[by_word]] == [[("trace", f"t{i}".encode())] for i in range(3)]
        # user topics: the plain serialized values, each with its input's headers
        assert [m.value() for m in d._outputs["counts"]] == [L.serialize(n) for n in (1, 1, 2)]
        assert [m.value() for m in d._outputs["rekeyed"]] == [S.serialize(w) for w in words]
        assert [m.value() for m in d._outputs["joined"]] == [S.serialize("apple+apple")] * 2
        for topic in ("counts", "rekeyed", "joined"):
            assert d._outputs[topic], topic
            for m in d._outputs[topic]:
                names = [n for n, _ in m.headers() or ()]
                assert names == ["trace"], (topic, m.headers())
        assert [h for m in d._outputs["counts"] for h in m.headers() or ()] == [
            ("trace", b"t0"), ("trace", b"t1"), ("trace", b"t2")]
        assert [h for m in d._outputs["joined"] for h in m.headers() or ()] == [("trace", b"o")] * 2
        # changelogs: the plain serialized values, no trailer
        logged = {tp: [m.value() for m in q if m.key() != origins.RESERVED_KEY]
                  for tp, q in d._outputs.items() if tp.endswith("-changelog")}
        assert logged.pop("test-driver-c-changelog") == [L.serialize(n) for n in (1, 1, 2)]
        assert sorted(logged.values()) == [[S.serialize("apple")],
                                           [S.serialize("apple"), S.serialize("banana"), S.serialize("apple")]]


def test_a_user_header_named_like_the_old_origin_header_passes_through_untouched() -> None:
    """A producer outside the application may send a header named ``iqmesh.org`` (the first
    carrier of origins) holding what looks like a high origin: the runtime neither adds nor
    removes nor reads any header, so it reaches every topic unchanged, like any header, and makes
    no downstream task skip anything."""
    with TopologyTestDriver(_word_count(), NO_CACHE) as d:
        forged = _partition(d, "in") + b"\xff" * (origins.ORIGIN_BYTES - origins.PARTITION_BYTES)
        headers = [("iqmesh.org", forged), ("trace", b"t")]
        t = d.create_input_topic("in", S, S)
        t.pipe_input("k0", "apple", 0, headers=headers)
        t.pipe_input("k1", "apple", 1, headers=headers)
        topic = _internal_inputs(d)[0]
        assert [_origin(m) for m in d._outputs[topic]] == [_at(d, "in", i) for i in (0, 1)]
        assert [m.headers() for m in d._outputs[topic]] == [headers, headers]
        assert [m.headers() for m in d._outputs["out"]] == [headers, headers]
        assert [m.value() for m in d._outputs["out"]] == [L.serialize(1), L.serialize(2)]
        assert dict(d.get_key_value_store("counts").all()) == {"apple": 2}
        assert _skipped(d) == 0
        # on an internal topic too, the header is not read: a record with it and a new origin is
        # applied, its re-delivery skipped by its trailer's origin
        again = d._outputs[topic][1]
        d.pipe_raw(topic, again.key(), origins.seal(S.serialize("apple"), _at(d, "in", 2)), 2, headers)
        d.pipe_raw(topic, again.key(), again.value(), 2, [("trace", b"t")])
        assert dict(d.get_key_value_store("counts").all()) == {"apple": 3}
        assert _skipped(d) == 1
        assert d._outputs["out"][-1].headers() == headers
        _no_trailer_outside(d)


def _count_by_key() -> Topology:
    """A count behind a repartition that keeps null values (the count drops them downstream)."""
    b = StreamsBuilder(S, S)
    b.stream("in").group_by(lambda k, v: k).count("counts").to_stream().to("out", value_serde=L)
    return b.build()


class _Consumed:
    """A consumed record, shaped like confluent_kafka.Message where the runtime reads it."""

    def __init__(self, topic: str, offset: int, key: bytes | None, value: bytes | None,
                 headers: list[tuple[str, bytes]] | None = None) -> None:
        self._t, self._o, self._k, self._v, self._h = topic, offset, key, value, headers

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._o

    def timestamp(self) -> tuple[int, int]:
        return (1, self._o)

    def key(self) -> bytes | None:
        return self._k

    def value(self) -> bytes | None:
        return self._v

    def headers(self) -> list[tuple[str, bytes]] | None:
        return self._h


def _real_tasks(topology: Topology, eos: bool, sent: list[tuple[str, bytes | None, Any]]) -> list[StreamTask]:
    """A real StreamTask per subtopology (partition 0), with its state manager under ``eos`` or
    at-least-once, as the runtime's ActiveTaskCreator builds it; what they write goes to ``sent``
    as (topic, value, headers)."""
    app = "app"
    cfg = StreamsConfig.from_properties({"application.id": app, "bootstrap.servers": "dummy:1234",
                                         **(EOS if eos else {})})
    assert cfg.eos == eos
    internal = set(topology.internal_topics)

    def send(topic: str, key: bytes | None, value: bytes | None, ts: int, partition: int, headers: Any) -> None:
        sent.append((topic, value, list(headers or ())))

    def changelog(topic: str, partition: int, task: Any) -> ChangelogSend:
        return lambda batch: None

    tasks = []
    for st in topology.subtopologies():
        tid = TaskId(st.id, 0)
        tasks.append(StreamTask(tid, topology, st, app, lambda t: f"{app}-{t}" if t in internal else t, send,
                                changelog, ProcessorStateManager(tid, None, app, eos=cfg.eos), 0, True,
                                ErrorHandling(cfg.to_properties())))
    return tasks


REPARTITION = "app-counts-repartition"
#: the origin partition of records processed from ``in`` partition 0, in _count_by_key's tasks
IN_0 = struct.pack(">HI", origins.topic_ids(["in", REPARTITION])["in"], 0)


def _written_to_the_repartition_topic(eos: bool) -> list[tuple[bytes | None, Any]]:
    """(value, headers) a real upstream task of _count_by_key writes to its repartition topic for
    two input records: a value, then a null value."""
    sent: list[tuple[str, bytes | None, Any]] = []
    tasks = _real_tasks(_count_by_key(), eos, sent)
    upstream = next(t for t in tasks if "in" in t.sources)
    assert [t.origin is None for t in tasks] == [eos] * len(tasks)
    try:
        upstream.add_records("in", [_Consumed("in", 0, b"k", b"apple", [("trace", b"t")]),
                                    _Consumed("in", 1, b"k", None, [("trace", b"t")])])
        assert upstream.process() == 2
        upstream.flush()
    finally:
        for t in tasks:
            t.close()
    assert [t for t, _, _ in sent] == [REPARTITION] * 2
    return [(v, h) for _, v, h in sent]


def test_exactly_once_task_writes_a_trailer_without_origin() -> None:
    headers = [("trace", b"t")]
    eos = _written_to_the_repartition_topic(eos=True)
    assert eos == [(b"apple" + origins.NO_ORIGIN, headers), (origins.NO_ORIGIN_NULL, headers)]
    assert [origins.unseal(v) for v, _ in eos] == [(b"apple", None), (None, None)]
    # the same task under at-least-once writes the origin; the headers are the same
    alos = _written_to_the_repartition_topic(eos=False)
    assert alos == [(b"apple" + IN_0 + struct.pack(">QI", 0, 0) + origins.WITH_ORIGIN, headers),
                    (IN_0 + struct.pack(">QI", 1, 0) + origins.WITH_ORIGIN_NULL, headers)]
    assert [origins.unseal(v) for v, _ in alos] == [(b"apple", IN_0 + struct.pack(">QI", 0, 0)),
                                                    (None, IN_0 + struct.pack(">QI", 1, 0))]


@pytest.mark.parametrize("eos", [True, False], ids=["exactly-once", "at-least-once"])
def test_a_real_downstream_task_skips_by_origin_only_under_at_least_once(eos: bool) -> None:
    """A real downstream task strips the trailer whatever the guarantee; under exactly_once_v2
    it skips nothing (a record with an origin, written before a switch to it, is applied as any)."""
    tasks = _real_tasks(_count_by_key(), eos, [])
    down = next(t for t in tasks if REPARTITION in t.sources)
    origin = IN_0 + struct.pack(">QI", 0, 0)
    try:
        down.add_records(REPARTITION, [
            _Consumed(REPARTITION, 0, b"k", origins.seal(b"apple", origin)),
            _Consumed(REPARTITION, 1, b"k", origins.seal(b"apple", origin)),  # written again
            _Consumed(REPARTITION, 2, b"k", origins.seal(b"apple", None)),
            _Consumed(REPARTITION, 3, b"k", origins.seal(None, None))])
        down.process()
        down.flush()
        assert dict(down.stores["counts"].all()) == {"k": 3 if eos else 2}
        assert down.duplicates_skipped == (0 if eos else 1)
        assert down.state.origins.snapshot() == ({} if eos else {REPARTITION: {IN_0: origin}})
    finally:
        for t in tasks:
            t.close()


def test_exactly_once_in_the_driver_writes_no_origin() -> None:
    """The driver builds its tasks as the runtime does (ActiveTaskCreator passes eos=config.eos):
    under exactly-once, a trailer without origin (test_exactly_once_task_writes_a_trailer_without_origin)."""
    with TopologyTestDriver(_word_count(), EOS) as d:
        t = d.create_input_topic("in", S, S)
        for i, w in enumerate(["apple", "banana", "apple"]):
            t.pipe_input(f"k{i}", w, i)
        topic = _internal_inputs(d)[0]
        assert len(d._outputs[topic]) == 3
        assert [m.value() for m in d._outputs[topic]] == [
            w.encode() + origins.NO_ORIGIN for w in ["apple", "banana", "apple"]]
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
#: records processed from source topic id 1, partition 2: the last one applied, offset 9 index 1
PART = struct.pack(">HI", 1, 2)
MARKS = {REPART: {PART: PART + struct.pack(">QI", 9, 1)}}


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
    assert all(len(k) == origins.PARTITION_BYTES and len(v) == origins.ORIGIN_BYTES and v.startswith(k)
               for m in MARKS.values() for k, v in m.items())
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
