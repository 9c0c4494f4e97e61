"""KTable and KGroupedTable: changelog streams whose nodes forward ``Change(new, old)``.

Old values follow Kafka Streams' ``sendOldValues``: each table node has an :class:`OldValues`
flag, off by default; an operator that needs old values (``group_by``, the left side of a left
join, both sides of an outer join, a downstream join result) enables it, and an unmaterialized node
passes the request on to the tables it is computed from. A materialized table gets its old value
from its own store, so the request stops there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from instance.errors import TopologyException
from instance.serde.change_serde import ChangeSerde
from instance.state.spec import StoreSpec
from instance.topology import table_processors as TP
from instance.topology.materialized import MaterializedArg, materialized_of, table_store_spec
from instance.topology.processors import OldValues
from instance.topology.topology import InternalTopic, source_topics
from router.core.serdes import LongSerde, Serde

if TYPE_CHECKING:
    from instance.topology.builder import KStream, StreamsBuilder


def with_old_values(proc: Any, old_values: OldValues) -> Any:
    """Give a store-forwarding processor its table's flag (for suppliers of existing processors)."""
    proc.old_values = old_values
    return proc


def store_getter(store: str) -> TP.GetterFactory:
    """The timestamped getter of a materialized table."""
    return lambda context: context.get_state_store(store).get_with_timestamp


class KTable:
    """A changelog stream; ``queryable_store_name`` is None for an unmaterialized table (computed
    from its parents on lookup)."""

    def __init__(self, builder: StreamsBuilder, node: str, store: str | None, key_serde: Serde | None,
                 value_serde: Serde | None, *, old_values: OldValues | None = None,
                 getter: TP.GetterFactory | None = None, getter_stores: tuple[str, ...] | None = None,
                 upstream: tuple[KTable, ...] = ()) -> None:
        if getter is None:
            if store is None:
                raise TopologyException(f"table {node}: an unmaterialized table needs a value getter")
            getter, getter_stores = store_getter(store), (store,)
        self._b = builder
        self.node = node
        self.queryable_store_name = store
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.old_values = old_values or OldValues()
        self._getter = getter
        self._getter_stores: tuple[str, ...] = getter_stores or ()
        self._upstream = upstream
        #: a versioned source table: its store's history retention (lookups as of a timestamp)
        self.history_retention_ms: int | None = None

    # -- internals shared with joins --------------------------------------------------------------
    def enable_send_old_values(self) -> None:
        self.old_values.enabled = True
        if self.queryable_store_name is None:
            for parent in self._upstream:
                parent.enable_send_old_values()

    def connect_getter(self, processor: str) -> TP.GetterFactory:
        """Give ``processor`` access to this table's current values; returns the (timestamped)
        getter factory."""
        for s in self._getter_stores:
            self._b.topology.connect_processor_and_state_stores(s, processor)
        return self._getter

    def value_getter(self) -> TP.GetterFactory:
        """A getter of plain values (a materialized table's own ``get``); connect the reader with
        :meth:`connect_getter`."""
        store = self.queryable_store_name
        if store is not None and self.history_retention_ms is None:
            return lambda context: context.get_state_store(store).get
        return TP.values_of(self._getter)

    def source_topics(self) -> set[str]:
        return source_topics(self._b.topology, self.node)

    def materialize(self, m: Any, prefix: str, value_serde: Serde | None) -> StoreSpec:
        """The spec of a store for a node derived from this table (named, or named as Kafka
        Streams does: ``<prefix>STATE-STORE-<index>``)."""
        b = self._b
        store = m.name or b.new_name(f"{prefix}STATE-STORE-")
        ks = m.key_serde or self.key_serde or b.default_key_serde
        vs = m.value_serde or value_serde or b.default_value_serde
        return table_store_spec(store, ks, vs, m)

    # -- stateless ----------------------------------------------------------------------------------
    def _transform(self, prefix: str, compute: Callable[[Any, Any], Any], skip_empty: bool,
                   materialized: MaterializedArg, name: str | None, value_serde: Serde | None) -> KTable:
        b = self._b
        flag = OldValues()
        spec = None if materialized is None else self.materialize(materialized_of(materialized), prefix,
                                                                    value_serde)
        store = None if spec is None else spec.name
        node = name or b.new_name(prefix)
        b.topology.add_processor(node, lambda: TP.TableTransformProcessor(compute, flag, skip_empty, store),
                                 self.node)
        if spec is not None:
            b.topology.add_state_store(spec, node)
            return KTable(b, node, spec.name, spec.key_serde, spec.value_serde, old_values=flag)
        parent = self._getter

        def getter(context: Any) -> TP.Getter:
            get = parent(context)

            def compute_get(key: Any) -> Any:
                vt = get(key)
                if vt is None:
                    return None
                v = compute(key, vt[0])
                return None if v is None else (v, vt[1])
            return compute_get
        return KTable(b, node, None, self.key_serde, value_serde, old_values=flag, getter=getter,
                      getter_stores=self._getter_stores, upstream=(self,))

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
        return self._transform("KTABLE-MAPVALUES-", lambda k, v: mapper(v), False, materialized, name,
                               None)

    def suppress(self, suppressed: Any) -> KTable:
        """``Suppressed.until_window_closes(...)`` (windowed tables) or
        ``Suppressed.until_time_limit(...)``; the result sends no old values."""
        from instance.topology.suppress import suppress
        return suppress(self, suppressed)  # type: ignore[no-any-return]

    def to_stream(self, name: str | None = None) -> KStream:
        from instance.topology.builder import KStream
        node = name or self._b.new_name("KTABLE-TOSTREAM-")
        self._b.topology.add_processor(node, TP.TableToStreamProcessor, self.node)
        return KStream(self._b, node, self.key_serde, self.value_serde, repartition_required=False)

    # -- regrouping -----------------------------------------------------------------------------------
    def group_by(self, selector: Callable[[Any, Any], tuple[Any, Any] | None],
                 key_serde: Any = None, value_serde: Serde | None = None, grouped: Any = None) -> KGroupedTable:
        """``selector(key, value) -> (new_key, new_value)``; aggregations of the result go
        through a repartition topic that carries old and new values (named after a
        ``Grouped``'s name if given, else after the store)."""
        from instance.topology.builder import _grouped
        g, key_serde, value_serde = _grouped(grouped, key_serde, value_serde)
        b = self._b
        self.enable_send_old_values()
        node = b.new_name("KTABLE-SELECT-")
        b.topology.add_processor(node, lambda: TP.TableRepartitionMapProcessor(selector), self.node)
        out = KGroupedTable(b, node, key_serde or b.default_key_serde,
                            value_serde or self.value_serde or b.default_value_serde)
        out.repartition_name = g.name
        return out

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

    def _join(self, mode: str, other: KTable, first: Callable[..., Any], args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> KTable:
        if (args and callable(args[0])) or "foreign_key_extractor" in kwargs:
            from instance.topology.fk_join import fk_join, split_args
            if "foreign_key_extractor" in kwargs:  # join(other, foreign_key_extractor=f, joiner=j)
                extractor, joiner = kwargs.pop("foreign_key_extractor"), first
            else:
                extractor, joiner, args = first, args[0], args[1:]
            table_joined, materialized = split_args(args, kwargs)
            return fk_join(self, other, extractor, joiner, mode == TP.LEFT, table_joined, materialized)
        from instance.topology.table_joins import table_table_join
        return table_table_join(self, other, first, mode, *args, **kwargs)

    def outer_join(self, other: KTable, joiner: Callable[[Any, Any], Any],
                   materialized: MaterializedArg = None, name: str | None = None) -> KTable:
        from instance.topology.table_joins import table_table_join
        return table_table_join(self, other, joiner, TP.OUTER, materialized, name)


class KGroupedTable:
    """A re-grouped table: ``aggregate(initializer, adder, subtractor)``, ``reduce(adder,
    subtractor)``, ``count()``, each exact because the old value travels with the new one."""

    def __init__(self, builder: StreamsBuilder, node: str, key_serde: Serde, value_serde: Serde) -> None:
        self._b = builder
        self.node = node
        self.key_serde = key_serde
        self.value_serde = value_serde
        #: ``Grouped``'s name: the repartition topic is ``<name>-repartition`` (else the store's)
        self.repartition_name: str | None = None

    def _aggregate(self, prefix: str, materialized: MaterializedArg, agg_value_serde: Serde | None,
                   make: Callable[[str, OldValues], Any]) -> KTable:
        b = self._b
        m = materialized_of(materialized)
        vs = m.value_serde or agg_value_serde
        if vs is None:
            raise TopologyException("aggregate() needs Materialized(value_serde=...) for the aggregate")
        ks = m.key_serde or self.key_serde
        # as Kafka Streams: store name, then sink, source, and the aggregate's node
        store = m.name or b.new_name(f"{prefix}STATE-STORE-")
        topic = f"{self.repartition_name or store}-repartition"
        sink, source = b.new_name("KSTREAM-SINK-"), b.new_name("KSTREAM-SOURCE-")
        node = b.new_name(prefix)
        changes = ChangeSerde(self.value_serde)
        b.topology.add_sink(sink, topic, self.node, key_serde=self.key_serde, value_serde=changes)
        b.topology.add_source(source, topic, key_serde=self.key_serde, value_serde=changes)
        b.topology.add_internal_topic(InternalTopic(topic))
        flag = OldValues()
        b.topology.add_processor(node, lambda: make(store, flag), source)
        b.topology.add_state_store(table_store_spec(store, ks, vs, m), node)
        return KTable(b, node, store, ks, vs, old_values=flag)

    def aggregate(self, initializer: Callable[[], Any], adder: Callable[[Any, Any, Any], Any],
                  subtractor: Callable[[Any, Any, Any], Any], materialized: MaterializedArg = None) -> KTable:
        """``adder(key, value, agg)`` / ``subtractor(key, value, agg)`` return the new aggregate."""
        return self._aggregate("KTABLE-AGGREGATE-", materialized, None,
                               lambda store, flag: TP.TableAggregateProcessor(
                                   store, initializer, adder, subtractor, flag))

    def reduce(self, adder: Callable[[Any, Any], Any], subtractor: Callable[[Any, Any], Any],
               materialized: MaterializedArg = None) -> KTable:
        return self._aggregate("KTABLE-REDUCE-", materialized, self.value_serde,
                               lambda store, flag: TP.TableReduceProcessor(store, adder, subtractor, flag))

    def count(self, materialized: MaterializedArg = None) -> KTable:
        return self._aggregate("KTABLE-AGGREGATE-", materialized, LongSerde(),
                               lambda store, flag: TP.TableAggregateProcessor(
                                   store, _zero, _plus_one, _minus_one, flag))


def _zero() -> int:
    return 0


def _plus_one(key: Any, value: Any, agg: int) -> int:
    return agg + 1


def _minus_one(key: Any, value: Any, agg: int) -> int:
    return agg - 1


def versioned_table(builder: StreamsBuilder, proc: str, source: str, store: str, ks: Serde, vs: Serde,
                    m: Any, flag: OldValues) -> KTable:
    """``builder.table`` materialized in a versioned store (instance/topology/versioned.py)."""
    from instance.topology.versioned import VersionedTableSourceProcessor, versioned_spec, versioned_view
    retention = m.history_retention_ms
    builder.topology.add_processor(proc, lambda: VersionedTableSourceProcessor(store, retention, flag), source)
    builder.topology.add_state_store(versioned_spec(store, ks, vs, m), proc)
    table = KTable(builder, proc, store, ks, vs, old_values=flag,
                   getter=lambda context: versioned_view(context, store, retention).get_with_timestamp,
                   getter_stores=(store,))
    table.history_retention_ms = retention
    return table
