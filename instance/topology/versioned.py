"""Versioned tables in the DSL (KIP-889/914/923): a table materialized in a versioned store
forwards only updates that are the latest of their key (an out-of-order update is kept in the
history but changes nothing downstream), and a stream-table join against it looks the table up
as of each stream record's timestamp; ``Joined.with_grace_period`` holds stream records back (in
timestamp order) until stream time passes them by the grace period, so late table updates are
seen. The grace buffer is a logged store, as in Kafka Streams."""

from __future__ import annotations

import heapq
import struct
from collections.abc import Callable
from typing import Any

from instance.errors import TopologyException
from instance.state.change import Change
from instance.state.spec import StoreSpec
from instance.state.versioned_store import HistorySerde, VersionedKeyValueStore
from instance.topology.materialized import Materialized
from instance.topology.processor import BaseProcessor, ProcessorContext
from instance.topology.processors import OldValues
from kernel.serdes import BytesSerde, Serde

AsOfGetter = Callable[[Any, int], Any]
_BUFFER_KEY = struct.Struct(">qq")  # timestamp, arrival sequence
_LEN = struct.Struct(">i")


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
    a grace period (see the module doc). Drops (and counts) None values, and None keys in an
    inner join.

    The grace buffer is mirrored in a logged store (``buffer_store``: key ``(timestamp, seq)``
    packed big-endian, value the record's serialized key and value), so records held across a
    commit survive a crash or a move: the task reloads them before it processes anything."""

    def __init__(self, store_name: str, retention_ms: int, joiner: Callable[[Any, Any], Any], left: bool,
                 grace_ms: int, buffer_store: str | None = None, key_serde: Serde | None = None,
                 value_serde: Serde | None = None) -> None:
        self.store_name = store_name
        self.retention_ms = retention_ms
        self.joiner = joiner
        self.left = left
        self.grace_ms = grace_ms
        self.buffer_store = buffer_store
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.dropped_records = 0
        #: (timestamp, key bytes, seq, key, value): released by time, then key bytes, as Kafka
        #: Streams' time-ordered buffer does
        self._buffer: list[tuple[int, bytes, int, Any, Any]] = []
        self._seq = 0
        self._stream_time = -1

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.table = versioned_view(context, self.store_name, self.retention_ms)
        self._record = context.record
        self._forward_at = context.forward
        self._held: Any = None
        if self.buffer_store is not None:
            self._held = context.get_state_store(self.buffer_store)
        self._loaded = False

    def _load(self) -> None:
        """Records a previous owner held (its store is restored before the task processes)."""
        self._loaded = True
        if self._held is None:
            return
        assert self.key_serde is not None and self.value_serde is not None
        kd, vd = self.key_serde.deserialize, self.value_serde.deserialize
        for kb, data in self._held.all():
            ts, seq = _BUFFER_KEY.unpack(kb)
            n = _LEN.unpack_from(data)[0]
            self._buffer.append((ts, data[4:4 + n], seq, kd(data[4:4 + n]), vd(data[4 + n:])))
            self._seq = max(self._seq, seq + 1)
            self._stream_time = max(self._stream_time, ts)
        heapq.heapify(self._buffer)

    def _hold(self, ts: int, key: Any, value: Any) -> None:
        seq = self._seq
        self._seq += 1
        kb = (self.key_serde.serialize(key) if self.key_serde is not None else None) or b""
        heapq.heappush(self._buffer, (ts, kb, seq, key, value))
        if self._held is not None:
            assert self.value_serde is not None
            self._held.put(_BUFFER_KEY.pack(ts, seq), _LEN.pack(len(kb)) + kb + (self.value_serde.serialize(value)
                                                                                or b""), ts)

    def _join(self, key: Any, value: Any, ts: int, now: bool) -> None:
        other = self.table.get_as_of(key, ts)
        if other is not None or self.left:
            out = self.joiner(value, other)
            if now:
                self.forward(key, out)
            else:
                self._forward_at(key, out, ts)

    def process(self, key: Any, value: Any) -> None:
        if not self._loaded:
            self._load()
        ts = self._record.timestamp
        if value is None or (key is None and not self.left):
            self.dropped_records += 1
            return
        if key is None:  # a left join without a join key (KIP-962): no table value to look up
            self.forward(key, self.joiner(value, None))
            return
        if self.grace_ms <= 0:
            self._join(key, value, ts, True)
            return
        # the buffer's time: only records it took move it (not dropped or late ones), and it
        # releases only when it takes one, as Kafka Streams' time-ordered buffer does
        if ts < self._stream_time - self.grace_ms:  # later than the grace period: joined at once
            self._join(key, value, ts, True)
            return
        self._hold(ts, key, value)
        if ts > self._stream_time:
            self._stream_time = ts
        horizon = self._stream_time - self.grace_ms
        buf, held = self._buffer, self._held
        while buf and buf[0][0] <= horizon:
            bts, _, seq, bkey, bvalue = heapq.heappop(buf)
            if held is not None:
                held.put(_BUFFER_KEY.pack(bts, seq), None, ts)
            self._join(bkey, bvalue, bts, False)


def buffer_spec(name: str) -> StoreSpec:
    """The logged store behind a join's grace buffer (bytes in, bytes out; no cache)."""
    return StoreSpec(name, BytesSerde(), BytesSerde(), caching_enabled=False)


def check_grace(grace_ms: int | None, table_retention_ms: int | None) -> None:
    if grace_ms is None:
        return
    if table_retention_ms is None:
        raise TopologyException("Joined.with_grace_period needs a versioned table "
                                "(Materialized.as_(Stores.persistent_versioned_key_value_store(...)))")
    if grace_ms > table_retention_ms:
        raise TopologyException(f"the join's grace period ({grace_ms} ms) must not exceed the table's "
                                f"history retention ({table_retention_ms} ms)")
