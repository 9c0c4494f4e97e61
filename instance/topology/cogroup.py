"""``KGroupedStream.cogroup`` (KIP-150, Kafka Streams' ``CogroupedKStream``): several grouped
streams aggregated into one store, each with its own aggregator, without a join per pair.

As Kafka Streams builds it: every grouped stream (repartitioned first if its key changed) feeds
its own aggregate processor; all of them write the one store (so they are one sub-topology and
their inputs must be co-partitioned), and a merge node after them is the resulting table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from instance.errors import TopologyException
from instance.topology import processors as P
from instance.topology.ktable import KTable, with_old_values
from instance.topology.materialized import MaterializedArg, materialized_of, table_store_spec
from instance.topology.processors import OldValues
from instance.topology.topology import source_topics

if TYPE_CHECKING:
    from instance.topology.builder import KGroupedStream

Aggregator = Callable[[Any, Any, Any], Any]


class CogroupedKStream:
    """Grouped streams with their aggregators; ``aggregate(initializer, materialized)`` ends it."""

    def __init__(self, first: KGroupedStream, aggregator: Aggregator) -> None:
        self._b = first._b
        self._groups: list[tuple[KGroupedStream, Aggregator]] = [(first, aggregator)]

    def cogroup(self, grouped: KGroupedStream, aggregator: Aggregator) -> CogroupedKStream:
        """Add ``grouped``, aggregated by ``aggregator(key, value, aggregate)``."""
        if grouped._b is not self._b:
            raise TopologyException("cogrouped streams must come from the same StreamsBuilder")
        if any(g is grouped for g, _ in self._groups):
            raise TopologyException("this grouped stream is already cogrouped")
        self._groups.append((grouped, aggregator))
        return self

    def windowed_by(self, windows: Any) -> CogroupedWindowedKStream:
        """``TimeWindows`` / ``SlidingWindows`` / ``SessionWindows``: the aggregate is per window."""
        return CogroupedWindowedKStream(self._groups, windows)

    def aggregate(self, initializer: Callable[[], Any], materialized: MaterializedArg = None,
                  name: str | None = None) -> KTable:
        """One table: each record of any grouped stream updates its key's aggregate through that
        stream's aggregator (starting from ``initializer()``)."""
        from instance.topology.builder import _insert_repartition
        b = self._b
        m = materialized_of(materialized)
        if m.value_serde is None:
            raise TopologyException("cogroup aggregate() needs Materialized(value_serde=...) for the aggregate")
        store = m.name or b.new_name("COGROUPKSTREAM-AGGREGATE-STATE-STORE-")
        first = self._groups[0][0]
        ks = m.key_serde or first.key_serde
        flag = OldValues()
        nodes: list[str] = []
        for i, (grouped, aggregator) in enumerate(self._groups):
            parent = grouped.node
            if grouped.repartition_required:
                parent = _insert_repartition(b, grouped.node, f"{store}-{i}", grouped.key_serde,
                                             grouped.value_serde, None)
            node = b.new_name("COGROUPKSTREAM-AGGREGATE-")

            def make(aggregator: Aggregator = aggregator) -> Any:
                return with_old_values(P.AggregateProcessor(store, initializer, aggregator), flag)
            b.topology.add_processor(node, make, parent)
            nodes.append(node)
        b.topology.add_state_store(table_store_spec(store, ks, m.value_serde, m), *nodes)
        merge = name or b.new_name("COGROUPKSTREAM-MERGE-")
        b.topology.add_processor(merge, P.PassThroughProcessor, *nodes)
        b.topology.add_copartition_group(set().union(*(source_topics(b.topology, n) for n in nodes)))
        return KTable(b, merge, store, ks, m.value_serde, old_values=flag)


class CogroupedWindowedKStream:
    """Kafka Streams' ``TimeWindowedCogroupedKStream`` / ``SessionWindowedCogroupedKStream``:
    ``aggregate(initializer[, merger], materialized)`` (a merger for session windows). Results are
    emitted on window update: each cogrouped stream's processor keeps its own stream time, so
    closing windows on it would emit a window once per stream."""

    def __init__(self, groups: list[tuple[KGroupedStream, Aggregator]], windows: Any) -> None:
        from instance.topology.windowed import windowed_by
        self._groups = groups
        self._windowed = windowed_by(groups[0][0], windows)

    def aggregate(self, initializer: Callable[[], Any], *args: Any) -> Any:
        """``aggregate(initializer, materialized)``; session windows: ``aggregate(initializer,
        merger, materialized)``."""
        from instance.topology.windowed import SessionWindowedKStream
        merger = None
        if isinstance(self._windowed, SessionWindowedKStream):
            if not args or not callable(args[0]):
                raise TopologyException("a session-windowed cogroup aggregate() needs a merger(key, agg1, agg2)")
            merger, args = args[0], args[1:]
        materialized = args[0] if args else None
        return self._windowed._build("COGROUPKSTREAM-AGGREGATE-", materialized, None, initializer,
                                     self._groups[0][1], merger, cogrouped=self._groups)
