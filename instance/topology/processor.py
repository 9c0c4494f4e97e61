"""The Processor API: what a processor sees while a record flows through its task.

Records travel depth-first as plain ``(key, value)`` calls; the record's metadata (topic,
partition, offset, timestamp) lives in one :class:`RecordContext` per task that every node reads,
so no wrapper object is allocated per record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class RecordContext:
    """Metadata of the record currently being processed in one task (mutable, shared)."""

    __slots__ = ("topic", "partition", "offset", "timestamp", "headers")

    def __init__(self) -> None:
        self.topic: str | None = None
        self.partition: int = -1
        self.offset: int = -1
        self.timestamp: int = 0
        self.headers: Any = None


class ProcessorContext:
    """What one processor node uses: forward to its children, read the record metadata, reach
    the task's stores, schedule punctuations (through the task)."""

    __slots__ = ("task_id", "node_name", "record", "_children", "_stores", "application_id", "_task",
                 "forward_kv")

    def __init__(self, task_id: str, node_name: str, record: RecordContext,
                 children: list[Callable[[Any, Any], None]], stores: dict[str, Any],
                 application_id: str, task: Any = None) -> None:
        self.task_id = task_id
        self.node_name = node_name
        self.record = record
        self._children = children
        self._stores = stores
        self.application_id = application_id
        self._task = task
        #: ``forward_kv(key, value)``: forward keeping the timestamp, with no per-call checks
        self.forward_kv: Callable[[Any, Any], None] = (
            children[0] if len(children) == 1 else self._fan_out)

    def _fan_out(self, key: Any, value: Any) -> None:
        for child in self._children:
            child(key, value)

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

    def forward(self, key: Any, value: Any, timestamp: int | None = None) -> None:
        """Send a record to every child, depth-first; ``timestamp`` overrides the current one for
        the children only (a cache flush forwarding inside a ``get``/``put`` must not change the
        timestamp of the record being processed)."""
        if timestamp is None:
            for child in self._children:
                child(key, value)
            return
        rc = self.record
        current, rc.timestamp = rc.timestamp, timestamp
        for child in self._children:
            child(key, value)
        rc.timestamp = current

    def get_state_store(self, name: str) -> Any:
        try:
            return self._stores[name]
        except KeyError:
            from instance.errors import StreamsException
            raise StreamsException(
                f"processor {self.node_name} has no access to store {name!r}; connect it with "
                f"Topology.connect_processor_and_state_stores") from None


class Processor(Protocol):
    """A node of the topology. ``process`` is called once per record, depth-first."""

    def init(self, context: ProcessorContext) -> None: ...

    def process(self, key: Any, value: Any) -> None: ...

    def close(self) -> None: ...


ProcessorSupplier = Callable[[], Processor]


class BaseProcessor:
    """Convenience base: keeps the context and a fast ``forward``."""

    context: ProcessorContext

    def init(self, context: ProcessorContext) -> None:
        self.context = context
        self.forward = context.forward_kv

    def process(self, key: Any, value: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        pass
