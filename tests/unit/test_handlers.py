"""Exception handlers and timestamp extractors, through the TopologyTestDriver.

Deserialization (log-and-fail, log-and-continue, dead-letter topic), production (fail, continue,
records too large, sink serialization errors), processing (KIP-1033, processors and punctuators),
custom handlers, and timestamp extractors with negative timestamps, as Kafka Streams behaves.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from instance.config import StreamsConfig
from instance.errors import (
    ConfigException,
    ProcessingException,
    ProductionException,
    SerializationException,
    StreamsException,
)
from instance.serde import BytesSerde, LongSerde, StringSerde
from instance.testing import TopologyTestDriver
from instance.topology import (
    BaseProcessor,
    ContextualProcessor,
    Materialized,
    ProcessorContext,
    PunctuationType,
    Record,
    StreamsBuilder,
    Topology,
)
from instance.topology.handlers import (
    HEADER_EXCEPTION,
    HEADER_MESSAGE,
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_STACKTRACE,
    HEADER_TOPIC,
    ErrorHandlerContext,
    HandlerResponse,
    HandlerResult,
)
from instance.topology.timestamps import ConsumedRecord

S = StringSerde()
L = LongSerde()
B = BytesSerde()
BAD = b"\xff\xfe not utf-8"


def _upper_topology() -> Topology:
    b = StreamsBuilder(S, S)
    b.stream("in").map_values(str.upper).to("out")
    return b.build()


def _driver(topology: Topology, **props: str) -> TopologyTestDriver:
    return TopologyTestDriver(topology, {k.replace("_", "."): v for k, v in props.items()})


def _headers(rec: Any) -> dict[str, bytes | None]:
    return dict(rec.headers)


# -- deserialization -------------------------------------------------------------------------------


def test_default_deserialization_handler_fails_naming_the_record_and_the_setting(
        caplog: pytest.LogCaptureFixture) -> None:
    with _driver(_upper_topology()) as d, caplog.at_level(logging.ERROR):
        d.pipe_raw("in", b"k", b"fine")
        with pytest.raises(SerializationException) as e:
            d.pipe_raw("in", b"k", BAD)
    msg = str(e.value)
    assert "topic=in partition=0 offset=1" in msg
    assert "default.deserialization.exception.handler=log-and-continue" in msg
    assert "default.deserialization.exception.handler=log-and-continue" in caplog.text
    assert "topic=in partition=0 offset=1" in caplog.text


def test_log_and_continue_skips_and_counts_the_record() -> None:
    with _driver(_upper_topology(), **{"default.deserialization.exception.handler": "log-and-continue"}) as d:
        d.pipe_raw("in", b"k1", b"a")
        d.pipe_raw("in", b"k2", BAD)
        d.pipe_raw("in", b"k3", b"c")
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == [("k1", "A"), ("k3", "C")]
        assert d.errors.dropped["deserialization-error"] == 1


def test_dead_letter_topic_gets_the_original_bytes_with_headers_naming_the_input() -> None:
    props = {"default.deserialization.exception.handler": "log-and-continue",
             "errors.dead.letter.queue.topic.name": "dlq"}
    with _driver(_upper_topology(), **props) as d:
        d.pipe_raw("in", b"k1", b"a", 10)
        d.pipe_raw("in", b"poison-key", BAD, 20, headers=[("trace", b"t-1")])
        d.pipe_raw("in", b"k3", b"c", 30)
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == [("k1", "A"), ("k3", "C")]
        dlq = d.create_output_topic("dlq", B, B)
        rec = dlq.read_record()
        assert dlq.is_empty()
    assert (rec.key, rec.value, rec.timestamp) == (b"poison-key", BAD, 20)
    h = _headers(rec)
    assert h["trace"] == b"t-1"  # the input's own headers are kept
    assert (h[HEADER_TOPIC], h[HEADER_PARTITION], h[HEADER_OFFSET]) == (b"in", b"0", b"1")
    assert h[HEADER_EXCEPTION] == b"builtins.UnicodeDecodeError"
    assert b"utf-8" in (h[HEADER_MESSAGE] or b"")
    assert b"Traceback" in (h[HEADER_STACKTRACE] or b"")


def test_log_and_fail_with_a_dead_letter_topic_writes_it_then_fails() -> None:
    props = {"errors.dead.letter.queue.topic.name": "dlq"}
    with _driver(_upper_topology(), **props) as d:
        with pytest.raises(SerializationException):
            d.pipe_raw("in", b"k", BAD)
        assert d.read_output("dlq") is not None


# -- production ------------------------------------------------------------------------------------


def _big_topology() -> Topology:
    """Repeats the value ``int(key)`` times: a large key makes a record too large to write."""
    b = StreamsBuilder(S, S)
    b.stream("in").map_values(lambda v: v * 1000).to("out")
    return b.build()


def test_record_too_large_fails_by_default_naming_input_output_and_setting() -> None:
    with _driver(_big_topology(), **{"producer.message.max.bytes": "5000"}) as d:
        d.pipe_raw("in", b"k", b"abc")
        with pytest.raises(ProductionException) as e:
            d.pipe_raw("in", b"k", b"0123456789")
    msg = str(e.value)
    assert "MSG_SIZE_TOO_LARGE" in msg
    assert "topic out" in msg
    assert "input topic=in partition=0 offset=1" in msg
    assert "default.production.exception.handler=continue" in msg


def test_production_continue_skips_the_record_and_keeps_going(caplog: pytest.LogCaptureFixture) -> None:
    props = {"producer.message.max.bytes": "5000", "default.production.exception.handler": "continue",
             "errors.dead.letter.queue.topic.name": "dlq"}
    with _driver(_big_topology(), **props) as d, caplog.at_level(logging.ERROR):
        d.pipe_raw("in", b"k1", b"a")
        d.pipe_raw("in", b"k2", b"0123456789")
        d.pipe_raw("in", b"k3", b"b")
        out = d.create_output_topic("out", S, S).read_key_values_to_list()
        dlq = d.create_output_topic("dlq", B, B).read_record()
        assert d.errors.dropped["production-error"] == 1
    assert out == [("k1", "a" * 1000), ("k3", "b" * 1000)]
    assert (dlq.key, dlq.value) == (b"k2", b"0123456789")  # the input record, not the output
    assert _headers(dlq)[HEADER_OFFSET] == b"1"
    assert "input topic=in partition=0 offset=1" in caplog.text and "MSG_SIZE_TOO_LARGE" in caplog.text


def test_sink_serialization_error_goes_to_the_production_handler() -> None:
    b = StreamsBuilder(S, S)
    b.stream("in").map_values(lambda v: int(v) if v.isdigit() else v).to("out", value_serde=L)
    with _driver(b.build()) as d, pytest.raises(ProductionException, match="topic out"):
        d.pipe_raw("in", b"k", b"not-a-number")
    with _driver(b.build(), **{"default.production.exception.handler": "continue"}) as d:
        d.pipe_raw("in", b"k", b"not-a-number")
        d.pipe_raw("in", b"k", b"42")
        assert d.create_output_topic("out", S, L).read_key_values_to_list() == [("k", 42)]


# -- processing (KIP-1033) ---------------------------------------------------------------------------


class _Boom(BaseProcessor):
    def process(self, key: Any, value: Any) -> None:
        if value == "boom":
            raise ValueError("cannot process boom")
        self.forward(key, value)


def _boom_topology() -> Topology:
    t = Topology()
    t.add_source("src", "in", key_serde=S, value_serde=S)
    t.add_processor("upper", lambda: _UpperRecord(), "src")
    t.add_processor("explode", _Boom, "upper")
    t.add_sink("sink", "out", "explode", key_serde=S, value_serde=S)
    return t


class _UpperRecord(ContextualProcessor):
    def process(self, record: Record) -> None:
        self.context().forward(record.with_value(record.value.lower()))


def test_processing_error_fails_by_default_naming_the_node_and_the_setting() -> None:
    with _driver(_boom_topology()) as d, pytest.raises(ProcessingException) as e:
        d.pipe_raw("in", b"k", b"BOOM")
    msg = str(e.value)
    assert "processor explode" in msg
    assert "input topic=in partition=0 offset=0" in msg
    assert "processing.exception.handler=log-and-continue" in msg
    assert isinstance(e.value.__cause__, ValueError)


def test_processing_log_and_continue_drops_the_record_and_goes_on() -> None:
    props = {"processing.exception.handler": "log-and-continue", "errors.dead.letter.queue.topic.name": "dlq"}
    with _driver(_boom_topology(), **props) as d:
        for v in (b"a", b"BOOM", b"c"):
            d.pipe_raw("in", b"k", v)
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == [("k", "a"), ("k", "c")]
        assert d.errors.dropped["processing-error"] == 1
        assert d.create_output_topic("dlq", B, B).read_record().value == b"BOOM"


class _BadPunctuator(ContextualProcessor):
    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.calls = 0
        context.schedule(10, PunctuationType.WALL_CLOCK_TIME, self.tick)

    def tick(self, now: int) -> None:
        self.calls += 1
        raise RuntimeError(f"tick {self.calls} failed")

    def process(self, record: Record) -> None:
        pass


def _punctuator_topology() -> Topology:
    t = Topology()
    t.add_source("src", "in")
    t.add_processor("ticker", _BadPunctuator, "src")
    return t


def test_punctuator_errors_go_to_the_processing_handler() -> None:
    with _driver(_punctuator_topology()) as d, pytest.raises(ProcessingException, match="processor ticker"):
        d.advance_wall_clock_time(10)
    with _driver(_punctuator_topology(), **{"processing.exception.handler": "log-and-continue"}) as d:
        for _ in range(3):
            d.advance_wall_clock_time(10)
        assert d.errors.dropped["processing-error"] == 3  # it stays scheduled


# -- custom handlers and validation -------------------------------------------------------------------

SEEN: list[tuple[str | None, int, str]] = []


class RecordingDeserializationHandler:
    """A custom handler: remembers what failed, continues."""

    def configure(self, properties: dict[str, Any]) -> None:
        self.app = properties["application.id"]

    def handle(self, context: ErrorHandlerContext, exception: Exception) -> HandlerResult:
        SEEN.append((context.topic, context.offset, self.app))
        return HandlerResult(HandlerResponse.CONTINUE)


def test_custom_handler_by_module_and_name() -> None:
    SEEN.clear()
    name = f"{__name__}:RecordingDeserializationHandler"
    with _driver(_upper_topology(), **{"default.deserialization.exception.handler": name}) as d:
        d.pipe_raw("in", b"k", BAD)
        d.pipe_raw("in", b"k", b"ok")
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == [("k", "OK")]
    assert SEEN == [("in", 0, "test-driver")]


@pytest.mark.parametrize(("setting", "value", "expected"), [
    ("default.deserialization.exception.handler", "skip", "log-and-continue, log-and-fail"),
    ("default.production.exception.handler", "no.such.module:Handler", "cannot load"),
    ("processing.exception.handler", f"{__name__}:SEEN", "not a class"),
    ("default.timestamp.extractor", "event-time", "wall-clock"),
])
def test_a_bad_handler_name_is_refused_at_start_up(setting: str, value: str, expected: str) -> None:
    with pytest.raises(ConfigException, match=expected):
        StreamsConfig.from_properties({"application.id": "a", "bootstrap.servers": "b:1", setting: value})


def test_kafka_streams_class_names_are_accepted() -> None:
    c = StreamsConfig.from_properties({
        "application.id": "a", "bootstrap.servers": "b:1",
        "default.deserialization.exception.handler": "org.apache.kafka.streams.errors.LogAndContinueExceptionHandler",
        "default.production.exception.handler": "org.apache.kafka.streams.errors.DefaultProductionExceptionHandler",
        "processing.exception.handler": "org.apache.kafka.streams.errors.LogAndContinueProcessingExceptionHandler",
        "default.timestamp.extractor": "org.apache.kafka.streams.processor.WallclockTimestampExtractor"})
    assert c.processing_exception_handler.endswith("LogAndContinueProcessingExceptionHandler")


# -- timestamp extractors ----------------------------------------------------------------------------


def test_negative_timestamp_fails_with_the_default_extractor_naming_the_setting() -> None:
    with _driver(_upper_topology()) as d, pytest.raises(StreamsException) as e:
        d.pipe_raw("in", b"k", b"v", -5)
    assert "default.timestamp.extractor=log-and-skip-on-invalid-timestamp" in str(e.value)
    assert "topic=in partition=0 offset=0" in str(e.value)


def test_log_and_skip_drops_negative_timestamps_and_counts_them() -> None:
    with _driver(_upper_topology(), **{"default.timestamp.extractor": "log-and-skip-on-invalid-timestamp"}) as d:
        d.pipe_raw("in", b"k1", b"a", 5)
        d.pipe_raw("in", b"k2", b"b", -1)
        d.pipe_raw("in", b"k3", b"c", 7)
        assert d.create_output_topic("out", S, S).read_records_to_list() == [("k1", "A", 5), ("k3", "C", 7)]
        assert d.errors.dropped["invalid-timestamp"] == 1
        assert d.tasks[0].stream_time == 7


def test_use_partition_time_replaces_a_negative_timestamp() -> None:
    with _driver(_upper_topology(), **{"default.timestamp.extractor": "use-partition-time-on-invalid-timestamp"}) as d:
        d.pipe_raw("in", b"k1", b"a", 50)
        d.pipe_raw("in", b"k2", b"b", -1)
        assert d.create_output_topic("out", S, S).read_records_to_list() == [("k1", "A", 50), ("k2", "B", 50)]


def test_wall_clock_extractor_uses_system_time() -> None:
    with _driver(_upper_topology(), **{"default.timestamp.extractor": "wall-clock"}) as d:
        before = time.time_ns() // 1_000_000
        d.pipe_raw("in", b"k", b"a", 5)
        after = time.time_ns() // 1_000_000
        ts = d.create_output_topic("out", S, S).read_record().timestamp
    assert before <= ts <= after


def value_timestamp(record: ConsumedRecord, partition_time: int) -> int:
    """A custom extractor: the event time is in the value (``<ts>:<payload>``); -1 if missing."""
    head, sep, _ = record.value.partition(":")
    return int(head) if sep else -1


def test_custom_extractor_function_and_skip_of_its_negative_result() -> None:
    with _driver(_upper_topology(), **{"default.timestamp.extractor": f"{__name__}:value_timestamp"}) as d:
        d.pipe_raw("in", b"k", b"123:a", 1)
        d.pipe_raw("in", b"k", b"no-time", 2)
        assert d.create_output_topic("out", S, S).read_records_to_list() == [("k", "123:A", 123)]
        assert d.errors.dropped["invalid-timestamp"] == 1


class _DoubleTimestamp:
    def extract(self, record: ConsumedRecord, partition_time: int) -> int:
        return record.timestamp * 2


def test_a_source_can_have_its_own_extractor() -> None:
    t = Topology()
    t.add_source("a", "in-a", key_serde=S, value_serde=S, timestamp_extractor=_DoubleTimestamp())
    t.add_source("b", "in-b", key_serde=S, value_serde=S)
    t.add_sink("sink", "out", "a", "b", key_serde=S, value_serde=S)
    with TopologyTestDriver(t) as d:
        d.pipe_raw("in-a", b"k", b"a", 10)
        d.pipe_raw("in-b", b"k", b"b", 10)
        assert d.create_output_topic("out", S, S).read_records_to_list() == [("k", "a", 20), ("k", "b", 10)]


# -- global topics ---------------------------------------------------------------------------------


def _global_join_topology() -> Topology:
    b = StreamsBuilder(default_key_serde=S, default_value_serde=S)
    names = b.global_table("names", "names-store")
    b.stream("in").left_join(names, lambda k, v: k, lambda v, name: f"{v}:{name}").to("out")
    return b.build()


def test_a_global_record_that_does_not_deserialize_fails_by_default_naming_its_offset() -> None:
    with _driver(_global_join_topology()) as d:
        d.pipe_raw("names", b"a", b"alice")
        with pytest.raises(SerializationException) as e:
            d.pipe_raw("names", b"b", BAD)
    assert (e.value.topic, e.value.partition, e.value.offset) == ("names", 0, 1)
    assert "log-and-continue" in str(e.value)


def test_a_global_record_that_does_not_deserialize_is_skipped_and_dead_lettered() -> None:
    """Kafka Streams' global update task hands it to the deserialization handler: with
    log-and-continue and a dead-letter topic it never reaches the store (where every reader of
    the key would fail later) and lands in the dead-letter topic."""
    props = {"default.deserialization.exception.handler": "log-and-continue",
             "errors.dead.letter.queue.topic.name": "dlq"}
    with _driver(_global_join_topology(), **props) as d:
        d.pipe_raw("names", b"a", b"alice")
        d.pipe_raw("names", b"b", BAD, 7)
        d.pipe_raw("in", b"a", b"x")
        d.pipe_raw("in", b"b", b"y")
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == [("a", "x:alice"), ("b", "y:None")]
        assert dict(d.get_key_value_store("names-store").all()) == {"a": "alice"}
        assert d.errors.dropped["deserialization-error"] == 1
        rec = d.create_output_topic("dlq", B, B).read_record()
    assert (rec.key, rec.value, rec.timestamp) == (b"b", BAD, 7)
    assert (_headers(rec)[HEADER_TOPIC], _headers(rec)[HEADER_OFFSET]) == (b"names", b"1")


def _cached_table_topology() -> StreamsBuilder:
    """A cached table whose downstream map_values fails on one value."""
    b = StreamsBuilder(default_key_serde=S, default_value_serde=S)

    def upper(v: str) -> str:
        if v == "boom":
            raise ValueError("cannot map boom")
        return v.upper()
    b.table("t", Materialized(name="t", caching_enabled=True)).map_values(upper).to_stream().to("out")
    return b


def _pipe_then_commit(d: TopologyTestDriver, records: list[tuple[bytes, bytes]]) -> None:
    """Several records processed before one commit, so one cache flush forwards them all."""
    from instance.testing.driver import _Msg
    task = d.tasks[0]
    task.add_records("t", [_Msg("t", 0, i, i, k, v) for i, (k, v) in enumerate(records)])
    task.process()
    d._commit()


def test_a_failure_downstream_of_a_cache_flush_goes_to_the_processing_handler() -> None:
    """KIP-1033 covers the changes a cache flush forwards at commit: with log-and-continue the
    failing change is dropped and the rest of the flush still reaches downstream."""
    with _driver(_cached_table_topology().build(), **{"processing.exception.handler": "log-and-continue"}) as d:
        _pipe_then_commit(d, [(b"a", b"x"), (b"b", b"boom"), (b"c", b"z")])
        assert d.create_output_topic("out", S, S).read_key_values_to_list() == [("a", "X"), ("c", "Z")]
        assert d.errors.dropped["processing-error"] == 1


def test_a_failure_downstream_of_a_cache_flush_fails_by_default_naming_no_input_record() -> None:
    with _driver(_cached_table_topology().build()) as d, pytest.raises(ProcessingException) as e:
        _pipe_then_commit(d, [(b"a", b"x"), (b"b", b"boom")])
    assert "no input record" in str(e.value) and "KTABLE-MAPVALUES" in str(e.value)
