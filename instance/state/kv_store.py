"""The typed key-value store processors, queries and the runtime hold: ``KeyValueStore``, the top
(Metered) of the layers ``store_builder.build_key_value_store`` composes:

    MeteredKeyValueStore          metered.py         API, closed check, counters
    CachingKeyValueStore          caching.py         typed write-back cache, forwards on flush
      or UncachedKeyValueStore    uncached.py        caching off: forwards each put, writes in batches
    ChangeLoggingKeyValueStore    change_logging.py  each batch also to the changelog (if logged)
    BytesStore                    bytes_store.py     RocksDB or in memory

Flush listeners receive ``(key, Change(new, old), timestamp)`` (``change.py``).
"""

from __future__ import annotations

from instance.state.change import Change
from instance.state.change_logging import ChangelogSend
from instance.state.metered import MeteredKeyValueStore
from instance.state.typed_store import FlushListener

__all__ = ["Change", "ChangelogSend", "FlushListener", "KeyValueStore"]

#: Kafka Streams' ``KeyValueStore`` for one task (build it with ``build_key_value_store``)
KeyValueStore = MeteredKeyValueStore
