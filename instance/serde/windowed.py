"""Windowed keys and their serdes, byte-compatible with Kafka Streams' ``TimeWindowedSerializer``
(key bytes + 8-byte big-endian window start) and ``SessionWindowedSerializer`` (key bytes +
8-byte end + 8-byte start), so windowed output topics read the same from Java and Python.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from kernel.serdes import Serde

_LONG = struct.Struct(">q")
_TWO_LONGS = struct.Struct(">qq")


class TimeWindow(NamedTuple):
    """A fixed window ``[start, end)``."""

    start: int
    end: int


class SessionWindow(NamedTuple):
    """A session ``[start, end]``: ``end`` is the timestamp of its last record."""

    start: int
    end: int


class Windowed(NamedTuple):
    """A windowed result's key: the record key and its window (``window.start`` / ``window.end``)."""

    key: Any
    window: Any

    def __str__(self) -> str:  # Kafka Streams' Windowed.toString
        return f"[{self.key}@{self.window.start}/{self.window.end}]"


class TimeWindowedSerde:
    """``Windowed(key, TimeWindow)``; the end is not on the wire: it is start + ``window_size_ms``."""

    def __init__(self, inner: Serde, window_size_ms: int) -> None:
        self.inner = inner
        self.window_size_ms = window_size_ms
        self.name = f"time-windowed<{inner.name}>"

    def serialize(self, value: Any) -> bytes | None:
        if value is None:
            return None
        kb = self.inner.serialize(value.key) or b""
        return kb + _LONG.pack(value.window.start)

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) < 8:
            raise ValueError(f"{self.name}: {len(data)} bytes cannot hold a window start")
        start = _LONG.unpack_from(data, len(data) - 8)[0]
        return Windowed(self.inner.deserialize(data[:-8]), TimeWindow(start, start + self.window_size_ms))

    def parse(self, text: str) -> Any:
        raise ValueError(f"{self.name} keys cannot be typed on a command line")


class SessionWindowedSerde:
    """``Windowed(key, SessionWindow)``: key bytes, end, start."""

    def __init__(self, inner: Serde) -> None:
        self.inner = inner
        self.name = f"session-windowed<{inner.name}>"

    def serialize(self, value: Any) -> bytes | None:
        if value is None:
            return None
        kb = self.inner.serialize(value.key) or b""
        return kb + _TWO_LONGS.pack(value.window.end, value.window.start)

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) < 16:
            raise ValueError(f"{self.name}: {len(data)} bytes cannot hold a session window")
        end, start = _TWO_LONGS.unpack_from(data, len(data) - 16)
        return Windowed(self.inner.deserialize(data[:-16]), SessionWindow(start, end))

    def parse(self, text: str) -> Any:
        raise ValueError(f"{self.name} keys cannot be typed on a command line")


class WindowedSerdes:
    """Kafka Streams' ``WindowedSerdes``: read windowed output topics."""

    @staticmethod
    def time_windowed(inner: Serde, window_size_ms: int) -> TimeWindowedSerde:
        return TimeWindowedSerde(inner, window_size_ms)

    @staticmethod
    def session_windowed(inner: Serde) -> SessionWindowedSerde:
        return SessionWindowedSerde(inner)
