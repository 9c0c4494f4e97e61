"""What the DSL builds into: the :class:`Topology`, the counter that numbers node names as Kafka
Streams does (``KSTREAM-FILTER-0000000001``...), and the default serdes. ``StreamsBuilder`` is
one; the graph-building functions take it, so they need no handle class."""

from __future__ import annotations

from instance.topology import processors as P
from instance.topology.refs import StreamRef
from instance.topology.topology import InternalTopic, Topology
from kernel.serdes import BytesSerde, Serde


class DslGraph:
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

    def insert_repartition(self, parent: str, base: str, ks: Serde, vs: Serde,
                           num_partitions: int | None = None) -> str:
        """sink → ``<base>-repartition`` → source; returns the source node's name."""
        topic = f"{base}-repartition"
        # Kafka Streams (createRepartitionedSource, used by grouping and repartition()) names the
        # sink, then the filter, then the source
        sink, filt = self.new_name("KSTREAM-SINK-"), self.new_name("KSTREAM-FILTER-")
        self.topology.add_processor(filt, P.DropNullKeyProcessor, parent)
        self.topology.add_sink(sink, topic, filt, key_serde=ks, value_serde=vs)
        source = self.new_name("KSTREAM-SOURCE-")
        self.topology.add_source(source, topic, key_serde=ks, value_serde=vs)
        self.topology.add_internal_topic(InternalTopic(topic, num_partitions))
        return source

    def repartition(self, stream: StreamRef, name: str | None = None, num_partitions: int | None = None,
                    key_serde: Serde | None = None, value_serde: Serde | None = None) -> StreamRef:
        """``KStream.repartition``: write to ``<name>-repartition`` and read it back."""
        base = name or self.new_name("KSTREAM-REPARTITION-")
        ks = key_serde or stream.key_serde or self.default_key_serde
        vs = value_serde or stream.value_serde or self.default_value_serde
        return StreamRef(self.insert_repartition(stream.node, base, ks, vs, num_partitions), ks, vs)
