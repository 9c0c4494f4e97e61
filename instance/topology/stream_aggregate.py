"""What ``KGroupedStream.count / reduce / aggregate`` add to the graph: the store, a repartition
topic first if the key changed, and the aggregate node."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from instance.errors import TopologyException
from instance.topology import processors as P
from instance.topology.graph import DslGraph
from instance.topology.materialized import Materialized, MaterializedArg, materialized_of, table_store_spec
from instance.topology.processors import OldValues, with_old_values
from instance.topology.refs import GroupedRef, TableRef
from kernel.serdes import LongSerde, Serde


def _aggregate(g: DslGraph, grouped: GroupedRef, prefix: str, m: Materialized, agg_value_serde: Serde,
               make: Callable[[str], Any]) -> TableRef:
    # as Kafka Streams: a generated store name takes its index before the processor's name
    store = m.name or g.new_name(f"{prefix}STATE-STORE-")
    node = g.new_name(prefix)
    parent = grouped.node
    if grouped.repartition_required:
        parent = g.insert_repartition(grouped.node, grouped.repartition_name or store, grouped.key_serde,
                                      grouped.value_serde)
    ks = m.key_serde or grouped.key_serde
    vs = m.value_serde or agg_value_serde
    flag = OldValues()
    g.topology.add_processor(node, lambda: with_old_values(make(store), flag), parent)
    g.topology.add_state_store(table_store_spec(store, ks, vs, m), node)
    return TableRef.materialized(node, store, ks, vs, flag)


def count(g: DslGraph, grouped: GroupedRef, materialized: MaterializedArg) -> TableRef:
    return _aggregate(g, grouped, "KSTREAM-AGGREGATE-", materialized_of(materialized), LongSerde(), P.CountProcessor)


def reduce(g: DslGraph, grouped: GroupedRef, reducer: Callable[[Any, Any], Any],
           materialized: MaterializedArg) -> TableRef:
    return _aggregate(g, grouped, "KSTREAM-REDUCE-", materialized_of(materialized), grouped.value_serde,
                      lambda store: P.ReduceProcessor(store, reducer))


def aggregate(g: DslGraph, grouped: GroupedRef, initializer: Callable[[], Any],
              aggregator: Callable[[Any, Any, Any], Any], materialized: MaterializedArg) -> TableRef:
    m = materialized_of(materialized)
    if m.value_serde is None:
        raise TopologyException("aggregate() needs Materialized(value_serde=...) for the aggregate")
    return _aggregate(g, grouped, "KSTREAM-AGGREGATE-", m, m.value_serde,
                      lambda store: P.AggregateProcessor(store, initializer, aggregator))
