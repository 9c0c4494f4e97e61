"""Composes a task's store from its spec (Kafka Streams' ``KeyValueStoreBuilder``,
``WindowStoreBuilder``, ``SessionStoreBuilder``): the only place the layers are put together."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from instance.state import session_store, window_store
from instance.state.bytes_store import BytesStore
from instance.state.caching import CachingKeyValueStore
from instance.state.change_logging import ChangeLoggingKeyValueStore, ChangelogSend
from instance.state.committed_view import CommittedView
from instance.state.kv_store import KeyValueStore
from instance.state.metered import MeteredKeyValueStore
from instance.state.segmented import SegmentedBytesStore, segment_interval
from instance.state.spec import StoreSpec
from instance.state.typed_store import TypedStoreBase
from instance.state.uncached import UncachedKeyValueStore
from instance.state.windowed_base import WindowedStoreBase


def _typed(spec: StoreSpec, inner: BytesStore, changelog: ChangelogSend | None,
           cache_max_entries: int) -> TypedStoreBase:
    """Caching (or Uncached: ``spec.caching_enabled`` false or ``cache_max_entries`` 0)
    -> ChangeLogging (if ``spec.logging_enabled`` and there is a changelog) -> ``inner``."""
    logged = (ChangeLoggingKeyValueStore(inner, changelog)
              if spec.logging_enabled and changelog is not None else None)
    if spec.caching_enabled and cache_max_entries > 0:
        return CachingKeyValueStore(spec, inner, logged, cache_max_entries)
    return UncachedKeyValueStore(spec, inner, logged, cache_max_entries)


def build_key_value_store(spec: StoreSpec, inner: BytesStore, changelog: ChangelogSend | None,
                          cache_max_entries: int, committed_reads: bool = False) -> KeyValueStore:
    """Metered -> Caching/Uncached -> ChangeLogging -> ``inner``. ``committed_reads`` (an active
    task under exactly-once): -> CommittedView -> ``inner``, and queries read an uncached typed
    layer over the view's committed side."""
    if not committed_reads:
        return MeteredKeyValueStore(spec, inner, _typed(spec, inner, changelog, cache_max_entries))
    view = CommittedView(inner)
    return MeteredKeyValueStore(spec, inner, _typed(spec, view, changelog, cache_max_entries),
                                (view, UncachedKeyValueStore(spec, view.committed, None, 0)))


def build_window_store(spec: StoreSpec, inner: BytesStore, changelog: ChangelogSend | None,
                       cache_max_entries: int, committed_reads: bool = False) -> window_store.WindowStore:
    """WindowStore -> the key-value layers (tuple keys) -> SegmentedBytesStore -> ``inner``."""
    return _windowed(window_store.WindowStore, window_store.typed_spec(spec), window_store.SUFFIX,
                     spec, inner, changelog, cache_max_entries, committed_reads)


def build_session_store(spec: StoreSpec, inner: BytesStore, changelog: ChangelogSend | None,
                        cache_max_entries: int, committed_reads: bool = False) -> session_store.SessionStore:
    """SessionStore -> the key-value layers (tuple keys) -> SegmentedBytesStore -> ``inner``."""
    return _windowed(session_store.SessionStore, session_store.typed_spec(spec), session_store.SUFFIX,
                     spec, inner, changelog, cache_max_entries, committed_reads)


W = TypeVar("W", bound=WindowedStoreBase)


def _windowed(kind: Callable[[StoreSpec, SegmentedBytesStore, TypedStoreBase], W], typed_spec: StoreSpec,
              suffix: int, spec: StoreSpec, inner: BytesStore, changelog: ChangelogSend | None,
              cache_max_entries: int, committed_reads: bool) -> W:
    """``kind`` -> the key-value layers -> SegmentedBytesStore -> ``inner``; ``committed_reads``:
    -> CommittedView -> ``inner``, and queries read a copy of the store whose segments and
    uncached typed layer are over the view's committed side."""
    interval = segment_interval(spec.retention_ms)
    view = CommittedView(inner) if committed_reads else None
    seg = SegmentedBytesStore(inner if view is None else view, interval, suffix)
    store = kind(spec, seg, _typed(typed_spec, seg, changelog, cache_max_entries))
    if view is not None:
        committed = SegmentedBytesStore(view.committed, interval, suffix)
        committed.segments = seg.segments  # the same live segments
        store.read_committed(view, committed, UncachedKeyValueStore(typed_spec, committed, None, 0))
    return store


def build_store(spec: StoreSpec, inner: BytesStore, changelog: ChangelogSend | None,
                cache_max_entries: int, committed_reads: bool = False) -> Any:
    """The store ``spec.kind`` names. ``committed_reads``: queries read what the last commit left
    (an active task under exactly-once; ``committed_view.py``)."""
    if spec.kind == "window":
        return build_window_store(spec, inner, changelog, cache_max_entries, committed_reads)
    if spec.kind == "session":
        return build_session_store(spec, inner, changelog, cache_max_entries, committed_reads)
    return build_key_value_store(spec, inner, changelog, cache_max_entries, committed_reads)
