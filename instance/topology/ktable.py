"""What KTable and KGroupedTable operations add to the graph (the handles are in ``dsl.py``):
table sources, filter / map_values, to_stream, group_by and the aggregations after it.

Old values follow Kafka Streams' ``sendOldValues``: each table node has an :class:`OldValues`
flag, off by default; an operator that needs old values (``group_by``, the left side of a left
join, both sides of an outer join, a downstream join result) enables it, and an unmaterialized node
passes the request on to the tables it is computed from. A materialized table gets its old value
from its own store, so the request stops there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from instance.errors import TopologyException
from instance.state.spec import StoreSpec
from instance.topology import table_processors as TP
from instance.topology.change_serde import ChangeSerde
from instance.topology.graph import DslGraph
from instance.topology.materialized import Materialized, MaterializedArg, materialized_of, table_store_spec
from instance.topology.options import Consumed
from instance.topology.processors import OldValues, TableSourceProcessor, with_old_values
from instance.topology.refs import GroupedRef, StreamRef, TableRef
from instance.topology.topology import InternalTopic
from instance.topology.versioned import VersionedTableSourceProcessor, versioned_spec, versioned_view
from kernel.serdes import LongSerde, Serde


def source_table(g: DslGraph, topic: str, c: Consumed, m: Materialized, ks: Serde, vs: Serde) -> TableRef:
    """``StreamsBuilder.table``: a source and a table node materialized in a (versioned) store."""
    # as Kafka Streams: the generated store name takes its index before the two nodes
    store = m.name or g.new_name(f"{topic}-STATE-STORE-")
    source = c.name or g.new_name("KSTREAM-SOURCE-")
    g.topology.add_source(source, topic, key_serde=ks, value_serde=vs, timestamp_extractor=c.timestamp_extractor)
    proc = f"{c.name}-table-source" if c.name else g.new_name("KTABLE-SOURCE-")
    flag = OldValues()
    retention = m.history_retention_ms
    if retention is None:
        g.topology.add_processor(proc, lambda: with_old_values(TableSourceProcessor(store), flag), source)
        g.topology.add_state_store(table_store_spec(store, ks, vs, m), proc)
        return TableRef.materialized(proc, store, ks, vs, flag)
    # versioned (instance/topology/versioned.py)
    g.topology.add_processor(proc, lambda: VersionedTableSourceProcessor(store, retention, flag), source)
    g.topology.add_state_store(versioned_spec(store, ks, vs, m), proc)
    return TableRef(proc, store, ks, vs, flag,
                    lambda context: versioned_view(context, store, retention).get_with_timestamp,
                    (store,), history_retention_ms=retention)


def materialize(g: DslGraph, table: TableRef, m: Materialized, prefix: str, value_serde: Serde | None) -> StoreSpec:
    """The spec of a store for a node derived from ``table`` (named, or named as Kafka Streams
    does: ``<prefix>STATE-STORE-<index>``)."""
    store = m.name or g.new_name(f"{prefix}STATE-STORE-")
    ks = m.key_serde or table.key_serde or g.default_key_serde
    vs = m.value_serde or value_serde or g.default_value_serde
    return table_store_spec(store, ks, vs, m)


def transform(g: DslGraph, table: TableRef, prefix: str, compute: Callable[[Any, Any], Any], skip_empty: bool,
              materialized: MaterializedArg, name: str | None, value_serde: Serde | None) -> TableRef:
    """filter / map_values: ``compute(key, value)`` per change; unmaterialized, the result's
    values are computed on lookup from the parent's."""
    flag = OldValues()
    spec = None if materialized is None else materialize(g, table, materialized_of(materialized), prefix,
                                                         value_serde)
    store = None if spec is None else spec.name
    node = name or g.new_name(prefix)
    g.topology.add_processor(node, lambda: TP.TableTransformProcessor(compute, flag, skip_empty, store),
                             table.node)
    if spec is not None:
        g.topology.add_state_store(spec, node)
        return TableRef.materialized(node, spec.name, spec.key_serde, spec.value_serde, flag)
    parent = table.getter

    def getter(context: Any) -> TP.Getter:
        get = parent(context)

        def compute_get(key: Any) -> Any:
            vt = get(key)
            if vt is None:
                return None
            v = compute(key, vt[0])
            return None if v is None else (v, vt[1])
        return compute_get
    return TableRef(node, None, table.key_serde, value_serde, flag, getter, table.getter_stores, (table,))


def to_stream(g: DslGraph, table: TableRef, name: str | None) -> StreamRef:
    node = name or g.new_name("KTABLE-TOSTREAM-")
    g.topology.add_processor(node, TP.TableToStreamProcessor, table.node)
    return StreamRef(node, table.key_serde, table.value_serde)


def regroup(g: DslGraph, table: TableRef, selector: Callable[[Any, Any], tuple[Any, Any] | None],
            key_serde: Serde | None, value_serde: Serde | None, repartition_name: str | None) -> GroupedRef:
    """``KTable.group_by``: the selector's node, whose changes carry old values."""
    table.enable_send_old_values()
    node = g.new_name("KTABLE-SELECT-")
    g.topology.add_processor(node, lambda: TP.TableRepartitionMapProcessor(selector), table.node)
    return GroupedRef(node, key_serde or g.default_key_serde,
                      value_serde or table.value_serde or g.default_value_serde, True, repartition_name)


def _regrouped(g: DslGraph, grouped: GroupedRef, prefix: str, materialized: MaterializedArg,
               agg_value_serde: Serde | None, make: Callable[[str, OldValues], Any]) -> TableRef:
    """The repartition topic (old and new values) and the aggregate node with its store."""
    m = materialized_of(materialized)
    vs = m.value_serde or agg_value_serde
    if vs is None:
        raise TopologyException("aggregate() needs Materialized(value_serde=...) for the aggregate")
    ks = m.key_serde or grouped.key_serde
    # as Kafka Streams: store name, then sink, source, and the aggregate's node
    store = m.name or g.new_name(f"{prefix}STATE-STORE-")
    topic = f"{grouped.repartition_name or store}-repartition"
    sink, source = g.new_name("KSTREAM-SINK-"), g.new_name("KSTREAM-SOURCE-")
    node = g.new_name(prefix)
    changes = ChangeSerde(grouped.value_serde)
    g.topology.add_sink(sink, topic, grouped.node, key_serde=grouped.key_serde, value_serde=changes)
    g.topology.add_source(source, topic, key_serde=grouped.key_serde, value_serde=changes)
    g.topology.add_internal_topic(InternalTopic(topic))
    flag = OldValues()
    g.topology.add_processor(node, lambda: make(store, flag), source)
    g.topology.add_state_store(table_store_spec(store, ks, vs, m), node)
    return TableRef.materialized(node, store, ks, vs, flag)


def regrouped_aggregate(g: DslGraph, grouped: GroupedRef, initializer: Callable[[], Any],
                        adder: Callable[[Any, Any, Any], Any], subtractor: Callable[[Any, Any, Any], Any],
                        materialized: MaterializedArg) -> TableRef:
    return _regrouped(g, grouped, "KTABLE-AGGREGATE-", materialized, None,
                      lambda store, flag: TP.TableAggregateProcessor(store, initializer, adder, subtractor, flag))


def regrouped_reduce(g: DslGraph, grouped: GroupedRef, adder: Callable[[Any, Any], Any],
                     subtractor: Callable[[Any, Any], Any], materialized: MaterializedArg) -> TableRef:
    return _regrouped(g, grouped, "KTABLE-REDUCE-", materialized, grouped.value_serde,
                      lambda store, flag: TP.TableReduceProcessor(store, adder, subtractor, flag))


def regrouped_count(g: DslGraph, grouped: GroupedRef, materialized: MaterializedArg) -> TableRef:
    return _regrouped(g, grouped, "KTABLE-AGGREGATE-", materialized, LongSerde(),
                      lambda store, flag: TP.TableAggregateProcessor(store, _zero, _plus_one, _minus_one, flag))


def _zero() -> int:
    return 0


def _plus_one(key: Any, value: Any, agg: int) -> int:
    return agg + 1


def _minus_one(key: Any, value: Any, agg: int) -> int:
    return agg - 1
