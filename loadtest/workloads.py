"""The peer benchmark's workloads (../shared/bench/README.md) as iqmesh topologies.

Input: keys ``user-N`` (bytes), values small JSON ``{"page": ..., "ms": ...}``.
- stateful: per-key running count in a RocksDB store with a changelog; every update goes to the
  output topic as ``{"count": c, "page": ...}`` (caching off, so the output volume equals Quix
  Streams'; ``cache=True`` is Kafka Streams' default and emits the latest per key per commit).
- stateless: keep ``ms >= 100``, map to ``{"page", "ms", "slow": ms > 500}``.
- wordcount: examples/wordcount.py on the benchmark's own topics (lines, not user events).
- window-count / join: the DSL benchmarks of ``loadtest.dsl`` (peers in ``loadtest/peers/``).
"""

from __future__ import annotations

from typing import Any

from instance.serde import BytesSerde, JsonSerde, LongSerde, StringSerde
from instance.topology import Materialized, StreamsBuilder, Topology
from instance.topology.windows import TimeWindows


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


WINDOW_MS = 60_000


def window_count(topic: str, out: str, cache: bool = False) -> Topology:
    """Per-key count in 1-minute tumbling windows; caching off emits every update (as Quix's
    ``tumbling_window(...).count().current()``), caching on the latest per window per commit."""
    b = StreamsBuilder(default_key_serde=BytesSerde(), default_value_serde=JsonSerde())
    (b.stream(topic).group_by_key()
      .windowed_by(TimeWindows.of_size_with_no_grace(WINDOW_MS))
      .count(Materialized("window-counts", caching_enabled=cache))
      .to_stream().to(out, value_serde=LongSerde()))
    return b.build()


def _enrich(value: Any, row: Any) -> Any:
    return {**value, "region": row["region"]}


def stream_table_join(topic: str, table_topic: str, out: str) -> Topology:
    """Each stream record joined with its key's row of the table (inner), merged into one dict."""
    b = StreamsBuilder(default_key_serde=BytesSerde(), default_value_serde=JsonSerde())
    users = b.table(table_topic, Materialized("users", caching_enabled=False))
    b.stream(topic).join(users, _enrich).to(out)
    return b.build()


def stream_global_table_join(topic: str, table_topic: str, out: str) -> Topology:
    """As :func:`stream_table_join` against a GlobalKTable (bootstrapped before processing starts)."""
    b = StreamsBuilder(default_key_serde=BytesSerde(), default_value_serde=JsonSerde())
    users = b.global_table(table_topic, Materialized("users", caching_enabled=False))
    b.stream(topic).join(users, lambda key, _value: key, _enrich).to(out)
    return b.build()


def wordcount(topic: str, out: str) -> Topology:
    """``examples/wordcount.py`` on other topics: split lines, group by word (a repartition), count
    (the record cache on, as in the example and Kafka Streams' WordCountLambdaExample)."""
    from examples.wordcount import split_words

    b = StreamsBuilder(default_key_serde=StringSerde(), default_value_serde=StringSerde())
    (b.stream(topic).flat_map_values(split_words)
      .group_by(lambda _key, word: word)
      .count("counts")
      .to_stream().to(out, value_serde=LongSerde()))
    return b.build()
