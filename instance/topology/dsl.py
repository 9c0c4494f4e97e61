"""The DSL's handles: KStream, KGroupedStream, KTable, KGroupedTable, the windowed and cogrouped
streams. They return one another (as Kafka Streams' interfaces do), so they live in this one
module. Each method checks its arguments, calls the function that adds its nodes to the graph
(in the modules below: ``stream_aggregate``, ``ktable``, ``windowed``, ``cogroup``, the joins,
``suppress``), and wraps the plain value it returns (``refs.py``) in the right handle.

Node names follow Kafka Streams (``KSTREAM-FILTER-0000000001``...), one counter per builder.
A key-changing operation (map, flat_map, select_key, group_by) marks the stream; a grouping
after it inserts a repartition topic, which is where the topology splits into sub-topologies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from instance.errors import TopologyException
from instance.topology import cogroup as CG
from instance.topology import fk_join as FK
from instance.topology import ktable as KT
from instance.topology import processors as P
from instance.topology import stream_aggregate as SA
from instance.topology import stream_joins as SJ
from instance.topology import table_joins as TJ
from instance.topology import table_processors as TP
from instance.topology import windowed as WD
from instance.topology.global_table import GlobalKTable, stream_global_join
from instance.topology.graph import DslGraph
from instance.topology.materialized import MaterializedArg
from instance.topology.options import Grouped, Produced, serdes_of
from instance.topology.refs import GroupedRef, NodeRef, StreamRef, TableRef
from instance.topology.suppress import suppress
from instance.topology.topology import source_topics
from instance.topology.window_aggregate import Aggregator, Initializer, Merger
from instance.topology.windows import EmitStrategy
from kernel.serdes import Serde

R = TypeVar("R", bound=NodeRef)


class _Handle(Generic[R]):
    """What every handle holds: its builder and the plain value of its node (``ref``), whose node
    name and serdes it shows."""

    def __init__(self, builder: DslGraph, ref: R) -> None:
        self._b = builder
        self.ref = ref
        self.node = ref.node
        self.key_serde = ref.key_serde
        self.value_serde = ref.value_serde


def _grouped(grouped: Grouped | None, key_serde: Any, value_serde: Serde | None
             ) -> tuple[Grouped, Serde | None, Serde | None]:
    """A grouping's serdes: keyword ones first, then the :class:`Grouped`'s."""
    g, ks, vs = serdes_of(grouped, key_serde, value_serde, Grouped)
    g = g or Grouped()
    return g, ks or g.key_serde, vs or g.value_serde


class KStream(_Handle[StreamRef]):
    """A record stream. Every operation adds one node and returns a new KStream."""

    def __init__(self, builder: DslGraph, ref: StreamRef) -> None:
        super().__init__(builder, ref)
        self.repartition_required = ref.repartition_required

    def _add(self, prefix: str, supplier: Callable[[], Any], *, key_changed: bool = False,
             value_changed: bool = False, name: str | None = None) -> KStream:
        node = name or self._b.new_name(prefix)
        self._b.topology.add_processor(node, supplier, self.node)
        return KStream(self._b, StreamRef(node, None if key_changed else self.key_serde,
                                          None if value_changed else self.value_serde,
                                          self.repartition_required or key_changed))

    def filter(self, predicate: Callable[[Any, Any], bool], name: str | None = None) -> KStream:
        return self._add("KSTREAM-FILTER-", lambda: P.FilterProcessor(predicate), name=name)

    def filter_not(self, predicate: Callable[[Any, Any], bool], name: str | None = None) -> KStream:
        return self._add("KSTREAM-FILTER-", lambda: P.FilterProcessor(predicate, negate=True), name=name)

    def map(self, mapper: Callable[[Any, Any], tuple[Any, Any]], name: str | None = None) -> KStream:
        return self._add("KSTREAM-MAP-", lambda: P.MapProcessor(mapper), key_changed=True,
                         value_changed=True, name=name)

    def map_values(self, mapper: Callable[[Any], Any], name: str | None = None) -> KStream:
        return self._add("KSTREAM-MAPVALUES-", lambda: P.MapValuesProcessor(mapper), value_changed=True,
                         name=name)

    def flat_map(self, mapper: Callable[[Any, Any], Iterable[tuple[Any, Any]]],
                 name: str | None = None) -> KStream:
        return self._add("KSTREAM-FLATMAP-", lambda: P.FlatMapProcessor(mapper), key_changed=True,
                         value_changed=True, name=name)

    def flat_map_values(self, mapper: Callable[[Any], Iterable[Any]], name: str | None = None) -> KStream:
        return self._add("KSTREAM-FLATMAPVALUES-", lambda: P.FlatMapValuesProcessor(mapper),
                         value_changed=True, name=name)

    def select_key(self, selector: Callable[[Any, Any], Any], name: str | None = None) -> KStream:
        return self._add("KSTREAM-KEY-SELECT-", lambda: P.SelectKeyProcessor(selector), key_changed=True,
                         name=name)

    def peek(self, action: Callable[[Any, Any], None], name: str | None = None) -> KStream:
        return self._add("KSTREAM-PEEK-", lambda: P.PeekProcessor(action), name=name)

    def foreach(self, action: Callable[[Any, Any], None], name: str | None = None) -> None:
        self._add("KSTREAM-FOREACH-", lambda: P.PeekProcessor(action, forward_after=False), name=name)

    def split(self, name: str | None = None) -> BranchedKStream:
        return BranchedKStream(self, name or self._b.new_name("KSTREAM-BRANCH-"))

    def merge(self, other: KStream, name: str | None = None) -> KStream:
        node = name or self._b.new_name("KSTREAM-MERGE-")
        self._b.topology.add_processor(node, P.PassThroughProcessor, self.node, other.node)
        same = self.key_serde is other.key_serde
        return KStream(self._b, StreamRef(node, self.key_serde if same else None,
                                          self.value_serde if self.value_serde is other.value_serde else None,
                                          self.repartition_required or other.repartition_required))

    def to(self, topic: str, key_serde: Serde | Produced | None = None, value_serde: Serde | None = None,
           name: str | None = None, produced: Produced | None = None) -> None:
        """Write to ``topic``; serdes by keyword or a :class:`Produced` (``to("out",
        Produced.with_(S, L))``, as in Java)."""
        p, ks, vs = serdes_of(produced, key_serde, value_serde, Produced)
        p = p or Produced()
        node = name or p.name or self._b.new_name("KSTREAM-SINK-")
        self._b.topology.add_sink(node, topic, self.node,
                                  key_serde=ks or p.key_serde or self.key_serde or self._b.default_key_serde,
                                  value_serde=vs or p.value_serde or self.value_serde or self._b.default_value_serde)

    def repartition(self, name: str | None = None, num_partitions: int | None = None,
                    key_serde: Serde | None = None, value_serde: Serde | None = None) -> KStream:
        """Write to an internal ``<application.id>-<name>-repartition`` topic and read it back."""
        return KStream(self._b, self._b.repartition(self.ref, name, num_partitions, key_serde, value_serde))

    def group_by_key(self, key_serde: Serde | Grouped | None = None, value_serde: Serde | None = None,
                     grouped: Grouped | None = None) -> KGroupedStream:
        """Serdes by keyword or a :class:`Grouped` (whose name names the repartition topic)."""
        grouped, key_serde, value_serde = _grouped(grouped, key_serde, value_serde)
        return KGroupedStream(self._b, GroupedRef(
            self.node, key_serde or self.key_serde or self._b.default_key_serde,
            value_serde or self.value_serde or self._b.default_value_serde, self.repartition_required,
            grouped.name))

    def group_by(self, selector: Callable[[Any, Any], Any], key_serde: Serde | Grouped | None = None,
                 value_serde: Serde | None = None, grouped: Grouped | None = None) -> KGroupedStream:
        grouped, key_serde, value_serde = _grouped(grouped, key_serde, value_serde)
        selected = self.select_key(selector)
        return KGroupedStream(self._b, GroupedRef(
            selected.node, key_serde or self._b.default_key_serde,
            value_serde or self.value_serde or self._b.default_value_serde, True, grouped.name))

    def join(self, other: Any, *args: Any, **kwargs: Any) -> KStream:
        """``join(other_stream, joiner, join_windows[, stream_joined])`` (windowed stream-stream),
        ``join(table, joiner[, joined])`` or ``join(global_table, key_selector, joiner)``; joiners
        are ``(left_value, right_value) -> value``."""
        return self._join("inner", other, *args, **kwargs)

    def left_join(self, other: Any, *args: Any, **kwargs: Any) -> KStream:
        """As :meth:`join`; the joiner gets None for a missing right side (for a stream-stream join,
        once the left record's window closes)."""
        return self._join("left", other, *args, **kwargs)

    def outer_join(self, other: KStream, joiner: Callable[[Any, Any], Any], windows: Any = None,
                   stream_joined: Any = None) -> KStream:
        """Stream-stream outer join: unmatched records of either side once their window closes."""
        return self._join("outer", other, joiner, windows, stream_joined)

    def _join(self, kind: str, other: Any, *args: Any, **kwargs: Any) -> KStream:
        if isinstance(other, KStream):
            def windowed(joiner: Callable[[Any, Any], Any], windows: Any = None,
                         stream_joined: Any = None) -> StreamRef:
                return SJ.stream_stream_join(self._b, self.ref, other.ref, joiner, windows, kind, stream_joined)
            return KStream(self._b, windowed(*args, **kwargs))
        if kind == "outer":
            raise TopologyException("outer_join takes a KStream (tables: KTable.outer_join)")
        if isinstance(other, KTable):
            if other._b is not self._b:
                raise TopologyException("the stream and the table of a join must come from the same StreamsBuilder")
            return KStream(self._b, TJ.stream_table_join(self._b, self.ref, other.ref, *args,
                                                         left=kind == "left", **kwargs))
        if isinstance(other, GlobalKTable):
            if other._b is not self._b:
                raise TopologyException("the stream and the global table must come from the same StreamsBuilder")
            return KStream(self._b, stream_global_join(self._b, self.ref, other, *args, left=kind == "left",
                                                       **kwargs))
        raise TopologyException(f"cannot join a KStream with {type(other).__name__} here")

    def process(self, supplier: Callable[[], Any], *store_names: str, name: str | None = None) -> KStream:
        """Attach a Processor-API processor (its stores must be added to the topology first)."""
        out = self._add("KSTREAM-PROCESSOR-", supplier, key_changed=True, value_changed=True, name=name)
        for s in store_names:
            self._b.topology.connect_processor_and_state_stores(s, out.node)
        return out


class BranchedKStream:
    """``split()``: ``branch(predicate, name)`` … ``default_branch()``; returns the branches by name."""

    def __init__(self, stream: KStream, name: str) -> None:
        self._stream = stream
        self._name = name
        self._branches: list[tuple[str, Callable[[Any, Any], bool] | None]] = []
        self._done = False

    def branch(self, predicate: Callable[[Any, Any], bool], name: str | None = None) -> BranchedKStream:
        if self._done:
            raise TopologyException("split() already ended with default_branch() or no_default_branch()")
        self._branches.append((name or str(len(self._branches) + 1), predicate))
        self._stream._b.new_name("KSTREAM-BRANCHCHILD-")  # Kafka Streams burns an index per branch
        return self

    def default_branch(self, name: str | None = None) -> dict[str, KStream]:
        self._branches.append((name or "0", None))
        self._stream._b.new_name("KSTREAM-BRANCHCHILD-")
        return self._finish()

    def no_default_branch(self) -> dict[str, KStream]:
        return self._finish()

    def _finish(self) -> dict[str, KStream]:
        self._done = True
        b, s = self._stream._b, self._stream
        preds = [p for _, p in self._branches]
        b.topology.add_processor(self._name, lambda: P.BranchProcessor(preds), s.node)
        out: dict[str, KStream] = {}
        for suffix, _ in self._branches:
            node = f"{self._name}{suffix}"
            b.topology.add_processor(node, P.PassThroughProcessor, self._name)
            out[node] = KStream(b, StreamRef(node, s.key_serde, s.value_serde, s.repartition_required))
        return out


class KGroupedStream(_Handle[GroupedRef]):
    """A grouped stream: ``count``, ``reduce``, ``aggregate`` into a queryable store."""

    def __init__(self, builder: DslGraph, ref: GroupedRef) -> None:
        super().__init__(builder, ref)
        self.repartition_required = ref.repartition_required
        #: ``Grouped``'s name: the repartition topic is ``<name>-repartition`` (else the store's)
        self.repartition_name = ref.repartition_name

    def count(self, materialized: MaterializedArg = None) -> KTable:
        return KTable(self._b, SA.count(self._b, self.ref, materialized))

    def reduce(self, reducer: Callable[[Any, Any], Any], materialized: MaterializedArg = None) -> KTable:
        return KTable(self._b, SA.reduce(self._b, self.ref, reducer, materialized))

    def aggregate(self, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                  materialized: MaterializedArg = None) -> KTable:
        return KTable(self._b, SA.aggregate(self._b, self.ref, initializer, aggregator, materialized))

    def cogroup(self, aggregator: Callable[[Any, Any, Any], Any]) -> CogroupedKStream:
        """Start a cogroup (KIP-150) with this stream and ``aggregator(key, value, aggregate)``;
        add streams with ``.cogroup(grouped, aggregator)``, end with ``.aggregate(initializer,
        materialized)`` (instance/topology/cogroup.py)."""
        return CogroupedKStream(self, aggregator)

    def windowed_by(self, windows: Any) -> TimeWindowedKStream | SessionWindowedKStream:
        """``TimeWindows`` / ``SlidingWindows`` / ``SessionWindows`` -> a windowed stream whose
        ``count / reduce / aggregate`` give a KTable keyed by ``Windowed(key, window)``."""
        w = WD.windowing(windows)
        if isinstance(w, WD.SessionWindowing):
            return SessionWindowedKStream(self, w)
        if isinstance(w, WD.SlidingWindowing):
            return SlidingWindowedKStream(self, w)
        return TimeWindowedKStream(self, w)


class _WindowedStream:
    """What the windowed streams share (Kafka Streams' ``TimeWindowedKStream``,
    ``SlidingWindowedKStream``, ``SessionWindowedKStream``): the emit strategy, count and reduce;
    the results are keyed by ``Windowed(key, window)``."""

    def __init__(self, grouped: KGroupedStream, windowing: WD.Windowing) -> None:
        self._grouped = grouped
        self._windowing = windowing
        self.windows = windowing.windows
        self._emit = EmitStrategy.on_window_update()

    def emit_strategy(self, strategy: EmitStrategy) -> Any:
        self._emit = strategy
        return self

    def _table(self, ref: TableRef) -> KTable:
        return KTable(self._grouped._b, ref)

    def count(self, materialized: MaterializedArg = None) -> KTable:
        g = self._grouped
        return self._table(WD.count(g._b, self._windowing, self._emit.on_close, g.ref, materialized))

    def reduce(self, reducer: Callable[[Any, Any], Any], materialized: MaterializedArg = None) -> KTable:
        g = self._grouped
        return self._table(WD.reduce(g._b, self._windowing, self._emit.on_close, g.ref, reducer, materialized))

    def _aggregate(self, initializer: Initializer, aggregator: Aggregator, merger: Merger | None,
                   materialized: MaterializedArg) -> KTable:
        g = self._grouped
        return self._table(WD.windowed_aggregate(g._b, self._windowing, self._emit.on_close, [(g.ref, aggregator)],
                                                 "KSTREAM-AGGREGATE-", materialized, None, initializer, merger))


class TimeWindowedKStream(_WindowedStream):
    """Tumbling or hopping windows."""

    def aggregate(self, initializer: Initializer, aggregator: Aggregator,
                  materialized: MaterializedArg = None) -> KTable:
        return self._aggregate(initializer, aggregator, None, materialized)


class SlidingWindowedKStream(TimeWindowedKStream):
    """Sliding windows: results are keyed by ``[start, start + time difference]`` windows."""


class SessionWindowedKStream(_WindowedStream):
    """Session windows; ``aggregate`` takes a merger ``(key, agg1, agg2) -> agg``."""

    def aggregate(self, initializer: Initializer, aggregator: Aggregator, merger: Merger,
                  materialized: MaterializedArg = None) -> KTable:
        return self._aggregate(initializer, aggregator, merger, materialized)


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
        return CogroupedWindowedKStream(self._b, [(g.ref, a) for g, a in self._groups], windows)

    def aggregate(self, initializer: Callable[[], Any], materialized: MaterializedArg = None,
                  name: str | None = None) -> KTable:
        """One table: each record of any grouped stream updates its key's aggregate through that
        stream's aggregator (starting from ``initializer()``)."""
        groups = [(g.ref, a) for g, a in self._groups]
        return KTable(self._b, CG.cogroup_aggregate(self._b, groups, initializer, materialized, name))


class CogroupedWindowedKStream:
    """Kafka Streams' ``TimeWindowedCogroupedKStream`` / ``SessionWindowedCogroupedKStream``:
    ``aggregate(initializer[, merger], materialized)`` (a merger for session windows). Results are
    emitted on window update: each cogrouped stream's processor keeps its own stream time, so
    closing windows on it would emit a window once per stream."""

    def __init__(self, builder: DslGraph, groups: list[tuple[GroupedRef, Aggregator]], windows: Any) -> None:
        self._b = builder
        self._groups = groups
        self._windowing = WD.windowing(windows)

    def aggregate(self, initializer: Callable[[], Any], *args: Any) -> KTable:
        """``aggregate(initializer, materialized)``; session windows: ``aggregate(initializer,
        merger, materialized)``."""
        merger = None
        if isinstance(self._windowing, WD.SessionWindowing):
            if not args or not callable(args[0]):
                raise TopologyException("a session-windowed cogroup aggregate() needs a merger(key, agg1, agg2)")
            merger, args = args[0], args[1:]
        materialized = args[0] if args else None
        return KTable(self._b, WD.windowed_aggregate(self._b, self._windowing, False, self._groups,
                                                     "COGROUPKSTREAM-AGGREGATE-", materialized, None, initializer,
                                                     merger, cogrouped=True))


class KTable(_Handle[TableRef]):
    """A changelog stream; ``queryable_store_name`` is None for an unmaterialized table (computed
    from its parents on lookup)."""

    def __init__(self, builder: DslGraph, ref: TableRef) -> None:
        super().__init__(builder, ref)
        self.queryable_store_name = ref.store
        self.old_values = ref.old_values
        #: a versioned source table: its store's history retention (lookups as of a timestamp)
        self.history_retention_ms = ref.history_retention_ms
        #: a windowed aggregation's windows (else None)
        self.windows = ref.windows

    def enable_send_old_values(self) -> None:
        self.ref.enable_send_old_values()

    def source_topics(self) -> set[str]:
        return source_topics(self._b.topology, self.node)

    # -- stateless ----------------------------------------------------------------------------------
    def _transform(self, prefix: str, compute: Callable[[Any, Any], Any], skip_empty: bool,
                   materialized: MaterializedArg, name: str | None, value_serde: Serde | None) -> KTable:
        return KTable(self._b, KT.transform(self._b, self.ref, prefix, compute, skip_empty, materialized, name,
                                            value_serde))

    def filter(self, predicate: Callable[[Any, Any], bool], materialized: MaterializedArg = None,
               name: str | None = None) -> KTable:
        def keep(key: Any, value: Any) -> Any:
            return value if predicate(key, value) else None
        return self._transform("KTABLE-FILTER-", keep, True, materialized, name, self.value_serde)

    def filter_not(self, predicate: Callable[[Any, Any], bool], materialized: MaterializedArg = None,
                   name: str | None = None) -> KTable:
        def keep(key: Any, value: Any) -> Any:
            return None if predicate(key, value) else value
        return self._transform("KTABLE-FILTER-", keep, True, materialized, name, self.value_serde)

    def map_values(self, mapper: Callable[[Any], Any], materialized: MaterializedArg = None,
                   name: str | None = None) -> KTable:
        return self._transform("KTABLE-MAPVALUES-", lambda k, v: mapper(v), False, materialized, name, None)

    def suppress(self, suppressed: Any) -> KTable:
        """``Suppressed.until_window_closes(...)`` (windowed tables) or
        ``Suppressed.until_time_limit(...)``; the result sends no old values."""
        return KTable(self._b, suppress(self._b, self.ref, suppressed))

    def to_stream(self, name: str | None = None) -> KStream:
        return KStream(self._b, KT.to_stream(self._b, self.ref, name))

    # -- regrouping -----------------------------------------------------------------------------------
    def group_by(self, selector: Callable[[Any, Any], tuple[Any, Any] | None],
                 key_serde: Any = None, value_serde: Serde | None = None, grouped: Any = None) -> KGroupedTable:
        """``selector(key, value) -> (new_key, new_value)``; aggregations of the result go
        through a repartition topic that carries old and new values (named after a
        ``Grouped``'s name if given, else after the store)."""
        g, key_serde, value_serde = _grouped(grouped, key_serde, value_serde)
        return KGroupedTable(self._b, KT.regroup(self._b, self.ref, selector, key_serde, value_serde, g.name))

    # -- joins -----------------------------------------------------------------------------------------
    def join(self, other: KTable, joiner: Callable[..., Any], *args: Any, **kwargs: Any) -> KTable:
        """``join(other, joiner[, materialized][, name])``: both tables keyed alike; or a
        foreign-key join (KIP-213), ``join(other, foreign_key_extractor, joiner[, table_joined]
        [, materialized])``: the extractor (``f(value)`` or ``f(key, value)``) gives each row the
        key of the ``other`` row it joins (instance/topology/fk_join.py)."""
        return self._join(TP.INNER, other, joiner, args, kwargs)

    def left_join(self, other: KTable, joiner: Callable[..., Any], *args: Any, **kwargs: Any) -> KTable:
        """As :meth:`join`; every row of this table has a result, with None for a missing
        ``other`` row."""
        return self._join(TP.LEFT, other, joiner, args, kwargs)

    def outer_join(self, other: KTable, joiner: Callable[[Any, Any], Any],
                   materialized: MaterializedArg = None, name: str | None = None) -> KTable:
        return self._table_join(TP.OUTER, other, joiner, materialized, name)

    def _join(self, mode: str, other: KTable, first: Callable[..., Any], args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> KTable:
        if not ((args and callable(args[0])) or "foreign_key_extractor" in kwargs):
            return self._table_join(mode, other, first, *args, **kwargs)
        if "foreign_key_extractor" in kwargs:  # join(other, foreign_key_extractor=f, joiner=j)
            extractor, joiner = kwargs.pop("foreign_key_extractor"), first
        else:
            extractor, joiner, args = first, args[0], args[1:]
        table_joined, materialized = FK.split_args(args, kwargs)
        if not isinstance(other, KTable):
            raise TopologyException(f"a foreign-key join needs a KTable, got {type(other).__name__}")
        if not callable(joiner):
            raise TopologyException(f"joiner must be callable, got {type(joiner).__name__}")
        self._check_same_builder(other)
        return KTable(self._b, FK.fk_join(self._b, self.ref, other.ref, extractor, joiner, mode == TP.LEFT,
                                          table_joined, materialized))

    def _table_join(self, mode: str, other: KTable, joiner: Callable[[Any, Any], Any],
                    materialized: MaterializedArg = None, name: str | None = None) -> KTable:
        if not isinstance(other, KTable):
            raise TopologyException(f"a table can only be joined with a KTable, got {type(other).__name__}")
        self._check_same_builder(other)
        return KTable(self._b, TJ.table_table_join(self._b, self.ref, other.ref, joiner, mode, materialized, name))

    def _check_same_builder(self, other: KTable) -> None:
        if other._b is not self._b:
            raise TopologyException("both tables of a join must come from the same StreamsBuilder")


class KGroupedTable(_Handle[GroupedRef]):
    """A re-grouped table: ``aggregate(initializer, adder, subtractor)``, ``reduce(adder,
    subtractor)``, ``count()``, each exact because the old value travels with the new one."""

    def __init__(self, builder: DslGraph, ref: GroupedRef) -> None:
        super().__init__(builder, ref)
        #: ``Grouped``'s name: the repartition topic is ``<name>-repartition`` (else the store's)
        self.repartition_name = ref.repartition_name

    def aggregate(self, initializer: Callable[[], Any], adder: Callable[[Any, Any, Any], Any],
                  subtractor: Callable[[Any, Any, Any], Any], materialized: MaterializedArg = None) -> KTable:
        """``adder(key, value, agg)`` / ``subtractor(key, value, agg)`` return the new aggregate."""
        return KTable(self._b, KT.regrouped_aggregate(self._b, self.ref, initializer, adder, subtractor,
                                                      materialized))

    def reduce(self, adder: Callable[[Any, Any], Any], subtractor: Callable[[Any, Any], Any],
               materialized: MaterializedArg = None) -> KTable:
        return KTable(self._b, KT.regrouped_reduce(self._b, self.ref, adder, subtractor, materialized))

    def count(self, materialized: MaterializedArg = None) -> KTable:
        return KTable(self._b, KT.regrouped_count(self._b, self.ref, materialized))
