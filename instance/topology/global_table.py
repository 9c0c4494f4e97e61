"""GlobalKTable: a table every instance holds whole (all partitions of its topic), so a stream
joins it by any key it computes, without co-partitioning or repartitioning. The store is filled
by the global thread (instance/runtime/global_thread.py), bootstrapped before processing starts;
stream threads only read it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from instance.errors import TopologyException
from instance.topology import table_processors as TP
from instance.topology.graph import DslGraph
from instance.topology.materialized import MaterializedArg, materialized_of, table_store_spec
from instance.topology.refs import StreamRef
from kernel.serdes import Serde


def global_store_getter(store: str) -> TP.GetterFactory:
    """Reads that never fill a cache: the global thread writes the store concurrently."""
    return lambda context: context.get_state_store(store).query_get


class GlobalKTable:
    """What a stream joins with: the store and its serdes (returns no other handle)."""

    def __init__(self, builder: DslGraph, store: str, key_serde: Serde, value_serde: Serde) -> None:
        self._b = builder
        self.queryable_store_name = store
        self.key_serde = key_serde
        self.value_serde = value_serde


def global_table(builder: DslGraph, topic: str, materialized: MaterializedArg = None,
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


def stream_global_join(b: DslGraph, stream: StreamRef, table: GlobalKTable, key_selector: Callable[[Any, Any], Any],
                       joiner: Callable[[Any, Any], Any], name: str | None = None, *, left: bool) -> StreamRef:
    """Each stream record looks up ``key_selector(key, value)`` in the global table as of now; a
    None lookup key or a None value drops the record (counted)."""
    if table._b is not b:
        raise TopologyException("the stream and the global table must come from the same StreamsBuilder")
    node = name or b.new_name("KSTREAM-LEFTJOIN-" if left else "KSTREAM-JOIN-")
    getter = global_store_getter(table.queryable_store_name)
    b.topology.add_processor(node, lambda: TP.StreamTableJoinProcessor(getter, joiner, left, key_selector),
                             stream.node)
    b.topology.connect_processor_and_state_stores(table.queryable_store_name, node)
    return StreamRef(node, stream.key_serde, None, stream.repartition_required)
