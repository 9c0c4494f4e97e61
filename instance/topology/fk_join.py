"""``KTable.join / left_join(other, foreign_key_extractor, joiner[, table_joined][, materialized])``:
foreign-key table-table joins (KIP-213), wired as Kafka Streams wires them (``KTableImpl.
doJoinOnForeignKey``), with the same node, store and topic names:

- ``<app>-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-<n>-topic`` (keyed by foreign key,
  co-partitioned with the right table) and ``<app>-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-<n>-topic``
  (keyed by primary key, co-partitioned with the left table), created by the runtime like
  repartition topics;
- ``KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-<n>`` on the right side (changelogged), keyed by
  (foreign key, primary key) so one foreign key's subscribers are one prefix;
- the result: a table node ``KTABLE-FK-JOIN-OUTPUT-<n>``, always materialized here (Kafka Streams
  materializes it only when named or when a downstream operator needs it; unnamed, its store is
  ``KTABLE-FK-JOIN-OUTPUT-STATE-STORE-<n>`` with caching off, so every result is forwarded as Kafka
  Streams forwards an unmaterialized one).

The processors are in ``fk_processors.py``, what crosses the topics in ``fk_wire.py``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from instance.errors import TopologyException
from instance.state.spec import StoreSpec
from instance.topology import fk_processors as FP
from instance.topology import fk_wire as W
from instance.topology.graph import DslGraph
from instance.topology.materialized import Materialized, MaterializedArg, materialized_of, table_store_spec
from instance.topology.processors import OldValues, TableSourceProcessor, with_old_values
from instance.topology.refs import TableRef
from instance.topology.topology import InternalTopic, source_topics


@dataclass(frozen=True)
class TableJoined:
    """Name of a foreign-key join (Kafka Streams' ``TableJoined``): its nodes, store and topics
    are named after it (``<name>-subscription-registration-topic``...). Custom partitioners are
    not supported: the internal topics are partitioned by key."""

    name: str | None = None

    @staticmethod
    def as_(name: str) -> TableJoined:
        return TableJoined(name=name)

    def with_name(self, name: str) -> TableJoined:
        return replace(self, name=name)


def as_extractor(fn: Callable[..., Any]) -> FP.Extractor:
    """``fn(value)`` or ``fn(key, value)`` (Kafka Streams' ``Function`` and ``BiFunction``
    extractors), told apart by how many positional arguments ``fn`` requires."""
    if not callable(fn):
        raise TopologyException(f"foreign_key_extractor must be callable, got {type(fn).__name__}")
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return lambda _k, v: fn(v)
    required = [p for p in params if p.default is p.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(required) >= 2:
        return fn
    return lambda _k, v: fn(v)


def split_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[TableJoined, MaterializedArg]:
    """The optional ``[table_joined][, materialized]`` of a foreign-key join, by type."""
    tj: TableJoined | None = kwargs.pop("table_joined", None)
    m: MaterializedArg = kwargs.pop("materialized", None)
    name = kwargs.pop("name", None)
    if kwargs:
        raise TopologyException(f"unexpected arguments of a foreign-key join: {sorted(kwargs)}")
    for a in args:
        if isinstance(a, TableJoined):
            tj = a
        elif isinstance(a, Materialized | str):
            m = a
        elif a is not None:
            raise TopologyException(f"a foreign-key join takes TableJoined and Materialized, got "
                                    f"{type(a).__name__}")
    tj = tj or TableJoined()
    if name is not None:
        tj = tj.with_name(name)
    return tj, m


def fk_join(b: DslGraph, left: TableRef, right: TableRef, extractor: Callable[..., Any],
            joiner: Callable[[Any, Any], Any], left_join: bool, table_joined: TableJoined,
            materialized: MaterializedArg) -> TableRef:
    """Wire the join; see the module docstring for what is created."""
    extract = as_extractor(extractor)
    # old values: the left side's to unsubscribe an old foreign key; the right side's as Kafka
    # Streams asks for them (an upstream filter then forwards no (None, None) change)
    left.enable_send_old_values()
    right.enable_send_old_values()
    base = table_joined.name

    def named(suffix: str, prefix: str) -> str:
        return f"{base}{suffix}" if base else b.new_name(prefix)

    pk_serde = left.key_serde or b.default_key_serde
    fk_serde = right.key_serde or b.default_key_serde
    left_values = left.value_serde or b.default_value_serde
    right_values = right.value_serde or b.default_value_serde
    subs, responses = W.SubscriptionSerde(pk_serde), W.ResponseSerde(right_values)
    topo = b.topology

    sub_topic = named("-subscription-registration", "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-") + "-topic"
    send = named("-subscription-registration-processor", "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-")
    sub_sink = named("-subscription-registration-sink", "KTABLE-SINK-")
    sub_source = named("-subscription-registration-source", "KSTREAM-SOURCE-")
    store = named("-subscription-store", "KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-")
    receive = named("-subscription-receive", "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-")
    answer = named("-subscription-join-foreign", "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-")
    foreign = named("-foreign-join-subscription", "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-")
    resp_topic = named("-subscription-response", "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-") + "-topic"
    resp_sink = named("-subscription-response-sink", "KTABLE-SINK-")
    resp_source = named("-subscription-response-source", "KSTREAM-SOURCE-")
    resolver = named("-subscription-response-resolver",
                     "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-")
    output = named("-result", "KTABLE-FK-JOIN-OUTPUT-")
    m: Materialized = materialized_of(materialized)
    if materialized is None:  # forward every result, as an unmaterialized result does
        m = replace(m, caching_enabled=False)
    out_store = m.name or b.new_name("KTABLE-FK-JOIN-OUTPUT-STATE-STORE-")

    # left side: subscriptions out
    topo.add_processor(send, lambda: FP.SubscriptionSendProcessor(extract, left_join, fk_serde, left_values),
                       left.node)
    topo.add_sink(sub_sink, sub_topic, send, key_serde=fk_serde, value_serde=subs)
    topo.add_internal_topic(InternalTopic(sub_topic))
    # right side: subscriptions in, answered now and whenever the right row changes
    topo.add_source(sub_source, sub_topic, key_serde=fk_serde, value_serde=subs)
    topo.add_processor(receive, lambda: FP.SubscriptionReceiveProcessor(store), sub_source)
    keys = W.CombinedKeySerde(fk_serde, pk_serde)
    topo.add_state_store(StoreSpec(store, keys, subs, caching_enabled=False, timestamped=True), receive)
    # the getters are connected once their reader exists; the suppliers run at task build time
    topo.add_processor(answer, lambda: FP.SubscriptionJoinProcessor(right_getter), receive)
    right_getter = right.connect_getter(topo, answer)
    topo.add_processor(foreign, lambda: FP.ForeignTableJoinProcessor(store, keys, subs), right.node)
    topo.connect_processor_and_state_stores(store, foreign)
    topo.add_sink(resp_sink, resp_topic, answer, foreign, key_serde=pk_serde, value_serde=responses)
    topo.add_internal_topic(InternalTopic(resp_topic))
    topo.add_copartition_group(source_topics(topo, right.node) | {sub_topic})
    # left side: answers in, joined with the row as it is now
    topo.add_source(resp_source, resp_topic, key_serde=pk_serde, value_serde=responses)
    topo.add_processor(resolver, lambda: FP.ResponseJoinProcessor(left_getter, left_values, joiner, left_join),
                       resp_source)
    left_getter = left.connect_getter(topo, resolver)
    flag = OldValues()
    topo.add_processor(output, lambda: with_old_values(TableSourceProcessor(out_store), flag), resolver)
    spec = table_store_spec(out_store, m.key_serde or pk_serde, m.value_serde or b.default_value_serde, m)
    topo.add_state_store(spec, output)
    topo.add_copartition_group(source_topics(topo, left.node) | {resp_topic})
    return TableRef.materialized(output, out_store, spec.key_serde, spec.value_serde, flag)
