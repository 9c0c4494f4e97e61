"""StreamsBuilder, the DSL's entry point: sources (streams, tables, global tables) and ``build()``.
The handles it returns are in ``dsl.py``; what they add to the graph in the modules below it."""

from __future__ import annotations

from typing import Any

from instance.errors import TopologyException
from instance.topology.dsl import KGroupedStream, KStream, KTable
from instance.topology.global_table import GlobalKTable, global_table
from instance.topology.graph import DslGraph
from instance.topology.ktable import source_table
from instance.topology.materialized import Materialized, MaterializedArg, materialized_of
from instance.topology.options import Consumed
from instance.topology.refs import StreamRef
from instance.topology.topology import Topology
from kernel.serdes import Serde

__all__ = ["StreamsBuilder", "KStream", "KGroupedStream", "KTable"]


class StreamsBuilder(DslGraph):
    """Entry point of the DSL; ``build()`` returns the :class:`Topology`."""

    def stream(self, *topics: str | Consumed, key_serde: Serde | None = None,
               value_serde: Serde | None = None, consumed: Consumed | None = None) -> KStream:
        """``stream("a", "b")``, optionally with a :class:`Consumed` (also positionally, as in
        Java: ``stream("a", Consumed.with_(S, S))``)."""
        names: list[str] = []
        for t in topics:
            if isinstance(t, Consumed):
                if consumed is not None:
                    raise TopologyException("Consumed given twice")
                consumed = t
            elif isinstance(t, str):
                names.append(t)
            else:
                raise TopologyException(f"a topic name must be a string, got {type(t).__name__}")
        c = consumed or Consumed()
        ks = key_serde or c.key_serde or self.default_key_serde
        vs = value_serde or c.value_serde or self.default_value_serde
        name = c.name or self.new_name("KSTREAM-SOURCE-")
        self.topology.add_source(name, *names, key_serde=ks, value_serde=vs,
                                 timestamp_extractor=c.timestamp_extractor)
        return KStream(self, StreamRef(name, ks, vs))

    def table(self, topic: str, materialized: MaterializedArg | Consumed = None, key_serde: Any = None,
              value_serde: Serde | None = None, consumed: Consumed | None = None) -> KTable:
        """``table(topic[, consumed][, materialized])`` as in Java, or with keyword serdes."""
        c, m, ks, vs = _table_args(materialized, key_serde, value_serde, consumed)
        ks = ks or c.key_serde or m.key_serde or self.default_key_serde
        vs = vs or c.value_serde or m.value_serde or self.default_value_serde
        return KTable(self, source_table(self, topic, c, m, ks, vs))

    def global_table(self, topic: str, materialized: MaterializedArg | Consumed = None, key_serde: Any = None,
                     value_serde: Serde | None = None, consumed: Consumed | None = None) -> GlobalKTable:
        """A table of the whole topic on every instance (instance/topology/global_table.py)."""
        c, m, ks, vs = _table_args(materialized, key_serde, value_serde, consumed)
        if c.timestamp_extractor is not None or c.name is not None:
            raise TopologyException("a global table's Consumed takes serdes only")
        return global_table(self, topic, m, ks or c.key_serde, vs or c.value_serde)

    def build(self) -> Topology:
        self.topology.subtopologies()  # validates reachability
        return self.topology


def _table_args(materialized: Any, key_serde: Any, value_serde: Serde | None,
                consumed: Consumed | None) -> tuple[Consumed, Materialized, Serde | None, Serde | None]:
    """``table``'s arguments in either form: ``(topic, consumed[, materialized])`` (Java) or
    ``(topic, materialized, key_serde, value_serde)``."""
    if isinstance(materialized, Consumed):
        if consumed is not None:
            raise TopologyException("Consumed given twice")
        consumed, materialized = materialized, None
        if isinstance(key_serde, Materialized | str):
            materialized, key_serde = key_serde, None
    if key_serde is not None and not hasattr(key_serde, "serialize"):
        raise TopologyException(f"key_serde must be a Serde, got {type(key_serde).__name__}")
    if materialized is not None and not isinstance(materialized, Materialized | str):
        raise TopologyException(f"expected Materialized or a store name, got {type(materialized).__name__}")
    return consumed or Consumed(), materialized_of(materialized), key_serde, value_serde
