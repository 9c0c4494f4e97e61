"""StreamTask: one sub-topology on one partition, with its own processors and stores.

Records arrive in whole batches per input partition; the task keeps them in a
:class:`PartitionGroup` and pushes each one depth-first through its processors, picking across
input partitions the record with the lowest timestamp.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import TopicPartition

from instance.errors import ProductionException, StreamsException
from instance.runtime.metrics import TaskMetrics
from instance.runtime.punctuation import PunctuationQueue, PunctuationSchedule
from instance.runtime.state_manager import ProcessorStateManager, TopicPart
from instance.runtime.task_state import TaskLifecycle
from instance.state import origins, source_offsets
from instance.state.kv_store import ChangelogSend
from instance.topology.handlers import ErrorHandling, ProducedRecord
from instance.topology.processor import ProcessorContext, Record, RecordContext, node_callable
from instance.topology.punctuation import PunctuationType, Punctuator
from instance.topology.timestamps import (
    ConsumedRecord,
    FailOnInvalidTimestamp,
    RecordTimestampExtractor,
    TimestampExtractor,
)
from instance.topology.topology import ProcessorNodeDef, SinkNode, SourceNode, SubTopology, Topology
from kernel.task_id import TaskId

log = logging.getLogger(__name__)

#: ``send(topic, key, value, timestamp, partition, headers)``; partition -1: the partitioner's
Sender = Callable[[str, bytes | None, bytes | None, int, int, Any], None]


def system_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class PartitionGroup:
    """Buffered records of a task's input partitions, released in timestamp order."""

    def __init__(self, topics: list[str]) -> None:
        self.queues: dict[str, deque[Any]] = {t: deque() for t in topics}

    def add(self, topic: str, msgs: list[Any]) -> None:
        self.queues[topic].extend(msgs)

    def clear(self) -> None:
        for q in self.queues.values():
            q.clear()


class StreamTask:
    """An active task. ``process()`` drains the buffered records; ``flush()`` is the commit step."""

    def __init__(self, task_id: TaskId, topology: Topology, subtopology: SubTopology, application_id: str,
                 resolve_topic: Callable[[str], str], send: Sender,
                 changelog_sender: Callable[[str, int, StreamTask], ChangelogSend],
                 state: ProcessorStateManager | None, cache_max_entries: int, in_memory: bool,
                 errors: ErrorHandling, global_stores: Mapping[str, Any] | None = None,
                 clock: Callable[[], int] = system_clock_ms, extractor: TimestampExtractor | None = None,
                 metrics: TaskMetrics | None = None) -> None:
        """``state``: the task's state manager (None: no task directory, as in the
        TopologyTestDriver); its stores are built here, in memory if ``in_memory``. ``errors``: the
        exception handlers; ``global_stores``: the instance's global stores (read-only here), by
        name; ``clock``: wall-clock time in ms (the driver's is mocked); ``extractor``:
        ``default.timestamp.extractor``; ``metrics``: the task's (runtime/metrics.py; default: one of
        its own on ``clock`` at INFO, the TopologyTestDriver's)."""
        self.id = task_id
        #: CREATED until the TaskManager starts its restore (runtime/task_state.py)
        self.lifecycle = TaskLifecycle(task_id)
        self.partition = task_id.partition
        self.subtopology = subtopology
        self.record = RecordContext()
        self.record.partition = task_id.partition
        #: the highest timestamp processed (Kafka Streams' stream time; -1: none yet)
        self.stream_time = -1
        self.clock = clock
        self._stream_punctuation = PunctuationQueue()
        self._wall_punctuation = PunctuationQueue()
        #: a processor called ``context.commit()``
        self.commit_requested = False
        self.errors = errors
        self.metrics = metrics if metrics is not None else TaskMetrics(None, str(task_id), clock=clock)
        #: lateness (stream time - timestamp) of the records processed since the last batch
        self.lateness_sum = 0
        self.lateness_max = 0
        self._extractor: TimestampExtractor = extractor or FailOnInvalidTimestamp()
        #: id(processor) -> node name: which node raised (found from the traceback, on error only)
        self._node_of: dict[int, str] = {}
        self.state = state if state is not None else ProcessorStateManager(task_id, None, application_id)
        self.stores = self.state.register_stores(
            [topology.stores[name] for name in subtopology.stores], in_memory=in_memory,
            cache_max_entries=cache_max_entries,
            changelog_for=lambda spec: changelog_sender(spec.changelog_topic(application_id), self.partition, self))
        self.metrics.instrument_stores(self.stores, in_memory)
        self._processors: list[Any] = []
        self._global_stores = global_stores or {}
        self.sources: dict[str, Callable[[Any], None]] = {}
        #: under at-least-once, the origin of what the task writes to internal topics, and the
        #: high-water of what it read from them (instance/state/origins.py)
        self.origin = None if self.state.eos else origins.OriginStamp(task_id.partition, origins.topic_ids(
            resolve_topic(t) for n in topology.nodes.values() if isinstance(n, SourceNode) for t in n.topics))
        #: records from internal topics skipped as applied already (their origin at or below the high-water)
        self.duplicates_skipped = 0
        try:
            self._build(topology, subtopology, application_id, resolve_topic, send)
        except BaseException:
            self.metrics.close()
            self.state.close(checkpoint=False)
            raise
        self.group = PartitionGroup(list(self.sources))
        #: ``caught_up(topic)``: the task's partition of ``topic`` has nothing on the broker beyond
        #: what was fetched (lag known and zero). None: never wait for an empty input (the driver,
        #: ``max.task.idle.ms = -1``)
        self.caught_up: Callable[[str], bool] | None = None
        self.max_idle_ms = 0
        self._empty_since: dict[str, int] = {}
        self.committable: dict[str, int] = {}
        #: offset of the last record processed per source topic (for changelog source marks)
        self.positions: dict[str, int] = {}
        #: input end offsets at assignment, per source topic, not yet processed again (see
        #: TaskManager: answers are flagged stale until then)
        self.catch_up_to: dict[str, int] = {}

    @property
    def changelog_offsets(self) -> dict[TopicPart, int]:
        """The changelog offset each store reflects (the state manager's)."""
        return self.state.changelog_offsets

    # -- wiring ------------------------------------------------------------------------------
    def _build(self, topology: Topology, st: SubTopology, app_id: str, resolve: Callable[[str], str],
               send: Sender) -> None:
        """Instantiate the processors children-first, so each node gets its children's callables."""
        callables: dict[str, Callable[[Any, Any], None]] = {}
        rc = self.record
        internal = topology.internal_topics
        pending = [n for n in st.nodes]
        for node in reversed(pending):  # seq order is a topological order; reverse = children first
            if isinstance(node, SinkNode):
                callables[node.name] = self._make_sink(resolve(node.topic), node, send, node.topic in internal)
            elif isinstance(node, ProcessorNodeDef):
                proc = node.supplier()
                children = [callables[c] for c in node.children]
                stores = {s: self.stores[s] if s in self.stores else self._global_store(s) for s in node.stores}
                ctx = ProcessorContext(str(self.id), node.name, rc, children, stores, app_id, self,
                                       child_names=node.children)
                proc.init(ctx)
                self._processors.append(proc)
                self._node_of[id(proc)] = node.name
                callables[node.name] = node_callable(proc, rc)
            elif isinstance(node, SourceNode):
                children = [callables[c] for c in node.children]
                for topic in node.topics:
                    self.sources[resolve(topic)] = self._make_source(resolve(topic), node, children, topic in internal)

    def _global_store(self, name: str) -> Any:
        store = self._global_stores.get(name)
        if store is None:
            raise StreamsException(f"task {self.id}: global store {name!r} is not open on this instance")
        return store

    def _make_source(self, topic: str, node: SourceNode, children: list[Callable[[Any, Any], None]],
                     internal: bool) -> Callable[[Any], None]:
        """The source of ``topic``; an ``internal`` one takes its values' origins off and, under
        at-least-once, skips a record its origin's high-water covers (instance/state/origins.py)."""
        kd, vd = node.key_serde.deserialize, node.value_serde.deserialize
        rc = self.record
        task = self
        errors = self.errors
        task_id = str(self.id)
        extractor = node.timestamp_extractor or self._extractor
        # the built-in record-timestamp extractors are inlined: ``extract`` only for a negative one
        inline_ts = isinstance(extractor, RecordTimestampExtractor)
        fwd: Callable[[Any, Any], None]
        if len(children) == 1:
            fwd = children[0]
        else:
            def fwd(k: Any, v: Any) -> None:
                for c in children:
                    c(k, v)

        def extract(msg: Any, k: Any, v: Any, ts: int) -> int:
            record = ConsumedRecord(topic, msg.partition(), msg.offset(), k, v, ts, tuple(msg.headers() or ()))
            return extractor.extract(record, task.stream_time)

        dedup = internal and self.origin is not None
        marks = self.state.origins.topic(topic) if dedup else {}
        seen = marks.get
        trailer, partition_end = origins.TRAILER_BYTES, origins.TRAILER_BYTES - origins.PARTITION_BYTES

        def source(msg: Any) -> None:
            rc.offset = msg.offset()
            rc.msg = msg
            rc.headers = None
            rc.timestamp = ts = msg.timestamp()[1]
            raw = msg.value()
            if internal and raw:  # origins.unseal, inlined
                flag = raw[-1]
                if flag < 2:
                    if dedup:
                        origin = raw[-trailer:-1]
                        part = raw[-trailer:-partition_end]
                        last = seen(part)
                        if last is not None and origin <= last:
                            task._skipped(topic, ts)
                            return
                        marks[part] = origin
                    raw = raw[:-trailer] if flag == 0 else None
                else:
                    raw = raw[:-1] if flag == 2 else None
            try:
                k = kd(msg.key())
                v = vd(raw)
            except Exception as e:
                errors.deserialization_error(task_id, rc, e)
                return
            if ts < 0 or not inline_ts:
                rc.timestamp = ts = extract(msg, k, v, ts)
                if ts < 0:  # as Kafka Streams: a negative extracted timestamp drops the record
                    errors.invalid_timestamp(task_id)
                    return
            if ts > task.stream_time:  # stream time counts the record before it is processed
                task.stream_time = ts
            elif ts < task.stream_time:  # record-lateness (0 for the others)
                late = task.stream_time - ts
                task.lateness_sum += late
                if late > task.lateness_max:
                    task.lateness_max = late
            try:
                fwd(k, v)
            except StreamsException:
                raise
            except Exception as e:
                task.processing_error(e, Record(k, v, ts, rc.current_headers()))
        return source

    def _skipped(self, topic: str, ts: int) -> None:
        """A record from an internal topic at or below its origin's high-water (instance/state/
        origins.py): applied already; it only moves stream time, as it did the first time."""
        if not self.duplicates_skipped:
            log.info("task %s: skipping records of %s its state holds already (written again upstream after a "
                     "restart from the last commit)", self.id, topic)
        self.duplicates_skipped += 1
        if ts > self.stream_time:
            self.stream_time = ts

    def processing_error(self, exc: Exception, record: Record | None, node: str | None = None) -> None:
        """A processor (or punctuator of ``node``) raised: the processing handler decides."""
        if node is None:
            tb = exc.__traceback__
            while tb is not None:  # the innermost processor frame is the failing node
                name = self._node_of.get(id(tb.tb_frame.f_locals.get("self")))
                if name is not None:
                    node = name
                tb = tb.tb_next
        self.errors.processing_error(self.errors.context(str(self.id), self.record, node), record, exc)

    def _make_sink(self, topic: str, node: SinkNode, send: Sender, internal: bool) -> Callable[[Any, Any], None]:
        """Writes with the current timestamp and headers (the input record's, or those a Record
        processor forwarded), as Kafka Streams' sink does; to an ``internal`` topic with the
        record's origin (under at-least-once) at the end of the value (instance/state/origins.py).
        A record the producer refuses, or that does not serialize, goes to the production exception
        handler."""
        ks, vs = node.key_serde.serialize, node.value_serde.serialize
        rc = self.record
        task_id = str(self.id)
        errors = self.errors
        name = node.name
        stamp = self.origin.value if self.origin is not None else None
        with_origin, with_origin_null = origins.WITH_ORIGIN, origins.WITH_ORIGIN_NULL
        no_origin, no_origin_null = origins.NO_ORIGIN, origins.NO_ORIGIN_NULL

        def failed(exc: Exception, kb: bytes | None, vb: bytes | None) -> None:
            ctx = errors.context(task_id, rc, name)
            errors.production_error(ctx, ProducedRecord(topic, -1, kb, vb, rc.timestamp), exc)

        def sink(key: Any, value: Any) -> None:
            forwarded = rc.headers
            if forwarded is None:
                msg = rc.msg
                headers = msg.headers() if msg is not None else None
            else:
                headers = list(forwarded)
            try:
                kb = None if key is None else ks(key)
                vb = None if value is None else vs(value)
            except Exception as e:
                failed(e, None, None)
                return
            if internal:  # origins.seal, inlined
                origin = stamp(rc.topic, rc.offset) if stamp is not None else None
                if origin is None:
                    vb = no_origin_null if vb is None else vb + no_origin
                else:
                    vb = origin + with_origin_null if vb is None else vb + origin + with_origin
            try:
                send(topic, kb, vb, rc.timestamp, -1, headers or None)
            except ProductionException as e:
                failed(e, kb, vb)
        return sink

    # -- processing --------------------------------------------------------------------------
    def add_records(self, topic: str, msgs: list[Any]) -> None:
        self.group.add(topic, msgs)
        self._empty_since.pop(topic, None)

    def process(self) -> int:
        """Process every buffered record; returns how many. Metrics are recorded per batch."""
        start = time.perf_counter_ns()
        n = self._process()
        if n:
            self.metrics.processed(n, time.perf_counter_ns() - start, self.lateness_sum, self.lateness_max,
                                   self.dropped_records + self.errors.dropped_by_task.get(str(self.id), 0))
            self.lateness_sum = self.lateness_max = 0
        return n

    def _process(self) -> int:
        queues = self.group.queues
        nonempty = [t for t, q in queues.items() if q]
        if not nonempty:
            return 0
        rc = self.record
        n = 0
        passable: dict[str, bool] = {}
        if len(nonempty) < len(queues) and not all(self._passable(t, passable) for t in queues if not queues[t]):
            return 0  # an empty input may still bring earlier records: wait for it (KIP-695)
        if len(nonempty) == 1:
            topic = nonempty[0]
            q = queues[topic]
            source = self.sources[topic]
            rc.topic = topic
            punctuation = self._stream_punctuation
            if punctuation:  # check after every record only when a punctuator is scheduled
                for msg in q:
                    source(msg)
                    if self.stream_time >= punctuation.due:
                        self.punctuate_stream_time()
                        rc.topic = topic
            else:
                for msg in q:
                    source(msg)
            n = len(q)
            last = q[-1]
            q.clear()
            self.committable[topic] = last.offset() + 1
            self.positions[topic] = last.offset()
            if self.stream_time >= punctuation.due:  # scheduled while processing the batch
                self.punctuate_stream_time()
            return n
        # several inputs: always take the head with the lowest timestamp
        while True:
            best = None
            best_ts = 0
            for t in queues:
                q = queues[t]
                if q:
                    ts = q[0].timestamp()[1]
                    if best is None or ts < best_ts:
                        best, best_ts = t, ts
                elif not self._passable(t, passable):
                    best = None  # emptied, and its next record may be earlier than the others'
                    break
            if best is None:
                break
            msg = queues[best].popleft()
            rc.topic = best
            self.positions[best] = msg.offset()
            self.sources[best](msg)
            self.committable[best] = msg.offset() + 1
            if self.stream_time >= self._stream_punctuation.due:
                self.punctuate_stream_time()
            n += 1
        return n

    def _passable(self, topic: str, passable: dict[str, bool]) -> bool:
        """Whether records may be processed while the input ``topic`` holds none: Kafka Streams'
        ``PartitionGroup.readyToProcess``. An empty input is passed over only when it is known to be
        caught up, and with ``max.task.idle.ms > 0`` once it stayed empty that long; otherwise a
        stream-table join would join stream records before the table rows fetched with them.
        ``passable`` caches the answers of one ``process()`` call."""
        caught_up = self.caught_up
        if caught_up is None:
            return True
        ok = passable.get(topic)
        if ok is None:
            ok = caught_up(topic)
            if ok and self.max_idle_ms > 0:
                now = self.clock()
                ok = now - self._empty_since.setdefault(topic, now) >= self.max_idle_ms
            passable[topic] = ok
        return ok

    @property
    def dropped_records(self) -> int:
        """What the task's processors dropped (late for a window, null key or value)."""
        return sum(getattr(p, "dropped_records", 0) for p in self._processors)

    @property
    def has_buffered(self) -> bool:
        return any(self.group.queues.values())

    # -- punctuation -------------------------------------------------------------------------
    def schedule(self, node: str, interval_ms: int, ptype: PunctuationType,
                 punctuator: Punctuator) -> PunctuationSchedule:
        """As Kafka Streams: stream-time schedules are aligned to 0, so the first fires as soon as
        the task has a stream time; wall-clock ones fire first one interval from now."""
        if interval_ms < 1:
            raise ValueError(f"punctuation interval must be at least 1 ms, got {interval_ms}")
        if ptype is PunctuationType.STREAM_TIME:
            return self._stream_punctuation.schedule(PunctuationSchedule(node, 0, interval_ms, punctuator))
        return self._wall_punctuation.schedule(
            PunctuationSchedule(node, self.clock() + interval_ms, interval_ms, punctuator))

    def punctuate_stream_time(self) -> bool:
        if self.stream_time < 0:
            return False
        return self._stream_punctuation.punctuate(self.stream_time, self._punctuate)

    def wall_clock_due(self) -> int:
        """When the next wall-clock punctuation is due (ms; punctuation.NEVER if none)."""
        return self._wall_punctuation.due

    def punctuate_wall_clock(self, now: int | None = None) -> bool:
        """Fire the wall-clock schedules due; what they write to internal topics has no origin
        (it is not written again the same way after a restart)."""
        origin = self.origin
        if origin is not None:
            origin.wall_clock = True
        try:
            return self._wall_punctuation.punctuate(self.clock() if now is None else now, self._punctuate)
        finally:
            if origin is not None:
                origin.wall_clock = False

    def _punctuate(self, sched: PunctuationSchedule, now: int) -> None:
        """Run one punctuator: the record context is the punctuation's (no input record)."""
        rc = self.record
        if rc.topic is not None and self.origin is not None:
            self.origin.at(rc.topic, rc.offset)
        rc.topic, rc.offset, rc.timestamp, rc.headers, rc.msg = None, -1, now, None, None
        start = time.perf_counter_ns()
        try:
            sched.punctuator(now)
        except StreamsException:
            raise
        except Exception as e:
            self.processing_error(e, None, sched.node)
        self.metrics.punctuated(time.perf_counter_ns() - start)

    def check_caught_up(self, consumer: Any = None) -> None:
        """Drop the inputs processed up to their end offset at assignment: by the last record
        processed or, with nothing of the partition left buffered, by where ``consumer`` stands:
        past the transaction markers that may follow the last record (an end offset counts them)."""
        positions = self.positions
        left = {t: end for t, end in self.catch_up_to.items() if positions.get(t, -1) + 1 < end}
        drained = [TopicPartition(t, self.partition) for t in left if not self.group.queues[t]]
        if drained and consumer is not None:
            at = {tp.topic: tp.offset for tp in consumer.position(drained)}
            left = {t: end for t, end in left.items() if at.get(t, -1) < end}
        self.catch_up_to = left

    def source_mark(self) -> bytes | None:
        """The input offsets this task has reached, for the header of a changelog record
        (instance/state/source_offsets.py); None before any input (a punctuation's writes)."""
        rc = self.record
        positions = self.positions
        if rc.topic is not None:  # None while punctuating: the positions reached so far
            positions[rc.topic] = rc.offset
            if len(positions) == 1:
                return b"%d %s" % (rc.offset, rc.topic.encode())
        return source_offsets.encode(positions.items()) if positions else None

    def flush(self) -> None:
        """Commit step one: flush caches (forwarding downstream) and stores. No input record is
        being processed meanwhile: the record context says so (for the handlers)."""
        rc = self.record
        if rc.topic is not None and self.origin is not None:
            self.origin.at(rc.topic, rc.offset)
        topic, msg, rc.topic, rc.msg = rc.topic, rc.msg, None, None
        try:
            self.state.flush()
        finally:
            rc.topic, rc.msg = topic, msg
        self.metrics.committed()

    def close(self, checkpoint: bool = False) -> None:
        """Close processors and stores, release the task directory; ``checkpoint`` after a commit
        (skipped if a processor fails to close)."""
        self.lifecycle.close()
        errors = []
        for p in self._processors:
            try:
                p.close()
            except Exception as e:  # keep closing the rest
                errors.append(e)
        self.group.clear()
        self.metrics.close()
        self.state.close(checkpoint=checkpoint and not errors)
        if errors:
            raise StreamsException(f"task {self.id}: processor close failed: {errors[0]}") from errors[0]
