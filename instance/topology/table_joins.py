"""Joins with tables: table-table (``KTable.join / left_join / outer_join``) and stream-table
(``KStream.join / left_join(table, joiner)``). Both sides must be co-partitioned: the topics
they come from form a co-partitioning group, checked at start-up (internal_topics.plan); a
stream whose key was changed is repartitioned first, as Kafka Streams does.

A table-table join result carries the larger timestamp of both sides (the other side's read from
its timestamped store, as Kafka Streams does); a stream-table result the stream record's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from instance.topology import table_processors as TP
from instance.topology.graph import DslGraph
from instance.topology.ktable import materialize
from instance.topology.materialized import MaterializedArg, materialized_of
from instance.topology.processors import OldValues
from instance.topology.refs import StreamRef, TableRef
from instance.topology.topology import source_topics
from instance.topology.versioned import VersionedStreamTableJoinProcessor, buffer_spec, check_grace
from kernel.serdes import Serde


@dataclass(frozen=True)
class Joined:
    """Serdes and name of a stream-table join (Kafka Streams' ``Joined``): the key and stream
    value serdes are used if the stream must be repartitioned first."""

    key_serde: Serde | None = None
    value_serde: Serde | None = None
    other_value_serde: Serde | None = None
    name: str | None = None
    #: KIP-923: hold stream records back this long (stream time) before joining (versioned tables)
    grace_period_ms: int | None = None

    @staticmethod
    def with_(key_serde: Serde | None, value_serde: Serde | None,
              other_value_serde: Serde | None = None) -> Joined:
        return Joined(key_serde, value_serde, other_value_serde)

    @staticmethod
    def as_(name: str) -> Joined:
        return Joined(name=name)

    def with_name(self, name: str) -> Joined:
        return replace(self, name=name)

    def with_grace_period(self, grace_ms: int) -> Joined:
        if grace_ms < 0:
            raise ValueError("grace period must not be negative")
        return replace(self, grace_period_ms=grace_ms)


_NAMES = {TP.INNER: ("KTABLE-JOINTHIS-", "KTABLE-JOINOTHER-"),
          TP.LEFT: ("KTABLE-LEFTTHIS-", "KTABLE-LEFTOTHER-"),
          TP.OUTER: ("KTABLE-OUTERTHIS-", "KTABLE-OUTEROTHER-")}
_OTHER_MODE = {TP.INNER: TP.INNER, TP.LEFT: TP.RIGHT_OF_LEFT, TP.OUTER: TP.OUTER}


def table_table_join(b: DslGraph, left: TableRef, right: TableRef, joiner: Callable[[Any, Any], Any], mode: str,
                     materialized: MaterializedArg = None, name: str | None = None) -> TableRef:
    """Each side's changes are joined with the other side's current value; both meet in a merge
    node (materialized if asked). Old values: the left side sends them for a left join, both for
    an outer join (so deleting an unmatched row deletes the result), as Kafka Streams does."""
    if mode in (TP.LEFT, TP.OUTER):
        left.enable_send_old_values()
    if mode == TP.OUTER:
        right.enable_send_old_values()
    this_prefix, other_prefix = _NAMES[mode]
    this_node = f"{name}-join-this" if name else b.new_name(this_prefix)
    other_node = f"{name}-join-other" if name else b.new_name(other_prefix)
    merge_node = name or b.new_name("KTABLE-MERGE-")
    spec = None if materialized is None else materialize(b, left, materialized_of(materialized),
                                                         "KTABLE-MERGE-", None)
    store = None if spec is None else spec.name
    flag = OldValues()
    # a materialized result takes old values from its store: the join sides never compute them
    sides = OldValues() if store is not None else flag
    get_left, get_right = left.getter, right.getter
    other_mode = _OTHER_MODE[mode]
    topo = b.topology
    topo.add_processor(this_node, lambda: TP.TableTableJoinProcessor(mode, True, joiner, get_right, sides),
                       left.node)
    topo.add_processor(other_node, lambda: TP.TableTableJoinProcessor(other_mode, False, joiner, get_left,
                                                                      sides), right.node)
    right.connect_getter(topo, this_node)
    left.connect_getter(topo, other_node)
    topo.add_processor(merge_node, lambda: TP.TableJoinMergeProcessor(store, flag), this_node, other_node)
    topo.add_copartition_group(source_topics(topo, left.node) | source_topics(topo, right.node))
    if spec is not None:
        topo.add_state_store(spec, merge_node)
        return TableRef.materialized(merge_node, spec.name, spec.key_serde, spec.value_serde, flag)
    return TableRef(merge_node, None, left.key_serde, None, flag, TP.join_getter(mode, joiner, get_left, get_right),
                    left.getter_stores + right.getter_stores, (left, right))


def stream_table_join(b: DslGraph, stream: StreamRef, table: TableRef, joiner: Callable[[Any, Any], Any],
                      joined: Joined | None = None, *, left: bool) -> StreamRef:
    """Each stream record is joined with the table's value for its key as of now."""
    j = joined or Joined()
    if stream.repartition_required:  # a key-changing operation came before: co-partition first
        stream = b.repartition(stream, name=f"{j.name}-left" if j.name else stream.node,
                               key_serde=j.key_serde, value_serde=j.value_serde)
    check_grace(j.grace_period_ms, table.history_retention_ms)
    node = j.name or b.new_name("KSTREAM-LEFTJOIN-" if left else "KSTREAM-JOIN-")
    getter = table.value_getter()
    retention, store = table.history_retention_ms, table.store
    if retention is not None and store is not None:  # a versioned table: as of the record's time
        grace = j.grace_period_ms or 0
        buffer = f"{node}-grace-buffer" if grace > 0 else None
        ks = j.key_serde or stream.key_serde or b.default_key_serde
        vs = j.value_serde or stream.value_serde or b.default_value_serde
        b.topology.add_processor(node, lambda: VersionedStreamTableJoinProcessor(
            store, retention, joiner, left, grace, buffer, ks, vs), stream.node)
        if buffer is not None:
            b.topology.add_state_store(buffer_spec(buffer), node)
    else:
        b.topology.add_processor(node, lambda: TP.StreamTableJoinProcessor(getter, joiner, left), stream.node)
    table.connect_getter(b.topology, node)
    b.topology.add_copartition_group(source_topics(b.topology, stream.node) | source_topics(b.topology, table.node))
    return StreamRef(node, stream.key_serde, None)

