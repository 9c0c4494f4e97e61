"""Composes a task's key-value store from its spec (Kafka Streams' ``KeyValueStoreBuilder``): the
only place the layers are put together."""

from __future__ import annotations

from instance.state.bytes_store import BytesStore
from instance.state.caching import CachingKeyValueStore
from instance.state.change_logging import ChangeLoggingKeyValueStore, ChangelogSend
from instance.state.kv_store import KeyValueStore
from instance.state.metered import MeteredKeyValueStore
from instance.state.spec import StoreSpec
from instance.state.typed_store import TypedStoreBase
from instance.state.uncached import UncachedKeyValueStore


def build_key_value_store(spec: StoreSpec, inner: BytesStore, changelog: ChangelogSend | None,
                          cache_max_entries: int) -> KeyValueStore:
    """Metered -> Caching (or Uncached: ``spec.caching_enabled`` false or ``cache_max_entries`` 0)
    -> ChangeLogging (if ``spec.logging_enabled`` and there is a changelog) -> ``inner``."""
    logged = (ChangeLoggingKeyValueStore(inner, changelog)
              if spec.logging_enabled and changelog is not None else None)
    typed: TypedStoreBase
    if spec.caching_enabled and cache_max_entries > 0:
        typed = CachingKeyValueStore(spec, inner, logged, cache_max_entries)
    else:
        typed = UncachedKeyValueStore(spec, inner, logged, cache_max_entries)
    return MeteredKeyValueStore(spec, inner, typed)
