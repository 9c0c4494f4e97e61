"""Benchmark of the snapshot job: rows/s of a snapshot of a large store on ``local[2]`` (Spark
start-up measured apart), against the same read done by a plain single-process Python loop over
the changelog (one consumer, latest value per key in a dict)::

    python -m loadtest.snapshot --keys 1000000 --reps 2

The store is synthetic: a changelog topic written directly, and the application's metadata record
(what its instances publish) naming it, so the job finds it exactly as for a running application.
Also used by the tests (``publish_app``, ``write_changelog``).
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from instance.kafka_errors import is_topic_exists
from kernel.instance_state import State
from kernel.kafka_clients import produce_when_room
from kernel.metadata import InstanceInfo, StoreInfo


def _create(admin: AdminClient, topic: str, partitions: int, compact: bool) -> None:
    config = {"cleanup.policy": "compact"} if compact else {}
    fut = admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic]
    try:
        fut.result()
    except Exception as e:
        if not is_topic_exists(e):
            raise
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        t = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} not ready")


def publish_app(bootstrap: str, application_id: str, stores: list[StoreInfo], instance_id: str = "synthetic-0",
                state: str = "NOT_RUNNING") -> None:
    """Create the changelog topics and publish one instance's metadata naming the stores."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _create(admin, f"{application_id}-iqmesh-instances", 1, True)
    for s in stores:
        if s.changelog:
            _create(admin, s.changelog, s.partitions, True)
    info = InstanceInfo(instance_id=instance_id, endpoint="", state=State.named(state),
                        heartbeat_ms=int(time.time() * 1000), store_catalog=tuple(stores))
    p = Producer({"bootstrap.servers": bootstrap})
    p.produce(f"{application_id}-iqmesh-instances", info.to_json(), instance_id.encode())
    if p.flush(30):
        raise RuntimeError("metadata not acknowledged")


def write_changelog(bootstrap: str, topic: str, records: Iterable[tuple[int, bytes, bytes | None]]) -> int:
    """(partition, key, value or None for a tombstone), in order per partition."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10_000,
                  "enable.idempotence": True, "queue.buffering.max.messages": 1_000_000})
    n = 0
    for part, k, v in records:
        produce_when_room(p, topic, v, k, partition=part)
        n += 1
    if p.flush(120):
        raise RuntimeError("not every changelog record was acknowledged")
    return n


def python_loop(bootstrap: str, topic: str, partitions: int) -> tuple[int, int, float]:
    """The baseline: one consumer, every partition to its last stable offset, latest value per key.
    Returns (records read, rows, seconds)."""
    t = time.monotonic()
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "isolation.level": "read_committed", "enable.partition.eof": True,
                  "fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 16 << 20})
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions) if ends[p] > 0])
    latest: dict[tuple[int, bytes], bytes | None] = {}
    pending, read = {p for p in range(partitions) if ends[p] > 0}, 0
    while pending:
        for m in c.consume(num_messages=10_000, timeout=0.1):
            p, off, err = m.partition(), m.offset(), m.error()
            assert p is not None and off is not None
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF and off >= ends[p]:
                    pending.discard(p)
                continue
            if off < ends[p]:
                k = m.key()
                assert k is not None
                latest[(p, k)] = m.value()
                read += 1
            if off + 1 >= ends[p]:
                pending.discard(p)
    c.close()
    rows = sum(1 for v in latest.values() if v is not None)
    return read, rows, time.monotonic() - t


def _same(batches: Any) -> Any:
    yield from batches


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--updates", type=int, default=1, help="records per key")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--bootstrap", help="an existing broker (default: a dev broker of its own)")
    ap.add_argument("--split-offsets", type=int, default=1_000_000)
    args = ap.parse_args(argv)

    from analytics.snapshot.changelog import consumer_config, plan_ranges, read_frame
    from analytics.snapshot.columns import Layout
    from analytics.snapshot.job import build_session, run_snapshot
    from analytics.snapshot.options import SnapshotOptions

    work = Path(tempfile.mkdtemp(prefix="iqmesh-snapbench-"))
    broker_dir = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        from instance.local.broker import start_broker

        broker_dir = work / "broker"
        bootstrap = start_broker(broker_dir).bootstrap
    try:
        app = f"bench-{uuid.uuid4().hex[:6]}"
        store = StoreInfo("kv", f"{app}-kv-changelog", "string", "long", args.partitions)
        publish_app(bootstrap, app, [store])
        t = time.monotonic()
        pack = struct.Struct(">q").pack
        from kernel.partitioner import default_partition

        def records() -> Iterable[tuple[int, bytes, bytes | None]]:
            for u in range(args.updates):
                for i in range(args.keys):
                    k = b"key-%09d" % i
                    yield default_partition(k, args.partitions), k, pack(i * args.updates + u)

        n = write_changelog(bootstrap, store.changelog, records())
        print(f"wrote {n:,} changelog records ({args.keys:,} keys) in {time.monotonic() - t:.1f}s", file=sys.stderr)

        t = time.monotonic()
        spark = build_session(args.master, {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"})
        # start-up includes the Python workers: a first tiny Python job starts them
        spark.range(2, numPartitions=2).mapInArrow(_same, "id BIGINT").count()
        start_s = time.monotonic() - t
        loop: list[tuple[int, int, float]] = []
        read_only: list[float] = []
        full: list[float] = []
        try:
            layout = Layout(store.key_serde, store.value_serde)
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": "x", "isolation.level": "read_committed"})
            ends = {p: c.get_watermark_offsets(TopicPartition(store.changelog, p))[1] for p in range(args.partitions)}
            c.close()
            ranges = plan_ranges(store.changelog, {}, ends, args.split_offsets)
            for r in range(args.reps):  # interleaved, so a change in the machine's load hits all three alike
                loop.append(python_loop(bootstrap, store.changelog, args.partitions))
                assert loop[-1][1] == args.keys, loop[-1]
                t = time.monotonic()
                rows = read_frame(spark, ranges, layout, consumer_config(bootstrap, {}), False).count()
                read_only.append(time.monotonic() - t)
                assert rows == args.keys, rows
                t = time.monotonic()
                manifest = run_snapshot(SnapshotOptions(bootstrap, app, str(work / f"out-{r}"),
                                                        split_offsets=args.split_offsets), spark)
                full.append(time.monotonic() - t)
                assert manifest["stores"]["kv"]["rows"] == args.keys
                print(f"rep {r + 1}: loop {loop[-1][2]:.2f}s, spark read {read_only[-1]:.2f}s, "
                      f"spark job {full[-1]:.2f}s", file=sys.stderr)
        finally:
            spark.stop()
        _report(args, n, loop, start_s, read_only, full)
    finally:
        if broker_dir is not None:
            from instance.local.broker import stop_broker

            stop_broker(broker_dir)
    return 0


def _report(args: Any, records: int, loop: list[tuple[int, int, float]], start_s: float, read_only: list[float],
            full: list[float]) -> None:
    def line(what: str, secs: list[float]) -> str:
        best = min(secs)
        return (f"| {what} | {best:.2f} | {statistics.median(secs):.2f} | {args.keys / best:,.0f} | "
                f"{records / best:,.0f} |")

    print(f"\n{args.keys:,} keys x {args.updates} update(s) = {records:,} changelog records, "
          f"{args.partitions} partitions, Spark master {args.master}, {args.reps} rep(s)\n")
    print("| what | best s | median s | rows/s | records/s |")
    print("|---|---|---|---|---|")
    print(line("Python loop (1 process, latest per key in a dict)", [s for _, _, s in loop]))
    print(line("Spark: read + latest per key (count)", read_only))
    print(line("Spark: whole snapshot job (metadata, cut, read, Parquet, manifest)", full))
    print(f"\nSpark start-up (SparkSession, JVM + Python workers): {start_s:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
