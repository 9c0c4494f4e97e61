"""The peer benchmark's workloads (../shared/bench/README.md) as iqmesh topologies.

Input: keys ``user-N`` (bytes), values small JSON ``{"page": ..., "ms": ...}``.
- stateful: per-key running count in a RocksDB store with a changelog; every update goes to the
  output topic as ``{"count": c, "page": ...}`` (caching off, so the output volume equals Quix
  Streams'; ``cache=True`` is Kafka Streams' default and emits the latest per key per commit).
- stateless: keep ``ms >= 100``, map to ``{"page", "ms", "slow": ms > 500}``.
"""

from __future__ import annotations

from typing import Any

from instance.serde import BytesSerde, JsonSerde
from instance.topology import Materialized, StreamsBuilder, Topology


def _count(_key: Any, value: Any, agg: Any) -> Any:
    return {"count": agg["count"] + 1, "page": value["page"]}


def stateful(topic: str, out: str, cache: bool = False) -> Topology:
    b = StreamsBuilder(default_key_serde=BytesSerde(), default_value_serde=JsonSerde())
    counts = b.stream(topic).group_by_key().aggregate(
        lambda: {"count": 0}, _count,
        Materialized("counts", value_serde=JsonSerde(), caching_enabled=cache))
    counts.to_stream().to(out)
    return b.build()


def stateless(topic: str, out: str) -> Topology:
    b = StreamsBuilder(default_key_serde=BytesSerde(), default_value_serde=JsonSerde())
    (b.stream(topic)
      .filter(lambda _k, v: v["ms"] >= 100)
      .map_values(lambda v: {"page": v["page"], "ms": v["ms"], "slow": v["ms"] > 500})
      .to(out))
    return b.build()
