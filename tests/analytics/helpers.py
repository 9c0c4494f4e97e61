"""Shared by the snapshot tests: the state a snapshot must hold, computed without the job."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from instance.state.origins import RESERVED_KEY

Rows = dict[tuple[int, bytes], bytes]


def state_at(bootstrap: str, topic: str, cut: dict[int, int], timeout: float = 60.0) -> Rows:
    """(partition, key) -> value as of ``cut``, recomputed independently of the job: a read_committed
    consumer per partition, records below the cut in order, the last one per key wins, a tombstone
    deletes (a task's origin high-water record is no store's: left out); done when the consumer's
    position reaches the cut."""
    out: Rows = {}
    for p, end in sorted(cut.items()):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{uuid.uuid4().hex[:8]}",
                      "enable.auto.commit": False, "isolation.level": "read_committed",
                      "enable.partition.eof": True})
        tp = TopicPartition(topic, p, 0)
        c.assign([tp])
        deadline = time.monotonic() + timeout
        try:
            while end > 0 and c.position([TopicPartition(topic, p)])[0].offset < end:
                assert time.monotonic() < deadline, f"{topic}[{p}] not read to {end}"
                m = c.poll(0.2)
                if m is None or m.error() is not None or m.offset() >= end:
                    continue
                k, v = m.key(), m.value()
                if k == RESERVED_KEY:
                    continue
                if v is None:
                    out.pop((p, k), None)
                else:
                    out[(p, k)] = v
        finally:
            c.close()
    return out


def snapshot_rows(spark: Any, out: str | Path, store: str) -> Rows:
    rows = spark.read.parquet(f"{out}/{store}").select("partition", "key", "value").collect()
    got = {(r["partition"], bytes(r["key"])): bytes(r["value"]) for r in rows}
    assert len(got) == len(rows), "a key appears twice"
    return got


def int_cut(manifest: dict[str, Any], store: str) -> dict[int, int]:
    return {int(p): int(o) for p, o in manifest["cut"][store].items()}


def committed_to_end(bootstrap: str, group: str, input_topic: str) -> str | None:
    """None once the application ``group`` has committed every partition of its input topic and
    of its repartition topics up to the end; else what is behind. A commit flushes the stores first
    (cached writes go to the changelog), so from then on the changelogs hold everything processed."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        md = c.list_topics(timeout=10)
        repartition = sorted(t for t in md.topics if t.startswith(f"{group}-") and t.endswith("-repartition"))
        topics = [input_topic, *repartition]
        tps = [TopicPartition(t, p) for t in topics for p in md.topics[t].partitions]
        done = c.committed(tps, timeout=10)
        behind = {f"{tp.topic}[{tp.partition}]": (d.offset, high) for tp, d in zip(tps, done, strict=True)
                  if (high := c.get_watermark_offsets(tp, timeout=10)[1]) > 0 and d.offset < high}
        return f"committed (offset, end): {behind}" if behind else None
    finally:
        c.close()
