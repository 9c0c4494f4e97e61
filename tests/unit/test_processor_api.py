"""The Processor API (Record-based processors, forwarding, metadata, punctuation, commit
requests, several parents), run through the TopologyTestDriver.

The punctuation cases are Kafka Streams' own (TopologyTestDriverTest.shouldPunctuateOnStreamsTime
and shouldPunctuateOnWallClockTime): same inputs, same expected punctuation times.
"""

from __future__ import annotations

from typing import Any

import pytest

from instance.errors import StreamsException
from instance.serde import LongSerde, StringSerde
from instance.state.spec import StoreSpec
from instance.testing import TopologyTestDriver
from instance.topology import (
    Cancellable,
    ContextualProcessor,
    ProcessorContext,
    PunctuationType,
    Record,
    RecordMetadata,
    StreamsBuilder,
    Topology,
)

S = StringSerde()
L = LongSerde()


class _Punctuating(ContextualProcessor):
    """Schedules one punctuator in ``init``; records the times it fired."""

    def __init__(self, interval: int, ptype: PunctuationType, fired: list[int]) -> None:
        self.interval, self.ptype, self.fired = interval, ptype, fired

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        context.schedule(self.interval, self.ptype, self.fired.append)

    def process(self, record: Record) -> None:
        pass


def _single(supplier: Any) -> Topology:
    t = Topology()
    t.add_source("source", "in", key_serde=S, value_serde=S)
    t.add_processor("proc", supplier, "source")
    return t


def test_stream_time_punctuation_fires_as_kafka_streams() -> None:
    fired: list[int] = []
    steps = [(42, [42]), (42, [42]), (51, [42, 51]), (52, [42, 51]), (61, [42, 51, 61]),
             (65, [42, 51, 61]), (71, [42, 51, 61, 71]), (72, [42, 51, 61, 71]),
             # 80 and 90 were passed: one punctuation, at 95, then aligned to 100
             (95, [42, 51, 61, 71, 95]), (101, [42, 51, 61, 71, 95, 101]),
             (102, [42, 51, 61, 71, 95, 101])]
    with TopologyTestDriver(_single(lambda: _Punctuating(10, PunctuationType.STREAM_TIME, fired))) as d:
        inp = d.create_input_topic("in", S, S)
        assert fired == []
        for ts, expected in steps:
            inp.pipe_input("k", "v", ts)
            assert fired == expected, ts


def test_stream_time_does_not_go_back_with_an_out_of_order_record() -> None:
    fired: list[int] = []
    with TopologyTestDriver(_single(lambda: _Punctuating(10, PunctuationType.STREAM_TIME, fired))) as d:
        inp = d.create_input_topic("in", S, S)
        for ts in (25, 3, 29, 30):
            inp.pipe_input("k", "v", ts)
        assert fired == [25, 30]
        assert d.tasks[0].stream_time == 30


def test_wall_clock_punctuation_fires_as_kafka_streams() -> None:
    fired: list[int] = []
    t = _single(lambda: _Punctuating(10, PunctuationType.WALL_CLOCK_TIME, fired))
    with TopologyTestDriver(t, initial_wall_clock_ms=0) as d:
        for advance, expected in [(5, []), (9, [14]), (1, [14]), (20, [14, 35]), (5, [14, 35, 40])]:
            d.advance_wall_clock_time(advance)
            assert fired == expected
        d.create_input_topic("in", S, S).pipe_input("k", "v", 10_000)  # records do not move wall time
        assert fired == [14, 35, 40]


class _CancelAfter(ContextualProcessor):
    """Forwards a count from its punctuator; cancels itself after ``n`` punctuations."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.handle: Cancellable | None = None
        self.count = 0

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.handle = context.schedule(100, PunctuationType.WALL_CLOCK_TIME, self.punctuate)

    def punctuate(self, now: int) -> None:
        self.count += 1
        assert self.context().record_metadata() is None  # no input record in a punctuation
        self.context().forward(Record(f"tick-{self.count}", str(now), now))
        if self.count == self.n and self.handle is not None:
            self.handle.cancel()

    def process(self, record: Record) -> None:
        pass


def test_punctuator_forwards_with_its_timestamp_and_can_be_cancelled() -> None:
    t = _single(lambda: _CancelAfter(2))
    t.add_sink("sink", "out", "proc", key_serde=S, value_serde=S)
    with TopologyTestDriver(t, initial_wall_clock_ms=1000) as d:
        out = d.create_output_topic("out", S, S)
        for _ in range(5):
            d.advance_wall_clock_time(100)
        assert out.read_records_to_list() == [("tick-1", "1100", 1100), ("tick-2", "1200", 1200)]


def test_schedule_rejects_a_zero_interval() -> None:
    with pytest.raises(ValueError):
        TopologyTestDriver(_single(lambda: _Punctuating(0, PunctuationType.STREAM_TIME, [])))


# -- the Record API -----------------------------------------------------------------------------


class _Enrich(ContextualProcessor):
    """Upper-cases the value, appends where it came from, adds a header, shifts the timestamp."""

    def __init__(self, seen: list[RecordMetadata | None]) -> None:
        self.seen = seen

    def process(self, record: Record) -> None:
        md = self.context().record_metadata()
        self.seen.append(md)
        out = (record.with_value(record.value.upper())
               .with_timestamp(record.timestamp + 1)
               .with_headers([*record.headers, ("seen-by", b"enrich")]))
        self.context().forward(out)


def test_record_processor_sees_and_forwards_records_with_headers() -> None:
    seen: list[RecordMetadata | None] = []
    t = _single(lambda: _Enrich(seen))
    t.add_sink("sink", "out", "proc", key_serde=S, value_serde=S)
    with TopologyTestDriver(t) as d:
        inp = d.create_input_topic("in", S, S)
        inp.pipe_input("a", "x", 10, headers=[("trace", b"t1")])
        inp.pipe_input("b", "y", 20)
        out = d.create_output_topic("out", S, S)
        r1, r2 = out.read_record(), out.read_record()
    assert (r1, r2) == (("a", "X", 11), ("b", "Y", 21))
    assert r1.headers == (("trace", b"t1"), ("seen-by", b"enrich"))
    assert r2.headers == (("seen-by", b"enrich"),)
    assert seen == [RecordMetadata("in", 0, 0), RecordMetadata("in", 0, 1)]


def test_headers_of_the_input_record_reach_the_sink_through_dsl_processors() -> None:
    b = StreamsBuilder(S, S)
    b.stream("in").map_values(str.upper).to("out")
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, S).pipe_input("k", "v", 5, headers=[("h", b"1")])
        rec = d.create_output_topic("out", S, S).read_record()
    assert rec == ("k", "V", 5) and rec.headers == (("h", b"1"),)


def test_record_with_methods_return_new_records() -> None:
    r = Record("k", "v", 5)
    assert r.with_key("k2") == Record("k2", "v", 5)
    assert r.with_value(None) == Record("k", None, 5)
    assert r.with_headers([("a", b"1")]).headers == (("a", b"1"),)
    assert r == Record("k", "v", 5, ())
    with pytest.raises(ValueError):
        r.with_timestamp(-1)


class _Router(ContextualProcessor):
    """Sends even values to the child named ``even``, the rest to ``odd``."""

    def process(self, record: Record) -> None:
        self.context().forward(record, "even" if int(record.value) % 2 == 0 else "odd")


def test_forward_to_one_named_child() -> None:
    t = _single(_Router)
    t.add_sink("even", "out-even", "proc", key_serde=S, value_serde=S)
    t.add_sink("odd", "out-odd", "proc", key_serde=S, value_serde=S)
    with TopologyTestDriver(t) as d:
        d.create_input_topic("in", S, S).pipe_key_value_list([("a", "1"), ("b", "2"), ("c", "4")])
        assert d.create_output_topic("out-even", S, S).read_key_values_to_list() == [("b", "2"), ("c", "4")]
        assert d.create_output_topic("out-odd", S, S).read_key_values_to_list() == [("a", "1")]


class _BadChild(ContextualProcessor):
    def process(self, record: Record) -> None:
        self.context().forward(record, child_name="nope")


def test_forward_to_an_unknown_child_names_the_children() -> None:
    t = _single(_BadChild)
    t.add_sink("sink", "out", "proc")
    with TopologyTestDriver(t) as d, pytest.raises(StreamsException, match="no child 'nope'.*sink"):
        d.create_input_topic("in", S, S).pipe_input("a", "1")


class _Committer(ContextualProcessor):
    def process(self, record: Record) -> None:
        if record.value == "commit":
            self.context().commit()


def test_commit_request_is_seen_by_the_task() -> None:
    with TopologyTestDriver(_single(_Committer)) as d:
        inp = d.create_input_topic("in", S, S)
        inp.pipe_input("a", "x")
        assert not d.tasks[0].commit_requested
        inp.pipe_input("a", "commit")
        assert d.tasks[0].commit_requested


# -- several parents: Kafka Streams' co-grouping shape -----------------------------------------------


class _CoGroup(ContextualProcessor):
    """Sums, per customer, amounts from two streams (orders add, refunds subtract) into one
    store; emits the running total. One processor, two parents."""

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = context.get_state_store("totals")

    def process(self, record: Record) -> None:
        md = self.context().record_metadata()
        assert md is not None
        sign = 1 if md.topic == "orders" else -1
        total = (self.store.get(record.key) or 0) + sign * int(record.value)
        self.store.put(record.key, total, record.timestamp)
        self.context().forward(record.with_value(total))


def test_processor_with_two_parents_cogroups_both_streams() -> None:
    t = Topology()
    t.add_source("orders-src", "orders", key_serde=S, value_serde=S)
    t.add_source("refunds-src", "refunds", key_serde=S, value_serde=S)
    t.add_processor("cogroup", _CoGroup, "orders-src", "refunds-src")
    t.add_state_store(StoreSpec("totals", S, L, caching_enabled=False), "cogroup")
    t.add_sink("sink", "totals-out", "cogroup", key_serde=S, value_serde=L)
    assert len(t.subtopologies()) == 1
    with TopologyTestDriver(t) as d:
        orders = d.create_input_topic("orders", S, S)
        refunds = d.create_input_topic("refunds", S, S)
        orders.pipe_input("alice", "10", 1)
        orders.pipe_input("bob", "5", 2)
        refunds.pipe_input("alice", "3", 3)
        orders.pipe_input("alice", "1", 4)
        assert d.create_output_topic("totals-out", S, L).read_records_to_list() == [
            ("alice", 10, 1), ("bob", 5, 2), ("alice", 7, 3), ("alice", 8, 4)]
        assert dict(d.get_key_value_store("totals").all()) == {"alice": 8, "bob": 5}


def test_record_processor_in_the_dsl_via_kstream_process() -> None:
    b = StreamsBuilder(S, S)
    b.stream("in").process(lambda: _Enrich([])).to("out")
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", S, S).pipe_input("k", "abc", 7)
        assert d.create_output_topic("out", S, S).read_record() == ("k", "ABC", 8)


# -- the seeds' co-grouping processor: two parents, a shared store, emission per punctuation ---------


class _TagAs(ContextualProcessor):
    """Txn-Processor / Events-Processor: re-key by stock symbol, tag the event's kind."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def process(self, record: Record) -> None:
        symbol, _, detail = record.value.partition(":")
        self.context().forward(Record(symbol, (self.kind, detail), record.timestamp))


class _CogroupingProcessor(ContextualProcessor):
    """Accumulates clicks and purchases per symbol in one store; every 15 s of wall-clock time
    emits (clicks, purchases) for each symbol and clears it."""

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = context.get_state_store("cogroup-store")
        context.schedule(15_000, PunctuationType.WALL_CLOCK_TIME, self.emit)

    def process(self, record: Record) -> None:
        kind, detail = record.value
        acc = self.store.get(record.key) or {"clicks": [], "purchases": []}
        acc["clicks" if kind == "click" else "purchases"].append(detail)
        self.store.put(record.key, acc, record.timestamp)

    def emit(self, now: int) -> None:
        for symbol, acc in list(self.store.all()):
            if acc["clicks"] or acc["purchases"]:
                self.context().forward(Record(symbol, [acc["clicks"], acc["purchases"]], now))
                self.store.put(symbol, {"clicks": [], "purchases": []}, now)


def test_seeds_cogrouping_processor_with_two_parents_emits_per_punctuation() -> None:
    from instance.serde import JsonSerde
    j = JsonSerde()
    t = Topology()
    t.add_source("Txn-Source", "stock-transactions", key_serde=S, value_serde=S)
    t.add_source("Events-Source", "events", key_serde=S, value_serde=S)
    t.add_processor("Txn-Processor", lambda: _TagAs("purchase"), "Txn-Source")
    t.add_processor("Events-Processor", lambda: _TagAs("click"), "Events-Source")
    t.add_processor("CoGrouping-Processor", _CogroupingProcessor, "Txn-Processor", "Events-Processor")
    t.add_state_store(StoreSpec("cogroup-store", S, j), "CoGrouping-Processor")
    t.add_sink("Tuple-Sink", "cogrouped", "CoGrouping-Processor", key_serde=S, value_serde=j)
    assert t.nodes["CoGrouping-Processor"].parents == ["Txn-Processor", "Events-Processor"]
    with TopologyTestDriver(t, initial_wall_clock_ms=0) as d:
        txns = d.create_input_topic("stock-transactions", S, S)
        events = d.create_input_topic("events", S, S)
        out = d.create_output_topic("cogrouped", S, j)
        txns.pipe_input(None, "ACME:buy 10", 1)
        events.pipe_input(None, "ACME:page-view", 2)
        events.pipe_input(None, "INIT:search", 3)
        txns.pipe_input(None, "ACME:sell 5", 4)
        assert out.is_empty()
        d.advance_wall_clock_time(15_000)
        assert sorted(out.read_records_to_list()) == [
            ("ACME", [["page-view"], ["buy 10", "sell 5"]], 15_000),
            ("INIT", [["search"], []], 15_000)]
        events.pipe_input(None, "INIT:click", 5)
        d.advance_wall_clock_time(15_000)
        assert out.read_records_to_list() == [("INIT", [["click"], []], 30_000)]
        d.advance_wall_clock_time(15_000)  # nothing new: nothing emitted
        assert out.is_empty()


class _GlobalUpper(ContextualProcessor):
    """A Record-API processor maintaining a global store (``Topology.add_global_store``)."""

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = context.get_state_store("upper")

    def process(self, record: Record) -> None:
        self.store.put(record.key, None if record.value is None else record.value.upper())


class _Lookup(ContextualProcessor):
    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = context.get_state_store("upper")

    def process(self, record: Record) -> None:
        self.context().forward(record.with_value(self.store.query_get(record.value)))


def test_record_processors_maintain_and_read_a_global_store() -> None:
    t = Topology()
    t.add_global_store(StoreSpec("upper", S, S), "global-source", "names", "global-proc", _GlobalUpper)
    t.add_source("src", "in", key_serde=S, value_serde=S)
    t.add_processor("lookup", _Lookup, "src")
    t.connect_processor_and_state_stores("upper", "lookup")
    t.add_sink("sink", "out", "lookup", key_serde=S, value_serde=S)
    with TopologyTestDriver(t) as d:
        d.create_input_topic("names", S, S).pipe_key_value_list([("a", "alice"), ("b", "bob")])
        d.create_input_topic("in", S, S).pipe_key_value_list([("1", "a"), ("2", "b"), ("3", "c")])
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == [
            ("1", "ALICE"), ("2", "BOB"), ("3", None)]
