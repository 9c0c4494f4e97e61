"""Topology.describe() in Kafka Streams' text format."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from instance.topology.topology import Node, Topology


def _depth(node: Node, nodes: dict[str, Node], memo: dict[str, int]) -> int:
    if node.name in memo:
        return memo[node.name]
    d = 0 if not node.parents else 1 + max(_depth(nodes[p], nodes, memo) for p in node.parents)
    memo[node.name] = d
    return d


def describe(topology: Topology) -> str:
    from instance.topology.topology import ProcessorNodeDef, SinkNode, SourceNode

    nodes = topology.nodes
    memo: dict[str, int] = {}
    lines = ["Topologies:"]
    for st in topology.subtopologies():
        lines.append(f"   Sub-topology: {st.id}")
        for node in sorted(st.nodes, key=lambda n: (_depth(n, nodes, memo), n.name)):
            if isinstance(node, SourceNode):
                lines.append(f"    Source: {node.name} (topics: [{', '.join(node.topics)}])")
            elif isinstance(node, ProcessorNodeDef):
                lines.append(f"    Processor: {node.name} (stores: [{', '.join(node.stores)}])")
            elif isinstance(node, SinkNode):
                lines.append(f"    Sink: {node.name} (topic: {node.topic})")
            if not isinstance(node, SinkNode):
                lines.append(f"      --> {', '.join(node.children) if node.children else 'none'}")
            if node.parents:
                lines.append(f"      <-- {', '.join(node.parents)}")
        lines.append("")
    return "\n".join(lines) + "\n"
