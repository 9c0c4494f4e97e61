"""DSL benchmarks: a tumbling-window count and a stream-table join, iqmesh against Quix Streams,
same broker, same input, one run; both sides' outputs are checked against the expected results.

    python -m loadtest.dsl [--bootstrap HOST:PORT] [-n 200000] [--reps 3] [--only window-count|join]

Input (produced once per run, fresh topics, 4 partitions, librdkafka's default partitioner):
- stream: ``-n`` records, keys ``user-0`` … ``user-<keys-1>`` (uniform, seed 42), values small JSON
  ``{"page": ..., "ms": ...}`` as ``../shared/bench/produce.py``; timestamps 10 ms apart (6,000
  records a minute, so 1M records span about 167 one-minute windows), increasing in every partition.
- table: ``--table-rows`` rows ``user-i -> {"region": "r<i % 50>"}``, all older than the stream.

Workloads (every update goes to the output topic on both sides, so the output volumes are equal):
- window-count: per-key count in 1-minute tumbling windows, no grace (iqmesh: caching off;
  Quix: ``tumbling_window(60_000).count().current()``);
- join: inner stream-table join merging the row into the record (Quix: ``join_asof``, which
  aligns its two inputs by timestamp); join-global: the same against a GlobalKTable
  (bootstrapped before processing starts), compared with the same Quix join. The KTable join's
  output is not exact: the runtime has no task idling (Kafka Streams' max.task.idle.ms, KIP-695),
  so stream records fetched before their table partition's first fetch find no row.
The figure is stream records/s from the first record processed to the last (table rows are
processed too, but not counted; ``loadtest/worker.py``, ``loadtest/peers/quix_dsl.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from instance.local import broker as devbroker
from instance.local.cluster import ensure_topic
from instance.serde import BytesSerde, LongSerde
from instance.serde.windowed import WindowedSerdes
from kernel.kafka_clients import produce_when_room
from loadtest.workloads import WINDOW_MS

REPO = Path(__file__).resolve().parent.parent
PEER = REPO / "loadtest" / "peers" / "quix_dsl.py"
QUIX_VERSION = "3.28.1"  # the pin of ../shared/bench/run_peer.sh
PARTITIONS = 4
REGIONS = 50

#: expected output of one workload: (key, window start) -> count, or joined-record hash -> occurrences
Expected = Counter[Any]


def _producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 10000,
                     "queue.buffering.max.messages": 500_000, "acks": "all"})


def _produce(p: Producer, topic: str, rows: list[tuple[bytes, bytes, int]]) -> None:
    for key, value, ts in rows:
        produce_when_room(p, topic, value, key, timestamp=ts)
    if p.flush(120):
        raise RuntimeError(f"producing {topic}: records left undelivered")


def produce_inputs(bootstrap: str, stream: str, table: str, n: int, keys: int,
                   table_rows: int) -> tuple[Expected, Expected]:
    """Write the table then the stream; return the expected window counts and join outputs."""
    rnd = random.Random(42)
    pages = ["/home", "/search", "/cart", "/checkout"] + [f"/p/{i}" for i in range(96)]
    pool = [{"page": rnd.choice(pages), "ms": rnd.randrange(1000)} for _ in range(4096)]
    pool_bytes = [json.dumps(v, separators=(",", ":")).encode() for v in pool]
    base = (int(time.time() * 1000) - n * 10 - 3_600_000) // WINDOW_MS * WINDOW_MS
    ensure_topic(bootstrap, table, PARTITIONS)
    ensure_topic(bootstrap, stream, PARTITIONS)
    p = _producer(bootstrap)
    regions = {f"user-{i}".encode(): {"region": f"r{i % REGIONS}"} for i in range(table_rows)}
    _produce(p, table, [(k, json.dumps(v).encode(), base - WINDOW_MS) for k, v in regions.items()])
    windows: Expected = Counter()
    joined: Expected = Counter()
    rows = []
    for i in range(n):
        key = f"user-{rnd.randrange(keys)}".encode()
        ts = base + i * 10
        rows.append((key, pool_bytes[i & 4095], ts))
        windows[(key, ts // WINDOW_MS * WINDOW_MS)] += 1
        row = regions.get(key)
        if row is not None:
            joined[_join_hash(key, {**pool[i & 4095], **row})] += 1
    _produce(p, stream, rows)
    return windows, joined


def _join_hash(key: bytes, value: dict[str, Any]) -> int:
    return hash((key, json.dumps(value, sort_keys=True)))


def read_topic(bootstrap: str, topic: str, expected_records: int, idle_s: float = 20.0) -> list[Any]:
    """All records of ``topic`` (stops at ``expected_records`` or after ``idle_s`` without any)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"dsl-verify-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, i, 0) for i in range(PARTITIONS)])
        out: list[Any] = []
        last = time.monotonic()
        while len(out) < expected_records and time.monotonic() - last < idle_s:
            batch = c.consume(10_000, 1.0)
            for m in batch:
                if m.error() is None:
                    out.append(m)
            if batch:
                last = time.monotonic()
        return out
    finally:
        c.close()


def _window_results(lib: str, msgs: list[Any]) -> Expected:
    got: Expected = Counter()
    if lib == "iqmesh":
        keys, values = WindowedSerdes.time_windowed(BytesSerde(), WINDOW_MS), LongSerde()
        for m in msgs:
            w = keys.deserialize(m.key())
            got[(w.key, w.window.start)] = values.deserialize(m.value())
    else:
        for m in msgs:
            v = json.loads(m.value())
            got[(m.key(), v["start"])] = v["value"]
    return got


def _join_results(_lib: str, msgs: list[Any]) -> Expected:
    return Counter(_join_hash(m.key(), json.loads(m.value())) for m in msgs)


def verify(bootstrap: str, mode: str, lib: str, out_topic: str, n: int, expected: Expected) -> str:
    msgs = read_topic(bootstrap, out_topic, n if mode == "window-count" else sum(expected.values()))
    got = (_window_results if mode == "window-count" else _join_results)(lib, msgs)
    if got == expected:
        return f"exact ({len(msgs)} output records, {len(got)} distinct results)"
    missing = sum(1 for k in expected if got.get(k) != expected[k])
    extra = sum(1 for k in got if k not in expected)
    return f"MISMATCH ({len(msgs)} output records; {missing} results differ or missing, {extra} unexpected)"


def _run(cmd: list[str], what: str) -> dict[str, Any]:
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=3600)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            res: dict[str, Any] = json.loads(line[7:])
            if res.get("ok"):
                return res
    raise RuntimeError(f"{what} failed (rc {p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")


def ensure_quix(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run(["python3", "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"quixstreams=={QUIX_VERSION}"], check=True)
    return python


def _stats(vals: list[float]) -> str:
    if not vals:
        return "-"
    return f"{min(vals):,.0f} / {statistics.median(vals):,.0f} / {max(vals):,.0f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", help="default: start a dev broker for the run")
    ap.add_argument("-n", type=int, default=200_000, help="stream records (the issue's figure: 1000000)")
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--table-rows", type=int, default=10_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", choices=["window-count", "join"], help="join: both joins")
    ap.add_argument("--no-peer", action="store_true", help="only iqmesh")
    ap.add_argument("--quix-venv", default=os.environ.get("QUIX_VENV", "/tmp/quix-bench-venv"))
    args = ap.parse_args()

    tmp = None
    bootstrap = args.bootstrap
    if not bootstrap:
        tmp = Path(tempfile.mkdtemp(prefix="iqmesh-dsl-broker-"))
        bootstrap = devbroker.start_broker(tmp).bootstrap
    try:
        quix = None if args.no_peer else ensure_quix(Path(args.quix_venv))
        run = uuid.uuid4().hex[:6]
        stream, table = f"dsl-in-{args.n}-{run}", f"dsl-table-{args.table_rows}-{run}"
        t0 = time.perf_counter()
        windows, joined = produce_inputs(bootstrap, stream, table, args.n, args.keys, args.table_rows)
        print(f"input on {bootstrap}: {stream} ({args.n} records, {args.keys} keys), {table} "
              f"({args.table_rows} rows), produced in {time.perf_counter() - t0:.1f}s; "
              f"load average {os.getloadavg()[0]:.2f}", flush=True)
        # our workload -> the peer's workload it is compared with (one Quix join serves both joins)
        pairs = {"window-count": "window-count", "join": "join", "join-global": None}
        modes = [m for m in pairs if not args.only or m.startswith(args.only)]
        rates: dict[tuple[str, str], list[float]] = {}
        inexact: set[str] = set()
        for rep in range(1, args.reps + 1):
            for mode in modes:
                expected = windows if mode == "window-count" else joined
                table_args = ["--table-topic", table, "--table-rows", str(args.table_rows)]
                common = ["--bootstrap", bootstrap, "--topic", stream, "-n", str(args.n), "--tag", f"rep{rep}",
                          *(table_args if mode.startswith("join") else [])]
                sides = [("iqmesh", [sys.executable, "-m", "loadtest.worker", "--mode", mode, *common])]
                if quix is not None and pairs[mode]:
                    sides.insert(0, ("quixstreams", [str(quix), str(PEER), "--mode", str(pairs[mode]), *common]))
                for lib, cmd in sides:
                    load = os.getloadavg()[0]
                    res = _run(cmd, f"{lib} {mode}")
                    rate = float(res["rate_first_to_last"])
                    rates.setdefault((mode, lib), []).append(rate)
                    check = verify(bootstrap, mode, lib, res["out_topic"], args.n, expected)
                    if not check.startswith("exact"):
                        inexact.add(f"{mode} {lib}")
                    print(f"  rep{rep} {mode:12} {lib:11} {rate:>9,.0f} records/s  (load {load:.2f})  {check}",
                          flush=True)
        print(f"\nstream records/s, first to last record processed (min / median / max of {args.reps})")
        print(f"{'workload':14} {'iqmesh':>26} {'quix':>26} {'ratio of medians':>17}")
        for mode in modes:
            ours = rates.get((mode, "iqmesh"), [])
            peer = rates.get((str(pairs[mode] or "join"), "quixstreams"), [])
            ratio = statistics.median(ours) / statistics.median(peer) if ours and peer else float("nan")
            print(f"{mode:14} {_stats(ours):>26} {_stats(peer):>26} {ratio:>17.2f}")
        if inexact:
            print(f"NOT COMPARABLE, output not as expected in some run: {', '.join(sorted(inexact))}")
        print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return 0
    finally:
        if tmp is not None:
            devbroker.stop_broker(tmp)


if __name__ == "__main__":
    sys.exit(main())
