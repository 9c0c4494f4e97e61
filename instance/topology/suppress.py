"""``KTable.suppress(...)`` (Kafka Streams' ``KTableSuppressProcessor``, KIP-328).

Updates of a key wait in a buffer ordered by a buffer time and leave it (the latest value of the
key, with the timestamp of its latest update) once stream time, as observed by this processor
from the updates reaching it, passes that time by the suppression duration:

- ``until_window_closes``: the buffer time is the window end, the duration the windows' grace
  (for session windows gap + grace): one final result per window; tombstones are not emitted.
- ``until_time_limit(ms, ...)``: the buffer time is the timestamp of the key's first buffered
  update, the duration ``ms``: at most one update per key per ``ms`` of stream time.

When the buffer is over its bound it emits the oldest early (``emit_early_when_full``, the default
of ``max_records``) or fails (``shut_down_when_full``). The buffer is a logged key-value store, so
a restarted or migrated task picks up what was waiting.
"""

from __future__ import annotations

import heapq
import struct
from dataclasses import dataclass
from typing import Any

from instance.errors import StreamsException, TopologyException
from instance.state.change import Change
from instance.state.spec import StoreSpec
from instance.topology.graph import DslGraph
from instance.topology.processor import BaseProcessor, ProcessorContext
from instance.topology.refs import TableRef
from instance.topology.windows import SessionWindows, SlidingWindows, TimeWindows
from kernel.serdes import Serde

_TWO_LONGS = struct.Struct(">qq")


@dataclass(frozen=True)
class BufferConfig:
    """How many records the buffer holds (None: no bound) and what happens when it is full."""

    max_records_: int | None = None
    shut_down_when_full_: bool = False

    @staticmethod
    def unbounded() -> BufferConfig:
        return BufferConfig(None, True)

    @staticmethod
    def max_records(n: int) -> BufferConfig:
        if n < 0:
            raise ValueError(f"max_records must not be negative (got {n})")
        return BufferConfig(n, False)

    def with_max_records(self, n: int) -> BufferConfig:
        return BufferConfig(n, self.shut_down_when_full_)

    def with_no_bound(self) -> BufferConfig:
        return BufferConfig(None, self.shut_down_when_full_)

    def emit_early_when_full(self) -> BufferConfig:
        return BufferConfig(self.max_records_, False)

    def shut_down_when_full(self) -> BufferConfig:
        return BufferConfig(self.max_records_, True)


@dataclass(frozen=True)
class Suppressed:
    final_results: bool
    time_limit_ms: int
    buffer: BufferConfig
    name: str | None = None

    @staticmethod
    def until_window_closes(buffer: BufferConfig) -> Suppressed:
        if not buffer.shut_down_when_full_:
            raise ValueError("until_window_closes needs a strict buffer: BufferConfig.unbounded() or "
                             "....shut_down_when_full() (emitting early would not be a final result)")
        return Suppressed(True, 0, buffer)

    @staticmethod
    def until_time_limit(time_to_wait_ms: int, buffer: BufferConfig) -> Suppressed:
        if time_to_wait_ms < 0:
            raise ValueError(f"the time limit must not be negative (got {time_to_wait_ms})")
        return Suppressed(False, time_to_wait_ms, buffer)

    def with_name(self, name: str) -> Suppressed:
        return Suppressed(self.final_results, self.time_limit_ms, self.buffer, name)


def window_close_delay(windows: Any) -> int:
    """How long after a window's end stream time closes it."""
    if isinstance(windows, SessionWindows):
        return windows.gap_ms + windows.grace_ms
    if isinstance(windows, TimeWindows | SlidingWindows):
        return windows.grace_ms
    raise TopologyException(f"cannot suppress until windows close: unknown windows {windows!r}")


class BufferedSerde:
    """``(buffer time, record timestamp, value or None)`` of one buffered key."""

    def __init__(self, inner: Serde) -> None:
        self.inner = inner
        self.name = f"suppress-buffered<{inner.name}>"

    def serialize(self, v: Any) -> bytes | None:
        if v is None:
            return None
        head = _TWO_LONGS.pack(v[0], v[1])
        return head + b"\x00" if v[2] is None else head + b"\x01" + (self.inner.serialize(v[2]) or b"")

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        t, ts = _TWO_LONGS.unpack_from(data)
        return (t, ts, None if data[16] == 0 else self.inner.deserialize(data[17:]))

    def parse(self, text: str) -> Any:
        raise ValueError(f"{self.name} values cannot be typed on a command line")


def buffer_spec(name: str, key_serde: Serde, value_serde: Serde) -> StoreSpec:
    return StoreSpec(name, key_serde, BufferedSerde(value_serde), caching_enabled=False)


class SuppressProcessor(BaseProcessor):
    def __init__(self, store_name: str, suppressed: Suppressed, delay_ms: int) -> None:
        self.store_name = store_name
        self.final_results = suppressed.final_results
        self.delay_ms = delay_ms
        self.max_records = suppressed.buffer.max_records_
        self.shut_down_when_full = suppressed.buffer.shut_down_when_full_
        self.observed_stream_time = -1
        #: key -> (buffer time, record timestamp, value); mirrors the store
        self._buffered: dict[Any, tuple[int, int, Any]] = {}
        #: (buffer time, key bytes, arrival seq, key), pushed when a key is buffered (not on its
        #: updates): keys buffered for one time leave in the order of their bytes, as in Kafka Streams
        self._heap: list[tuple[int, bytes, int, Any]] = []
        self._seq = 0
        self._loaded = False

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self._ctx = context
        self._record = context.record
        self.store = context.get_state_store(self.store_name)
        self._key_bytes = self.store.spec.key_serde.serialize

    def _load(self) -> None:
        """What a previous owner left in the buffer (the store is restored before processing)."""
        self._loaded = True
        for key, entry in self.store.all():
            self._buffer(key, entry)

    def _buffer(self, key: Any, entry: tuple[int, int, Any]) -> None:
        self._buffered[key] = entry
        self._seq += 1
        heapq.heappush(self._heap, (entry[0], self._key_bytes(key) or b"", self._seq, key))

    def process(self, key: Any, value: Any) -> None:
        if not self._loaded:
            self._load()
        ts = self._record.timestamp
        if value.__class__ is Change:  # a table's change: the buffer keeps the new value
            value = value[0]
        if ts > self.observed_stream_time:
            self.observed_stream_time = ts
        old = self._buffered.get(key)
        if old is not None:  # the key keeps its place (its first buffer time)
            entry = (old[0], ts, value)
            self._buffered[key] = entry
        else:
            entry = (key.window.end if self.final_results else ts, ts, value)
            self._buffer(key, entry)
        self.store.put(key, entry, ts)
        self._evict()

    def _evict(self) -> None:
        expiry = self.observed_stream_time - self.delay_ms
        heap, buffered = self._heap, self._buffered
        while heap:
            t, _, _, key = heap[0]
            entry = buffered.get(key)
            if entry is None or entry[0] != t:
                heapq.heappop(heap)  # stale: emitted (and maybe buffered again) since
                continue
            over = self.max_records is not None and len(buffered) > self.max_records
            if t > expiry and not over:
                return
            if t > expiry and self.shut_down_when_full:
                raise StreamsException(f"suppress buffer {self.store_name} is full "
                                       f"({len(buffered)} > {self.max_records} records)")
            heapq.heappop(heap)
            del buffered[key]
            self.store.put(key, None, entry[1])
            if entry[2] is not None or not self.final_results:
                self._ctx.forward(key, Change(entry[2], None), entry[1])


def suppress(b: DslGraph, table: TableRef, suppressed: Suppressed) -> TableRef:
    """Add the suppress node and its buffer store after ``table``; returns the suppressed table."""
    if not isinstance(suppressed, Suppressed):
        raise TopologyException("suppress() takes Suppressed.until_window_closes(...) or "
                                "Suppressed.until_time_limit(...)")
    delay = suppressed.time_limit_ms
    if suppressed.final_results:
        windows = table.windows
        if windows is None:
            raise TopologyException("Suppressed.until_window_closes needs a windowed KTable "
                                    "(the result of windowed_by(...).count/reduce/aggregate)")
        delay = window_close_delay(windows)
    node = suppressed.name or b.new_name("KTABLE-SUPPRESS-")
    store = f"{node}-store" if suppressed.name else b.new_name("KTABLE-SUPPRESS-STATE-STORE-")
    # the result reads the suppressed table's store (a materialized table has both serdes)
    if table.store is None or table.key_serde is None or table.value_serde is None:
        raise TopologyException(f"table {node}: an unmaterialized table needs a value getter")
    b.topology.add_processor(node, lambda: SuppressProcessor(store, suppressed, delay), table.node)
    b.topology.add_state_store(buffer_spec(store, table.key_serde, table.value_serde), node)
    return TableRef.materialized(node, table.store, table.key_serde, table.value_serde)
