"""Materialized: the name, serdes and kind of a store the DSL creates (Kafka Streams'
``Materialized``), and the store a KTable materializes into.

A module of its own because every DSL module that creates a store (KStream and KTable
aggregations, joins, global tables, versioned tables, cogroups) takes one, while none of them
needs the others for it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

from instance.errors import TopologyException
from instance.state.spec import StoreSpec
from instance.state.versioned_store import VersionedStoreSupplier
from kernel.serdes import Serde


@dataclass(frozen=True)
class Materialized:
    """Name and serdes of a store (Kafka Streams' ``Materialized``)."""

    name: str | None = None
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    caching_enabled: bool = True
    logging_enabled: bool = True
    in_memory: bool = False
    #: a versioned store (KIP-889) keeping this much history; only for a source table
    history_retention_ms: int | None = None
    #: window and session stores: how long windows are kept (default: window size + grace)
    retention_ms: int | None = None

    @staticmethod
    def as_(name: str | VersionedStoreSupplier) -> Materialized:
        if isinstance(name, VersionedStoreSupplier):
            return Materialized(name=name.name, caching_enabled=False,
                                history_retention_ms=name.history_retention_ms)
        return Materialized(name=name)

    # -- Kafka Streams' builder chain: each returns a copy ---------------------------------------
    @staticmethod
    def with_(key_serde: Serde | None = None, value_serde: Serde | None = None) -> Materialized:
        """Serdes only; the store's name is generated (Kafka Streams' ``Materialized.with``)."""
        return Materialized(key_serde=key_serde, value_serde=value_serde)

    def with_key_serde(self, serde: Serde) -> Materialized:
        return replace(self, key_serde=serde)

    def with_value_serde(self, serde: Serde) -> Materialized:
        return replace(self, value_serde=serde)

    def with_caching_enabled(self) -> Materialized:
        return replace(self, caching_enabled=True)

    def with_caching_disabled(self) -> Materialized:
        return replace(self, caching_enabled=False)

    def with_logging_enabled(self, config: dict[str, str] | None = None) -> Materialized:
        """Logging on (the default); topic configs for the changelog are not supported."""
        if config:
            raise TopologyException("changelog topic configs (with_logging_enabled(config)) are not supported")
        return replace(self, logging_enabled=True)

    def with_logging_disabled(self) -> Materialized:
        return replace(self, logging_enabled=False)

    def with_retention(self, retention: int | timedelta) -> Materialized:
        """How long a window or session store keeps windows: milliseconds, or a timedelta (Java's
        ``Duration``); at least window size + grace."""
        ms = int(retention.total_seconds() * 1000) if isinstance(retention, timedelta) else retention
        if not isinstance(ms, int) or isinstance(ms, bool) or ms < 0:
            raise TopologyException(f"retention must be a non-negative number of ms, got {retention!r}")
        return replace(self, retention_ms=ms)

    def with_store_type(self, store_type: str) -> Materialized:
        """``"rocks_db"`` (the default) or ``"in_memory"`` (Kafka Streams' ``StoreType``)."""
        kind = store_type.lower().replace("-", "_") if isinstance(store_type, str) else store_type
        if kind not in ("rocks_db", "in_memory"):
            raise TopologyException(f"store type must be 'rocks_db' or 'in_memory', got {store_type!r}")
        return replace(self, in_memory=kind == "in_memory")


MaterializedArg = Materialized | str | None


def materialized_of(m: MaterializedArg) -> Materialized:
    """A store argument in any accepted form (None, a store name, a Materialized) as a Materialized."""
    if m is None:
        return Materialized()
    if isinstance(m, str):
        return Materialized(name=m)
    return m


def table_store_spec(name: str, ks: Serde, vs: Serde, m: Materialized) -> StoreSpec:
    """A KTable's store: timestamped, as Kafka Streams materializes every KTable."""
    return StoreSpec(name, ks, vs, logging_enabled=m.logging_enabled,
                     caching_enabled=m.caching_enabled, in_memory=m.in_memory, timestamped=True)
