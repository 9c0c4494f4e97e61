"""What a windowed aggregation adds to the graph (``windowed_by(...).count / reduce / aggregate``,
also cogrouped; the handles, Kafka Streams' ``TimeWindowedKStream``, ``SlidingWindowedKStream`` and
``SessionWindowedKStream``, are in ``dsl.py``): per window type, the store's retention and spec,
the result's key serde and the aggregate processor; then the nodes, as Kafka Streams names them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from instance.errors import TopologyException
from instance.serde.windowed import SessionWindowedSerde, TimeWindowedSerde
from instance.state.spec import StoreSpec
from instance.topology import processors as P
from instance.topology import window_aggregate as W
from instance.topology.graph import DslGraph
from instance.topology.materialized import Materialized, MaterializedArg, materialized_of
from instance.topology.processors import OldValues, with_old_values
from instance.topology.refs import GroupedRef, TableRef
from instance.topology.topology import source_topics
from instance.topology.windows import SessionWindows, SlidingWindows, TimeWindows
from kernel.serdes import LongSerde, Serde

AnyWindows = TimeWindows | SlidingWindows | SessionWindows


class Windowing(Protocol):
    """What differs between the window types."""

    @property
    def windows(self) -> AnyWindows: ...

    def min_retention(self) -> int: ...

    def table_key_serde(self, key_serde: Serde) -> Serde: ...

    def spec(self, name: str, ks: Serde, vs: Serde, m: Materialized, retention: int) -> StoreSpec: ...

    def processor(self, store: str, initializer: W.Initializer, aggregator: W.Aggregator,
                  merger: W.Merger | None, on_close: bool) -> Any: ...


@dataclass(frozen=True)
class TimeWindowing:
    """Tumbling or hopping windows."""

    windows: TimeWindows

    def window_size(self) -> int:
        return self.windows.size_ms

    def min_retention(self) -> int:
        return self.windows.size_ms + self.windows.grace_ms

    def table_key_serde(self, key_serde: Serde) -> Serde:
        return TimeWindowedSerde(key_serde, self.window_size())

    def spec(self, name: str, ks: Serde, vs: Serde, m: Materialized, retention: int) -> StoreSpec:
        return StoreSpec(name, ks, vs, logging_enabled=m.logging_enabled, caching_enabled=m.caching_enabled,
                         in_memory=m.in_memory, kind="window", retention_ms=retention,
                         window_size_ms=self.window_size(), timestamped=True)

    def processor(self, store: str, initializer: W.Initializer, aggregator: W.Aggregator,
                  merger: W.Merger | None, on_close: bool) -> Any:
        return W.TimeWindowAggregateProcessor(store, self.windows, initializer, aggregator, on_close)


@dataclass(frozen=True)
class SlidingWindowing(TimeWindowing):
    """Sliding windows: results are keyed by ``[start, start + time difference]`` windows."""

    windows: SlidingWindows  # type: ignore[assignment]

    def window_size(self) -> int:
        return self.windows.time_difference_ms

    def min_retention(self) -> int:
        return 2 * self.windows.time_difference_ms + self.windows.grace_ms

    def processor(self, store: str, initializer: W.Initializer, aggregator: W.Aggregator,
                  merger: W.Merger | None, on_close: bool) -> Any:
        return W.SlidingWindowAggregateProcessor(store, self.windows, initializer, aggregator, on_close)


@dataclass(frozen=True)
class SessionWindowing:
    """Session windows; the aggregation takes a merger ``(key, agg1, agg2) -> agg``."""

    windows: SessionWindows

    def min_retention(self) -> int:
        return self.windows.gap_ms + self.windows.grace_ms

    def table_key_serde(self, key_serde: Serde) -> Serde:
        return SessionWindowedSerde(key_serde)

    def spec(self, name: str, ks: Serde, vs: Serde, m: Materialized, retention: int) -> StoreSpec:
        return StoreSpec(name, ks, vs, logging_enabled=m.logging_enabled, caching_enabled=m.caching_enabled,
                         in_memory=m.in_memory, kind="session", retention_ms=retention)

    def processor(self, store: str, initializer: W.Initializer, aggregator: W.Aggregator,
                  merger: W.Merger | None, on_close: bool) -> Any:
        assert merger is not None
        return W.SessionWindowAggregateProcessor(store, self.windows, initializer, aggregator, merger, on_close)


def windowing(windows: Any) -> Windowing:
    if isinstance(windows, TimeWindows):
        return TimeWindowing(windows)
    if isinstance(windows, SlidingWindows):
        return SlidingWindowing(windows)
    if isinstance(windows, SessionWindows):
        return SessionWindowing(windows)
    raise TopologyException(f"windowed_by() takes TimeWindows, SlidingWindows or SessionWindows, "
                            f"not {type(windows).__name__}")


def windowed_aggregate(g: DslGraph, w: Windowing, on_close: bool, groups: list[tuple[GroupedRef, W.Aggregator]],
                       prefix: str, materialized: MaterializedArg, agg_value_serde: Serde | None,
                       initializer: W.Initializer, merger: W.Merger | None = None,
                       cogrouped: bool = False) -> TableRef:
    """One aggregate processor per grouped stream (``cogrouped``: several, each with its
    aggregator, all writing the one store, then a merge node), as Kafka Streams builds them."""
    m = materialized_of(materialized)
    vs = m.value_serde or agg_value_serde
    if vs is None:
        raise TopologyException("aggregate() needs Materialized(value_serde=...) for the aggregate")
    retention = w.min_retention()
    if m.retention_ms is not None:
        if m.retention_ms < retention:
            raise TopologyException(f"the retention ({m.retention_ms} ms) of a windowed store must "
                                    f"be at least window size + grace ({retention} ms)")
        retention = m.retention_ms
    if on_close and not isinstance(w, SessionWindowing):
        # Kafka Streams' emit-on-close window store (time-first key schema) keeps a window
        # while its start >= stream time - retention, one ms longer than a window store
        retention += 1
    store = m.name or g.new_name(f"{prefix}STATE-STORE-")
    # old values go downstream only when an operator there asks (Kafka Streams forwards
    # Change(new, None) unless sendOldValues was enabled)
    flag = OldValues()
    nodes = []
    for i, (grouped, agg) in enumerate(groups):
        node = g.new_name(prefix)
        parent = grouped.node
        if grouped.repartition_required:
            base = (grouped.repartition_name or store) if i == 0 else f"{store}-{i}"
            parent = g.insert_repartition(grouped.node, base, grouped.key_serde, grouped.value_serde)

        def make(agg: W.Aggregator = agg) -> Any:
            return with_old_values(w.processor(store, initializer, agg, merger, on_close), flag)
        g.topology.add_processor(node, make, parent)
        nodes.append(node)
    ks = m.key_serde or groups[0][0].key_serde
    g.topology.add_state_store(w.spec(store, ks, vs, m, retention), *nodes)
    node = nodes[0]
    if cogrouped:
        node = g.new_name("COGROUPKSTREAM-MERGE-")
        g.topology.add_processor(node, P.PassThroughProcessor, *nodes)
        g.topology.add_copartition_group(set().union(*(source_topics(g.topology, n) for n in nodes)))
    return TableRef.materialized(node, store, w.table_key_serde(ks), vs, flag, windows=w.windows)


def count(g: DslGraph, w: Windowing, on_close: bool, grouped: GroupedRef,
          materialized: MaterializedArg) -> TableRef:
    return windowed_aggregate(g, w, on_close, [(grouped, _count_aggregator)], "KSTREAM-AGGREGATE-", materialized,
                              LongSerde(), _zero, _count_merger)


def reduce(g: DslGraph, w: Windowing, on_close: bool, grouped: GroupedRef, reducer: Callable[[Any, Any], Any],
           materialized: MaterializedArg) -> TableRef:
    return windowed_aggregate(g, w, on_close, [(grouped, _reduce_aggregator(reducer))], "KSTREAM-REDUCE-",
                              materialized, grouped.value_serde, _none, _reduce_merger(reducer))


def _count_aggregator(key: Any, value: Any, agg: Any) -> Any:
    return agg + 1


def _count_merger(key: Any, a: Any, b: Any) -> Any:
    return a + b


def _reduce_aggregator(reducer: Callable[[Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
    def aggregate(key: Any, value: Any, agg: Any) -> Any:
        return value if agg is None else reducer(agg, value)
    return aggregate


def _reduce_merger(reducer: Callable[[Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
    def merge(key: Any, a: Any, b: Any) -> Any:
        return b if a is None else reducer(a, b)
    return merge


def _none() -> Any:
    return None


def _zero() -> int:
    return 0
