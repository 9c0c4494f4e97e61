"""Kafka Streams' ``CachingKeyValueStore`` (caching on): puts land in a dict; on flush (commit, or
when the dict is full) the dirty entries go below as one batch and are forwarded downstream as
``(key, Change(new, old), timestamp)``, the latest value per key per flush.

Deviation from Kafka Streams, on purpose: its cache holds serialized bytes (shared by all stores
of a thread, sized in bytes); this one holds the typed Python objects and is per store, sized in
entries. Python pays per call, so serializing once per key per flush instead of on every put (and
deserializing never on a hit) is where the throughput comes from.

``old`` is the value as of the previous flush, i.e. what downstream last saw, as Kafka Streams'
cache-flush listener gives it. ``_flushed`` keeps it, typed, for the keys in the cache (get misses
read through into it, flushes update it), so a put stays two dict stores; only a key put without
being read since it left the cache costs a store read, at flush.
"""

from __future__ import annotations

from itertools import repeat
from operator import is_
from typing import Any

from instance.state.bytes_store import BytesStore
from instance.state.change import Change
from instance.state.change_logging import ChangeLoggingKeyValueStore
from instance.state.spec import StoreSpec
from instance.state.typed_store import MISSING, TypedStoreBase, new_change


class CachingKeyValueStore(TypedStoreBase):
    """Typed write-back cache; a put touches only dicts."""

    def __init__(self, spec: StoreSpec, inner: BytesStore, logged: ChangeLoggingKeyValueStore | None,
                 cache_max_entries: int) -> None:
        super().__init__(spec, inner, logged, cache_max_entries)
        #: the value as of the last flush (= in the bytes store) of keys in the cache
        self._flushed: dict[Any, Any] = {}

    def put(self, key: Any, value: Any, timestamp: int = 0) -> None:
        if key is None:
            raise ValueError(f"store {self.name}: key must not be None")
        if value is None and self.get(key) is None:
            return  # deleting what is not there: nothing to write or forward (as Kafka Streams)
        self._cache[key] = value
        dirty = self._dirty
        dirty[key] = timestamp
        if len(dirty) > self._max:
            self.flush_cache()

    def get(self, key: Any) -> Any:
        v = self._cache.get(key, MISSING)
        if v is not MISSING:
            return v
        v = self._load(key)
        if len(self._cache) >= self._max:
            self._make_room()
        self._cache[key] = self._flushed[key] = v  # read-through, and the old value of a later put
        return v

    def flush_cache(self) -> None:
        """Write the dirty entries below as one batch, then forward them to the listener."""
        if not self._dirty:
            return
        with self.flush_lock:
            dirty, values, batch = self._take_dirty()
            listener = self._listener
            if listener is not None:
                flushed = self._flushed
                olds = list(map(flushed.get, dirty, repeat(MISSING)))
                if any(map(is_, olds, repeat(MISSING))):  # keys put without being read: ask below,
                    load = self._load  # before the batch overwrites them
                    olds = [load(k) if o is MISSING else o for k, o in zip(dirty, olds, strict=True)]
            self._write_below(batch)
        # every entry is clean now: the flushed values are the cache (a copy is cheaper than an
        # update unless the cache is much larger than what was dirty)
        cache = self._cache
        if len(cache) > self._max:
            self._cache, self._flushed, self._times = {}, {}, {}
        elif len(cache) <= 2 * len(dirty):
            self._flushed = cache.copy()
        else:
            self._flushed.update(zip(dirty, values, strict=True))
        if listener is not None:
            changes = map(new_change, repeat(Change), zip(values, olds, strict=True))
            for k, change, ts in zip(dirty, changes, dirty.values(), strict=True):
                if change[0] is not None or change[1] is not None:  # put, then deleted: no change
                    listener(k, change, ts)

    def _keep_only_dirty(self) -> None:
        super()._keep_only_dirty()
        flushed = self._flushed
        self._flushed = {k: flushed[k] for k in self._dirty if k in flushed}

    def _forget(self, key: Any) -> None:
        super()._forget(key)
        self._flushed.pop(key, None)
