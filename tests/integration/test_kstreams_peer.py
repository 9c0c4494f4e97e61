"""The throughput benchmark's Java peer (loadtest/peers/kstreams, Kafka Streams 4.4.0) builds and
computes the right outputs on the session's broker: the same workloads iqmesh is measured on, so
its rates are rates of correct work. Skipped when Java or Maven is missing."""

from __future__ import annotations

import collections
import json
import random
import shutil
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from instance.local.cluster import ensure_topic
from instance.local.kafka_broker import KAFKA_VERSION
from loadtest.peers import kstreams
from loadtest.proc_usage import run_measured
from tests.integration.helpers import word_counts

pytestmark = pytest.mark.skipif(shutil.which("java") is None or shutil.which("mvn") is None,
                                reason="the Kafka Streams peer needs java (17+) and mvn on PATH")

PARTITIONS = 4


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes]]) -> None:
    ensure_topic(bootstrap, topic, PARTITIONS)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, (key, value) in enumerate(records):
        if key is None:  # null keys: spread by hand, as loadtest.partitions does
            p.produce(topic, value, None, partition=i % PARTITIONS)
        else:
            p.produce(topic, value, key)
    assert p.flush(30) == 0


def _read_all(bootstrap: str, topic: str, timeout: float = 60.0) -> list[tuple[bytes, bytes]]:
    """Every committed record of ``topic``, read until the end of each partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "isolation.level": "read_committed"})
    c.subscribe([topic])
    out: list[tuple[bytes, bytes]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(at_end) < PARTITIONS:
            assert time.monotonic() < deadline, f"{topic}: not read to its end in {timeout}s"
            m = c.poll(0.5)
            if m is None:
                continue
            err = m.error()
            if err is not None and err.code() == KafkaError._PARTITION_EOF:
                at_end.add(m.partition())
                continue
            assert err is None, err
            at_end.discard(m.partition())
            out.append((m.key(), m.value()))
    finally:
        c.close()
    return out


def _run(bootstrap: str, topic: str, n: int, mode: str, guarantee: str = "at-least-once",
         cache: bool = False, target: int | None = None) -> tuple[str, dict[str, Any]]:
    out = f"{topic}-out-{mode}"
    ensure_topic(bootstrap, out, PARTITIONS)
    u = run_measured(kstreams.command(bootstrap, topic, n, mode, out, guarantee, cache, target=target,
                                      timeout_s=120), timeout=180)
    results = [json.loads(x[7:]) for x in u.stdout.splitlines() if x.startswith("RESULT ")]
    assert u.returncode == 0 and results, f"{u.stdout[-2000:]}\n{u.stderr[-3000:]}"
    assert results[0]["ok"] and results[0]["lib"] == "kafka-streams" and results[0]["version"] == KAFKA_VERSION
    assert u.cpu_s > 0 and u.maxrss_mib > 50  # a JVM was measured, not a wrapper
    return out, results[0]


def _events(n: int) -> list[tuple[bytes | None, bytes]]:
    rnd = random.Random(5)
    return [(b"user-%d" % rnd.randrange(7),
             json.dumps({"page": f"/p/{i}", "ms": rnd.randrange(1000)}).encode()) for i in range(n)]


def test_stateful_count_exactly_once_emits_every_update(bootstrap: str, unique: str) -> None:
    events = _events(300)
    topic = f"ksp-ev-{unique}"
    _produce(bootstrap, topic, events)
    out, res = _run(bootstrap, topic, len(events), "stateful", "exactly-once")
    assert res["processed"] == len(events)
    got: dict[bytes, list[dict[str, Any]]] = collections.defaultdict(list)
    for key, value in _read_all(bootstrap, out):
        got[key].append(json.loads(value))
    want: dict[bytes | None, list[dict[str, Any]]] = collections.defaultdict(list)
    for key, value in events:
        want[key].append({"count": len(want[key]) + 1, "page": json.loads(value)["page"]})
    assert dict(got) == dict(want)  # per key: 1, 2, 3... in input order, nothing lost or doubled


def _by_page(kv: tuple[Any, dict[str, Any]]) -> str:
    return str(kv[1]["page"])  # unique per input record


def test_stateless_filter_map(bootstrap: str, unique: str) -> None:
    events = _events(200)
    topic = f"ksp-sl-{unique}"
    _produce(bootstrap, topic, events)
    out, _ = _run(bootstrap, topic, len(events), "stateless")
    got = sorted(((k, json.loads(v)) for k, v in _read_all(bootstrap, out)), key=_by_page)
    want = sorted(((k, {"page": d["page"], "ms": d["ms"], "slow": d["ms"] > 500})
                   for k, d in ((k, json.loads(v)) for k, v in events) if d["ms"] >= 100), key=_by_page)
    assert got == want and 0 < len(want) < len(events)


def test_wordcount_final_counts(bootstrap: str, unique: str) -> None:
    lines = ["the quick brown fox", "The lazy dog, the END!", "fox and dog", "a b a b a"]
    topic = f"ksp-wc-{unique}"
    _produce(bootstrap, topic, [(None, line.encode()) for line in lines])
    expected = word_counts(lines)
    out, res = _run(bootstrap, topic, len(lines), "wordcount", cache=True, target=sum(expected.values()))
    assert res["processed"] == sum(expected.values())
    latest = {k.decode(): int.from_bytes(v, "big", signed=True) for k, v in _read_all(bootstrap, out)}
    assert latest == dict(expected)
