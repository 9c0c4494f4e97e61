"""The StreamsBuilder DSL: KStream, KGroupedStream, KTable over the Processor-API Topology.

Node names follow Kafka Streams (``KSTREAM-FILTER-0000000001``...), one counter per builder.
A key-changing operation (map, flat_map, select_key, group_by) marks the stream; a grouping
after it inserts a repartition topic, which is where the topology splits into sub-topologies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from instance.errors import TopologyException
from instance.topology import processors as P
from instance.topology.global_table import GlobalKTable, global_table
from instance.topology.ktable import KTable, versioned_table, with_old_values
from instance.topology.materialized import Materialized, MaterializedArg, materialized_of, table_store_spec
from instance.topology.options import Consumed, Grouped, Produced, serdes_of
from instance.topology.processors import OldValues
from instance.topology.topology import InternalTopic, Topology
from router.core.serdes import BytesSerde, LongSerde, Serde


class StreamsBuilder:
    """Entry point of the DSL; ``build()`` returns the :class:`Topology`."""

    def __init__(self, default_key_serde: Serde | None = None,
                 default_value_serde: Serde | None = None) -> None:
        self.topology = Topology()
        self._index = 0
        self.default_key_serde: Serde = default_key_serde or BytesSerde()
        self.default_value_serde: Serde = default_value_serde or BytesSerde()

    def new_name(self, prefix: str) -> str:
        name = f"{prefix}{self._index:010d}"
        self._index += 1
        return name

    def stream(self, *topics: str | Consumed, key_serde: Serde | None = None,
               value_serde: Serde | None = None, consumed: Consumed | None = None) -> KStream:
        """``stream("a", "b")``, optionally with a :class:`Consumed` (also positionally, as in
        Java: ``stream("a", Consumed.with_(S, S))``)."""
        names: list[str] = []
        for t in topics:
            if isinstance(t, Consumed):
                if consumed is not None:
                    raise TopologyException("Consumed given twice")
                consumed = t
            elif isinstance(t, str):
                names.append(t)
            else:
                raise TopologyException(f"a topic name must be a string, got {type(t).__name__}")
        c = consumed or Consumed()
        ks = key_serde or c.key_serde or self.default_key_serde
        vs = value_serde or c.value_serde or self.default_value_serde
        name = c.name or self.new_name("KSTREAM-SOURCE-")
        self.topology.add_source(name, *names, key_serde=ks, value_serde=vs,
                                 timestamp_extractor=c.timestamp_extractor)
        return KStream(self, name, ks, vs, repartition_required=False)

    def table(self, topic: str, materialized: MaterializedArg | Consumed = None, key_serde: Any = None,
              value_serde: Serde | None = None, consumed: Consumed | None = None) -> KTable:
        """``table(topic[, consumed][, materialized])`` as in Java, or with keyword serdes."""
        c, m, ks, vs = _table_args(materialized, key_serde, value_serde, consumed)
        ks = ks or c.key_serde or m.key_serde or self.default_key_serde
        vs = vs or c.value_serde or m.value_serde or self.default_value_serde
        # as Kafka Streams: the generated store name takes its index before the two nodes
        store = m.name or self.new_name(f"{topic}-STATE-STORE-")
        source = c.name or self.new_name("KSTREAM-SOURCE-")
        self.topology.add_source(source, topic, key_serde=ks, value_serde=vs,
                                 timestamp_extractor=c.timestamp_extractor)
        proc = f"{c.name}-table-source" if c.name else self.new_name("KTABLE-SOURCE-")
        flag = OldValues()
        if m.history_retention_ms is not None:
            return versioned_table(self, proc, source, store, ks, vs, m, flag)
        self.topology.add_processor(proc, lambda: with_old_values(P.TableSourceProcessor(store), flag), source)
        self.topology.add_state_store(table_store_spec(store, ks, vs, m), proc)
        return KTable(self, proc, store, ks, vs, old_values=flag)

    def global_table(self, topic: str, materialized: MaterializedArg | Consumed = None, key_serde: Any = None,
                     value_serde: Serde | None = None, consumed: Consumed | None = None) -> GlobalKTable:
        """A table of the whole topic on every instance (instance/topology/global_table.py)."""
        c, m, ks, vs = _table_args(materialized, key_serde, value_serde, consumed)
        if c.timestamp_extractor is not None or c.name is not None:
            raise TopologyException("a global table's Consumed takes serdes only")
        return global_table(self, topic, m, ks or c.key_serde, vs or c.value_serde)

    def build(self) -> Topology:
        self.topology.subtopologies()  # validates reachability
        return self.topology


def _table_args(materialized: Any, key_serde: Any, value_serde: Serde | None,
                consumed: Consumed | None) -> tuple[Consumed, Materialized, Serde | None, Serde | None]:
    """``table``'s arguments in either form: ``(topic, consumed[, materialized])`` (Java) or
    ``(topic, materialized, key_serde, value_serde)``."""
    if isinstance(materialized, Consumed):
        if consumed is not None:
            raise TopologyException("Consumed given twice")
        consumed, materialized = materialized, None
        if isinstance(key_serde, Materialized | str):
            materialized, key_serde = key_serde, None
    if key_serde is not None and not hasattr(key_serde, "serialize"):
        raise TopologyException(f"key_serde must be a Serde, got {type(key_serde).__name__}")
    if materialized is not None and not isinstance(materialized, Materialized | str):
        raise TopologyException(f"expected Materialized or a store name, got {type(materialized).__name__}")
    return consumed or Consumed(), materialized_of(materialized), key_serde, value_serde


class KStream:
    """A record stream. Every operation adds one node and returns a new KStream."""

    def __init__(self, builder: StreamsBuilder, node: str, key_serde: Serde | None,
                 value_serde: Serde | None, repartition_required: bool) -> None:
        self._b = builder
        self.node = node
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.repartition_required = repartition_required

    def _add(self, prefix: str, supplier: Callable[[], Any], *, key_changed: bool = False,
             value_changed: bool = False, name: str | None = None) -> KStream:
        node = name or self._b.new_name(prefix)
        self._b.topology.add_processor(node, supplier, self.node)
        return KStream(self._b, node, None if key_changed else self.key_serde,
                       None if value_changed else self.value_serde,
                       self.repartition_required or key_changed)

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
        return KStream(self._b, node, self.key_serde if same else None,
                       self.value_serde if self.value_serde is other.value_serde else None,
                       self.repartition_required or other.repartition_required)

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
        base = name or self._b.new_name("KSTREAM-REPARTITION-")
        ks = key_serde or self.key_serde or self._b.default_key_serde
        vs = value_serde or self.value_serde or self._b.default_value_serde
        source = _insert_repartition(self._b, self.node, base, ks, vs, num_partitions)
        return KStream(self._b, source, ks, vs, repartition_required=False)

    def group_by_key(self, key_serde: Serde | Grouped | None = None, value_serde: Serde | None = None,
                     grouped: Grouped | None = None) -> KGroupedStream:
        """Serdes by keyword or a :class:`Grouped` (whose name names the repartition topic)."""
        grouped, key_serde, value_serde = _grouped(grouped, key_serde, value_serde)
        g = KGroupedStream(self._b, self.node, key_serde or self.key_serde or self._b.default_key_serde,
                           value_serde or self.value_serde or self._b.default_value_serde,
                           self.repartition_required)
        g.repartition_name = grouped.name
        return g

    def group_by(self, selector: Callable[[Any, Any], Any], key_serde: Serde | Grouped | None = None,
                 value_serde: Serde | None = None, grouped: Grouped | None = None) -> KGroupedStream:
        grouped, key_serde, value_serde = _grouped(grouped, key_serde, value_serde)
        selected = self.select_key(selector)
        g = KGroupedStream(self._b, selected.node, key_serde or self._b.default_key_serde,
                           value_serde or self.value_serde or self._b.default_value_serde, True)
        g.repartition_name = grouped.name
        return g

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
            from instance.topology.stream_joins import stream_stream_join

            def windowed(joiner: Callable[[Any, Any], Any], windows: Any = None,
                         stream_joined: Any = None) -> KStream:
                return stream_stream_join(self, other, joiner, windows, kind, stream_joined)
            return windowed(*args, **kwargs)
        if kind == "outer":
            raise TopologyException("outer_join takes a KStream (tables: KTable.outer_join)")
        from instance.topology.table_joins import stream_join
        return stream_join(self, other, *args, left=kind == "left", **kwargs)

    def process(self, supplier: Callable[[], Any], *store_names: str, name: str | None = None) -> KStream:
        """Attach a Processor-API processor (its stores must be added to the topology first)."""
        out = self._add("KSTREAM-PROCESSOR-", supplier, key_changed=True, value_changed=True, name=name)
        if store_names:
            self._b.topology.connect_processor_and_state_stores(store_names[0], out.node)
            for s in store_names[1:]:
                self._b.topology.connect_processor_and_state_stores(s, out.node)
        return out


def _grouped(grouped: Grouped | None, key_serde: Any, value_serde: Serde | None
             ) -> tuple[Grouped, Serde | None, Serde | None]:
    """A grouping's serdes: keyword ones first, then the :class:`Grouped`'s."""
    g, ks, vs = serdes_of(grouped, key_serde, value_serde, Grouped)
    g = g or Grouped()
    return g, ks or g.key_serde, vs or g.value_serde


def _insert_repartition(b: StreamsBuilder, parent: str, base: str, ks: Serde, vs: Serde,
                        num_partitions: int | None) -> str:
    """sink → ``<base>-repartition`` → source; returns the source node's name."""
    topic = f"{base}-repartition"
    # Kafka Streams (createRepartitionedSource, used by grouping and repartition()) names the
    # sink, then the filter, then the source
    new_name = b.new_name
    sink, filt = new_name("KSTREAM-SINK-"), new_name("KSTREAM-FILTER-")
    b.topology.add_processor(filt, P.DropNullKeyProcessor, parent)
    b.topology.add_sink(sink, topic, filt, key_serde=ks, value_serde=vs)
    source = new_name("KSTREAM-SOURCE-")
    b.topology.add_source(source, topic, key_serde=ks, value_serde=vs)
    b.topology.add_internal_topic(InternalTopic(topic, num_partitions))
    return source


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
            out[node] = KStream(b, node, s.key_serde, s.value_serde, s.repartition_required)
        return out


class KGroupedStream:
    """A grouped stream: ``count``, ``reduce``, ``aggregate`` into a queryable store."""

    def __init__(self, builder: StreamsBuilder, node: str, key_serde: Serde, value_serde: Serde,
                 repartition_required: bool) -> None:
        self._b = builder
        self.node = node
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.repartition_required = repartition_required
        #: ``Grouped``'s name: the repartition topic is ``<name>-repartition`` (else the store's)
        self.repartition_name: str | None = None

    def _aggregate(self, prefix: str, m: Materialized, agg_value_serde: Serde,
                   make: Callable[[str], Any]) -> KTable:
        b = self._b
        # as Kafka Streams: a generated store name takes its index before the processor's name
        store = m.name or b.new_name(f"{prefix}STATE-STORE-")
        node = b.new_name(prefix)
        parent = self.node
        if self.repartition_required:
            parent = _insert_repartition(b, self.node, self.repartition_name or store, self.key_serde,
                                         self.value_serde, None)
        ks = m.key_serde or self.key_serde
        vs = m.value_serde or agg_value_serde
        flag = OldValues()
        b.topology.add_processor(node, lambda: with_old_values(make(store), flag), parent)
        b.topology.add_state_store(table_store_spec(store, ks, vs, m), node)
        return KTable(b, node, store, ks, vs, old_values=flag)

    def count(self, materialized: MaterializedArg = None) -> KTable:
        return self._aggregate("KSTREAM-AGGREGATE-", materialized_of(materialized), LongSerde(),
                               P.CountProcessor)

    def reduce(self, reducer: Callable[[Any, Any], Any], materialized: MaterializedArg = None) -> KTable:
        return self._aggregate("KSTREAM-REDUCE-", materialized_of(materialized), self.value_serde,
                               lambda store: P.ReduceProcessor(store, reducer))

    def cogroup(self, aggregator: Callable[[Any, Any, Any], Any]) -> Any:
        """Start a cogroup (KIP-150) with this stream and ``aggregator(key, value, aggregate)``;
        add streams with ``.cogroup(grouped, aggregator)``, end with ``.aggregate(initializer,
        materialized)`` (instance/topology/cogroup.py)."""
        from instance.topology.cogroup import CogroupedKStream
        return CogroupedKStream(self, aggregator)

    def windowed_by(self, windows: Any) -> Any:
        """``TimeWindows`` / ``SlidingWindows`` / ``SessionWindows`` -> a windowed stream whose
        ``count / reduce / aggregate`` give a KTable keyed by ``Windowed(key, window)``."""
        from instance.topology.windowed import windowed_by
        return windowed_by(self, windows)

    def aggregate(self, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                  materialized: MaterializedArg = None) -> KTable:
        m = materialized_of(materialized)
        if m.value_serde is None:
            raise TopologyException("aggregate() needs Materialized(value_serde=...) for the aggregate")
        return self._aggregate("KSTREAM-AGGREGATE-", m, m.value_serde,
                               lambda store: P.AggregateProcessor(store, initializer, aggregator))
