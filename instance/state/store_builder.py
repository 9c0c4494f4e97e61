"""Builds a task's key-value store from its spec (Kafka Streams' ``KeyValueStoreBuilder``)."""

from __future__ import annotations

from instance.state.bytes_store import BytesStore
from instance.state.kv_store import ChangelogSend, KeyValueStore
from instance.state.spec import StoreSpec


def build_key_value_store(spec: StoreSpec, inner: BytesStore, changelog: ChangelogSend | None,
                          cache_max_entries: int) -> KeyValueStore:
    """The typed store over ``inner``, logging to ``changelog`` and caching as ``spec`` says."""
    return KeyValueStore(spec, inner, changelog, cache_max_entries)
