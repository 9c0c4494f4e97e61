"""StoreSpec: how a store is built (Kafka Streams' StoreBuilder / Materialized)."""

from __future__ import annotations

from dataclasses import dataclass

from kernel.serdes import Serde


@dataclass(frozen=True)
class StoreSpec:
    """A key-value store: name, serdes, and its layers. ``in_memory`` stores still log to a
    changelog (like ``Stores.inMemoryKeyValueStore``) so they are restored after a move."""

    name: str
    key_serde: Serde
    value_serde: Serde
    logging_enabled: bool = True
    caching_enabled: bool = True
    in_memory: bool = False
    #: "kv", "window" or "session": which store ``store_builder.build_store`` composes
    kind: str = "kv"
    #: window and session stores: how long a window is kept after stream time passed its start/end
    retention_ms: int = 0
    #: window stores: the window size (windowed keys of queries and of the changelog's readers)
    window_size_ms: int = 0
    #: window stores: keep every put of one key and window (stream-stream join buffers)
    retain_duplicates: bool = False
    #: window stores: values carry the timestamp of their latest record (windowed aggregations)
    timestamped: bool = False

    @property
    def windowed(self) -> bool:
        return self.kind != "kv"

    def changelog_topic(self, application_id: str) -> str:
        return f"{application_id}-{self.name}-changelog"
