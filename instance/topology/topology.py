"""The logical topology (Processor API) and its split into sub-topologies.

Nodes are wired parent → child. A repartition topic written by a sink and read by a source is not
an edge, so it splits the graph: each connected component (processors sharing a store count as
connected) is a sub-topology, and a task is one sub-topology on one partition.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from instance.errors import ConfigException, TopologyException
from instance.state.spec import StoreSpec
from instance.topology.describe import describe
from instance.topology.nodes import Node, ProcessorNodeDef, SinkNode, SourceNode, SubTopology
from instance.topology.processor import ProcessorSupplier
from kernel.serdes import BytesSerde, Serde

__all__ = ["GlobalStore", "InternalTopic", "Node", "ProcessorNodeDef", "SinkNode", "SourceNode", "SubTopology",
           "Topology", "source_topics"]


@dataclass(frozen=True)
class InternalTopic:
    """A topic the application owns: repartition (``name`` without the application prefix)."""

    name: str
    num_partitions: int | None = None  # None: as many as the upstream source topics


@dataclass(frozen=True)
class GlobalStore:
    """A store every instance holds whole, filled from all partitions of ``topic`` (Kafka
    Streams' global store): bootstrapped before processing starts, then kept up to date by the
    global thread. The topic is its changelog, so the store itself logs nothing. Records are
    applied as they are (``processor`` None: a GlobalKTable) or through ``processor``."""

    spec: StoreSpec
    source_name: str
    topic: str
    key_serde: Serde
    value_serde: Serde
    processor_name: str
    processor: ProcessorSupplier | None = None


class Topology:
    """A DAG of sources, processors and sinks, plus the stores processors use."""

    def __init__(self) -> None:
        self._nodes: dict[str, Node] = {}
        self._stores: dict[str, StoreSpec] = {}
        self._seq = 0
        self._internal: dict[str, InternalTopic] = {}
        self._copartition_groups: list[set[str]] = []
        self._global_stores: dict[str, GlobalStore] = {}
        self._subtopologies: list[SubTopology] | None = None

    # -- building -------------------------------------------------------------------------
    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def _check_new(self, name: str) -> None:
        if not name:
            raise TopologyException("node name must not be empty")
        if name in self._nodes:
            raise TopologyException(f"node {name!r} is already added")
        self._subtopologies = None

    def _check_parents(self, name: str, parents: Sequence[str]) -> None:
        """Validate before anything is added, so a rejected node leaves the topology unchanged."""
        for p in parents:
            if p == name:
                raise TopologyException(f"node {name!r} cannot be its own parent")
            parent = self._nodes.get(p)
            if parent is None:
                raise TopologyException(f"parent node {p!r} of {name!r} is not added yet")
            if isinstance(parent, SinkNode):
                raise TopologyException(f"sink {p!r} cannot have children ({name!r})")

    def _connect(self, name: str, parents: Sequence[str]) -> None:
        for p in parents:
            self._nodes[p].children.append(name)
            self._nodes[name].parents.append(p)

    def add_source(self, name: str, *topics: str, key_serde: Serde | None = None,
                   value_serde: Serde | None = None, timestamp_extractor: Any = None) -> Topology:
        self._check_new(name)
        if not topics:
            raise TopologyException(f"source {name!r} needs at least one topic")
        for n in self._nodes.values():
            if isinstance(n, SourceNode):
                dup = set(n.topics) & set(topics)
                if dup:
                    raise TopologyException(f"topic(s) {sorted(dup)} already read by source {n.name!r}")
        for g in self._global_stores.values():
            if g.topic in topics:
                raise TopologyException(f"topic {g.topic!r} already feeds global store {g.spec.name!r}")
        self._nodes[name] = SourceNode(name, list(topics), key_serde or BytesSerde(),
                                       value_serde or BytesSerde(), self._next(),
                                       timestamp_extractor=timestamp_extractor)
        return self

    def add_processor(self, name: str, supplier: ProcessorSupplier, *parents: str) -> Topology:
        self._check_new(name)
        if not parents:
            raise TopologyException(f"processor {name!r} needs at least one parent")
        self._check_parents(name, parents)
        self._nodes[name] = ProcessorNodeDef(name, supplier, self._next())
        self._connect(name, parents)
        return self

    def add_sink(self, name: str, topic: str, *parents: str, key_serde: Serde | None = None,
                 value_serde: Serde | None = None,
                 partitioner: Callable[[Any, Any, int], int | None] | None = None) -> Topology:
        self._check_new(name)
        if not parents:
            raise TopologyException(f"sink {name!r} needs at least one parent")
        self._check_parents(name, parents)
        self._nodes[name] = SinkNode(name, topic, key_serde or BytesSerde(), value_serde or BytesSerde(),
                                     self._next(), partitioner)
        self._connect(name, parents)
        return self

    def add_state_store(self, spec: StoreSpec, *processor_names: str) -> Topology:
        if spec.name in self._stores or spec.name in self._global_stores:
            raise TopologyException(f"store {spec.name!r} is already added")
        for pn in processor_names:
            if not isinstance(self._nodes.get(pn), ProcessorNodeDef):
                raise TopologyException(f"{pn!r} is not a processor; stores connect to processors")
        self._stores[spec.name] = spec
        self.connect_processor_and_state_stores(spec.name, *processor_names)
        return self

    def add_global_store(self, spec: StoreSpec, source_name: str, topic: str, processor_name: str,
                         processor: ProcessorSupplier | None = None, key_serde: Serde | None = None,
                         value_serde: Serde | None = None) -> Topology:
        """Kafka Streams' ``addGlobalStore``; any processor may then read the store (connect it
        with :meth:`connect_processor_and_state_stores`). Its nodes belong to no sub-topology."""
        if spec.name in self._stores or spec.name in self._global_stores:
            raise TopologyException(f"store {spec.name!r} is already added")
        for n in (source_name, processor_name):
            self._check_new(n)
        for g in self._global_stores.values():
            if g.topic == topic:
                raise TopologyException(f"topic {topic!r} already feeds global store {g.spec.name!r}")
        for node in self._nodes.values():
            if isinstance(node, SourceNode) and topic in node.topics:
                raise TopologyException(f"topic {topic!r} is already read by source {node.name!r}")
        self._global_stores[spec.name] = GlobalStore(
            replace(spec, logging_enabled=False), source_name, topic, key_serde or spec.key_serde,
            value_serde or spec.value_serde, processor_name, processor)
        return self

    @property
    def global_stores(self) -> dict[str, GlobalStore]:
        return self._global_stores

    def connect_processor_and_state_stores(self, store: str, *processor_names: str) -> Topology:
        if store in self._global_stores:
            for pn in processor_names:
                node = self._nodes.get(pn)
                if not isinstance(node, ProcessorNodeDef):
                    raise TopologyException(f"{pn!r} is not a processor; stores connect to processors")
                if store not in node.stores:
                    node.stores.append(store)
            return self
        if store not in self._stores:
            raise TopologyException(f"store {store!r} is not added")
        for pn in processor_names:
            node = self._nodes.get(pn)
            if not isinstance(node, ProcessorNodeDef):
                raise TopologyException(f"{pn!r} is not a processor; stores connect to processors")
            if store not in node.stores:
                node.stores.append(store)
        self._subtopologies = None
        return self

    def add_internal_topic(self, topic: InternalTopic) -> None:
        self._internal[topic.name] = topic

    def add_copartition_group(self, topics: set[str]) -> None:
        self._copartition_groups.append(set(topics))

    # -- reading ---------------------------------------------------------------------------
    @property
    def nodes(self) -> dict[str, Node]:
        return self._nodes

    @property
    def stores(self) -> dict[str, StoreSpec]:
        return self._stores

    @property
    def internal_topics(self) -> dict[str, InternalTopic]:
        return self._internal

    @property
    def copartition_groups(self) -> list[set[str]]:
        return self._copartition_groups

    def subtopologies(self) -> list[SubTopology]:
        """Connected components of the node graph, numbered by their earliest node."""
        if self._subtopologies is not None:
            return self._subtopologies
        if not self._nodes:
            raise TopologyException("topology has no nodes: add at least one source")
        parent_of: dict[str, str] = {n: n for n in self._nodes}

        def find(x: str) -> str:
            while parent_of[x] != x:
                parent_of[x] = parent_of[parent_of[x]]
                x = parent_of[x]
            return x

        def union(a: str, b: str) -> None:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent_of[rb] = ra

        store_users: dict[str, str] = {}
        for node in self._nodes.values():
            for c in node.children:
                union(node.name, c)
            if isinstance(node, ProcessorNodeDef):
                for s in node.stores:
                    if s in self._global_stores:
                        continue  # every task reads a global store: it joins nothing
                    if s in store_users:
                        union(store_users[s], node.name)
                    store_users[s] = node.name
        groups: dict[str, list[Node]] = {}
        for node in sorted(self._nodes.values(), key=lambda n: n.seq):
            groups.setdefault(find(node.name), []).append(node)
        subs = []
        for i, members in enumerate(sorted(groups.values(), key=lambda ms: ms[0].seq)):
            sources = [t for n in members if isinstance(n, SourceNode) for t in n.topics]
            if not sources:
                raise TopologyException(
                    f"nodes {[n.name for n in members]} are not reachable from any source")
            sinks = [n.topic for n in members if isinstance(n, SinkNode)]
            stores = [s for n in members if isinstance(n, ProcessorNodeDef) for s in n.stores
                      if s not in self._global_stores]
            subs.append(SubTopology(i, members, sources, sinks, list(dict.fromkeys(stores))))
        self._subtopologies = subs
        return subs

    def subtopology_of_store(self, store: str) -> SubTopology:
        for st in self.subtopologies():
            if store in st.stores:
                return st
        raise TopologyException(f"store {store!r} is not used by any processor")

    def serdes(self) -> list[Serde]:
        """Every serde the topology holds (sources, sinks, stores, global stores), each once."""
        found: list[Serde] = []
        for node in self._nodes.values():
            if isinstance(node, SourceNode | SinkNode):
                found += [node.key_serde, node.value_serde]
        for spec in self._stores.values():
            found += [spec.key_serde, spec.value_serde]
        for g in self._global_stores.values():
            found += [g.spec.key_serde, g.spec.value_serde, g.key_serde, g.value_serde]
        return list({id(s): s for s in found}.values())

    def configure_serdes(self, settings: Mapping[str, Any]) -> None:
        """Kafka Streams' ``Serde.configure`` with the application's serde settings
        (instance/serde/settings.py), on every serde that has it, wrapped ones included (a
        windowed or change serde holds the user's). A serde refusing its settings (ValueError) is
        a ConfigException: the start stops, naming it."""
        seen: set[int] = set()

        def visit(serde: Any) -> None:
            if id(serde) in seen:
                return
            seen.add(id(serde))
            configure = getattr(serde, "configure", None)
            if callable(configure):
                try:
                    configure(settings)
                except ValueError as e:
                    raise ConfigException(f"invalid configuration: {e}") from None
            for inner in vars(serde).values() if hasattr(serde, "__dict__") else ():
                if hasattr(inner, "serialize") and hasattr(inner, "deserialize") and not isinstance(inner, type):
                    visit(inner)

        for serde in self.serdes():
            visit(serde)

    def describe(self) -> str:
        """Kafka Streams' ``TopologyDescription`` text."""
        return describe(self.nodes, self.subtopologies())

    def __str__(self) -> str:
        return self.describe()


def source_topics(topology: Topology, node: str) -> set[str]:
    """The topics read by the source nodes ``node`` descends from (co-partitioning groups)."""
    out: set[str] = set()
    todo, seen = [node], set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        nd = topology.nodes[n]
        if isinstance(nd, SourceNode):
            out.update(nd.topics)
        todo.extend(nd.parents)
    return out
