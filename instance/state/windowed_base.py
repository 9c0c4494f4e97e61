"""What window and session stores share: the typed layers of a key-value store (cache or not,
changelog or not, from ``store_builder``) over a :class:`SegmentedBytesStore`, the observed stream
time and retention, the runtime's store interface (flush, restore, close, counters).

The typed layers' keys are tuples (``(key, start, seq)`` for windows, ``(key, start, end)`` for
sessions) that a key serde of the concrete store turns into Kafka Streams' store-key bytes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from typing import Any, Self

from instance.errors import InvalidStateStoreException
from instance.state.change_logging import Batch
from instance.state.committed_view import CommittedView
from instance.state.queryable import PositionSource, Window, unbound
from instance.state.segmented import SegmentedBytesStore
from instance.state.spec import StoreSpec
from instance.state.typed_store import MISSING, FlushListener, TypedStoreBase


class WindowedStoreBase:
    """A segmented store with retention; subclasses add the window or session API and answer
    their query (a :class:`~instance.state.queryable.QueryableStore`)."""

    def __init__(self, spec: StoreSpec, segmented: SegmentedBytesStore, typed: TypedStoreBase) -> None:
        self.name = spec.name
        self.spec = spec
        self.inner = segmented
        self._typed = typed
        self._open = True
        self._position: PositionSource = unbound
        #: an active task's under exactly-once (:meth:`read_committed`), else None
        self.committed_view: CommittedView | None = None
        self._committed: tuple[SegmentedBytesStore, TypedStoreBase] | None = None
        self.flushes = 0
        self.retention_ms = spec.retention_ms
        #: the largest window time put or restored (Kafka Streams' observedStreamTime of the store)
        self.observed_stream_time = -1
        self._min_live_segment = 0
        #: puts dropped because their window had expired
        self.expired_puts = 0
        #: record key -> typed keys put since the last flush_cache: a range fetch overlays only
        #: that key's writes, not every pending write of the store (joins fetch per record)
        self._written: dict[Any, set[Any]] = {}
        self.set_flush_listener: Callable[[FlushListener | None], None] = typed.set_flush_listener

    def read_committed(self, view: CommittedView, segmented: SegmentedBytesStore, typed: TypedStoreBase) -> None:
        """Queries read ``typed`` over ``segmented``, both over ``view``'s committed side."""
        self.committed_view = view
        self._committed = segmented, typed

    def for_query(self) -> Self:
        """What a query reads: this store, or (read-committed) a copy of it over the committed view,
        with the stream time and retention of now. A copy, because processors read through the
        same methods and must see their own writes."""
        parts = self._committed
        if parts is None:
            return self
        q = copy.copy(self)
        q.inner, q._typed = parts
        q._written = {}  # no pending writes: the committed side has none
        return q

    @property
    def before_write(self) -> Callable[[], None] | None:
        return self._typed.before_write

    @before_write.setter
    def before_write(self, hook: Callable[[], None] | None) -> None:
        self._typed.before_write = hook

    # -- time and retention ------------------------------------------------------------------------
    def _observe(self, t: int) -> None:
        """Stream time moved to ``t``: drop the segments (and cached windows) retention passed."""
        self.observed_stream_time = t
        min_live = max(0, (t - self.retention_ms) // self.inner.interval)
        if min_live <= self._min_live_segment:
            return
        self._min_live_segment = min_live
        cutoff = min_live * self.inner.interval
        typed = self._typed
        for k in [k for k in list(typed._cache) if self._time_of(k) < cutoff]:
            typed._forget(k)
        if any(s < min_live for s in self.inner.segments):
            if self.before_write is not None:  # the store changes below the checkpoint
                self.before_write()
            view = self.committed_view
            with nullcontext() if view is None else view.unrecorded():
                self.inner.drop_segments_before(min_live)

    def _time_of(self, typed_key: Any) -> int:
        """The time a key is segmented by (window start, session end)."""
        raise NotImplementedError

    def _expired(self, t: int) -> bool:
        """Reads hide windows retention passed (Kafka Streams' ``observedStreamTime - retention``)."""
        return t <= self.observed_stream_time - self.retention_ms

    def _segment_expired(self, t: int) -> bool:
        """Puts are dropped only when their segment is gone, as in Kafka Streams' RocksDB stores."""
        return t // self.inner.interval < self._min_live_segment

    def _put_typed(self, typed_key: Any, value: Any, timestamp: int) -> None:
        written = self._written.get(typed_key[0])
        if written is None:
            self._written[typed_key[0]] = {typed_key}
        else:
            written.add(typed_key)
        self._typed.put(typed_key, value, timestamp)

    def flush_cache(self) -> None:
        """Write the pending puts below (forwarding them, when cached)."""
        self._typed.flush_cache()
        self._written = {}

    def _pending(self, match: Callable[[Any], bool], key: Any = MISSING) -> dict[Any, Any]:
        """Puts since the last flush that ``match`` (typed key -> value or None; a clean copy is
        as good as the stored value), of ``key`` only if given. Safe from a query thread."""
        cache = self._typed._cache
        if key is MISSING:
            # list() copies a set atomically; a comprehension over a set the stream thread adds
            # to would not be
            candidates = [k for ks in list(self._written.values()) for k in list(ks)]
        else:
            candidates = list(self._written.get(key, ()))
        out = {}
        for k in candidates:
            if match(k):
                v = cache.get(k, MISSING)
                if v is not MISSING:
                    out[k] = v
        return out

    # -- the runtime's store interface ---------------------------------------------------------------
    def flush(self) -> None:
        """``flush_cache`` and a durable flush of the bytes store (commit)."""
        self.flushes += 1
        self.flush_cache()
        self.inner.flush()

    def position_with_unlogged(self, logged: Callable[[], int]) -> int:
        """The changelog position counting what the cache will still log (see typed_store)."""
        return self._typed.position_with_unlogged(logged)

    def restore_batch(self, records: Batch) -> None:
        """Changelog records (store-key bytes) below; stream time follows what was restored, and
        windows it expired are dropped again, as Kafka Streams' segmented restore does."""
        self._typed.restore_batch(records)
        latest = max(map(self.inner.time_of, (r[0] for r in records)), default=-1)
        if latest > self.observed_stream_time:
            self._observe(latest)

    def counters(self) -> dict[str, int]:
        t = self._typed
        return {"flushes": self.flushes, "batches_written": t.batches_written,
                "records_written": t.records_written, "expired_puts": self.expired_puts}

    def _check_open(self) -> None:
        if not self._open:
            raise InvalidStateStoreException(f"store {self.name} is closed (migrated?)")

    def _stored(self, lo: bytes | None, hi: bytes | None, key_len: int | None) -> Iterator[tuple[Any, Any]]:
        """(typed key, typed value) below in ``[lo, hi)`` whose serialized key has ``key_len``
        bytes if given (a longer key sharing the prefix is someone else's)."""
        kd, vd = self._typed._kd, self._typed._vd
        for kb, vb in self.inner.items(lo, hi):
            if key_len is None or len(kb) == key_len:
                yield kd(kb), vd(vb)

    @staticmethod
    def _merged(stored: Iterator[tuple[Any, Any]], pending: dict[Any, Any],
                order: Callable[[tuple[Any, Any]], Any]) -> list[tuple[Any, Any]]:
        """Stored entries overlaid by the pending writes (None: deleted), sorted by ``order``."""
        out = dict(stored)
        out.update(pending)
        return sorted(((k, v) for k, v in out.items() if v is not None), key=order)

    # -- key-value queries do not apply (a ValueError: INVALID_ARGUMENT at the gRPC edge) -------
    def query_get(self, key: Any) -> Any:
        raise ValueError(f"store {self.name} is a {self.spec.kind} store: fetch windows of a key, not a value")

    def range(self, start: Any, end: Any) -> Any:
        raise ValueError(f"store {self.name} is a {self.spec.kind} store: key ranges are not supported")

    def query_range(self, start: Any, end: Any) -> Any:
        return self.range(start, end)

    def query_windows(self, key: Any, time_from: int, time_to: int) -> list[Window]:
        raise ValueError(f"store {self.name} is a {self.spec.kind} store: it has no windows by start time")

    def query_sessions(self, key: Any) -> list[Window]:
        raise ValueError(f"store {self.name} is a {self.spec.kind} store: it has no sessions")

    def bind_position(self, source: PositionSource) -> None:
        """Where :meth:`position` comes from: the state manager that registered the store."""
        self._position = source

    def position(self) -> int:
        """The changelog offset that reflects what the store holds now (-1: not logged)."""
        return self._position()

    def approximate_num_entries(self) -> int:
        self._check_open()
        return self._typed.approximate_num_entries()

    def close(self) -> None:
        self._open = False
        self._typed.close()

    @property
    def is_open(self) -> bool:
        return self._open
