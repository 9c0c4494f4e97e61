"""StoreSpec: how a store is built (Kafka Streams' StoreBuilder / Materialized)."""

from __future__ import annotations

from dataclasses import dataclass

from instance.serde import Serde


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

    def changelog_topic(self, application_id: str) -> str:
        return f"{application_id}-{self.name}-changelog"
