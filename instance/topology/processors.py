"""The processors behind the DSL operations. Each one does its work and calls ``self.forward``
(the children, depth-first); nothing is looked up per record."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from instance.errors import StreamsException
from instance.state.change import Change
from instance.state.typed_store import new_change
from instance.topology.processor import BaseProcessor, ProcessorContext, Record


class FilterProcessor(BaseProcessor):
    def __init__(self, predicate: Callable[[Any, Any], bool], negate: bool = False) -> None:
        self.predicate = predicate
        self.negate = negate

    def process(self, key: Any, value: Any) -> None:
        if bool(self.predicate(key, value)) != self.negate:
            self.forward(key, value)


class MapProcessor(BaseProcessor):
    def __init__(self, mapper: Callable[[Any, Any], tuple[Any, Any]]) -> None:
        self.mapper = mapper

    def process(self, key: Any, value: Any) -> None:
        k, v = self.mapper(key, value)
        self.forward(k, v)


class MapValuesProcessor(BaseProcessor):
    def __init__(self, mapper: Callable[[Any], Any]) -> None:
        self.mapper = mapper

    def process(self, key: Any, value: Any) -> None:
        self.forward(key, self.mapper(value))


class FlatMapProcessor(BaseProcessor):
    def __init__(self, mapper: Callable[[Any, Any], Iterable[tuple[Any, Any]]]) -> None:
        self.mapper = mapper

    def process(self, key: Any, value: Any) -> None:
        fwd = self.forward
        for k, v in self.mapper(key, value):
            fwd(k, v)


class FlatMapValuesProcessor(BaseProcessor):
    def __init__(self, mapper: Callable[[Any], Iterable[Any]]) -> None:
        self.mapper = mapper

    def process(self, key: Any, value: Any) -> None:
        fwd = self.forward
        for v in self.mapper(value):
            fwd(key, v)


class SelectKeyProcessor(BaseProcessor):
    def __init__(self, selector: Callable[[Any, Any], Any]) -> None:
        self.selector = selector

    def process(self, key: Any, value: Any) -> None:
        self.forward(self.selector(key, value), value)


class PeekProcessor(BaseProcessor):
    """peek forwards; foreach (terminal, ``forward_after=False``) does not."""

    def __init__(self, action: Callable[[Any, Any], None], forward_after: bool = True) -> None:
        self.action = action
        self.forward_after = forward_after

    def process(self, key: Any, value: Any) -> None:
        self.action(key, value)
        if self.forward_after:
            self.forward(key, value)


class PassThroughProcessor(BaseProcessor):
    def process(self, key: Any, value: Any) -> None:
        self.forward(key, value)


class DropNullKeyProcessor(BaseProcessor):
    """Before a repartition sink: a record with a null key cannot be partitioned; dropped."""

    def process(self, key: Any, value: Any) -> None:
        if key is not None:
            self.forward(key, value)


class BranchProcessor(BaseProcessor):
    """split(): the first predicate that matches wins; each branch is one child, in order."""

    def __init__(self, predicates: list[Callable[[Any, Any], bool] | None]) -> None:
        self.predicates = predicates

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.children = list(context._children)

    def process(self, key: Any, value: Any) -> None:
        for pred, child in zip(self.predicates, self.children, strict=True):
            if pred is None or pred(key, value):
                child(key, value)
                return


class OldValues:
    """Kafka Streams' ``sendOldValues`` of one KTable node: off until a downstream operator that
    needs the previous value (a table aggregate's subtractor, a table-table join) enables it.
    Mutable and shared by the DSL object and its processor supplier; read once at ``init``."""

    __slots__ = ("enabled",)

    def __init__(self, enabled: bool = False) -> None:
        self.enabled = enabled


def with_old_values(proc: Any, old_values: OldValues) -> Any:
    """Give a store-forwarding processor its table's flag (for suppliers of existing processors)."""
    proc.old_values = old_values
    return proc


def forward_store_changes(context: ProcessorContext, store: Any, old_values: OldValues | None) -> None:
    """Make ``store``'s flush listener forward ``(key, Change(new, old), timestamp)`` to the
    node's children: at once without caching, on cache flush with it; ``old`` is None unless
    ``old_values`` is enabled.

    A child that raises goes to ``processing.exception.handler`` here, one change at a time, as
    Kafka Streams' processor nodes handle it where it happens: a cache flush at commit then
    forwards the other keys of the batch when the handler continues (the context names no input
    record: the flush is not part of processing one)."""
    forward = context.forward
    send_old = old_values is not None and old_values.enabled
    task = context.task

    def on_change(key: Any, change: Change, timestamp: int) -> None:
        try:
            forward(key, change if send_old else new_change(Change, (change.new_value, None)), timestamp)
        except StreamsException:
            raise
        except Exception as e:
            if task is None:
                raise
            task.processing_error(e, Record(key, change, timestamp, context.record.current_headers()))

    store.set_flush_listener(on_change)


class StoreForwardingProcessor(BaseProcessor):
    """Base of processors that write a KTable's store: its changes reach the children as
    ``Change(new, old)`` values when they reach the store (see :func:`forward_store_changes`)."""

    store_name: str
    #: the table's ``sendOldValues`` (set by the DSL; None: never)
    old_values: OldValues | None = None

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)
        forward_store_changes(context, self.store, self.old_values)
        self._get = self.store.get
        self._put = self.store.put
        self._ts_of = self.store.timestamp_of
        self._record = context.record

    def _stamp(self, key: Any) -> int:
        """The timestamp of an update to ``key``'s existing aggregate: the larger of the record's
        and the aggregate's, as Kafka Streams stamps aggregates (an out-of-order record does not
        move a result back in time)."""
        ts = self._record.timestamp
        t = self._ts_of(key)
        return t if t > ts else ts


class AggregateProcessor(StoreForwardingProcessor):
    """count / reduce / aggregate of a grouped stream; null keys and null values are skipped,
    as in Kafka Streams."""

    def __init__(self, store_name: str, initializer: Callable[[], Any],
                 aggregator: Callable[[Any, Any, Any], Any]) -> None:
        self.store_name = store_name
        self.initializer = initializer
        self.aggregator = aggregator

    def process(self, key: Any, value: Any) -> None:
        if key is None or value is None:
            return
        old = self._get(key)
        if old is None:
            self._put(key, self.aggregator(key, value, self.initializer()), self._record.timestamp)
        else:
            self._put(key, self.aggregator(key, value, old), self._stamp(key))


class ReduceProcessor(StoreForwardingProcessor):
    def __init__(self, store_name: str, reducer: Callable[[Any, Any], Any]) -> None:
        self.store_name = store_name
        self.reducer = reducer

    def process(self, key: Any, value: Any) -> None:
        if key is None or value is None:
            return
        old = self._get(key)
        if old is None:
            self._put(key, value, self._record.timestamp)
        else:
            self._put(key, self.reducer(old, value), self._stamp(key))


class CountProcessor(StoreForwardingProcessor):
    """count(): the hottest stateful path, so specialised (no initializer/aggregator calls)."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def process(self, key: Any, value: Any) -> None:
        if key is None or value is None:
            return
        old = self._get(key)
        if old is None:
            self._put(key, 1, self._record.timestamp)
            return
        ts = self._record.timestamp
        t = self._ts_of(key)  # _stamp inlined: the hottest path
        self._put(key, old + 1, t if t > ts else ts)


class TableSourceProcessor(StoreForwardingProcessor):
    """builder.table(): materialize the topic; a null value deletes the key."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def process(self, key: Any, value: Any) -> None:
        if key is None:
            return
        self._put(key, value, self._record.timestamp)
