"""Kafka Streams' ``SessionStore``: an aggregate per (key, session window), with retention.

The typed key is ``(key, start, end)``; its bytes are Kafka Streams' session store key,
``[key][8-byte end][8-byte start]``, segmented by the end. Cache, changelog and restore are the
key-value store's layers (``store_builder``).
"""

from __future__ import annotations

import struct
from typing import Any

from instance.serde.windowed import SessionWindow, Windowed
from instance.state.queryable import Window
from instance.state.segmented import SegmentedBytesStore
from instance.state.spec import StoreSpec
from instance.state.typed_store import TypedStoreBase
from instance.state.windowed_base import WindowedStoreBase
from kernel.serdes import Serde

_END_START = struct.Struct(">qq")
#: bytes after the key (end + start), and where the end begins from the end of the key
SUFFIX = 16
_MAX = 2**63 - 1


class SessionKeySerde:
    """``(key, start, end)`` <-> ``[key][end][start]``."""

    def __init__(self, inner: Serde) -> None:
        self.inner = inner
        self.name = f"session-key<{inner.name}>"
        self._ks = inner.serialize

    def serialize(self, k: Any) -> bytes:
        kb = self._ks(k[0])
        if kb is None:
            raise ValueError("session store key must not be None")
        return kb + _END_START.pack(k[2], k[1])

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        end, start = _END_START.unpack_from(data, len(data) - SUFFIX)
        return (self.inner.deserialize(data[:-SUFFIX]), start, end)

    def parse(self, text: str) -> Any:
        raise ValueError("session store keys cannot be typed on a command line")


def typed_spec(spec: StoreSpec) -> StoreSpec:
    return StoreSpec(spec.name, SessionKeySerde(spec.key_serde), spec.value_serde,
                     logging_enabled=spec.logging_enabled, caching_enabled=spec.caching_enabled,
                     in_memory=spec.in_memory)


class SessionStore(WindowedStoreBase):
    """One task's session store. Keys in the API are ``Windowed(key, SessionWindow(start, end))``."""

    def __init__(self, spec: StoreSpec, segmented: SegmentedBytesStore, typed: TypedStoreBase) -> None:
        super().__init__(spec, segmented, typed)
        self._ks = spec.key_serde.serialize

    def _time_of(self, typed_key: Any) -> int:
        return int(typed_key[2])

    def put(self, session: Windowed, aggregate: Any) -> None:
        """Store a session's aggregate (None removes it); forwarded with the session end as timestamp."""
        w = session.window
        if session.key is None:
            raise ValueError(f"store {self.name}: key must not be None")
        if w.end > self.observed_stream_time:
            self._observe(w.end)
        if aggregate is not None and self._segment_expired(w.end):
            self.expired_puts += 1
            return
        self._put_typed((session.key, w.start, w.end), aggregate, w.end)

    def remove(self, session: Windowed) -> None:
        self.put(session, None)

    def fetch_session(self, key: Any, start: int, end: int) -> Any:
        self._check_open()
        return self._typed.query_get((key, start, end))

    def find_sessions(self, key: Any, earliest_session_end: int, latest_session_start: int
                      ) -> list[tuple[Windowed, Any]]:
        """The key's sessions that end at or after ``earliest_session_end`` and start at or before
        ``latest_session_start`` (the ones a record there would merge with), by end then start."""
        self._check_open()
        kb = self._ks(key)
        if kb is None:
            raise ValueError(f"store {self.name}: key must not be None")
        # times are never negative (a negative one would sort after the positive ones as bytes).
        # A session whose end is past retention is not found, whether or not its segment is
        # still there: Kafka Streams' segmented store bounds every fetch by stream time -
        # retention (its caching store also serves what its cache still holds: docs/architecture.md)
        earliest_session_end = max(earliest_session_end, 0, self.observed_stream_time - self.retention_ms + 1)
        lo = kb + _END_START.pack(earliest_session_end, 0)
        hi = kb + _END_START.pack(_MAX, _MAX) + b"\x00"
        stored = (e for e in self._stored(lo, hi, len(kb) + SUFFIX) if e[0][1] <= latest_session_start)
        pending = self._pending(lambda k: k[2] >= earliest_session_end and k[1] <= latest_session_start, key)
        merged = self._merged(stored, pending, _by_end_start)
        return [(Windowed(k[0], SessionWindow(k[1], k[2])), v) for k, v in merged]

    def backward_find_sessions(self, key: Any, earliest_session_end: int, latest_session_start: int
                               ) -> list[tuple[Windowed, Any]]:
        return self.find_sessions(key, earliest_session_end, latest_session_start)[::-1]

    def fetch(self, key: Any) -> list[tuple[Windowed, Any]]:
        """Every unexpired session of ``key``."""
        return self.find_sessions(key, 0, _MAX)

    def query_sessions(self, key: Any) -> list[Window]:
        """(start, end, value) of the key's unexpired sessions, by end, as the last commit left
        them under exactly-once (:meth:`for_query`)."""
        return [(w.window.start, w.window.end, v) for w, v in self.for_query().fetch(key)]

    def all(self) -> list[tuple[Windowed, Any]]:
        self._check_open()
        stored = self._stored(None, None, None)
        pending = self._pending(lambda k: True)
        merged = self._merged(stored, pending, lambda e: (e[0][2], self._ks(e[0][0]), e[0][1]))
        return [(Windowed(k[0], SessionWindow(k[1], k[2])), v) for k, v in merged]


def _by_end_start(e: tuple[Any, Any]) -> Any:
    return (e[0][2], e[0][1])
