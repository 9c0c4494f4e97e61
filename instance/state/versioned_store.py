"""Versioned key-value stores (KIP-889): every key keeps its values with the timestamps they
became valid from, for ``history_retention_ms`` of stream time, so a lookup can ask for the value
*as of* a timestamp (a stream-table join against a versioned table, KIP-914).

Built on the ordinary layers: the store underneath is a plain key-value store whose value is the
key's history, serialized by :class:`HistorySerde`, so the changelog and restore need nothing
new (a changelog record carries the whole history of its key). Versioned stores are not cached,
as in Kafka Streams.
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass
from typing import Any

from instance.errors import SerializationException
from instance.state.change import ValueAndTimestamp
from kernel.serdes import Serde

#: one version: (valid from, value or None for a delete)
Version = tuple[int, Any]
_HEAD = struct.Struct(">qi")  # valid-from timestamp, value length (-1: a delete)


class HistorySerde:
    """A key's versions, oldest first: per version the timestamp, the value's length and bytes."""

    def __init__(self, inner: Serde) -> None:
        self.inner = inner
        self.name = f"history({inner.name})"

    def serialize(self, versions: Any) -> bytes | None:
        if versions is None:
            return None
        ser = self.inner.serialize
        parts = []
        for ts, value in versions:
            vb = None if value is None else ser(value)
            parts.append(_HEAD.pack(ts, -1 if vb is None else len(vb)))
            if vb is not None:
                parts.append(vb)
        return b"".join(parts)

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        de, out, pos, n = self.inner.deserialize, [], 0, len(data)
        while pos < n:
            if pos + _HEAD.size > n:
                raise SerializationException("truncated version history")
            ts, length = _HEAD.unpack_from(data, pos)
            pos += _HEAD.size
            if length < 0:
                out.append((ts, None))
            else:
                out.append((ts, de(data[pos:pos + length])))
                pos += length
        return out

    def parse(self, text: str) -> Any:
        raise SerializationException("a version history cannot be typed on a command line")


@dataclass(frozen=True)
class VersionedStoreSupplier:
    """What ``Stores.persistent_versioned_key_value_store`` returns; give it to ``Materialized.as_``."""

    name: str
    history_retention_ms: int


class Stores:
    """Store suppliers (Kafka Streams' ``Stores``), the versioned one here."""

    @staticmethod
    def persistent_versioned_key_value_store(name: str, history_retention_ms: int) -> VersionedStoreSupplier:
        if history_retention_ms < 0:
            raise ValueError("history_retention_ms must not be negative")
        return VersionedStoreSupplier(name, history_retention_ms)


class VersionedKeyValueStore:
    """The versioned view of a task's store (whose values are histories).

    ``put`` returns whether the value is now the latest of its key; a put older than the history
    retention (behind the observed stream time) is not stored, as in Kafka Streams."""

    def __init__(self, store: Any, history_retention_ms: int) -> None:
        self.store = store
        self.name = store.name
        self.history_retention_ms = history_retention_ms
        self._observed = -1

    @property
    def observed_stream_time(self) -> int:
        """The largest timestamp put, here or before the store moved (restored from its changelog,
        as Kafka Streams' versioned store restores it): lookups and puts older than it minus the
        history retention find nothing, also right after a restart."""
        restored = self.store.restored_stream_time
        return restored if restored > self._observed else self._observed

    def put(self, key: Any, value: Any, timestamp: int) -> tuple[bool, Any]:
        """Store ``value`` valid from ``timestamp``; returns (is it the latest, the previous latest)."""
        if timestamp > self._observed:
            self._observed = timestamp
        horizon = self.observed_stream_time - self.history_retention_ms
        history: list[Version] = list(self.store.get(key) or ())  # never mutate a cached value
        latest = history[-1][1] if history else None
        if timestamp < horizon:
            return False, latest  # too old for any lookup within the retention (not stored)
        i = bisect.bisect_left(history, timestamp, key=lambda v: v[0])
        if i < len(history) and history[i][0] == timestamp:
            history[i] = (timestamp, value)
        else:
            history.insert(i, (timestamp, value))
        # drop versions no lookup within the retention can reach (keep the one valid at the horizon)
        j = bisect.bisect_right(history, horizon, key=lambda v: v[0]) - 1
        if j > 0:
            del history[:j]
        # a lone tombstone goes only once no put can come before it: until then it ends the
        # validity of an out-of-order put older than it, as in Kafka Streams
        if len(history) == 1 and history[0][1] is None and history[0][0] <= horizon:
            history = []
        is_latest = history[-1][0] == timestamp if history else True
        self.store.put(key, history or None, timestamp)
        return is_latest, latest

    def get(self, key: Any) -> Any:
        """The latest value (None: absent or deleted)."""
        history = self.store.get(key)
        return history[-1][1] if history else None

    def get_with_timestamp(self, key: Any) -> ValueAndTimestamp | None:
        """The latest value with the timestamp it is valid from, or None."""
        history = self.store.get(key)
        if not history or history[-1][1] is None:
            return None
        ts, value = history[-1]
        return ValueAndTimestamp(value, ts)

    def get_as_of(self, key: Any, timestamp: int) -> Any:
        """The value valid at ``timestamp`` (None if none, deleted, or beyond the retention: there
        only the latest version answers, as in Kafka Streams, where it never expires)."""
        history = self.store.get(key)
        if not history:
            return None
        if timestamp < self.observed_stream_time - self.history_retention_ms:
            return history[-1][1] if history[-1][0] <= timestamp else None
        i = bisect.bisect_right(history, timestamp, key=lambda v: v[0]) - 1
        return history[i][1] if i >= 0 else None
