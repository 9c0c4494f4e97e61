"""``KGroupedStream.windowed_by(...)``: Kafka Streams' ``TimeWindowedKStream``,
``SlidingWindowedKStream`` and ``SessionWindowedKStream``, whose ``count / reduce / aggregate``
give a :class:`WindowedKTable` keyed by ``Windowed(key, window)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from instance.errors import TopologyException
from instance.serde.windowed import SessionWindowedSerde, TimeWindowedSerde
from instance.state.spec import StoreSpec
from instance.topology import processors as P
from instance.topology import window_aggregate as W
from instance.topology.builder import KGroupedStream, KTable, _insert_repartition
from instance.topology.ktable import with_old_values
from instance.topology.materialized import Materialized, MaterializedArg, materialized_of
from instance.topology.processors import OldValues
from instance.topology.topology import source_topics
from instance.topology.windows import EmitStrategy, SessionWindows, SlidingWindows, TimeWindows
from router.core.serdes import LongSerde, Serde

AnyWindows = TimeWindows | SlidingWindows | SessionWindows


def _count_aggregator(key: Any, value: Any, agg: Any) -> Any:
    return agg + 1


def _reduce_aggregator(reducer: Callable[[Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
    def aggregate(key: Any, value: Any, agg: Any) -> Any:
        return value if agg is None else reducer(agg, value)
    return aggregate


def _none() -> Any:
    return None


def _zero() -> int:
    return 0


def windowed_by(grouped: KGroupedStream, windows: AnyWindows) -> Any:
    if isinstance(windows, TimeWindows):
        return TimeWindowedKStream(grouped, windows)
    if isinstance(windows, SlidingWindows):
        return SlidingWindowedKStream(grouped, windows)
    if isinstance(windows, SessionWindows):
        return SessionWindowedKStream(grouped, windows)
    raise TopologyException(f"windowed_by() takes TimeWindows, SlidingWindows or SessionWindows, "
                            f"not {type(windows).__name__}")


class _WindowedStream:
    """What the three windowed streams share: the emit strategy and building the aggregation."""

    def __init__(self, grouped: KGroupedStream, windows: AnyWindows) -> None:
        self._grouped = grouped
        self.windows = windows
        self._emit = EmitStrategy.on_window_update()

    def emit_strategy(self, strategy: EmitStrategy) -> Any:
        self._emit = strategy
        return self

    # -- per window type ----------------------------------------------------------------------
    def _min_retention(self) -> int:
        raise NotImplementedError

    def _table_key_serde(self, key_serde: Serde) -> Serde:
        raise NotImplementedError

    def _spec(self, name: str, ks: Serde, vs: Serde, m: Materialized, retention: int) -> StoreSpec:
        raise NotImplementedError

    def _processor(self, store: str, initializer: W.Initializer, aggregator: W.Aggregator,
                   merger: W.Merger | None) -> Any:
        raise NotImplementedError

    # -- building -------------------------------------------------------------------------------
    def _build(self, prefix: str, materialized: MaterializedArg, agg_value_serde: Serde | None,
               initializer: W.Initializer, aggregator: W.Aggregator, merger: W.Merger | None = None,
               cogrouped: list[tuple[KGroupedStream, W.Aggregator]] | None = None) -> WindowedKTable:
        """One aggregate processor per grouped stream (``cogrouped``: several, each with its
        aggregator, all writing the one store, then a merge node), as Kafka Streams builds them."""
        g = self._grouped
        b = g._b
        groups = cogrouped or [(g, aggregator)]
        m = materialized_of(materialized)
        vs = m.value_serde or agg_value_serde
        if vs is None:
            raise TopologyException("aggregate() needs Materialized(value_serde=...) for the aggregate")
        retention = self._min_retention()
        if m.retention_ms is not None:
            if m.retention_ms < retention:
                raise TopologyException(f"the retention ({m.retention_ms} ms) of a windowed store must "
                                        f"be at least window size + grace ({retention} ms)")
            retention = m.retention_ms
        if self._emit.on_close and not isinstance(self.windows, SessionWindows):
            # Kafka Streams' emit-on-close window store (time-first key schema) keeps a window
            # while its start >= stream time - retention, one ms longer than a window store
            retention += 1
        store = m.name or b.new_name(f"{prefix}STATE-STORE-")
        # old values go downstream only when an operator there asks (Kafka Streams forwards
        # Change(new, None) unless sendOldValues was enabled)
        flag = OldValues()
        nodes = []
        for i, (grouped, agg) in enumerate(groups):
            node = b.new_name(prefix)
            parent = grouped.node
            if grouped.repartition_required:
                base = (grouped.repartition_name or store) if i == 0 else f"{store}-{i}"
                parent = _insert_repartition(b, grouped.node, base,
                                             grouped.key_serde, grouped.value_serde, None)

            def make(agg: W.Aggregator = agg) -> Any:
                return with_old_values(self._processor(store, initializer, agg, merger), flag)
            b.topology.add_processor(node, make, parent)
            nodes.append(node)
        ks = m.key_serde or g.key_serde
        b.topology.add_state_store(self._spec(store, ks, vs, m, retention), *nodes)
        node = nodes[0]
        if cogrouped is not None:
            node = b.new_name("COGROUPKSTREAM-MERGE-")
            b.topology.add_processor(node, P.PassThroughProcessor, *nodes)
            b.topology.add_copartition_group(set().union(*(source_topics(b.topology, n) for n in nodes)))
        return WindowedKTable(b, node, store, self._table_key_serde(ks), vs, self.windows, flag)

    def count(self, materialized: MaterializedArg = None) -> WindowedKTable:
        return self._build("KSTREAM-AGGREGATE-", materialized, LongSerde(), _zero, _count_aggregator,
                           _count_merger)

    def reduce(self, reducer: Callable[[Any, Any], Any], materialized: MaterializedArg = None) -> WindowedKTable:
        return self._build("KSTREAM-REDUCE-", materialized, self._grouped.value_serde, _none,
                           _reduce_aggregator(reducer), _reduce_merger(reducer))


def _count_merger(key: Any, a: Any, b: Any) -> Any:
    return a + b


def _reduce_merger(reducer: Callable[[Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
    def merge(key: Any, a: Any, b: Any) -> Any:
        return b if a is None else reducer(a, b)
    return merge


class TimeWindowedKStream(_WindowedStream):
    """Tumbling or hopping windows."""

    windows: TimeWindows

    def _window_size(self) -> int:
        return self.windows.size_ms

    def _min_retention(self) -> int:
        return self.windows.size_ms + self.windows.grace_ms

    def _table_key_serde(self, key_serde: Serde) -> Serde:
        return TimeWindowedSerde(key_serde, self._window_size())

    def _spec(self, name: str, ks: Serde, vs: Serde, m: Materialized, retention: int) -> StoreSpec:
        return StoreSpec(name, ks, vs, logging_enabled=m.logging_enabled, caching_enabled=m.caching_enabled,
                         in_memory=m.in_memory, kind="window", retention_ms=retention,
                         window_size_ms=self._window_size(), timestamped=True)

    def _processor(self, store: str, initializer: W.Initializer, aggregator: W.Aggregator,
                   merger: W.Merger | None) -> Any:
        return W.TimeWindowAggregateProcessor(store, self.windows, initializer, aggregator, self._emit.on_close)

    def aggregate(self, initializer: W.Initializer, aggregator: W.Aggregator,
                  materialized: MaterializedArg = None) -> WindowedKTable:
        return self._build("KSTREAM-AGGREGATE-", materialized, None, initializer, aggregator)


class SlidingWindowedKStream(TimeWindowedKStream):
    """Sliding windows: results are keyed by ``[start, start + time difference]`` windows."""

    windows: SlidingWindows  # type: ignore[assignment]

    def _window_size(self) -> int:
        return self.windows.time_difference_ms

    def _min_retention(self) -> int:
        return 2 * self.windows.time_difference_ms + self.windows.grace_ms

    def _processor(self, store: str, initializer: W.Initializer, aggregator: W.Aggregator,
                   merger: W.Merger | None) -> Any:
        return W.SlidingWindowAggregateProcessor(store, self.windows, initializer, aggregator,
                                                 self._emit.on_close)


class SessionWindowedKStream(_WindowedStream):
    """Session windows; ``aggregate`` takes a merger ``(key, agg1, agg2) -> agg``."""

    windows: SessionWindows

    def _min_retention(self) -> int:
        return self.windows.gap_ms + self.windows.grace_ms

    def _table_key_serde(self, key_serde: Serde) -> Serde:
        return SessionWindowedSerde(key_serde)

    def _spec(self, name: str, ks: Serde, vs: Serde, m: Materialized, retention: int) -> StoreSpec:
        return StoreSpec(name, ks, vs, logging_enabled=m.logging_enabled, caching_enabled=m.caching_enabled,
                         in_memory=m.in_memory, kind="session", retention_ms=retention)

    def _processor(self, store: str, initializer: W.Initializer, aggregator: W.Aggregator,
                   merger: W.Merger | None) -> Any:
        assert merger is not None
        return W.SessionWindowAggregateProcessor(store, self.windows, initializer, aggregator, merger,
                                                 self._emit.on_close)

    def aggregate(self, initializer: W.Initializer, aggregator: W.Aggregator, merger: W.Merger,
                  materialized: MaterializedArg = None) -> WindowedKTable:
        return self._build("KSTREAM-AGGREGATE-", materialized, None, initializer, aggregator, merger)


class WindowedKTable(KTable):
    """The result of a windowed aggregation; knows its windows (``suppress`` needs their grace)."""

    def __init__(self, builder: Any, node: str, store: str, key_serde: Serde, value_serde: Serde,
                 windows: AnyWindows, old_values: OldValues | None = None) -> None:
        super().__init__(builder, node, store, key_serde, value_serde, old_values=old_values)
        self.windows = windows
