"""What ``CogroupedKStream.aggregate`` adds to the graph (KIP-150; the handles are in
``dsl.py``): several grouped streams aggregated into one store, each with its own aggregator,
without a join per pair.

As Kafka Streams builds it: every grouped stream (repartitioned first if its key changed) feeds
its own aggregate processor; all of them write the one store (so they are one sub-topology and
their inputs must be co-partitioned), and a merge node after them is the resulting table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from instance.errors import TopologyException
from instance.topology import processors as P
from instance.topology.graph import DslGraph
from instance.topology.materialized import MaterializedArg, materialized_of, table_store_spec
from instance.topology.processors import OldValues, with_old_values
from instance.topology.refs import GroupedRef, TableRef
from instance.topology.topology import source_topics

Aggregator = Callable[[Any, Any, Any], Any]


def cogroup_aggregate(g: DslGraph, groups: list[tuple[GroupedRef, Aggregator]], initializer: Callable[[], Any],
                      materialized: MaterializedArg, name: str | None) -> TableRef:
    """One table: each record of any grouped stream updates its key's aggregate through that
    stream's aggregator (starting from ``initializer()``)."""
    m = materialized_of(materialized)
    if m.value_serde is None:
        raise TopologyException("cogroup aggregate() needs Materialized(value_serde=...) for the aggregate")
    store = m.name or g.new_name("COGROUPKSTREAM-AGGREGATE-STATE-STORE-")
    ks = m.key_serde or groups[0][0].key_serde
    flag = OldValues()
    nodes: list[str] = []
    for i, (grouped, aggregator) in enumerate(groups):
        parent = grouped.node
        if grouped.repartition_required:
            parent = g.insert_repartition(grouped.node, f"{store}-{i}", grouped.key_serde, grouped.value_serde)
        node = g.new_name("COGROUPKSTREAM-AGGREGATE-")

        def make(aggregator: Aggregator = aggregator) -> Any:
            return with_old_values(P.AggregateProcessor(store, initializer, aggregator), flag)
        g.topology.add_processor(node, make, parent)
        nodes.append(node)
    g.topology.add_state_store(table_store_spec(store, ks, m.value_serde, m), *nodes)
    merge = name or g.new_name("COGROUPKSTREAM-MERGE-")
    g.topology.add_processor(merge, P.PassThroughProcessor, *nodes)
    g.topology.add_copartition_group(set().union(*(source_topics(g.topology, n) for n in nodes)))
    return TableRef.materialized(merge, store, ks, m.value_serde, flag)
