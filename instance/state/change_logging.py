"""Kafka Streams' ``ChangeLoggingKeyValueBytesStore``: bytes in, bytes out; every batch written to
the bytes store below is also sent to the changelog topic, as one call per batch.

Only writes pass through this layer: the typed layer above reads the bytes store directly (a
delegating ``get`` would be one more Python call per cache miss, for nothing). Without logging
(``spec.logging_enabled`` false, or no changelog) the builder leaves this layer out; that is why
the ``before_write`` hook is called by the typed layer that issues the batch, not here: unlogged
stores must call it too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from instance.state.bytes_store import BytesStore

#: one batch of (key, value or None = delete, timestamp), deduplicated per key
Batch = list[tuple[bytes, bytes | None, int]]
#: logs one batch to the changelog
ChangelogSend = Callable[[Batch], None]


class ChangeLoggingKeyValueStore:
    """Writes each batch to ``inner``, then the same batch to the changelog (store first, then
    log, as Kafka Streams' layer does per put)."""

    def __init__(self, inner: BytesStore, changelog: ChangelogSend) -> None:
        self.name = inner.name
        self.inner = inner
        self._changelog = changelog

    def write_batch(self, rows: Iterable[tuple[bytes, bytes | None]], batch: Batch) -> None:
        """``rows`` to the bytes store, ``batch`` (the same records as the changelog carries them:
        plain values, the timestamp apart) to the changelog."""
        self.inner.write(rows)
        self._changelog(batch)
