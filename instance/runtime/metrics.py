"""Kafka Streams' built-in metrics (names, groups, tags and meanings of its ``Monitoring`` docs),
recorded cheaply enough for the hot path.

Nothing here is paid per record: a task records once per batch it processes (records, elapsed
time, the lateness its source accumulated in two plain attributes), once per commit and once
per punctuation. So ``process-latency-avg`` is exact (time over records) while
``process-latency-max`` is the largest per-record mean of one batch (Kafka Streams' thread-level
figure is measured that way too; its task-level one times each record). Store operations are
timed per call only at ``metrics.recording.level=DEBUG`` (as in Kafka Streams, where store metrics
are DEBUG): the wrappers cost a Python call per operation, which INFO does not pay.

A :class:`Sensor` keeps cumulative totals and ``metrics.num.samples`` windows of
``metrics.sample.window.ms`` (Kafka's defaults: 2 x 30 s) for the avg / max / rate figures, as
Kafka's sampled stats do (an avg or max with no sample in the windows is NaN). Each sensor has one
writer (its stream thread); readers (the metrics endpoint) only read.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

INFO, DEBUG, TRACE = 0, 1, 2
LEVELS = {"INFO": INFO, "DEBUG": DEBUG, "TRACE": TRACE}

THREAD_GROUP = "stream-thread-metrics"
TASK_GROUP = "stream-task-metrics"
STATE_GROUP = "stream-state-metrics"

Clock = Callable[[], int]


def recording_level(name: str) -> int:
    """``metrics.recording.level`` by name (INFO, DEBUG, TRACE)."""
    level = LEVELS.get(name.strip().upper())
    if level is None:
        raise ValueError(f"metrics.recording.level must be INFO, DEBUG or TRACE, got {name!r}")
    return level


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass(frozen=True)
class MetricName:
    """Kafka's ``MetricName``: name, group and tags identify a metric; the description rides along."""

    name: str
    group: str
    tags: tuple[tuple[str, str], ...] = ()
    description: str = field(default="", compare=False)

    def tag(self, key: str) -> str | None:
        return dict(self.tags).get(key)


@dataclass(frozen=True)
class SampleConfig:
    """``metrics.sample.window.ms`` and ``metrics.num.samples``."""

    window_ms: int = 30_000
    samples: int = 2


class Sensor:
    """Cumulative count and sum, plus windowed samples of (count, sum, max)."""

    __slots__ = ("count", "sum", "_window", "_n", "_starts", "_counts", "_sums", "_maxes", "_i")

    def __init__(self, config: SampleConfig, now_ms: int) -> None:
        self.count = 0
        self.sum = 0.0
        self._window = config.window_ms
        self._n = max(2, config.samples)
        self._starts = [now_ms] + [now_ms - config.window_ms * self._n] * (self._n - 1)
        self._counts = [0] * self._n
        self._sums = [0.0] * self._n
        self._maxes = [-math.inf] * self._n
        self._i = 0

    def record(self, value: float, now_ms: int, count: int = 1, maximum: float | None = None) -> None:
        """``count`` events whose values sum to ``value`` (the largest being ``maximum``)."""
        self.count += count
        self.sum += value
        i = self._i
        if now_ms - self._starts[i] >= self._window:
            i = self._i = (i + 1) % self._n
            self._starts[i], self._counts[i], self._sums[i], self._maxes[i] = now_ms, 0, 0.0, -math.inf
        self._counts[i] += count
        self._sums[i] += value
        top = value if maximum is None else maximum
        if top > self._maxes[i]:
            self._maxes[i] = top

    def _live(self, now_ms: int) -> Iterator[int]:
        """Indices of the samples still inside the windows."""
        horizon = now_ms - self._window * self._n
        return (i for i in range(self._n) if self._starts[i] > horizon)

    def avg(self, now_ms: int) -> float:
        live = list(self._live(now_ms))
        n = sum(self._counts[i] for i in live)
        return sum(self._sums[i] for i in live) / n if n else math.nan

    def max(self, now_ms: int) -> float:
        tops = [self._maxes[i] for i in self._live(now_ms) if self._counts[i]]
        return max(tops) if tops else math.nan

    def _elapsed_s(self, now_ms: int) -> float:
        """Kafka's ``Rate.windowSize``: since the oldest live sample, at least samples-1 windows."""
        live = list(self._live(now_ms))
        oldest = min((self._starts[i] for i in live), default=now_ms)
        return max(now_ms - oldest, (self._n - 1) * self._window) / 1000.0

    def rate(self, now_ms: int) -> float:
        """Events per second."""
        return sum(self._counts[i] for i in self._live(now_ms)) / self._elapsed_s(now_ms)

    def value_rate(self, now_ms: int) -> float:
        """Sum of the values per second."""
        return sum(self._sums[i] for i in self._live(now_ms)) / self._elapsed_s(now_ms)


Metrics = dict[MetricName, float]


class _Group:
    """Sensors sharing tags and a clock; renders them as metric values."""

    def __init__(self, group: str, tags: tuple[tuple[str, str], ...], config: SampleConfig, clock: Clock) -> None:
        self.group = group
        self.tags = tags
        self.config = config
        self.clock = clock

    def sensor(self) -> Sensor:
        return Sensor(self.config, self.clock())

    def name(self, name: str, description: str) -> MetricName:
        return MetricName(name, self.group, self.tags, description)

    def invocations(self, out: Metrics, s: Sensor, what: str, description: str, now: int) -> None:
        """``<what>-rate`` and ``<what>-total`` of a sensor counting events."""
        out[self.name(f"{what}-rate", f"The average number of {description} per second")] = s.rate(now)
        out[self.name(f"{what}-total", f"The total number of {description}")] = float(s.count)

    def latency(self, out: Metrics, s: Sensor, what: str, unit: str, now: int) -> None:
        """``<what>-latency-avg`` and ``-max``."""
        out[self.name(f"{what}-latency-avg", f"The average latency in {unit} of {what}")] = s.avg(now)
        out[self.name(f"{what}-latency-max", f"The maximum latency in {unit} of {what}")] = s.max(now)


class ThreadMetrics(_Group):
    """``stream-thread-metrics`` of one stream thread, and the task metrics it holds."""

    def __init__(self, thread_id: str, level: int = INFO, config: SampleConfig | None = None,
                 clock: Clock = monotonic_ms) -> None:
        super().__init__(THREAD_GROUP, (("thread-id", thread_id),), config or SampleConfig(), clock)
        self.thread_id = thread_id
        self.level = level
        #: records per batch; value: elapsed ms (per-record mean of a batch as the max)
        self.process = self.sensor()
        self.commit = self.sensor()  # value: ms
        self.punctuate = self.sensor()  # value: ms
        self.task_created = self.sensor()
        self.task_closed = self.sensor()
        #: active tasks closed without a commit (iqmesh's: Kafka Streams only logs them)
        self.dirty_close = self.sensor()
        self._tasks: dict[str, TaskMetrics] = {}
        self._lock = threading.Lock()  # taken when a task comes or goes, never while processing

    def task_metrics(self, task_id: str, standby: bool = False) -> TaskMetrics:
        """The metrics of a task this thread now holds (replaces an earlier one of the same id)."""
        m = TaskMetrics(self, task_id, standby)
        with self._lock:
            self._tasks[("standby:" if standby else "") + task_id] = m
        if not standby:
            self.task_created.record(1.0, self.clock())
        return m

    def removed(self, m: TaskMetrics) -> None:
        """A task closed: its metrics go away with it, as Kafka Streams' task sensors do."""
        key = ("standby:" if m.standby else "") + m.task_id
        with self._lock:
            if self._tasks.get(key) is m:
                del self._tasks[key]
        if not m.standby:
            self.task_closed.record(1.0, self.clock())

    def metrics(self) -> Metrics:
        now = self.clock()
        out: Metrics = {}
        self.invocations(out, self.process, "process", "records processed", now)
        self.latency(out, self.process, "process", "ms", now)
        self.invocations(out, self.commit, "commit", "commits", now)
        self.latency(out, self.commit, "commit", "ms", now)
        self.invocations(out, self.punctuate, "punctuate", "punctuations", now)
        self.latency(out, self.punctuate, "punctuate", "ms", now)
        self.invocations(out, self.task_created, "task-created", "tasks created", now)
        self.invocations(out, self.task_closed, "task-closed", "tasks closed", now)
        self.invocations(out, self.dirty_close, "dirty-close", "active tasks closed without a commit", now)
        with self._lock:
            tasks = list(self._tasks.values())
        for t in tasks:
            out.update(t.metrics())
        return out


class TaskMetrics(_Group):
    """``stream-task-metrics`` of one active or standby task, and its stores' metrics."""

    def __init__(self, thread: ThreadMetrics | None, task_id: str, standby: bool = False,
                 clock: Clock | None = None, level: int | None = None) -> None:
        """``thread`` None: a task of its own (the TopologyTestDriver's), with ``clock`` and
        ``level`` (default INFO, as Kafka Streams' driver: no store timing)."""
        tags = (("thread-id", thread.thread_id if thread else "main"), ("task-id", task_id))
        super().__init__(TASK_GROUP, tags, thread.config if thread else SampleConfig(),
                         clock or (thread.clock if thread else monotonic_ms))
        self.thread = thread
        self.task_id = task_id
        self.standby = standby
        self.level = level if level is not None else (thread.level if thread else INFO)
        self.process = self.sensor()   # count: records; value: ns
        self.lateness = self.sensor()  # count: records; value: ms behind stream time
        self.dropped = self.sensor()
        self.punctuate = self.sensor()  # value: ns
        self.commit = self.sensor()
        self.restore = self.sensor()
        self.update = self.sensor()
        #: changelog partition -> records still to restore
        self.restore_remaining: dict[tuple[str, int], int] = {}
        self.stores: list[StoreMetrics] = []
        self._dropped_seen = 0
        self._closed = False

    # -- recording (the owning thread) ---------------------------------------------------------
    def processed(self, n: int, elapsed_ns: int, lateness_sum: int, lateness_max: int, dropped: int) -> None:
        """One batch: ``n`` records in ``elapsed_ns``; what the source saw of lateness; the
        task's dropped records so far."""
        now = self.clock()
        self.process.record(float(elapsed_ns), now, n, elapsed_ns / n)
        self.lateness.record(float(lateness_sum), now, n, float(lateness_max))
        if dropped > self._dropped_seen:
            self.dropped.record(float(dropped - self._dropped_seen), now, dropped - self._dropped_seen)
            self._dropped_seen = dropped
        thread = self.thread
        if thread is not None:
            ms = elapsed_ns / 1e6
            thread.process.record(ms, now, n, ms / n)

    def punctuated(self, elapsed_ns: int) -> None:
        now = self.clock()
        self.punctuate.record(float(elapsed_ns), now)
        if self.thread is not None:
            self.thread.punctuate.record(elapsed_ns / 1e6, now)

    def committed(self) -> None:
        self.commit.record(1.0, self.clock())

    def restore_started(self, tp: tuple[str, int], records: int) -> None:
        self.restore_remaining[tp] = records

    def restored(self, tp: tuple[str, int], n: int, remaining: int) -> None:
        self.restore.record(float(n), self.clock(), n)
        self.restore_remaining[tp] = max(0, remaining)

    def updated(self, n: int) -> None:
        """A standby applied ``n`` changelog records."""
        if n:
            self.update.record(float(n), self.clock(), n)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self.thread is not None:
                self.thread.removed(self)

    # -- stores --------------------------------------------------------------------------------
    def instrument_stores(self, stores: dict[str, Any], in_memory: bool) -> None:
        """At DEBUG, time the key-value stores' operations (before processors take their methods)."""
        if self.level < DEBUG:
            return
        from instance.state.metered import MeteredKeyValueStore
        for name, store in stores.items():
            if isinstance(store, MeteredKeyValueStore):
                sm = StoreMetrics(self, name, "in-memory" if in_memory else "rocksdb")
                sm.instrument(store)
                self.stores.append(sm)

    # -- reading -------------------------------------------------------------------------------
    def metrics(self) -> Metrics:
        now = self.clock()
        out: Metrics = {}
        if self.standby:
            self.invocations(out, self.update, "update", "records updated by a standby task", now)
            return out
        self.invocations(out, self.process, "process", "records processed", now)
        self.latency(out, self.process, "process", "ns", now)
        out[self.name("record-lateness-avg", "The observed average lateness of records in ms (stream time - "
                      "record timestamp)")] = self.lateness.avg(now)
        out[self.name("record-lateness-max", "The observed maximum lateness of records in ms (stream time - "
                      "record timestamp)")] = self.lateness.max(now)
        self.invocations(out, self.dropped, "dropped-records", "dropped records", now)
        out[self.name("active-process-ratio", "The fraction of time the thread spent on processing this "
                      "task")] = self.process.value_rate(now) / 1e9
        self.invocations(out, self.punctuate, "punctuate", "punctuations", now)
        self.latency(out, self.punctuate, "punctuate", "ns", now)
        self.invocations(out, self.commit, "commit", "commits", now)
        self.invocations(out, self.restore, "restore", "records restored", now)
        out[self.name("restore-remaining-records-total", "The number of records still to restore")] = \
            float(sum(self.restore_remaining.values()))
        for s in list(self.stores):
            out.update(s.metrics(now))
        return out


#: metered attribute -> Kafka Streams' operation name
STORE_OPERATIONS = (("put", "put"), ("get", "get"), ("delete", "delete"), ("put_if_absent", "put-if-absent"),
                    ("flush", "flush"))


class StoreMetrics(_Group):
    """``stream-state-metrics`` of one store: per operation rate and latency (ns)."""

    def __init__(self, task: TaskMetrics, store: str, store_type: str) -> None:
        tags = (*task.tags, ("store-type", store_type), (f"{store_type}-state-id", store))
        super().__init__(STATE_GROUP, tags, task.config, task.clock)
        self.sensors = {op: self.sensor() for _, op in STORE_OPERATIONS}

    def instrument(self, store: Any) -> None:
        """Replace the store's operation attributes with timed ones."""
        clock = self.clock
        perf = time.perf_counter_ns
        for attr, op in STORE_OPERATIONS:
            inner = getattr(store, attr)
            sensor = self.sensors[op]

            def timed(*args: Any, _inner: Callable[..., Any] = inner, _s: Sensor = sensor, **kw: Any) -> Any:
                t = perf()
                try:
                    return _inner(*args, **kw)
                finally:
                    _s.record(float(perf() - t), clock())
            setattr(store, attr, timed)

    def metrics(self, now: int) -> Metrics:
        out: Metrics = {}
        for op, s in self.sensors.items():
            out[self.name(f"{op}-rate", f"The average number of {op} calls per second")] = s.rate(now)
            self.latency(out, s, op, "ns", now)
        return out
