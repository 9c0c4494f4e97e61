"""Kafka Streams' task and store metrics through the TopologyTestDriver, after known input."""

from __future__ import annotations

import inspect
import math

import pytest

from instance.runtime.metrics import (
    DEBUG,
    INFO,
    STATE_GROUP,
    TASK_GROUP,
    THREAD_GROUP,
    MetricName,
    SampleConfig,
    Sensor,
    ThreadMetrics,
)
from instance.runtime.task import StreamTask
from instance.serde import LongSerde, StringSerde
from instance.testing import TopologyTestDriver
from instance.testing.driver import _Msg
from instance.topology import Materialized, StreamsBuilder
from instance.topology.handlers import ErrorHandling
from instance.topology.processor import ContextualProcessor, ProcessorContext, Record
from instance.topology.punctuation import PunctuationType
from instance.topology.windows import TimeWindows
from kernel.task_id import TaskId

S, L = StringSerde(), LongSerde()


def _value(metrics: dict[MetricName, float], name: str, group: str = TASK_GROUP, **tags: str) -> float:
    found = [v for m, v in metrics.items()
             if m.name == name and m.group == group and all(m.tag(k.replace("_", "-")) == t for k, t in tags.items())]
    assert len(found) == 1, f"{name} {tags}: {len(found)} metrics"
    return found[0]


def _windowed_count() -> StreamsBuilder:
    b = StreamsBuilder(S, S)
    (b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_and_grace(10_000, 1_000))
     .count(Materialized.as_("counts")))
    return b


def test_late_records_are_dropped_counted_and_their_lateness_measured() -> None:
    """Stream time 50 000; records at 45 000 (on time: within grace of window [40 000, 50 000)? no,
    that window closed at 51 000 > 50 000, so it is accepted), then 3 records whose windows closed:
    lateness 50 000 - ts each; the largest is 50 000 - 20 000 = 30 000."""
    with TopologyTestDriver(_windowed_count().build()) as d:
        t = d.create_input_topic("in", S, S)
        t.pipe_input("a", "x", 50_000)   # lateness 0 (advances stream time)
        t.pipe_input("a", "x", 45_000)   # 5 000 late, kept: window [40 000, 50 000) closes at 51 000
        t.pipe_input("a", "x", 20_000)   # 30 000 late, dropped
        t.pipe_input("b", "x", 30_000)   # 20 000 late, dropped
        t.pipe_input("c", "x", 38_000)   # 12 000 late, dropped
        t.pipe_input("a", "x", 50_000)   # lateness 0
        m = d.metrics()
        tags = {"task_id": "0_0"}
        assert _value(m, "dropped-records-total", **tags) == 3 == d.dropped_records_total()
        assert _value(m, "record-lateness-max", **tags) == 30_000
        assert _value(m, "record-lateness-avg", **tags) == pytest.approx((5_000 + 30_000 + 20_000 + 12_000) / 6)
        assert _value(m, "process-total", **tags) == 6
        assert _value(m, "process-rate", **tags) == pytest.approx(6 / 30.0)  # no wall time passed: 1 window
        assert _value(m, "dropped-records-rate", **tags) == pytest.approx(3 / 30.0)
        assert _value(m, "process-latency-max", **tags) > 0
        assert _value(m, "commit-total", **tags) == 6  # the driver commits after each record


def test_lateness_is_zero_for_records_in_order_and_nan_before_any() -> None:
    with TopologyTestDriver(_windowed_count().build()) as d:
        assert math.isnan(_value(d.metrics(), "record-lateness-max", task_id="0_0"))
        t = d.create_input_topic("in", S, S)
        for ts in (1_000, 2_000, 2_000, 3_000):
            t.pipe_input("a", "x", ts)
        m = d.metrics()
        assert _value(m, "record-lateness-max", task_id="0_0") == 0
        assert _value(m, "dropped-records-total", task_id="0_0") == 0


def _debug_task(b: StreamsBuilder, thread: ThreadMetrics) -> StreamTask:
    """One task of the topology's first sub-topology with in-memory stores, as a stream thread at
    ``metrics.recording.level=DEBUG`` builds it (no broker: nothing is sent anywhere)."""
    topology = b.build()
    st = topology.subtopologies()[0]
    errors = ErrorHandling({})
    return StreamTask(TaskId(st.id, 0), topology, st, "app", lambda t: t, lambda *a: None,
                      lambda topic, p, task: (lambda batch: None), None, 1000, True, errors,
                      metrics=thread.task_metrics("0_0"))


def test_store_operations_are_timed_per_store_at_debug() -> None:
    """A plain count: one get and one put per record (the typed layer, caching on), and a flush
    per commit, in ``stream-state-metrics`` with Kafka Streams' tags; the thread's figures too."""
    b = StreamsBuilder(S, S)
    b.stream("in").group_by_key().count(Materialized.as_("counts"))
    now = [0]
    thread = ThreadMetrics("t-1", DEBUG, clock=lambda: now[0])
    task = _debug_task(b, thread)
    try:
        task.add_records("in", [_Msg("in", 0, i, 1000, k.encode(), b"x") for i, k in enumerate("abcab")])
        assert task.process() == 5
        task.flush()
        m = thread.metrics()
        store = {"thread_id": "t-1", "task_id": "0_0", "store_type": "in-memory", "in_memory_state_id": "counts"}
        assert _value(m, "put-rate", STATE_GROUP, **store) == pytest.approx(5 / 30.0)
        assert _value(m, "get-rate", STATE_GROUP, **store) == pytest.approx(5 / 30.0)
        assert _value(m, "flush-rate", STATE_GROUP, **store) == pytest.approx(1 / 30.0)
        assert 0 < _value(m, "put-latency-avg", STATE_GROUP, **store) <= _value(m, "put-latency-max", STATE_GROUP,
                                                                              **store)
        assert _value(m, "process-total", THREAD_GROUP, thread_id="t-1") == 5
        assert _value(m, "task-created-total", THREAD_GROUP, thread_id="t-1") == 1
    finally:
        task.close()
    m = thread.metrics()
    assert not [k for k in m if k.group in (TASK_GROUP, STATE_GROUP)]  # gone with the task, as in Kafka Streams
    assert _value(m, "task-closed-total", THREAD_GROUP, thread_id="t-1") == 1


def test_stores_are_not_timed_at_info() -> None:
    b = StreamsBuilder(S, S)
    b.stream("in").group_by_key().count(Materialized.as_("counts"))
    thread = ThreadMetrics("t-1", INFO)
    task = _debug_task(b, thread)
    try:
        assert not [k for k in thread.metrics() if k.group == STATE_GROUP]
        assert inspect.ismethod(task.stores["counts"].put)  # the typed layer's own bound method: no wrapper
    finally:
        task.close()


def test_punctuations_are_counted_and_timed() -> None:
    class Ticker(ContextualProcessor):
        def init(self, context: ProcessorContext) -> None:
            super().init(context)
            context.schedule(1_000, PunctuationType.WALL_CLOCK_TIME, lambda now: None)

        def process(self, record: Record) -> None:
            pass

    b = StreamsBuilder(S, S)
    b.stream("in").process(Ticker)
    with TopologyTestDriver(b.build()) as d:
        d.advance_wall_clock_time(1_000)
        d.advance_wall_clock_time(1_000)
        m = d.metrics()
        assert _value(m, "punctuate-total", task_id="0_0") == 2
        assert _value(m, "punctuate-latency-max", task_id="0_0") > 0


def test_windows_age_out_rates_and_maxima() -> None:
    """Kafka's sampled stats: two windows of 30 s; a max older than both is gone (NaN)."""
    s = Sensor(SampleConfig(30_000, 2), now_ms=0)
    s.record(7.0, 0)
    s.record(3.0, 10_000)
    assert s.max(10_000) == 7.0 and s.avg(10_000) == 5.0
    assert s.rate(10_000) == pytest.approx(2 / 30.0)
    s.record(1.0, 40_000)  # second window
    assert s.max(40_000) == 7.0
    assert s.rate(40_000) == pytest.approx(3 / 40.0)
    assert s.max(65_000) == 1.0  # the first window (from 0) left the 60 s horizon
    assert math.isnan(s.max(200_000)) and s.count == 3
