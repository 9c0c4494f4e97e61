"""The processors behind the DSL operations. Each one does its work and calls ``self.forward``
(the children, depth-first); nothing is looked up per record."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from instance.state.change import Change
from instance.topology.processor import BaseProcessor, ProcessorContext


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


class StoreForwardingProcessor(BaseProcessor):
    """Base of processors that write a store: changes reach children when they reach the store
    (at once without caching, on cache flush with it). Children get the new value; the store's
    listener also has the old one (``Change``), for a child that will want it."""

    store_name: str

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)
        forward = context.forward

        def on_change(key: Any, change: Change, timestamp: int) -> None:
            forward(key, change.new_value, timestamp)

        self.store.set_flush_listener(on_change)
        self._get = self.store.get
        self._put = self.store.put
        self._record = context.record


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
            old = self.initializer()
        self._put(key, self.aggregator(key, value, old), self._record.timestamp)


class ReduceProcessor(StoreForwardingProcessor):
    def __init__(self, store_name: str, reducer: Callable[[Any, Any], Any]) -> None:
        self.store_name = store_name
        self.reducer = reducer

    def process(self, key: Any, value: Any) -> None:
        if key is None or value is None:
            return
        old = self._get(key)
        self._put(key, value if old is None else self.reducer(old, value), self._record.timestamp)


class CountProcessor(StoreForwardingProcessor):
    """count(): the hottest stateful path, so specialised (no initializer/aggregator calls)."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def process(self, key: Any, value: Any) -> None:
        if key is None or value is None:
            return
        old = self._get(key)
        self._put(key, 1 if old is None else old + 1, self._record.timestamp)


class TableSourceProcessor(StoreForwardingProcessor):
    """builder.table(): materialize the topic; a null value deletes the key."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def process(self, key: Any, value: Any) -> None:
        if key is None:
            return
        self._put(key, value, self._record.timestamp)
