"""The typed key-value store processors and queries use: a record cache over a bytes store,
with every flushed change written to the changelog topic.

The cache is the write path (see ARCHITECTURE.md, "Where the speed comes from"): puts land in a
dict of Python objects; on commit, or when the cache is full, dirty entries are serialized once,
written to RocksDB as one batch, sent to the changelog, and forwarded downstream (for KTables:
Kafka Streams' cache-flush forwarding, so downstream sees the latest value per key per commit).
With caching off every put is forwarded at once, and written to RocksDB and the changelog in
batches (deduplicated per key; unobservable outside but the changelog's volume).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from instance.errors import InvalidStateStoreException
from instance.state.bytes_store import BytesStore
from instance.state.spec import StoreSpec

#: logs one batch of (key, value or None, timestamp) to the changelog
ChangelogSend = Callable[[list[tuple[bytes, bytes | None, int]]], None]
FlushListener = Callable[[Any, Any, int], None]

_MISSING = object()
_STORED = object()
_MIN_BUFFER = 1000


class KeyValueStore:
    """Kafka Streams' ``KeyValueStore`` (cached, change-logged) for one task."""

    def __init__(self, spec: StoreSpec, inner: BytesStore, changelog: ChangelogSend | None,
                 cache_max_entries: int) -> None:
        self.name = spec.name
        self.spec = spec
        self.inner = inner
        self._changelog = changelog if spec.logging_enabled else None
        self._ks = spec.key_serde.serialize
        self._kd = spec.key_serde.deserialize
        self._vs = spec.value_serde.serialize
        self._vd = spec.value_serde.deserialize
        self._caching = spec.caching_enabled and cache_max_entries > 0
        self._max = max(cache_max_entries, _MIN_BUFFER)
        self._cache: dict[Any, Any] = {}
        self._dirty: dict[Any, int] = {}
        # without caching: serialized writes already forwarded, not yet in the bytes store nor
        # the changelog; written and logged as one batch (reads see them through ``_cache``)
        self._unwritten: dict[bytes, tuple[bytes | None, int]] = {}
        self._listener: FlushListener | None = None
        #: called before each batch written to the bytes store (the task invalidates its
        #: checkpoint: the store now holds writes the checkpoint does not describe)
        self.before_write: Callable[[], None] | None = None
        self._open = True

    # -- processor side ---------------------------------------------------------------------
    def set_flush_listener(self, listener: FlushListener | None) -> None:
        """Called with (key, new value, timestamp) for each change reaching the store."""
        self._listener = listener

    def get(self, key: Any) -> Any:
        v = self._cache.get(key, _MISSING)
        if v is not _MISSING:
            return v
        data = self.inner.get(self._ks(key))  # type: ignore[arg-type]
        return None if data is None else self._vd(data)

    def put(self, key: Any, value: Any, timestamp: int = 0) -> None:
        if key is None:
            raise ValueError(f"store {self.name}: key must not be None")
        if self._caching:
            self._cache[key] = value
            self._dirty[key] = timestamp
            if len(self._dirty) > self._max:
                self.flush_cache()
            return
        kb = self._ks(key)
        vb = None if value is None else self._vs(value)
        self._cache[key] = value
        self._unwritten[kb] = (vb, timestamp)  # type: ignore[index]
        if len(self._unwritten) > self._max:
            self._write_unwritten()
        if self._listener is not None:
            self._listener(key, value, timestamp)

    def put_if_absent(self, key: Any, value: Any, timestamp: int = 0) -> Any:
        old = self.get(key)
        if old is None:
            self.put(key, value, timestamp)
        return old

    def delete(self, key: Any, timestamp: int = 0) -> Any:
        old = self.get(key)
        self.put(key, None, timestamp)
        return old

    def _write_unwritten(self) -> None:
        if self.before_write is not None:
            self.before_write()
        unwritten, self._unwritten = self._unwritten, {}
        self.inner.write([(kb, vb) for kb, (vb, _) in unwritten.items()])
        if self._changelog is not None:
            self._changelog([(kb, vb, ts) for kb, (vb, ts) in unwritten.items()])
        if len(self._cache) > self._max:
            self._cache = {}

    def flush_cache(self) -> None:
        """Write dirty entries to the bytes store and the changelog, then forward them."""
        if self._unwritten:
            self._write_unwritten()
        if not self._dirty:
            return
        dirty, self._dirty = self._dirty, {}
        cache = self._cache
        ks, vs = self._ks, self._vs
        batch = []
        for key in dirty:
            v = cache[key]
            batch.append((ks(key), None if v is None else vs(v)))
        if self.before_write is not None:
            self.before_write()
        self.inner.write(batch)  # type: ignore[arg-type]
        if self._changelog is not None:
            self._changelog([(kb, vb, ts) for (kb, vb), ts in zip(batch, dirty.values(), strict=True)])  # type: ignore[misc]
        listener = self._listener
        if listener is not None:
            for key, ts in dirty.items():
                listener(key, cache[key], ts)
        if len(cache) > self._max:
            # clean entries only remain; reads fall through to the bytes store already written
            self._cache = {}

    def flush(self) -> None:
        self.flush_cache()
        self.inner.flush()

    # -- restore side (bypasses cache and changelog) -----------------------------------------
    def restore_batch(self, records: list[tuple[bytes, bytes | None]]) -> None:
        self.inner.write(records)
        if self._cache:
            kd = self._kd
            for kb, _ in records:
                self._cache.pop(kd(kb), None)

    # -- query side --------------------------------------------------------------------------
    def query_get(self, key: Any) -> Any:
        """Read for an interactive query: cache first, then the bytes store."""
        if not self._open:
            raise InvalidStateStoreException(f"store {self.name} is closed (migrated?)")
        return self.get(key)

    def all(self) -> Iterator[tuple[Any, Any]]:
        """All entries in key-byte order, the cache overlaid on the bytes store."""
        yield from self.range(None, None)

    def range(self, start: Any, end: Any) -> Iterator[tuple[Any, Any]]:
        """Entries with ``start <= key <= end`` (by serialized key) in key-byte order, the cache
        overlaid on the bytes store (a cached None hides a stored key)."""
        ks, kd, vd = self._ks, self._kd, self._vd

        def key_bytes(k: Any) -> bytes:
            kb = ks(k)
            if kb is None:
                raise ValueError(f"store {self.name}: key must not be None")
            return kb

        sb = None if start is None else key_bytes(start)
        eb = None if end is None else key_bytes(end) + b"\x00"  # inclusive end, like Kafka Streams
        merged: dict[bytes, Any] = {kb: _STORED for kb, _ in self.inner.items(sb, eb)}
        for k, v in list(self._cache.items()):
            kb = key_bytes(k)
            if (sb is None or kb >= sb) and (eb is None or kb < eb):
                merged[kb] = v
        for kb in sorted(merged):
            v = merged[kb]
            if v is _STORED:
                data = self.inner.get(kb)
                if data is not None:
                    yield kd(kb), vd(data)
            elif v is not None:
                yield kd(kb), v

    def approximate_num_entries(self) -> int:
        return self.inner.approximate_num_entries() + len(self._dirty)

    def close(self) -> None:
        self._open = False
        self.inner.close()

    @property
    def is_open(self) -> bool:
        return self._open
