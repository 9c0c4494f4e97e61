"""Kafka Streams' ``MeteredKeyValueStore``: the top of a store, the API processors, queries and
the runtime hold; the closed check and counters.

Unlike Kafka Streams' (serdes, per-call latency sensors), it adds no Python call on the hot path:
``get``, ``put``, ``put_if_absent``, ``delete``, ``flush_cache`` and ``restore_batch`` are the typed
layer's bound methods, set as attributes. Measured with cachegrind, a delegating ``get`` cost ~37%
more instructions than the cached get itself, and a per-call counter ~20% on top; so the counters
are per durable flush and per batch written, not per call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from instance.errors import InvalidStateStoreException
from instance.state.bytes_store import BytesStore
from instance.state.change_logging import Batch
from instance.state.committed_view import CommittedView
from instance.state.queryable import PositionSource, Window, unbound
from instance.state.spec import StoreSpec
from instance.state.typed_store import FlushListener, TypedStoreBase


class MeteredKeyValueStore:
    """One task's typed key-value store (cached or not, change-logged or not); a
    :class:`~instance.state.queryable.QueryableStore`."""

    get: Callable[[Any], Any]
    #: put(key, value, timestamp=0)
    put: Callable[..., None]
    #: put_if_absent(key, value, timestamp=0) -> the value already there, or None
    put_if_absent: Callable[..., Any]
    #: delete(key, timestamp=0) -> the old value
    delete: Callable[..., Any]
    #: cache -> lower layers (bytes store, changelog), then forward to the flush listener
    flush_cache: Callable[[], None]
    #: changelog records straight to the bytes store (bypasses cache and changelog)
    restore_batch: Callable[[Batch], None]
    #: timestamp_of(key) -> the timestamp of its latest put (timestamped stores; -1: none)
    timestamp_of: Callable[[Any], int]
    #: get_with_timestamp(key) -> ValueAndTimestamp(value, timestamp) or None
    set_flush_listener: Callable[[FlushListener | None], None]
    position_with_unlogged: Callable[[Callable[[], int]], int]

    def __init__(self, spec: StoreSpec, inner: BytesStore, store: TypedStoreBase,
                 committed: tuple[CommittedView, TypedStoreBase] | None = None) -> None:
        self.name = spec.name
        self.spec = spec
        #: the bytes store at the bottom
        self.inner = inner
        self._store = store
        #: an active task's under exactly-once: what queries read (``committed_view.py``)
        self.committed_view: CommittedView | None = None
        #: the typed layer queries read: ``store`` itself, or one over the committed view
        self._reads = store
        if committed is not None:
            self.committed_view, self._reads = committed
        self._open = True
        self._position: PositionSource = unbound
        self.flushes = 0
        self.get = store.get
        self.put = store.put
        self.put_if_absent = store.put_if_absent
        self.delete = store.delete
        self.flush_cache = store.flush_cache
        self.restore_batch = store.restore_batch
        self.timestamp_of = store.timestamp_of
        self.get_with_timestamp = store.get_with_timestamp
        self.set_flush_listener = store.set_flush_listener
        #: the changelog position that covers what the store holds (see TypedStoreBase)
        self.position_with_unlogged = store.position_with_unlogged

    @property
    def restored_stream_time(self) -> int:
        """The largest timestamp restored from the changelog (-1: none)."""
        return self._store.restored_stream_time

    @property
    def before_write(self) -> Callable[[], None] | None:
        """Called before each batch reaches the bytes store."""
        return self._store.before_write

    @before_write.setter
    def before_write(self, hook: Callable[[], None] | None) -> None:
        self._store.before_write = hook

    def flush(self) -> None:
        """``flush_cache``, then a durable flush of the bytes store (commit)."""
        self.flushes += 1
        self._store.flush()

    def counters(self) -> dict[str, int]:
        """Cheap counts: durable flushes (commits), batches and records written below."""
        s = self._store
        return {"flushes": self.flushes, "batches_written": s.batches_written,
                "records_written": s.records_written}

    # -- queries (from other threads) ---------------------------------------------------------
    def _check_open(self) -> None:
        if not self._open:
            raise InvalidStateStoreException(f"store {self.name} is closed (migrated?)")

    def query_get(self, key: Any) -> Any:
        """Read for an interactive query: cache first, then the bytes store; never fills the cache.
        Under exactly-once, what the last commit left (``committed_view.py``)."""
        self._check_open()
        return self._reads.query_get(key)

    def query_range(self, start: Any, end: Any) -> Iterator[tuple[Any, Any]]:
        """:meth:`range` for an interactive query (under exactly-once, as of the last commit)."""
        self._check_open()
        return self._reads.range(start, end)

    def query_windows(self, key: Any, time_from: int, time_to: int) -> list[Window]:
        raise ValueError(f"store {self.name} is a {self.spec.kind} store: it has no windows")

    def query_sessions(self, key: Any) -> list[Window]:
        raise ValueError(f"store {self.name} is a {self.spec.kind} store: it has no sessions")

    def bind_position(self, source: PositionSource) -> None:
        """Where :meth:`position` comes from: the state manager that registered the store."""
        self._position = source

    def position(self) -> int:
        """The changelog offset that reflects what the store holds now (-1: not logged); for an
        active, counting what its cache will still log (ProcessorStateManager.position)."""
        return self._position()

    def all(self) -> Iterator[tuple[Any, Any]]:
        """All entries in key-byte order, the cache overlaid on the bytes store."""
        self._check_open()
        return self._store.range(None, None)

    def range(self, start: Any, end: Any) -> Iterator[tuple[Any, Any]]:
        """Entries with ``start <= key <= end`` (inclusive, by serialized key) in key-byte order,
        the cache overlaid on the bytes store (a cached None hides a stored key)."""
        self._check_open()
        return self._store.range(start, end)

    def approximate_num_entries(self) -> int:
        self._check_open()
        return self._store.approximate_num_entries()

    def close(self) -> None:
        self._open = False
        self._store.close()

    @property
    def is_open(self) -> bool:
        return self._open
