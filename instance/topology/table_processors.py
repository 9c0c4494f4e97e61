"""Processors between KTable nodes: their values are ``Change(new, old)`` (Kafka Streams'
``KTableProcessorSupplier`` family). ``old`` is None unless the node's :class:`OldValues` is
enabled by a downstream operator that needs it (see ``ktable.py``).

A table's current value for a key is read through a *value getter*: the store of a materialized
table, or a function over the parents' getters for a stateless one. A table's own getter is
*timestamped* (``get(key) -> (value, timestamp) | None``, Kafka Streams' ``ValueAndTimestamp``):
table-table joins stamp results with the larger timestamp of both sides.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from instance.state.change import Change
from instance.state.typed_store import new_change
from instance.topology.processor import BaseProcessor, ProcessorContext
from instance.topology.processors import OldValues, StoreForwardingProcessor, forward_store_changes

Getter = Callable[[Any], Any]
#: builds a value getter inside a task, from the node's context (its connected stores)
GetterFactory = Callable[[ProcessorContext], Getter]
#: the timestamp of a side that has no value (Kafka Streams' ``UNKNOWN``)
NO_TIMESTAMP = -1
Joiner = Callable[[Any, Any], Any]


class TableTransformProcessor(BaseProcessor):
    """filter / filter_not / map_values of a KTable: ``compute(key, value)`` maps one side of the
    change (None stays None). Not materialized: forwards the mapped change (the filter drops it
    when both sides are None and old values are sent, as Kafka Streams' ``KTableFilter``).
    Materialized: writes the new value to its store, whose listener forwards: with caching off,
    also the delete of a key the table never held (``Change(None, None)``, as Kafka Streams
    does); a caching store ignores that delete."""

    def __init__(self, compute: Callable[[Any, Any], Any], old_values: OldValues, skip_empty: bool,
                 store_name: str | None) -> None:
        self.compute = compute
        self.old_values = old_values
        self.skip_empty = skip_empty
        self.store_name = store_name

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.send_old = self.old_values.enabled
        self.store = None
        if self.store_name is not None:
            self.store = context.get_state_store(self.store_name)
            forward_store_changes(context, self.store, self.old_values)
        self._record = context.record

    def process(self, key: Any, change: Any) -> None:
        compute = self.compute
        new = None if change.new_value is None else compute(key, change.new_value)
        store = self.store
        if store is not None:
            store.put(key, new, self._record.timestamp)
            return
        old = None
        if self.send_old:
            old = None if change.old_value is None else compute(key, change.old_value)
            if self.skip_empty and new is None and old is None:
                return
        self.forward(key, new_change(Change, (new, old)))


class TableToStreamProcessor(BaseProcessor):
    """``KTable.to_stream()``: the new value of each change (a delete is a None value)."""

    def process(self, key: Any, change: Any) -> None:
        # a node that forwards plain values (not a Change) passes through unchanged
        self.forward(key, change[0] if change.__class__ is Change else change)


class TableRepartitionMapProcessor(BaseProcessor):
    """``KTable.group_by(selector)``: the old value goes to the old group (to be subtracted), the
    new one to the new group (to be added); one record with both when the group did not change,
    so the subtractor runs before the adder on it (KAFKA-12446). ``selector(key, value)`` returns
    ``(group_key, group_value)``; None, or a None key or value, selects nothing."""

    def __init__(self, selector: Callable[[Any, Any], tuple[Any, Any] | None]) -> None:
        self.selector = selector

    def process(self, key: Any, change: Any) -> None:
        sel = self.selector
        new = None if change.new_value is None else sel(key, change.new_value)
        old = None if change.old_value is None else sel(key, change.old_value)
        if new is not None and (new[0] is None or new[1] is None):
            new = None
        if old is not None and (old[0] is None or old[1] is None):
            old = None
        fwd = self.forward
        if new is not None and old is not None and new[0] == old[0]:
            fwd(new[0], new_change(Change, (new[1], old[1])))
            return
        if old is not None:
            fwd(old[0], new_change(Change, (None, old[1])))
        if new is not None:
            fwd(new[0], new_change(Change, (new[1], None)))


class TableAggregateProcessor(StoreForwardingProcessor):
    """``KGroupedTable.aggregate(initializer, adder, subtractor)``: subtract the old value, then
    add the new one, one store update per record (Kafka Streams' ``KTableAggregate``)."""

    def __init__(self, store_name: str, initializer: Callable[[], Any],
                 adder: Callable[[Any, Any, Any], Any], subtractor: Callable[[Any, Any, Any], Any],
                 old_values: OldValues) -> None:
        self.store_name = store_name
        self.initializer = initializer
        self.adder = adder
        self.subtractor = subtractor
        self.old_values = old_values

    def process(self, key: Any, change: Any) -> None:
        if key is None:
            return
        agg = self._get(key)
        ts = self._record.timestamp if agg is None else self._stamp(key)
        if change.old_value is not None and agg is not None:
            agg = self.subtractor(key, change.old_value, agg)
        if change.new_value is not None:
            agg = self.adder(key, change.new_value, self.initializer() if agg is None else agg)
        self._put(key, agg, ts)


class TableReduceProcessor(StoreForwardingProcessor):
    """``KGroupedTable.reduce(adder, subtractor)`` (Kafka Streams' ``KTableReduce``)."""

    def __init__(self, store_name: str, adder: Callable[[Any, Any], Any],
                 subtractor: Callable[[Any, Any], Any], old_values: OldValues) -> None:
        self.store_name = store_name
        self.adder = adder
        self.subtractor = subtractor
        self.old_values = old_values

    def process(self, key: Any, change: Any) -> None:
        if key is None:
            return
        agg = self._get(key)
        ts = self._record.timestamp if agg is None else self._stamp(key)
        if change.old_value is not None and agg is not None:
            agg = self.subtractor(agg, change.old_value)
        if change.new_value is not None:
            agg = change.new_value if agg is None else self.adder(agg, change.new_value)
        self._put(key, agg, ts)


# -- table-table joins ---------------------------------------------------------------------------

INNER, LEFT, RIGHT_OF_LEFT, OUTER = "inner", "left", "right-of-left", "outer"


class TableTableJoinProcessor(BaseProcessor):
    """One side of a table-table join: a change of this side is joined with the other side's
    current value (Kafka Streams' ``KTableKTable{Inner,Left,Right,Outer}Join``). ``mode``:

    - ``inner``: nothing unless the other side has the key;
    - ``left`` (left side of a left join) and ``outer``: a result while this side has the key;
    - ``right-of-left`` (right side of a left join): nothing unless the left side has the key.

    ``joiner`` is always called as ``joiner(left_value, right_value)``; ``this_is_left`` says
    which side this processor is.
    """

    def __init__(self, mode: str, this_is_left: bool, joiner: Joiner, other: GetterFactory,
                 old_values: OldValues) -> None:
        self.mode = mode
        self.joiner = joiner if this_is_left else (lambda this, other: joiner(other, this))
        self.other = other
        self.old_values = old_values

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.get_other = self.other(context)
        self.send_old = self.old_values.enabled
        self._record = context.record

    def process(self, key: Any, change: Any) -> None:
        if key is None:
            return
        vt = self.get_other(key)
        ts = self._record.timestamp
        other = None
        if vt is not None:
            other = vt[0]
            if vt[1] > ts:
                ts = vt[1]
        new, old = change.new_value, change.old_value
        join, mode, send_old = self.joiner, self.mode, self.send_old
        if mode == INNER:
            if other is None:
                return
            rn = None if new is None else join(new, other)
            ro = join(old, other) if send_old and old is not None else None
        elif mode == RIGHT_OF_LEFT:
            if other is None:
                return
            rn = join(new, other)
            ro = join(old, other) if send_old else None
        elif mode == LEFT:
            if other is None and new is None and old is None:
                return
            rn = None if new is None else join(new, other)
            ro = join(old, other) if send_old and old is not None else None
        else:  # OUTER
            if other is None and new is None and old is None:
                return
            rn = join(new, other) if (new is not None or other is not None) else None
            ro = join(old, other) if send_old and (old is not None or other is not None) else None
        if ts == self._record.timestamp:
            self.forward(key, new_change(Change, (rn, ro)))
        else:
            self.context.forward(key, new_change(Change, (rn, ro)), ts)


class TableJoinMergeProcessor(BaseProcessor):
    """Where both sides of a table-table join meet: forwards, or (materialized) writes the new
    result to its store, whose listener forwards (Kafka Streams' ``KTableKTableJoinMerger``)."""

    def __init__(self, store_name: str | None, old_values: OldValues) -> None:
        self.store_name = store_name
        self.old_values = old_values

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = None
        if self.store_name is not None:
            self.store = context.get_state_store(self.store_name)
            forward_store_changes(context, self.store, self.old_values)
        self._record = context.record

    def process(self, key: Any, change: Any) -> None:
        if self.store is None:
            self.forward(key, change)
        else:
            self.store.put(key, change.new_value, self._record.timestamp)


def join_getter(mode: str, joiner: Joiner, left: GetterFactory, right: GetterFactory) -> GetterFactory:
    """The timestamped getter of an unmaterialized join result (``mode`` of the left side)."""

    def make(context: ProcessorContext) -> Getter:
        gl, gr = left(context), right(context)

        def get(key: Any) -> Any:
            lt, rt = gl(key), gr(key)
            if lt is None and rt is None:
                return None
            if mode == INNER and (lt is None or rt is None):
                return None
            if mode == LEFT and lt is None:
                return None
            lv, lts = (None, NO_TIMESTAMP) if lt is None else lt
            rv, rts = (None, NO_TIMESTAMP) if rt is None else rt
            return joiner(lv, rv), max(lts, rts)
        return get
    return make


def values_of(timestamped: GetterFactory) -> GetterFactory:
    """A plain value getter over a timestamped one."""

    def make(context: ProcessorContext) -> Getter:
        get = timestamped(context)

        def value(key: Any) -> Any:
            vt = get(key)
            return None if vt is None else vt[0]
        return value
    return make


# -- stream-table joins --------------------------------------------------------------------------


class StreamTableJoinProcessor(BaseProcessor):
    """``KStream.join / left_join(table, joiner)``: each stream record looks the table up as of
    now; the table's updates trigger nothing. A record with a None value, or a None join key in
    an inner join, is dropped and counted in ``dropped_records`` (Kafka Streams'
    ``KStreamKTableJoinProcessor``); a left join joins a None join key with no table value.
    ``key_selector`` maps the stream record to the table key (global tables)."""

    def __init__(self, table: GetterFactory, joiner: Joiner, left: bool,
                 key_selector: Callable[[Any, Any], Any] | None = None) -> None:
        self.table = table
        self.joiner = joiner
        self.left = left
        self.key_selector = key_selector
        self.dropped_records = 0

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.get = self.table(context)

    def process(self, key: Any, value: Any) -> None:
        table_key = key if self.key_selector is None or value is None else self.key_selector(key, value)
        if value is None or (table_key is None and not self.left):
            self.dropped_records += 1
            return
        # a left join of a record without a join key (KIP-962) joins it with no table value
        other = None if table_key is None else self.get(table_key)
        if other is not None or self.left:
            self.forward(key, self.joiner(value, other))
