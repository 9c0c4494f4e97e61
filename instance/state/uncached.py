"""The typed layer with caching off (``spec.caching_enabled`` false or no cache): every put is
forwarded at once as ``(key, Change(new, old), timestamp)``, ``old`` being the value before this
put. Writes still go below in batches (at flush, or every ``max(cache entries, 1000)`` keys),
deduplicated per key and serialized once per batch: nothing outside can tell, but the changelog's
volume, and reads see the pending writes.
"""

from __future__ import annotations

from typing import Any

from instance.state.change import Change
from instance.state.typed_store import MISSING, TypedStoreBase, new_change


class UncachedKeyValueStore(TypedStoreBase):
    """Forward on put, write behind."""

    def put(self, key: Any, value: Any, timestamp: int = 0) -> None:
        if key is None:
            raise ValueError(f"store {self.name}: key must not be None")
        cache = self._cache
        old = cache.get(key, MISSING)
        if old is MISSING:
            old = self._load(key)
        cache[key] = value
        dirty = self._dirty
        dirty[key] = timestamp
        if len(dirty) > self._max:
            self.flush_cache()
        listener = self._listener
        if listener is not None:
            listener(key, new_change(Change, (value, old)), timestamp)

    def flush_cache(self) -> None:
        """Write the pending puts below (they were forwarded when put)."""
        if not self._dirty:
            return
        with self.flush_lock:
            _, _, batch = self._take_dirty()
            self._write_below(batch)
        self._after_write()
