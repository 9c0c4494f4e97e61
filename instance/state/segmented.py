"""Time segments over one bytes store, for window and session stores (Kafka Streams'
``AbstractRocksDBSegmentedBytesStore``, with the segments as key prefixes of one DB).

Above this layer keys are Kafka Streams' store keys (``[key][time…]``): the cache, the changelog
and restore see them as they are. Below, each key is stored as ``[8-byte segment id][key]``, the
segment being the key's time field (``ts_from_end`` bytes from its end) divided by the segment
interval. Retention then drops whole segments: a range delete of expired keys only, not a scan of
the store, and not logged (the changelog topic expires them by its own retention, as in Kafka).
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterable, Iterator
from itertools import islice
from operator import itemgetter

from instance.state.bytes_store import BytesStore

_SEG = struct.Struct(">q")
_first = itemgetter(0)


def segment_interval(retention_ms: int) -> int:
    """Kafka Streams' default: half the retention, at least a minute."""
    return max(retention_ms // 2, 60_000)


class SegmentedBytesStore:
    """A :class:`BytesStore` whose keys are spread over time segments of ``inner``."""

    def __init__(self, inner: BytesStore, interval_ms: int, ts_from_end: int) -> None:
        self.name = inner.name
        self.inner = inner
        self.interval = interval_ms
        self._ts_at = ts_from_end
        #: segment ids that may hold keys (found in ``inner`` at open, added on write)
        self.segments: set[int] = set(self._discover())

    def _discover(self) -> Iterator[int]:
        start: bytes | None = None
        while True:
            first = next(islice(self.inner.items(start), 1), None)
            if first is None:
                return
            seg = _SEG.unpack_from(first[0])[0]
            yield seg
            start = _SEG.pack(seg + 1)

    def time_of(self, key: bytes) -> int:
        """The time field of a store key (window start, session end)."""
        return int(_SEG.unpack_from(key, len(key) - self._ts_at)[0])

    def segment_of(self, key: bytes) -> int:
        return max(0, self.time_of(key) // self.interval)

    def get(self, key: bytes) -> bytes | None:
        return self.inner.get(_SEG.pack(self.segment_of(key)) + key)

    def write(self, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        segments, seg_of, pack = self.segments, self.segment_of, _SEG.pack

        def prefixed() -> Iterator[tuple[bytes, bytes | None]]:
            for k, v in items:
                s = seg_of(k)
                if v is not None:
                    segments.add(s)
                yield pack(s) + k, v
        self.inner.write(prefixed())

    def items(self, start: bytes | None = None, end: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """Keys in ``[start, end)`` in key order, merged over the live segments."""
        def one(seg: int) -> Iterator[tuple[bytes, bytes]]:
            p = _SEG.pack(seg)
            lo = p if start is None else p + start
            hi = _SEG.pack(seg + 1) if end is None else p + end
            for k, v in self.inner.items(lo, hi):
                yield k[8:], v
        segments = sorted(self.segments)
        if len(segments) == 1:  # usually: a retention of a few segment intervals, most reads in one
            return one(segments[0])
        return heapq.merge(*(one(s) for s in segments), key=_first)

    def drop_segments_before(self, min_live: int) -> int:
        """Delete every key of the segments before ``min_live``; returns how many."""
        n = 0
        for seg in sorted(s for s in self.segments if s < min_live):
            keys = [k for k, _ in self.inner.items(_SEG.pack(seg), _SEG.pack(seg + 1))]
            if keys:
                self.inner.write((k, None) for k in keys)
            n += len(keys)
            self.segments.discard(seg)
        return n

    def approximate_num_entries(self) -> int:
        return self.inner.approximate_num_entries()

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()
