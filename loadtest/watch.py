"""Benchmark of Watch: how fast a watch replays a changelog, and how soon it delivers a new change.

    python -m loadtest.watch [-n 200000] [--samples 20] [--bootstrap HOST:PORT]

One word-count instance (``iqmesh run examples/wordcount.py``) serves the watches. Its ``counts``
changelog is written directly (string keys, long values, as the store writes them), so what is
measured is the watch alone, not the processing before it:

- ``replay``: ``-n`` records in 6 partitions; a watch of every key from the beginning, through
  the Python client (decoded with the store's serdes), until it has them all: changes/s.
- ``latency``: a quiet watch of one key; one record written at a time, the time until the client
  yields it (p50/p99/max over ``--samples``). Its floor is the consumer's idle cycle
  (instance/server/watch.py: IDLE_S + READ_TIMEOUT_S).

Without --bootstrap a dev broker is started for the run and stopped at the end.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer

from instance.local import broker as devbroker
from instance.local.cluster import LocalCluster, ensure_topic
from kernel.partitioner import default_partition
from router.client.sync_client import QueryClient
from router.client.watch_client import Change

APP = str(Path(__file__).resolve().parents[1] / "examples" / "wordcount.py")
PARTITIONS = 6


def _long(v: int) -> bytes:
    return v.to_bytes(8, "big", signed=True)


def replay(q: QueryClient, producer: Producer, changelog: str, n: int) -> float:
    for i in range(n):
        while True:
            try:
                producer.produce(changelog, _long(i), f"key-{i}".encode(), partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)
    t0 = time.perf_counter()
    seen = 0
    with q.watch("counts", all_keys=True, from_beginning=True) as w:
        for item in w:
            if isinstance(item, Change):
                seen += 1
                if seen == n:
                    break
    return n / (time.perf_counter() - t0)


def latency(q: QueryClient, producer: Producer, changelog: str, samples: int) -> list[float]:
    key = f"quiet-{uuid.uuid4().hex[:6]}"
    arrived: list[float] = []
    got = threading.Event()
    w = q.watch("counts", key)

    def follow() -> None:
        for item in w:
            if isinstance(item, Change):
                arrived.append(time.perf_counter())
                got.set()
    t = threading.Thread(target=follow, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while not w.start_token and time.monotonic() < deadline:
        time.sleep(0.05)
    out: list[float] = []
    partition = default_partition(key.encode(), PARTITIONS)
    for i in range(samples):
        time.sleep(0.5)  # quiet: the watch is in its idle cycle
        got.clear()
        sent = time.perf_counter()
        producer.produce(changelog, _long(i), key.encode(), partition=partition)
        producer.flush(10)
        if not got.wait(30):
            raise TimeoutError("a change did not arrive within 30 s")
        out.append(arrived[-1] - sent)
    w.close()
    t.join(10)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=200_000, help="records replayed")
    ap.add_argument("--samples", type=int, default=20, help="latency samples")
    ap.add_argument("--bootstrap", help="use this broker instead of starting a dev broker")
    args = ap.parse_args()
    broker_dir = None
    bootstrap = args.bootstrap
    if not bootstrap:
        broker_dir = Path(tempfile.mkdtemp(prefix="iqmesh-watch-broker-"))
        bootstrap = devbroker.start_broker(broker_dir).bootstrap
    unique = uuid.uuid4().hex[:8]
    topic = f"lines-{unique}"
    ensure_topic(bootstrap, topic, PARTITIONS)
    cluster = LocalCluster(bootstrap, APP, f"wb-{unique}", Path(tempfile.mkdtemp(prefix="iqmesh-watch-")), size=1,
                           env={"WORDCOUNT_INPUT_TOPIC": topic, "WORDCOUNT_OUTPUT_TOPIC": f"counts-{unique}"})
    cluster.start()
    try:
        cluster.wait_running(90)
        changelog = f"{cluster.application_id}-counts-changelog"
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        with QueryClient(cluster.instances[0].target) as q:
            rate = replay(q, producer, changelog, args.n)
            lat = sorted(latency(q, producer, changelog, args.samples))
        p = statistics.quantiles(lat, n=100, method="inclusive")
        print(f"replay: {args.n} changes from the beginning, all keys: {rate:,.0f} changes/s")
        print(f"latency (record written -> yielded by the client, quiet watch, {len(lat)} samples): "
              f"p50 {p[49] * 1000:.0f} ms, p99 {p[98] * 1000:.0f} ms, max {lat[-1] * 1000:.0f} ms")
    finally:
        cluster.stop()
        if broker_dir is not None:
            devbroker.stop_broker(broker_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
