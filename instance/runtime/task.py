"""StreamTask: one sub-topology on one partition, with its own processors and stores.

Records arrive in whole batches per input partition; the task keeps them in a
:class:`PartitionGroup` and pushes each one depth-first through its processors, picking across
input partitions the record with the lowest timestamp.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from instance.errors import SerializationException, StreamsException
from instance.runtime.state_manager import ProcessorStateManager, TopicPart
from instance.state import source_offsets
from instance.state.kv_store import ChangelogSend
from instance.topology.processor import ProcessorContext, RecordContext
from instance.topology.topology import ProcessorNodeDef, SinkNode, SourceNode, SubTopology, Topology
from router.task_id import TaskId

log = logging.getLogger(__name__)

Sender = Callable[[str, bytes | None, bytes | None, int], None]


class DeserializationHandler:
    """``default.deserialization.exception.handler``: ``fail`` or ``log-and-continue``."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.skipped = 0

    def __call__(self, exc: Exception, topic: str, partition: int, offset: int) -> None:
        if self.mode == "log-and-continue":
            self.skipped += 1
            log.warning("skipping record that does not deserialize: topic=%s partition=%d offset=%d: %s",
                        topic, partition, offset, exc)
            return
        raise SerializationException(f"record does not deserialize: {exc}", topic, partition, offset) from exc


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
                 on_bad_record: DeserializationHandler, global_stores: Mapping[str, Any] | None = None) -> None:
        """``state``: the task's state manager (None: no task directory, as in the
        TopologyTestDriver); its stores are built here, in memory if ``in_memory``.
        ``global_stores``: the instance's global stores (read-only here), by name."""
        self.id = task_id
        self.partition = task_id.partition
        self.subtopology = subtopology
        self.record = RecordContext()
        self.record.partition = task_id.partition
        self.stream_time = -1
        self._on_bad_record = on_bad_record
        self.state = state if state is not None else ProcessorStateManager(task_id, None, application_id)
        self.stores = self.state.register_stores(
            [topology.stores[name] for name in subtopology.stores], in_memory=in_memory,
            cache_max_entries=cache_max_entries,
            changelog_for=lambda spec: changelog_sender(spec.changelog_topic(application_id), self.partition, self))
        self._processors: list[Any] = []
        self._global_stores = global_stores or {}
        self.sources: dict[str, Callable[[Any], None]] = {}
        try:
            self._build(topology, subtopology, application_id, resolve_topic, send)
        except BaseException:
            self.state.close(checkpoint=False)
            raise
        self.group = PartitionGroup(list(self.sources))
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
        pending = [n for n in st.nodes]
        for node in reversed(pending):  # seq order is a topological order; reverse = children first
            if isinstance(node, SinkNode):
                callables[node.name] = _make_sink(resolve(node.topic), node, rc, send)
            elif isinstance(node, ProcessorNodeDef):
                proc = node.supplier()
                children = [callables[c] for c in node.children]
                stores = {s: self.stores[s] if s in self.stores else self._global_store(s) for s in node.stores}
                ctx = ProcessorContext(str(self.id), node.name, rc, children, stores, app_id, self)
                proc.init(ctx)
                self._processors.append(proc)
                callables[node.name] = proc.process
            elif isinstance(node, SourceNode):
                children = [callables[c] for c in node.children]
                for topic in node.topics:
                    self.sources[resolve(topic)] = self._make_source(resolve(topic), node, children)

    def _global_store(self, name: str) -> Any:
        store = self._global_stores.get(name)
        if store is None:
            raise StreamsException(f"task {self.id}: global store {name!r} is not open on this instance")
        return store

    def _make_source(self, topic: str, node: SourceNode, children: list[Callable[[Any, Any], None]]
                     ) -> Callable[[Any], None]:
        kd, vd = node.key_serde.deserialize, node.value_serde.deserialize
        rc = self.record
        handler = self._on_bad_record
        fwd: Callable[[Any, Any], None]
        if len(children) == 1:
            fwd = children[0]
        else:
            def fwd(k: Any, v: Any) -> None:
                for c in children:
                    c(k, v)

        def source(msg: Any) -> None:
            rc.offset = off = msg.offset()
            rc.timestamp = msg.timestamp()[1]
            try:
                k = kd(msg.key())
                v = vd(msg.value())
            except Exception as e:
                handler(e, topic, msg.partition(), off)
                return
            fwd(k, v)
        return source

    # -- processing --------------------------------------------------------------------------
    def add_records(self, topic: str, msgs: list[Any]) -> None:
        self.group.add(topic, msgs)

    def process(self) -> int:
        """Process every buffered record; returns how many."""
        queues = self.group.queues
        nonempty = [t for t, q in queues.items() if q]
        if not nonempty:
            return 0
        rc = self.record
        n = 0
        if len(nonempty) == 1:
            topic = nonempty[0]
            q = queues[topic]
            source = self.sources[topic]
            rc.topic = topic
            for msg in q:
                source(msg)
            n = len(q)
            last = q[-1]
            q.clear()
            self.committable[topic] = last.offset() + 1
            self.positions[topic] = last.offset()
            if rc.timestamp > self.stream_time:
                self.stream_time = rc.timestamp
            return n
        # several inputs: always take the head with the lowest timestamp
        while True:
            best = None
            best_ts = 0
            for t in nonempty:
                q = queues[t]
                if q:
                    ts = q[0].timestamp()[1]
                    if best is None or ts < best_ts:
                        best, best_ts = t, ts
            if best is None:
                break
            msg = queues[best].popleft()
            rc.topic = best
            self.positions[best] = msg.offset()
            self.sources[best](msg)
            self.committable[best] = msg.offset() + 1
            if best_ts > self.stream_time:
                self.stream_time = best_ts
            n += 1
        return n

    def check_caught_up(self) -> None:
        positions = self.positions
        self.catch_up_to = {t: end for t, end in self.catch_up_to.items() if positions.get(t, -1) + 1 < end}

    def source_mark(self) -> bytes:
        """The input offsets this task has reached, for the header of a changelog record
        (instance/state/source_offsets.py)."""
        rc = self.record
        positions = self.positions
        assert rc.topic is not None  # a store is written while a record is processed or after
        positions[rc.topic] = rc.offset
        if len(positions) == 1:
            return b"%d %s" % (rc.offset, rc.topic.encode())
        return source_offsets.encode(positions.items())

    def flush(self) -> None:
        """Commit step one: flush caches (forwarding downstream) and stores."""
        self.state.flush()

    def close(self, checkpoint: bool = False) -> None:
        """Close processors and stores, release the task directory; ``checkpoint`` after a commit
        (skipped if a processor fails to close)."""
        errors = []
        for p in self._processors:
            try:
                p.close()
            except Exception as e:  # keep closing the rest
                errors.append(e)
        self.group.clear()
        self.state.close(checkpoint=checkpoint and not errors)
        if errors:
            raise StreamsException(f"task {self.id}: processor close failed: {errors[0]}") from errors[0]


def _make_sink(topic: str, node: SinkNode, rc: RecordContext, send: Sender) -> Callable[[Any, Any], None]:
    ks, vs = node.key_serde.serialize, node.value_serde.serialize

    def sink(key: Any, value: Any) -> None:
        send(topic, None if key is None else ks(key), None if value is None else vs(value), rc.timestamp)
    return sink
