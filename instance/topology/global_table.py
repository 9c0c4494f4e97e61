"""GlobalKTable: a table every instance holds whole (all partitions of its topic), so a stream
joins it by any key it computes, without co-partitioning or repartitioning. The store is filled
by the global thread (instance/runtime/global_thread.py), bootstrapped before processing starts;
stream threads only read it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from instance.errors import TopologyException
from instance.topology import table_processors as TP
from instance.topology.materialized import MaterializedArg, materialized_of, table_store_spec
from router.core.serdes import Serde

if TYPE_CHECKING:
    from instance.topology.builder import KStream, StreamsBuilder


def global_store_getter(store: str) -> TP.GetterFactory:
    """Reads that never fill a cache: the global thread writes the store concurrently."""
    return lambda context: context.get_state_store(store).query_get


class GlobalKTable:
    def __init__(self, builder: StreamsBuilder, store: str, key_serde: Serde, value_serde: Serde) -> None:
        self._b = builder
        self.queryable_store_name = store
        self.key_serde = key_serde
        self.value_serde = value_serde


def global_table(builder: StreamsBuilder, topic: str, materialized: MaterializedArg = None,
                 key_serde: Serde | None = None, value_serde: Serde | None = None) -> GlobalKTable:
    m = materialized_of(materialized)
    ks = key_serde or m.key_serde or builder.default_key_serde
    vs = value_serde or m.value_serde or builder.default_value_serde
    store = m.name or builder.new_name(f"{topic}-STATE-STORE-")
    source = builder.new_name("KSTREAM-SOURCE-")
    proc = builder.new_name("KTABLE-SOURCE-")
    # the topic is the store's changelog; readers are other threads, so no cache
    spec = replace(table_store_spec(store, ks, vs, m), caching_enabled=False, logging_enabled=False)
    builder.topology.add_global_store(spec, source, topic, proc, None, ks, vs)
    return GlobalKTable(builder, store, ks, vs)


def stream_global_join(stream: KStream, table: GlobalKTable, key_selector: Callable[[Any, Any], Any],
                       joiner: Callable[[Any, Any], Any], name: str | None = None, *, left: bool) -> KStream:
    """Each stream record looks up ``key_selector(key, value)`` in the global table as of now; a
    None lookup key or a None value drops the record (counted)."""
    from instance.topology.builder import KStream
    b = stream._b
    if table._b is not b:
        raise TopologyException("the stream and the global table must come from the same StreamsBuilder")
    node = name or b.new_name("KSTREAM-LEFTJOIN-" if left else "KSTREAM-JOIN-")
    getter = global_store_getter(table.queryable_store_name)
    b.topology.add_processor(node, lambda: TP.StreamTableJoinProcessor(getter, joiner, left, key_selector),
                             stream.node)
    b.topology.connect_processor_and_state_stores(table.queryable_store_name, node)
    return KStream(b, node, stream.key_serde, None, stream.repartition_required)
