"""What the two typed layers (caching on: ``caching.py``, caching off: ``uncached.py``) share: the
serdes, typed Python values over the bytes store, and the batched writes below.

Values stay Python objects until a batch is written: serializing once per key per batch, not per
put, is most of what a store costs in Python. ``_cache`` holds the latest value of every key it
has (``None``: absent): those put and not written below yet (``_dirty``), and clean copies of the
bytes store, kept so the old value of a later put is known without a store read. A get hit is one
dict lookup and a cached put two dict stores, as before the layers were split.

A *timestamped* store (``spec.timestamped``: every KTable the DSL materializes, as Kafka Streams'
``TimestampedKeyValueStore``) also keeps the timestamp of each key's latest put: the bytes store
holds Kafka Streams' ``ValueAndTimestamp`` layout (8-byte timestamp, then the value), the
changelog the plain value with the timestamp as the record's timestamp (as Kafka Streams logs
it), and restore puts the two back together. Aggregates and table-table joins read it
(:meth:`TypedStoreBase.timestamp_of`) to stamp their results with the larger of both timestamps.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter
from typing import Any

from instance.state.bytes_store import BytesStore
from instance.state.change import Change, ValueAndTimestamp
from instance.state.change_logging import Batch, ChangeLoggingKeyValueStore
from instance.state.spec import StoreSpec

#: receives (key, Change(new value, old value), timestamp) for each change reaching the store
FlushListener = Callable[[Any, Change, int], None]

MISSING: Any = object()
#: the smallest write batch / dict bound, whatever the configured cache size
MIN_BUFFER = 1000
#: Change(new, old) without NamedTuple.__new__'s Python frame: ``new_change(Change, (new, old))``
new_change = tuple.__new__
_key_value = itemgetter(0, 1)
_timestamp = itemgetter(2)
_LONG = struct.Struct(">q")
#: the timestamp of a key with no value (Kafka Streams' ``RecordQueue.UNKNOWN``)
NO_TIMESTAMP = -1


def with_timestamps(batch: Batch) -> list[tuple[bytes, bytes | None]]:
    """``(key, value, timestamp)`` -> the rows of a timestamped bytes store (``ValueAndTimestamp``)."""
    pack = _LONG.pack
    return [(kb, None if vb is None else pack(ts) + vb) for kb, vb, ts in batch]


class TypedStoreBase:
    """Typed reads and queries over ``inner``; subclasses decide when a put is forwarded."""

    def __init__(self, spec: StoreSpec, inner: BytesStore, logged: ChangeLoggingKeyValueStore | None,
                 cache_max_entries: int) -> None:
        self.name = spec.name
        self.spec = spec
        self.inner = inner
        self._logged = logged
        self._ks = spec.key_serde.serialize
        self._kd = spec.key_serde.deserialize
        self._vs = spec.value_serde.serialize
        self._vd = spec.value_serde.deserialize
        self.timestamped = spec.timestamped and not spec.windowed
        if self.timestamped:
            vd = self._vd

            def value_of(data: bytes | None) -> Any:  # the bytes hold ValueAndTimestamp
                return None if data is None else vd(data[8:])
            self._vd = value_of
        #: timestamps of clean keys (a timestamped store's flushed puts; dirty ones are in _dirty)
        self._times: dict[Any, int] = {}
        #: the largest timestamp restored from the changelog (-1: none): the stream time a store
        #: that tracks one (versioned) had observed before it moved
        self.restored_stream_time = -1
        self._read = inner.get
        self._max = max(cache_max_entries, MIN_BUFFER)
        #: latest typed value per key: dirty ones and clean copies of the bytes store
        self._cache: dict[Any, Any] = {}
        #: keys whose value is not written below yet -> timestamp of the last put
        self._dirty: dict[Any, int] = {}
        self._listener: FlushListener | None = None
        #: called before each batch reaches the bytes store (the task invalidates its checkpoint:
        #: the store now holds writes the checkpoint does not describe)
        self.before_write: Callable[[], None] | None = None
        #: held from the swap of the dirty keys until the changelog has counted them (one lock
        #: per batch written, none per put): a query's position is read under it
        self.flush_lock = threading.Lock()
        #: batches and records written below (counted per batch: nothing is counted per put)
        self.batches_written = 0
        self.records_written = 0

    def set_flush_listener(self, listener: FlushListener | None) -> None:
        self._listener = listener

    def put(self, key: Any, value: Any, timestamp: int = 0) -> None:
        raise NotImplementedError

    def flush_cache(self) -> None:
        """Write the dirty values below as one batch (and forward them, when caching)."""
        raise NotImplementedError

    # -- reads --------------------------------------------------------------------------------
    def get(self, key: Any) -> Any:
        v = self._cache.get(key, MISSING)
        if v is not MISSING:
            return v
        v = self._load(key)
        if len(self._cache) >= self._max:
            self._make_room()
        self._cache[key] = v  # read-through: a later put knows its old value
        return v

    def _load(self, key: Any) -> Any:
        """The value in the bytes store (the last one written below)."""
        data = self._read(self._ks(key))  # type: ignore[arg-type]
        return None if data is None else self._vd(data)

    def timestamp_of(self, key: Any) -> int:
        """The timestamp of ``key``'s latest put; ``NO_TIMESTAMP`` if it has no value, and for a
        key not put since it was loaded in a store that is not timestamped."""
        ts = self._dirty.get(key)
        if ts is None:
            ts = self._times.get(key)
            if ts is None:
                data = self._read(self._ks(key))  # type: ignore[arg-type]
                if data is None or not self.timestamped:
                    return NO_TIMESTAMP
                ts = _LONG.unpack_from(data)[0]
        return ts

    def get_with_timestamp(self, key: Any) -> ValueAndTimestamp | None:
        """``ValueAndTimestamp(value, timestamp)`` of ``key``, or None."""
        v = self.get(key)
        return None if v is None else new_change(ValueAndTimestamp, (v, self.timestamp_of(key)))

    def query_get(self, key: Any) -> Any:
        """A read from another thread (interactive queries): never changes the cache."""
        v = self._cache.get(key, MISSING)
        return self._load(key) if v is MISSING else v

    def put_if_absent(self, key: Any, value: Any, timestamp: int = 0) -> Any:
        old = self.get(key)
        if old is None:
            self.put(key, value, timestamp)
        return old

    def delete(self, key: Any, timestamp: int = 0) -> Any:
        old = self.get(key)
        self.put(key, None, timestamp)
        return old

    # -- the bound ----------------------------------------------------------------------------
    def _make_room(self) -> None:
        """The cache is full: drop its clean entries. When dirty ones fill most of it, flush them
        first (else every later miss would copy them again)."""
        if len(self._dirty) > self._max // 2:
            self.flush_cache()
        self._keep_only_dirty()

    def _keep_only_dirty(self) -> None:
        cache, dirty = self._cache, self._dirty
        self._cache = {k: cache[k] for k in dirty} if dirty else {}
        self._times = {}

    # -- writes below -------------------------------------------------------------------------
    def position_with_unlogged(self, logged: Callable[[], int]) -> int:
        """``logged()`` (the changelog position counted so far) plus the records the changelog will
        receive for what the store holds now, one per dirty key. Under :attr:`flush_lock`, so never
        in the middle of a batch (swapped out, not counted yet); puts meanwhile only add."""
        with self.flush_lock:
            return logged() + len(self._dirty)

    def _take_dirty(self) -> tuple[dict[Any, int], list[Any], Batch]:
        """Swap out the dirty keys: (key -> timestamp, their values, the batch), serialized once.
        The caller holds :attr:`flush_lock` until :meth:`_write_below` returns."""
        dirty, self._dirty = self._dirty, {}
        if self.timestamped:
            self._times.update(dirty)
        values = list(map(self._cache.__getitem__, dirty))
        vs = self._vs
        vbs = [None if v is None else vs(v) for v in values]
        batch: Batch = list(zip(map(self._ks, dirty), vbs, dirty.values(), strict=True))  # type: ignore[arg-type]
        return dirty, values, batch

    def _write_below(self, batch: Batch) -> None:
        if self.before_write is not None:
            self.before_write()
        rows = self._rows(batch)
        if self._logged is not None:
            self._logged.write_batch(rows, batch)
        else:
            self.inner.write(rows)
        self.batches_written += 1
        self.records_written += len(batch)

    def _rows(self, batch: Batch) -> Iterable[tuple[bytes, bytes | None]]:
        """What the bytes store holds for ``batch``."""
        return with_timestamps(batch) if self.timestamped else map(_key_value, batch)

    def _after_write(self) -> None:
        """All entries are clean: when over the bound, drop them (reads fall through)."""
        if len(self._cache) > self._max:
            self._cache, self._times = {}, {}

    def flush(self) -> None:
        """``flush_cache`` and a durable flush of the bytes store (commit)."""
        self.flush_cache()
        self.inner.flush()

    # -- restore (bypasses the cache and the changelog) ----------------------------------------
    def restore_batch(self, records: Batch) -> None:
        """Changelog records ``(key, value, timestamp)`` straight to the bytes store."""
        self.inner.write(self._rows(records))
        latest = max(map(_timestamp, records), default=-1)
        if latest > self.restored_stream_time:
            self.restored_stream_time = latest
        if self._cache or self._times:
            kd = self._kd
            for r in records:
                self._forget(kd(r[0]))

    def _forget(self, key: Any) -> None:
        self._cache.pop(key, None)
        self._dirty.pop(key, None)
        self._times.pop(key, None)

    # -- queries ------------------------------------------------------------------------------
    def range(self, start: Any, end: Any) -> Iterator[tuple[Any, Any]]:
        """Entries with ``start <= key <= end`` (by serialized key; None = unbounded) in key-byte
        order, the cache overlaid on the bytes store (a cached None hides a stored key)."""
        ks, kd, vd = self._ks, self._kd, self._vd

        def key_bytes(k: Any) -> bytes:
            kb = ks(k)
            if kb is None:
                raise ValueError(f"store {self.name}: key must not be None")
            return kb

        sb = None if start is None else key_bytes(start)
        eb = None if end is None else key_bytes(end) + b"\x00"  # inclusive end, like Kafka Streams
        overlay: list[tuple[bytes, Any]] = []
        for k, v in list(self._cache.items()):
            kb = key_bytes(k)
            if (sb is None or kb >= sb) and (eb is None or kb < eb):
                overlay.append((kb, v))
        overlay.sort(key=lambda e: e[0])
        # a lazy merge: a page of a scan reads only as far into the store as it yields
        i, n = 0, len(overlay)
        for kb, vb in self.inner.items(sb, eb):
            while i < n and overlay[i][0] < kb:
                if overlay[i][1] is not None:
                    yield kd(overlay[i][0]), overlay[i][1]
                i += 1
            if i < n and overlay[i][0] == kb:
                if overlay[i][1] is not None:
                    yield kd(kb), overlay[i][1]
                i += 1
            else:
                yield kd(kb), vd(vb)
        for kb, v in overlay[i:]:
            if v is not None:
                yield kd(kb), v

    def approximate_num_entries(self) -> int:
        return self.inner.approximate_num_entries() + len(self._dirty)

    def close(self) -> None:
        self.inner.close()
