"""GlobalKTable and global stores through the TopologyTestDriver: the cases of Kafka Streams'
KStreamGlobalKTableJoinTest / KStreamGlobalKTableLeftJoinTest (values), and the topology rules."""

from __future__ import annotations

from typing import Any

import pytest

from instance.errors import TopologyException
from instance.serde import IntSerde, StringSerde
from instance.state.spec import StoreSpec
from instance.testing import TopologyTestDriver
from instance.testing.driver import _Msg
from instance.topology import BaseProcessor, GlobalKTable, StreamsBuilder, Topology
from instance.topology.handlers import ErrorHandling
from instance.topology.table_processors import StreamTableJoinProcessor

S = StringSerde()
I = IntSerde()  # noqa: E741


def joiner(a: Any, b: Any) -> str:
    return f"{'null' if a is None else a}+{'null' if b is None else b}"


def _fk(key: Any, value: str) -> str | None:
    """The key selector of Kafka's test: the foreign key after the comma."""
    parts = value.split(",")
    return parts[1] if len(parts) > 1 else None


def _topology(left: bool) -> tuple[StreamsBuilder, GlobalKTable]:
    b = StreamsBuilder(default_key_serde=I, default_value_serde=S)
    gt = b.global_table("globalTopic", "global-store", key_serde=S, value_serde=S)
    stream = b.stream("streamTopic")
    (stream.left_join(gt, _fk, joiner) if left else stream.join(gt, _fk, joiner)).to("output")
    return b, gt


def _push_stream(d: TopologyTestDriver, n: int, prefix: str, fk_prefix: str = "FKey") -> None:
    inp = d.create_input_topic("streamTopic", I, S)
    for k in range(n):
        inp.pipe_input(k, f"{prefix}{k},{fk_prefix}{k}")


def _push_global(d: TopologyTestDriver, n: int, prefix: str) -> None:
    inp = d.create_input_topic("globalTopic", S, S)
    for k in range(n):
        inp.pipe_input(f"FKey{k}", f"{prefix}{k}")


def _read(d: TopologyTestDriver) -> list[tuple[Any, Any]]:
    return d.create_output_topic("output", I, S).read_key_values_to_list()


def test_global_store_is_outside_every_subtopology() -> None:
    b, gt = _topology(False)
    topology = b.build()
    assert list(topology.global_stores) == ["global-store"]
    assert len(topology.subtopologies()) == 1
    assert topology.subtopologies()[0].stores == []
    assert topology.copartition_groups == []  # a global table needs no co-partitioning
    assert gt.queryable_store_name == "global-store"


def test_stream_global_table_inner_join() -> None:
    b, _ = _topology(False)
    with TopologyTestDriver(b.build()) as d:
        _push_stream(d, 2, "X")
        assert _read(d) == []
        _push_global(d, 2, "Y")   # global table updates trigger nothing
        assert _read(d) == []
        _push_stream(d, 4, "X")
        assert _read(d) == [(0, "X0,FKey0+Y0"), (1, "X1,FKey1+Y1")]
        _push_global(d, 4, "YY")
        _push_stream(d, 4, "X")
        assert _read(d) == [(0, "X0,FKey0+YY0"), (1, "X1,FKey1+YY1"), (2, "X2,FKey2+YY2"),
                            (3, "X3,FKey3+YY3")]
        g = d.create_input_topic("globalTopic", S, S)
        g.pipe_input("FKey0", None)
        g.pipe_input("FKey1", None)
        _push_stream(d, 4, "XX")
        assert _read(d) == [(2, "XX2,FKey2+YY2"), (3, "XX3,FKey3+YY3")]
        assert dict(d.get_key_value_store("global-store").all()) == {"FKey2": "YY2", "FKey3": "YY3"}


def test_stream_global_table_left_join() -> None:
    b, _ = _topology(True)
    with TopologyTestDriver(b.build()) as d:
        _push_stream(d, 2, "X")
        assert _read(d) == [(0, "X0,FKey0+null"), (1, "X1,FKey1+null")]
        _push_global(d, 2, "Y")
        _push_stream(d, 4, "X")
        assert _read(d) == [(0, "X0,FKey0+Y0"), (1, "X1,FKey1+Y1"), (2, "X2,FKey2+null"),
                            (3, "X3,FKey3+null")]


@pytest.mark.parametrize("left", [True, False])
def test_null_value_drops_the_record_a_null_lookup_key_only_in_an_inner_join(left: bool) -> None:
    b, _ = _topology(left)
    with TopologyTestDriver(b.build()) as d:
        _push_global(d, 1, "Y")
        inp = d.create_input_topic("streamTopic", I, S)
        inp.pipe_input(0, "no-foreign-key")     # the selector returns None
        inp.pipe_input(1, None)                 # None value
        inp.pipe_input(None, "A,FKey0")         # None stream key: the selector still finds a row
        # a left join joins a None lookup key with no table value (KIP-962; Kafka Streams 4.4.0)
        assert _read(d) == ([(0, "no-foreign-key+null"), (None, "A,FKey0+Y0")] if left else
                            [(None, "A,FKey0+Y0")])
        procs = [p for t in d.tasks for p in t._processors if isinstance(p, StreamTableJoinProcessor)]
        assert procs[0].dropped_records == (1 if left else 2)


class _Upper(BaseProcessor):
    """A global store processor (Processor API): stores values upper-cased."""

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store("upper")

    def process(self, key: Any, value: Any) -> None:
        self.store.put(key, None if value is None else value.upper())


class _Lookup(BaseProcessor):
    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store("upper")

    def process(self, key: Any, value: Any) -> None:
        self.forward(key, self.store.query_get(value))


def test_add_global_store_with_a_processor() -> None:
    t = Topology()
    t.add_global_store(StoreSpec("upper", S, S), "global-source", "names", "global-proc", _Upper)
    t.add_source("src", "in", key_serde=S, value_serde=S)
    t.add_processor("lookup", _Lookup, "src")
    t.connect_processor_and_state_stores("upper", "lookup")
    t.add_sink("sink", "out", "lookup", key_serde=S, value_serde=S)
    with TopologyTestDriver(t) as d:
        d.create_input_topic("names", S, S).pipe_key_value_list([("a", "alice"), ("b", "bob")])
        d.create_input_topic("in", S, S).pipe_key_value_list([("1", "a"), ("2", "b"), ("3", "c")])
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == [
            ("1", "ALICE"), ("2", "BOB"), ("3", None)]


def test_a_topic_cannot_feed_a_global_store_and_a_source() -> None:
    t = Topology()
    t.add_source("src", "in")
    with pytest.raises(TopologyException, match="already read"):
        t.add_global_store(StoreSpec("g", S, S), "gs", "in", "gp")
    t.add_global_store(StoreSpec("g", S, S), "gs", "names", "gp")
    with pytest.raises(TopologyException, match="already added"):
        t.add_global_store(StoreSpec("g", S, S), "gs2", "other", "gp2")


def _global_topology() -> Topology:
    b = StreamsBuilder(default_key_serde=S, default_value_serde=S)
    b.global_table("names", "names-store")
    b.stream("in").to("out")
    return b.build()


def test_a_missing_global_topic_is_a_clear_error() -> None:
    from instance.errors import StreamsException
    from instance.runtime.global_state import GlobalStateManager
    with pytest.raises(StreamsException, match="topic 'names' of global store 'names-store' does not exist"):
        GlobalStateManager(_global_topology(), {"in": 1}, None, "app", ErrorHandling({}))


def test_global_stores_persist_with_a_checkpoint_and_reload_without_one(tmp_path: Any) -> None:
    """Real RocksDB under <state.dir>/global: a checkpoint keeps the store and says from where to
    read on; without one the store is wiped and loaded whole again."""
    from instance.runtime.global_state import GlobalStateManager
    topology = _global_topology()
    state = GlobalStateManager(topology, {"names": 2}, tmp_path, "app", ErrorHandling({}))
    assert state.changelog_partitions == [("names", 0), ("names", 1)]
    state.apply(("names", 0), [_Msg("names", 0, 0, 0, b"a", b"1"), _Msg("names", 0, 1, 0, b"b", b"2")], 2)
    state.apply(("names", 1), [_Msg("names", 1, 0, 0, b"c", b"3"), _Msg("names", 1, 1, 0, None, b"x")], 2)
    state.flush_and_checkpoint()
    state.close(checkpoint=True)
    again = GlobalStateManager(topology, {"names": 2}, tmp_path, "app", ErrorHandling({}))
    assert again.checkpointed == {("names", 0): 2, ("names", 1): 2}
    assert dict(again.stores["names-store"].all()) == {"a": "1", "b": "2", "c": "3"}
    again.close(checkpoint=False)
    (tmp_path / "global" / ".checkpoint").unlink()
    fresh = GlobalStateManager(topology, {"names": 2}, tmp_path, "app", ErrorHandling({}))
    assert fresh.checkpointed == {} and dict(fresh.stores["names-store"].all()) == {}
    fresh.close(checkpoint=False)
