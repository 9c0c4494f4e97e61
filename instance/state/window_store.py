"""Kafka Streams' ``WindowStore``: values per (key, window start), with retention.

A key schema over the key-value layers: the typed key is ``(key, window start, seq)`` and its bytes
are Kafka Streams' window store key, ``[key][8-byte start][4-byte seq]``; ``seq`` is 0 unless the
store retains duplicates (stream-stream join buffers: every put is kept). The cache, the changelog
and restore are the key-value store's (``store_builder``); segments and retention are
``segmented.py``'s. A timestamped store (windowed aggregations) keeps ``(value, timestamp)``, its
value bytes being Kafka Streams' ``ValueAndTimestamp`` (8-byte timestamp, then the value).
"""

from __future__ import annotations

import struct
from typing import Any

from instance.serde.windowed import TimeWindow, Windowed
from instance.state.queryable import Window
from instance.state.segmented import SegmentedBytesStore
from instance.state.spec import StoreSpec
from instance.state.typed_store import TypedStoreBase
from instance.state.windowed_base import WindowedStoreBase
from kernel.serdes import Serde

_START_SEQ = struct.Struct(">qI")
_LONG = struct.Struct(">q")
#: bytes after the key in a window store key (start + seq), and where the start begins from the end
SUFFIX = 12
MAX_SEQ = 0xFFFFFFFF


class WindowKeySerde:
    """``(key, start, seq)`` <-> ``[key][start][seq]``."""

    def __init__(self, inner: Serde) -> None:
        self.inner = inner
        self.name = f"window-key<{inner.name}>"
        self._ks = inner.serialize

    def serialize(self, k: Any) -> bytes:
        kb = self._ks(k[0])
        if kb is None:
            raise ValueError("window store key must not be None")
        return kb + _START_SEQ.pack(k[1], k[2])

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        start, seq = _START_SEQ.unpack_from(data, len(data) - SUFFIX)
        return (self.inner.deserialize(data[:-SUFFIX]), start, seq)

    def parse(self, text: str) -> Any:
        raise ValueError("window store keys cannot be typed on a command line")


class TimestampedSerde:
    """``(value, timestamp)`` <-> Kafka Streams' ``ValueAndTimestamp`` bytes."""

    def __init__(self, inner: Serde) -> None:
        self.inner = inner
        self.name = f"timestamped<{inner.name}>"
        self._vs = inner.serialize
        self._vd = inner.deserialize

    def serialize(self, vt: Any) -> bytes | None:
        if vt is None:
            return None
        return _LONG.pack(vt[1]) + (self._vs(vt[0]) or b"")

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        return (self._vd(data[8:]), _LONG.unpack_from(data)[0])

    def parse(self, text: str) -> Any:
        raise ValueError("timestamped values cannot be typed on a command line")


def typed_spec(spec: StoreSpec) -> StoreSpec:
    """The spec of the key-value layers under a window store: tuple keys, maybe timestamped values."""
    vs: Serde = TimestampedSerde(spec.value_serde) if spec.timestamped else spec.value_serde
    return StoreSpec(spec.name, WindowKeySerde(spec.key_serde), vs, logging_enabled=spec.logging_enabled,
                     caching_enabled=spec.caching_enabled and not spec.retain_duplicates,
                     in_memory=spec.in_memory)


class WindowStore(WindowedStoreBase):
    """One task's window store. ``put`` and ``fetch_timestamped`` are the processors' path (on the
    stream thread); ``fetch``, ``fetch_all``, ``all`` are also safe for queries (they never fill
    the cache)."""

    def __init__(self, spec: StoreSpec, segmented: SegmentedBytesStore, typed: TypedStoreBase) -> None:
        super().__init__(spec, segmented, typed)
        self.window_size_ms = spec.window_size_ms
        self._timestamped = spec.timestamped
        self._dups = spec.retain_duplicates
        self._seq = 0
        self._ks = spec.key_serde.serialize
        self._get = typed.get

    def _time_of(self, typed_key: Any) -> int:
        return int(typed_key[1])

    # -- writes (stream thread) -------------------------------------------------------------------
    def put(self, key: Any, value: Any, window_start: int, timestamp: int | None = None) -> None:
        """``value`` None deletes (a no-op when duplicates are retained, as in Kafka Streams).
        A timestamped store keeps ``(value, timestamp)`` (``timestamp`` defaults to the start)."""
        if key is None:
            raise ValueError(f"store {self.name}: key must not be None")
        ts = window_start if timestamp is None else timestamp
        if self._dups and value is None:
            return  # a no-op that does not move stream time either, as in Kafka Streams
        if window_start > self.observed_stream_time:
            self._observe(window_start)
        if self._segment_expired(window_start):
            self.expired_puts += 1
            return
        seq = 0
        if self._dups:
            self._seq = seq = (self._seq + 1) & MAX_SEQ
        if value is not None and self._timestamped:
            value = (value, ts)
        self._put_typed((key, window_start, seq), value, ts)

    def fetch_timestamped(self, key: Any, window_start: int, include_expired: bool = False) -> Any:
        """The stored ``(value, timestamp)`` (timestamped stores) or value of one window, or None;
        read through the cache (the processors' path). ``include_expired``: also a window
        retention passed whose segment is still there (emit-on-close reads a window right after
        it closes, which can be when it expires)."""
        if not include_expired and self._expired(window_start):
            return None
        return self._get((key, window_start, 0))

    # -- reads ------------------------------------------------------------------------------------
    def _value(self, stored: Any) -> Any:
        return stored[0] if self._timestamped and stored is not None else stored

    def fetch(self, key: Any, time_from: int, time_to: int | None = None) -> Any:
        """``fetch(key, start)``: the value of one window (or None). ``fetch(key, from, to)``: the
        ``(start, value)`` of the key's windows starting in ``[from, to]``, oldest first (every
        duplicate, in put order, when duplicates are retained)."""
        self._check_open()
        if time_to is None:
            if self._expired(time_from):
                return None
            return self._value(self._typed.query_get((key, time_from, 0)))
        return [(k[1], self._value(v)) for k, v in self._fetch_entries(key, time_from, time_to)]

    def query_windows(self, key: Any, time_from: int, time_to: int) -> list[Window]:
        """(start, end, value) of the key's windows starting in ``[time_from, time_to]``, oldest
        first, as the last commit left them under exactly-once (:meth:`for_query`)."""
        size = self.window_size_ms
        return [(s, s + size, v) for s, v in self.for_query().fetch(key, time_from, time_to)]

    def backward_fetch(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        """``fetch(key, from, to)``, newest first."""
        return self.fetch(key, time_from, time_to)[::-1]  # type: ignore[no-any-return]

    def fetch_timestamped_range(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        """``fetch(key, from, to)`` with the stored ``(value, timestamp)`` of a timestamped store."""
        return [(k[1], v) for k, v in self._fetch_entries(key, time_from, time_to)]

    def _fetch_entries(self, key: Any, time_from: int, time_to: int) -> list[tuple[Any, Any]]:
        time_from = max(time_from, self.observed_stream_time - self.retention_ms + 1, 0)
        if time_to < time_from:
            return []
        kb = self._ks(key)
        if kb is None:
            raise ValueError(f"store {self.name}: key must not be None")
        lo = kb + _START_SEQ.pack(time_from, 0)
        hi = kb + _START_SEQ.pack(time_to, MAX_SEQ) + b"\x00"
        stored = self._stored(lo, hi, len(kb) + SUFFIX)
        pending = self._pending(lambda k: time_from <= k[1] <= time_to, key)
        return self._merged(stored, pending, _by_start_seq)

    def fetch_all(self, time_from: int, time_to: int) -> list[tuple[Windowed, Any]]:
        """Every key's windows starting in ``[from, to]``, by start, then key bytes."""
        size, value = self.window_size_ms, self._value
        return [(Windowed(k[0], TimeWindow(k[1], k[1] + size)), value(v))
                for k, v in self._fetch_all_entries(time_from, time_to)]

    def fetch_all_timestamped(self, time_from: int, time_to: int, clamp: bool = False) -> list[tuple[Windowed, Any]]:
        """``fetch_all`` with the stored ``(value, timestamp)`` of a timestamped store, including
        windows retention passed but whose segment is still there: a window expires when it
        closes, and the emit-on-close path reads it right after."""
        size = self.window_size_ms
        return [(Windowed(k[0], TimeWindow(k[1], k[1] + size)), v)
                for k, v in self._fetch_all_entries(time_from, time_to, clamp=clamp)]

    def _fetch_all_entries(self, time_from: int, time_to: int, clamp: bool = True) -> list[tuple[Any, Any]]:
        self._check_open()
        if clamp:
            time_from = max(time_from, self.observed_stream_time - self.retention_ms + 1, 0)
        stored = (e for e in self._stored(None, None, None) if time_from <= e[0][1] <= time_to)
        pending = self._pending(lambda k: time_from <= k[1] <= time_to)
        return self._merged(stored, pending, self._by_start_key)

    def all(self) -> list[tuple[Windowed, Any]]:
        """Every unexpired window, by start, then key bytes."""
        return self.fetch_all(0, 2**63 - 1)

    def _by_start_key(self, e: tuple[Any, Any]) -> Any:
        k = e[0]
        return (k[1], self._ks(k[0]), k[2])


def _by_start_seq(e: tuple[Any, Any]) -> Any:
    return (e[0][1], e[0][2])
