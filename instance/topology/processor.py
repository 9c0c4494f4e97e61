"""The Processor API: what a processor sees while a record flows through its task.

Two kinds of processor run side by side:

- the public API, Kafka Streams' ``org.apache.kafka.streams.processor.api.Processor`` in snake_case:
  ``process(record)`` with an immutable :class:`Record` (key, value, timestamp, headers), and
  ``context.forward(record[, child_name])``;
- the DSL's internal fast path, :class:`BaseProcessor`: ``process(key, value)`` called directly by
  its parents, with the record's metadata in one mutable :class:`RecordContext` per task, so no
  object is allocated per record.

A Record processor is wrapped once, at task build time, by :func:`node_callable`: its parents
call it as ``(key, value)`` like any node, and the adapter builds the ``Record`` it receives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from instance.topology.punctuation import Cancellable, PunctuationType, Punctuator

#: record headers: (name, value) pairs, in order, names may repeat (Kafka's ``Headers``)
Headers = tuple[tuple[str, bytes | None], ...]

_UNSET: Any = object()


@dataclass(frozen=True, slots=True)
class Record:
    """One record as a processor receives and forwards it (Kafka Streams' ``api.Record``)."""

    key: Any
    value: Any
    timestamp: int
    headers: Headers = ()

    def with_key(self, key: Any) -> Record:
        return Record(key, self.value, self.timestamp, self.headers)

    def with_value(self, value: Any) -> Record:
        return Record(self.key, value, self.timestamp, self.headers)

    def with_timestamp(self, timestamp: int) -> Record:
        if timestamp < 0:
            raise ValueError(f"timestamp must not be negative, got {timestamp}")
        return Record(self.key, self.value, timestamp, self.headers)

    def with_headers(self, headers: Headers | list[tuple[str, bytes | None]]) -> Record:
        return Record(self.key, self.value, self.timestamp, tuple(headers))


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where the record being processed came from (Kafka Streams' ``RecordMetadata``)."""

    topic: str
    partition: int
    offset: int


class RecordContext:
    """Metadata of the record currently being processed in one task (mutable, shared).

    ``msg`` is the source message (None while punctuating); ``headers`` overrides its headers
    once a processor forwarded a Record with its own (None: the source message's)."""

    __slots__ = ("topic", "partition", "offset", "timestamp", "headers", "msg")

    def __init__(self) -> None:
        self.topic: str | None = None
        self.partition: int = -1
        self.offset: int = -1
        self.timestamp: int = 0
        self.headers: Headers | None = None
        self.msg: Any = None

    def current_headers(self) -> Headers:
        h = self.headers
        if h is not None:
            return h
        msg = self.msg
        if msg is None:
            return ()
        raw = msg.headers()
        return tuple(raw) if raw else ()


class ProcessorTask(Protocol):
    """What a processor's context reaches in the task it runs in (``runtime.task.StreamTask``):
    a Protocol, so the Processor API does not import the runtime that imports it."""

    stream_time: int
    commit_requested: bool

    def clock(self) -> int: ...

    def schedule(self, node: str, interval_ms: int, ptype: PunctuationType,
                 punctuator: Punctuator) -> Cancellable: ...

    def processing_error(self, exc: Exception, record: Record | None, node: str | None = None) -> None: ...


class ProcessorContext:
    """What one processor node uses: forward to its children, read the record metadata, reach
    the task's stores, schedule punctuations, request a commit."""

    __slots__ = ("task_id", "node_name", "record", "_children", "_named", "_stores", "application_id",
                 "_task", "forward_kv")

    def __init__(self, task_id: str, node_name: str, record: RecordContext,
                 children: list[Callable[[Any, Any], None]], stores: dict[str, Any],
                 application_id: str, task: ProcessorTask | None = None,
                 child_names: list[str] | None = None) -> None:
        self.task_id = task_id
        self.node_name = node_name
        self.record = record
        self._children = children
        self._named = dict(zip(child_names, children, strict=True)) if child_names is not None else {}
        self._stores = stores
        self.application_id = application_id
        self._task = task
        #: ``forward_kv(key, value)``: forward keeping the timestamp, with no per-call checks
        self.forward_kv: Callable[[Any, Any], None] = (
            children[0] if len(children) == 1 else self._fan_out)

    def _fan_out(self, key: Any, value: Any) -> None:
        for child in self._children:
            child(key, value)

    # -- record metadata ---------------------------------------------------------------------
    @property
    def timestamp(self) -> int:
        return self.record.timestamp

    @property
    def topic(self) -> str | None:
        return self.record.topic

    @property
    def partition(self) -> int:
        return self.record.partition

    @property
    def offset(self) -> int:
        return self.record.offset

    @property
    def headers(self) -> Headers:
        return self.record.current_headers()

    def record_metadata(self) -> RecordMetadata | None:
        """Topic, partition and offset of the input record; None inside a punctuation."""
        rc = self.record
        if rc.topic is None:
            return None
        return RecordMetadata(rc.topic, rc.partition, rc.offset)

    def current_stream_time_ms(self) -> int:
        """The task's stream time: the highest timestamp it has processed (-1: none yet)."""
        return self._require_task().stream_time

    def current_system_time_ms(self) -> int:
        return self._require_task().clock()

    # -- forwarding -------------------------------------------------------------------------
    def forward(self, record: Any, value: Any = _UNSET, timestamp: int | None = None,
                child_name: str | None = None) -> None:
        """Send a record to every child (or the child named ``child_name``), depth-first.

        Public form: ``forward(Record(...)[, child_name])``: the children see the record's
        timestamp and headers. DSL form: ``forward(key, value[, timestamp])``: ``timestamp``
        overrides the current one for the children only (a cache flush forwarding inside a
        ``get``/``put`` must not change the timestamp of the record being processed)."""
        if isinstance(record, Record) and (value is _UNSET or isinstance(value, str)):
            if value is not _UNSET:
                child_name = value
            self._forward_record(record, child_name)
            return
        if value is _UNSET:
            raise TypeError("forward() takes a Record, or a key and a value")
        children = self._children if child_name is None else [self._child(child_name)]
        if timestamp is None:
            for child in children:
                child(record, value)
            return
        rc = self.record
        current, rc.timestamp = rc.timestamp, timestamp
        try:
            for child in children:
                child(record, value)
        finally:
            rc.timestamp = current

    def _forward_record(self, record: Record, child_name: str | None) -> None:
        rc = self.record
        ts, headers = rc.timestamp, rc.headers
        rc.timestamp, rc.headers = record.timestamp, record.headers
        try:
            if child_name is None:
                key, value = record.key, record.value
                for child in self._children:
                    child(key, value)
            else:
                self._child(child_name)(record.key, record.value)
        finally:
            rc.timestamp, rc.headers = ts, headers

    def _child(self, name: str) -> Callable[[Any, Any], None]:
        try:
            return self._named[name]
        except KeyError:
            from instance.errors import StreamsException
            raise StreamsException(f"processor {self.node_name} has no child {name!r}; its children: "
                                   f"{sorted(self._named)}") from None

    # -- stores, punctuation, commit ---------------------------------------------------------
    def get_state_store(self, name: str) -> Any:
        try:
            return self._stores[name]
        except KeyError:
            from instance.errors import StreamsException
            raise StreamsException(
                f"processor {self.node_name} has no access to store {name!r}; connect it with "
                f"Topology.connect_processor_and_state_stores") from None

    def schedule(self, interval_ms: int, punctuation_type: PunctuationType,
                 punctuator: Punctuator) -> Cancellable:
        """Call ``punctuator(timestamp)`` every ``interval_ms`` of stream time (first as soon as
        the task has a stream time) or of wall-clock time (first after one interval); the handle's
        ``cancel()`` stops it. Never concurrently with ``process`` of the same task."""
        return self._require_task().schedule(self.node_name, interval_ms, punctuation_type, punctuator)

    def commit(self) -> None:
        """Ask for a commit as soon as possible (after the current record)."""
        self._require_task().commit_requested = True

    @property
    def task(self) -> ProcessorTask | None:
        """The task this node runs in (None in a global store's processor)."""
        return self._task

    def _require_task(self) -> ProcessorTask:
        if self._task is None:
            from instance.errors import IllegalStateException
            raise IllegalStateException(f"processor {self.node_name} runs outside a task")
        return self._task


class Processor(Protocol):
    """A node of the topology (Kafka Streams' ``api.Processor``): ``process`` is called once per
    record, depth-first; ``init`` before the first record, ``close`` when the task closes."""

    def init(self, context: ProcessorContext) -> None: ...

    def process(self, record: Record) -> None: ...

    def close(self) -> None: ...


ProcessorSupplier = Callable[[], Any]


class ContextualProcessor:
    """Convenience base of a Record processor: keeps the context (``self.context()``)."""

    _context: ProcessorContext

    def init(self, context: ProcessorContext) -> None:
        self._context = context

    def context(self) -> ProcessorContext:
        return self._context

    def process(self, record: Record) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        pass


class BaseProcessor:
    """Base of the DSL's processors (the fast path): ``process(key, value)``, called directly by
    the parents, metadata from ``self.context``; ``self.forward(key, value)`` to all children."""

    context: ProcessorContext

    def init(self, context: ProcessorContext) -> None:
        self.context = context
        self.forward = context.forward_kv

    def process(self, key: Any, value: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        pass


def node_callable(proc: Any, rc: RecordContext) -> Callable[[Any, Any], None]:
    """What a parent calls for ``proc``: a :class:`BaseProcessor` directly, any other processor
    (the Record API) through an adapter that builds its :class:`Record`. Also the way to run a
    user's processor elsewhere (e.g. a global store's update processor)."""
    if isinstance(proc, BaseProcessor):
        return proc.process
    process = proc.process

    def as_record(key: Any, value: Any) -> None:
        process(Record(key, value, rc.timestamp, rc.current_headers()))
    return as_record
