"""The nodes of a topology (sources, processors, sinks) and a sub-topology: plain data, shared by
the topology that wires them and the text that describes them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from instance.topology.processor import ProcessorSupplier
from kernel.serdes import Serde


@dataclass
class SourceNode:
    name: str
    topics: list[str]
    key_serde: Serde
    value_serde: Serde
    seq: int
    children: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)
    #: this source's own extractor (``extract(record, partition_time)``); None: the configured default
    timestamp_extractor: Any = None


@dataclass
class ProcessorNodeDef:
    name: str
    supplier: ProcessorSupplier
    seq: int
    stores: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)


@dataclass
class SinkNode:
    name: str
    topic: str
    key_serde: Serde
    value_serde: Serde
    seq: int
    partitioner: Callable[[Any, Any, int], int | None] | None = None
    children: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)


Node = SourceNode | ProcessorNodeDef | SinkNode


@dataclass
class SubTopology:
    id: int
    nodes: list[Node]
    source_topics: list[str]
    sink_topics: list[str]
    stores: list[str]

    def source_nodes(self) -> list[SourceNode]:
        return [n for n in self.nodes if isinstance(n, SourceNode)]
