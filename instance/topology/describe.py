"""Topology.describe() in Kafka Streams' text format.

Nodes are listed as Kafka Streams' ``TopologyDescription`` orders them: by the size of the
sub-tree they root (largest first, counting every path, as ``InternalTopologyBuilder.updateSize``
does), ties broken by name; successors and predecessors are listed in that same order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from instance.topology.nodes import Node, ProcessorNodeDef, SinkNode, SourceNode, SubTopology


def _size(node: Node, nodes: Mapping[str, Node], memo: dict[str, int]) -> int:
    if node.name in memo:
        return memo[node.name]
    s = 1 + sum(_size(nodes[c], nodes, memo) for c in node.children)
    memo[node.name] = s
    return s


def describe(nodes: Mapping[str, Node], subtopologies: Sequence[SubTopology]) -> str:
    memo: dict[str, int] = {}

    def order(names: list[str]) -> list[str]:
        return sorted(names, key=lambda n: (-_size(nodes[n], nodes, memo), n))

    # Kafka Streams: "Topologies:\n " then "  " before every sub-topology, so the first one is
    # indented by three spaces and the following ones by two.
    parts = ["Topologies:\n "]
    for st in subtopologies:
        lines = [f"  Sub-topology: {st.id}"]
        for name in order([n.name for n in st.nodes]):
            node = nodes[name]
            if isinstance(node, SourceNode):
                lines.append(f"    Source: {node.name} (topics: [{', '.join(node.topics)}])")
            elif isinstance(node, ProcessorNodeDef):
                lines.append(f"    Processor: {node.name} (stores: [{', '.join(node.stores)}])")
            elif isinstance(node, SinkNode):
                lines.append(f"    Sink: {node.name} (topic: {node.topic})")
            if not isinstance(node, SinkNode):
                lines.append(f"      --> {', '.join(order(node.children)) if node.children else 'none'}")
            if not isinstance(node, SourceNode):
                lines.append(f"      <-- {', '.join(order(node.parents)) if node.parents else 'none'}")
        parts.append("\n".join(lines) + "\n\n")
    return "".join(parts)
