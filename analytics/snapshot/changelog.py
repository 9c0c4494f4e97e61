"""The changelog source: Spark tasks read changelog offset ranges with confluent-kafka, inside
the executors, and keep the latest value per key; the serving instances are not asked anything.

One task per changelog partition, or per ``--split-offsets`` offsets of a larger one. A range is
read ``read_committed`` from its start to its end (the cut): aborted records and transaction
markers never reach the application, and a range is done at the first record at or past its end, or
when the consumer's end-of-partition event is at or past it (the last records before the cut may be
markers, which are never delivered). Each task keeps the latest record per key of its range; when a
partition was split, or the result is merged onto an earlier snapshot, tombstones are kept until
the driver has picked the latest record per key across ranges, and dropped after.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from analytics.snapshot.catalog import kafka_config
from analytics.snapshot.columns import Layout
from instance.state.origins import RESERVED_KEY

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: a task that sees no record for this long (while below its end offset) fails
STALL_S = 120.0
RANGE_DDL = "topic STRING, partition INT, start BIGINT, end BIGINT, low BIGINT"


@dataclass(frozen=True)
class ReadRange:
    topic: str
    partition: int
    start: int
    end: int


def plan_ranges(topic: str, starts: dict[int, int], ends: dict[int, int], split: int) -> list[ReadRange]:
    """Offset ranges [start, end) of at most ``split`` offsets; empty partitions get none."""
    out = []
    for p in sorted(ends):
        start, end = starts.get(p, 0), ends[p]
        while start < end:
            out.append(ReadRange(topic, p, start, min(end, start + split)))
            start += split
    return out


def consumer_config(bootstrap: str, extra: dict[str, str]) -> dict[str, Any]:
    """One consumer per task, never in a group (offsets are assigned, nothing is committed)."""
    return kafka_config(bootstrap, extra, {
        "group.id": f"iqmesh-snapshot-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
        "enable.auto.offset.store": False, "isolation.level": "read_committed", "enable.partition.eof": True,
        "fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 16 << 20, "queued.max.messages.kbytes": 256 << 10,
        "client.id": "iqmesh-snapshot"})


def read_latest(consumer: Consumer, r: ReadRange, keep_from: int = 0,
                stall_s: float = STALL_S) -> tuple[dict[bytes, Message], int]:
    """key -> its last record in [r.start, r.end) at or past ``keep_from`` (a tombstone included:
    value None), and how many records at or past ``keep_from`` the consumer delivered.

    The hot path costs one call and one dict store per record: a batch whose last message is a
    record below the end and at or past ``keep_from`` holds only such records (offsets rise within
    a partition), plus perhaps events, which have no key: they land under ``None`` and send the
    batch through the careful path, which applies it again (harmless: same records, same order).
    """
    latest: dict[Any, Message] = {}
    delivered = 0
    if r.start >= r.end:
        return latest, delivered
    end, eof = r.end, KafkaError._PARTITION_EOF
    consumer.assign([TopicPartition(r.topic, r.partition, r.start)])
    try:
        progress = time.monotonic()
        while True:
            msgs = consumer.consume(num_messages=10_000, timeout=0.1)  # returns early only when full
            if not msgs:
                if time.monotonic() - progress > stall_s:
                    raise TimeoutError(f"{r.topic}[{r.partition}]: nothing read for {stall_s}s below offset {end}")
                continue
            progress = time.monotonic()
            last = msgs[-1]
            last_off = last.offset()
            first_off = msgs[0].offset()
            if (last.error() is None and last_off is not None and last_off + 1 < end and first_off is not None
                    and first_off >= keep_from):
                for m in msgs:
                    latest[m.key()] = m
                if None not in latest:
                    delivered += len(msgs)
                    continue
                del latest[None]
            for m in msgs:  # the careful path: events, the end, records before keep_from, null keys
                err, off = m.error(), m.offset()
                if err is not None:
                    if err.code() == eof:
                        if off is not None and off >= end:
                            return latest, delivered
                        continue
                    raise KafkaException(err)
                assert off is not None  # set on every message without error
                if off >= end:
                    return latest, delivered
                if off >= keep_from:
                    delivered += 1
                    k = m.key()
                    if k is not None:
                        latest[k] = m
                if off + 1 >= end:
                    return latest, delivered
    finally:
        consumer.unassign()


def read_range(config: dict[str, Any], r: ReadRange, low: int) -> dict[bytes, Message]:
    """The latest record per key of ``r``, exact on any broker.

    A read_committed consumer hides aborted records using the aborted-transaction list the broker
    sends with each fetch, until it meets the abort marker. Apache Kafka sends only transactions that
    overlap the fetch; the dev broker (noida-db 0.2.3) also sends ones that ended before it, so a read
    starting past an abort marker hides every later record of that producer. So a range that does not
    start at the log start is checked: if a read_uncommitted count finds records the committed read
    did not deliver (aborted ones, or hidden by that mistake), it is read again from the log start,
    where every marker is seen, keeping only the range.
    """
    def read(cfg: dict[str, Any], rr: ReadRange, keep_from: int) -> tuple[dict[bytes, Message], int]:
        consumer = Consumer(cfg)  # one per read: nothing prefetched for another range can leak in
        try:
            return read_latest(consumer, rr, keep_from)
        finally:
            consumer.close()

    latest, delivered = read(config, r, r.start)
    if not (r.start <= low or r.start >= r.end):
        _, everything = read({**config, "isolation.level": "read_uncommitted"}, r, r.start)
        if everything != delivered:
            latest = read(config, ReadRange(r.topic, r.partition, low, r.end), r.start)[0]
    latest.pop(RESERVED_KEY, None)  # a task's origin high-water, not a store's record
    return latest


def read_ranges(batches: Iterator[pa.RecordBatch], *, config: dict[str, Any], layout: Layout,
                keep_tombstones: bool) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: each input row is a range (RANGE_DDL); out come its rows (layout)."""
    for b in batches:
        for d in b.to_pylist():
            r = ReadRange(d["topic"], d["partition"], d["start"], d["end"])
            latest = read_range(config, r, d["low"])
            keys: list[bytes] = []
            values: list[bytes | None] = []
            offsets: list[int | None] = []
            stamps: list[int | None] = []
            add_k, add_v, add_o, add_t = keys.append, values.append, offsets.append, stamps.append
            for k, m in latest.items():
                v = m.value()
                if v is not None or keep_tombstones:
                    add_k(k)
                    add_v(v)
                    add_o(m.offset())
                    add_t(m.timestamp()[1])
            del latest
            yield from layout.batches(r.partition, keys, values, offsets, stamps)


def read_frame(spark: SparkSession, ranges: list[ReadRange], layout: Layout, config: dict[str, Any],
               keep_tombstones: bool, low: dict[int, int] | None = None) -> DataFrame:
    """The rows of ``ranges``, one Spark task per range (``low``: log start offset per partition)."""
    if not ranges:
        return spark.createDataFrame([], layout.ddl())
    rows = [(r.topic, r.partition, r.start, r.end, (low or {}).get(r.partition, 0)) for r in ranges]
    desc = spark.createDataFrame(spark.sparkContext.parallelize(rows, len(rows)), RANGE_DDL)
    fn = functools.partial(read_ranges, config=config, layout=layout, keep_tombstones=keep_tombstones)
    return desc.mapInArrow(fn, layout.ddl())


def latest_per_key(df: DataFrame) -> DataFrame:
    """The record with the highest offset per (partition, key), across ranges and snapshots."""
    from pyspark.sql import functions as F

    return (df.groupBy("partition", "key")
              .agg(F.max_by(F.struct(*df.columns), F.col("offset")).alias("r"))
              .select("r.*"))
