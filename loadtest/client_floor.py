"""The floor under any Python engine on confluent-kafka: a bare loop that consumes the benchmark's
input and produces it again, with iqmesh's client settings and no stream processing at all.

    python -m loadtest.client_floor --bootstrap HOST:PORT --topic pb-in-2000000 -n 2000000 [--work copy|stateless|count]

``copy`` writes each record back as it came (key, value, timestamp): what consuming and producing
cost from Python and in librdkafka's threads. ``stateless`` adds the stateless variant's own work
inlined (JSON in, ``ms >= 100``, a new JSON value out), the least an engine could do for it.
``count`` is the cached count's least: JSON in, the variant's aggregate per key in a dict, nothing
produced (a cache emits once per key per commit).
Prints a ``RESULT`` line with the steady state (second half) fields ``loadtest.worker`` prints,
so the two compare directly: what is left between them is the engine's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from typing import Any

import orjson
from confluent_kafka import Consumer, Producer

from instance.config import StreamsConfig
from instance.local.cluster import ensure_topic
from instance.runtime.thread_clients import main_consumer_config, producer_config
from loadtest.proc_usage import thread_cpu
from loadtest.worker import steady_state

#: how many records a consume call takes at most (the stream thread's batch)
BATCH = 10_000


def _clients(bootstrap: str) -> tuple[Consumer, Producer]:
    """A stream thread's main consumer and producer, with the settings the runtime gives them
    (instance/runtime/thread_clients.py), and failed deliveries reported as RecordCollector has them."""
    config = StreamsConfig.from_properties({"application.id": f"floor-{uuid.uuid4().hex[:8]}",
                                            "bootstrap.servers": bootstrap})
    consumer = Consumer(main_consumer_config(config, "floor", 0))
    producer = Producer({**producer_config(config, "floor-producer"), "delivery.report.only.error": True,
                         "on_delivery": _failed})
    return consumer, producer


def _failed(err: object, _msg: object) -> None:
    raise SystemExit(f"a record was not delivered: {err}")


def run(bootstrap: str, topic: str, n: int, work: str) -> dict[str, object]:
    out = f"floor-out-{uuid.uuid4().hex[:8]}"
    ensure_topic(bootstrap, out, 4)
    consumer, producer = _clients(bootstrap)
    consumer.subscribe([topic])
    produce, consume, poll = producer.produce, consumer.consume, producer.poll
    loads, dumps = orjson.loads, orjson.dumps
    aggregates: dict[bytes | None, dict[str, Any]] = {}
    half = (n + 1) // 2
    done = 0
    t_half = t_last = cpu_half = cpu_last = 0.0
    threads_half: dict[str, float] = {}
    t_start = time.perf_counter()
    while done < n and time.perf_counter() - t_start < 900:
        msgs = consume(BATCH, 0.1)
        if work == "copy":
            for m in msgs:
                produce(out, m.value(), m.key(), -1, None, None, m.timestamp()[1], None)
        elif work == "count":
            for m in msgs:
                raw = m.value()
                if raw is not None:
                    v = loads(raw)
                    key = m.key()
                    old = aggregates.get(key)
                    aggregates[key] = {"count": (0 if old is None else old["count"]) + 1, "page": v["page"]}
        else:
            for m in msgs:
                raw = m.value()
                if raw is None:
                    continue
                v = loads(raw)
                if v["ms"] >= 100:
                    produce(out, dumps({"page": v["page"], "ms": v["ms"], "slow": v["ms"] > 500}), m.key(), -1,
                            None, None, m.timestamp()[1], None)
        poll(0)
        done += len(msgs)
        if done >= half and not t_half:
            t_half, cpu_half, threads_half = time.perf_counter(), time.process_time(), thread_cpu()
    t_last, cpu_last, threads_last = time.perf_counter(), time.process_time(), thread_cpu()
    producer.flush(60)
    consumer.close()
    second = n - half
    return {"lib": "client-floor", "work": work, "n": n, "ok": done >= n,
            **steady_state(n, t_half, t_last, cpu_half, cpu_last),
            "steady_threads_us": {k: round((v - threads_half.get(k, 0.0)) / second * 1e6, 2)
                                  for k, v in threads_last.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("-n", type=int, default=2_000_000)
    ap.add_argument("--work", choices=("copy", "stateless", "count"), default="copy")
    args = ap.parse_args()
    result = run(args.bootstrap, args.topic, args.n, args.work)
    print("RESULT " + json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
