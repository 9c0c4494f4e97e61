"""What the DSL's graph-building functions take and return: plain values naming a node of the
topology with its serdes, never the handle classes (KStream, KTable...) of ``dsl.py``, which wrap
them. So the functions sit below the handles and the DSL has no import cycle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from instance.topology import table_processors as TP
from instance.topology.processors import OldValues
from instance.topology.topology import Topology
from kernel.serdes import Serde


class NodeRef(Protocol):
    """What every ref has: the node the next operation attaches to, and its serdes."""

    @property
    def node(self) -> str: ...

    @property
    def key_serde(self) -> Serde | None: ...

    @property
    def value_serde(self) -> Serde | None: ...


@dataclass(frozen=True)
class StreamRef:
    """A record stream's last node; ``repartition_required`` once a key-changing operation ran."""

    node: str
    key_serde: Serde | None
    value_serde: Serde | None
    repartition_required: bool = False


@dataclass(frozen=True)
class GroupedRef:
    """A grouped stream or table before its aggregation; ``repartition_name`` is a ``Grouped``'s
    name (the repartition topic is ``<name>-repartition``, else named after the store)."""

    node: str
    key_serde: Serde
    value_serde: Serde
    repartition_required: bool
    repartition_name: str | None = None


def store_getter(store: str) -> TP.GetterFactory:
    """The timestamped getter of a materialized table."""
    return lambda context: context.get_state_store(store).get_with_timestamp


@dataclass(frozen=True)
class TableRef:
    """A changelog stream's node. ``store`` is None for an unmaterialized table, whose values are
    computed by ``getter`` from the stores ``getter_stores`` of the tables ``upstream``."""

    node: str
    store: str | None
    key_serde: Serde | None
    value_serde: Serde | None
    old_values: OldValues
    getter: TP.GetterFactory
    getter_stores: tuple[str, ...]
    upstream: tuple[TableRef, ...] = ()
    #: a versioned source table: its store's history retention (lookups as of a timestamp)
    history_retention_ms: int | None = None
    #: a windowed aggregation's windows (``suppress`` needs their grace)
    windows: object | None = None

    @staticmethod
    def materialized(node: str, store: str, key_serde: Serde | None, value_serde: Serde | None,
                     old_values: OldValues | None = None, windows: object | None = None) -> TableRef:
        """A table read from its own store."""
        return TableRef(node, store, key_serde, value_serde, old_values or OldValues(), store_getter(store),
                        (store,), windows=windows)

    def enable_send_old_values(self) -> None:
        """Ask this node for old values; an unmaterialized one passes the request upstream."""
        self.old_values.enabled = True
        if self.store is None:
            for parent in self.upstream:
                parent.enable_send_old_values()

    def connect_getter(self, topology: Topology, processor: str) -> TP.GetterFactory:
        """Give ``processor`` access to this table's current values; returns the (timestamped)
        getter factory."""
        for s in self.getter_stores:
            topology.connect_processor_and_state_stores(s, processor)
        return self.getter

    def value_getter(self) -> TP.GetterFactory:
        """A getter of plain values (a materialized table's own ``get``); connect the reader with
        :meth:`connect_getter`."""
        store = self.store
        if store is not None and self.history_retention_ms is None:
            return lambda context: context.get_state_store(store).get
        return TP.values_of(self.getter)
