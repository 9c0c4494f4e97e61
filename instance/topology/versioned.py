"""Versioned tables in the DSL (KIP-889/914/923): a table materialized in a versioned store
forwards only updates that are the latest of their key (an out-of-order update is kept in the
history but changes nothing downstream), and a stream-table join against it looks the table up
as of each stream record's timestamp; ``Joined.with_grace_period`` holds stream records back (in
timestamp order) until stream time passes them by the grace period, so late table updates are
seen. Deviation: the grace buffer lives in memory (Kafka Streams changelogs it), so records held
at a crash are processed again from the last commit, not lost."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from instance.errors import TopologyException
from instance.serde import Serde
from instance.state.change import Change
from instance.state.spec import StoreSpec
from instance.state.versioned_store import HistorySerde, VersionedKeyValueStore
from instance.topology.processor import BaseProcessor, ProcessorContext
from instance.topology.processors import OldValues

if TYPE_CHECKING:
    from instance.topology.builder import Materialized

AsOfGetter = Callable[[Any, int], Any]


def versioned_view(context: ProcessorContext, store_name: str, retention_ms: int) -> VersionedKeyValueStore:
    """One view per task store, shared by its writer and its readers (observed stream time)."""
    store = context.get_state_store(store_name)
    view = getattr(store, "versioned_view", None)
    if view is None:
        view = VersionedKeyValueStore(store, retention_ms)
        store.versioned_view = view
    return view


def versioned_spec(store: str, ks: Serde, vs: Serde, m: Materialized) -> StoreSpec:
    return StoreSpec(store, ks, HistorySerde(vs), logging_enabled=m.logging_enabled, caching_enabled=False,
                     in_memory=m.in_memory)


class VersionedTableSourceProcessor(BaseProcessor):
    def __init__(self, store_name: str, retention_ms: int, old_values: OldValues) -> None:
        self.store_name = store_name
        self.retention_ms = retention_ms
        self.old_values = old_values

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = versioned_view(context, self.store_name, self.retention_ms)
        self.send_old = self.old_values.enabled
        self._record = context.record

    def process(self, key: Any, value: Any) -> None:
        if key is None:
            return
        is_latest, old = self.store.put(key, value, self._record.timestamp)
        if is_latest:
            self.forward(key, Change(value, old if self.send_old else None))


class VersionedStreamTableJoinProcessor(BaseProcessor):
    """A stream-table join whose lookup is as of the stream record's timestamp, optionally after
    a grace period (see the module doc). Drops (and counts) None keys and values."""

    def __init__(self, store_name: str, retention_ms: int, joiner: Callable[[Any, Any], Any], left: bool,
                 grace_ms: int) -> None:
        self.store_name = store_name
        self.retention_ms = retention_ms
        self.joiner = joiner
        self.left = left
        self.grace_ms = grace_ms
        self.dropped_records = 0
        self._buffer: list[tuple[int, int, Any, Any]] = []
        self._seq = 0
        self._stream_time = -1

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.table = versioned_view(context, self.store_name, self.retention_ms)
        self._record = context.record
        self._forward_at = context.forward

    def _join(self, key: Any, value: Any, ts: int, now: bool) -> None:
        other = self.table.get_as_of(key, ts)
        if other is not None or self.left:
            out = self.joiner(value, other)
            if now:
                self.forward(key, out)
            else:
                self._forward_at(key, out, ts)

    def process(self, key: Any, value: Any) -> None:
        ts = self._record.timestamp
        if ts > self._stream_time:
            self._stream_time = ts
        if key is None or value is None:
            self.dropped_records += 1
            return
        if self.grace_ms <= 0:
            self._join(key, value, ts, True)
            return
        horizon = self._stream_time - self.grace_ms
        if ts < horizon:  # later than the grace period: joined at once
            self._join(key, value, ts, True)
        else:
            heapq.heappush(self._buffer, (ts, self._seq, key, value))
            self._seq += 1
        buf = self._buffer
        while buf and buf[0][0] <= horizon:
            bts, _, bkey, bvalue = heapq.heappop(buf)
            self._join(bkey, bvalue, bts, False)


def check_grace(grace_ms: int | None, table_retention_ms: int | None) -> None:
    if grace_ms is None:
        return
    if table_retention_ms is None:
        raise TopologyException("Joined.with_grace_period needs a versioned table "
                                "(Materialized.as_(Stores.persistent_versioned_key_value_store(...)))")
    if grace_ms > table_retention_ms:
        raise TopologyException(f"the join's grace period ({grace_ms} ms) must not exceed the table's "
                                f"history retention ({table_retention_ms} ms)")
