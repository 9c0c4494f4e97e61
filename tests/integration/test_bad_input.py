"""Bad input to a running instance (issue 9, points 9 and 10).

A record that does not deserialize never fails silently: the error names topic, partition, offset
and the setting that skips such records; with the dead-letter topic it lands there with headers
naming where it came from, and the instance keeps running. A word too large to write to the
repartition topic stops the instance by default, naming the setting and the input record; with
``default.production.exception.handler=continue`` it is skipped and counting goes on.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from instance.local.cluster import LocalCluster, ensure_topic
from router.client.sync_client import QueryClient

pytestmark = pytest.mark.integration

APP = str(Path(__file__).resolve().parents[2] / "examples" / "wordcount.py")
BAD = b"\xff\xfe not utf-8"


def _produce_to(bootstrap: str, topic: str, partition: int, values: list[bytes],
                headers: dict[int, list[tuple[str, bytes]]] | None = None) -> None:
    """Compressed, so a 2 MB word of one repeated letter gets past the broker's ~1 MB limit (as it
    does from a compressing producer) and reaches the instance."""
    failed: list[object] = []
    p = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 10_000_000, "compression.type": "lz4"})
    for i, v in enumerate(values):
        p.produce(topic, v, partition=partition, headers=(headers or {}).get(i),
                  on_delivery=lambda err, _msg: failed.append(err) if err is not None else None)
    assert p.flush(30) == 0
    assert not failed, failed


def _wait_count(cluster: LocalCluster, word: str, expected: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    with QueryClient(cluster.instances[0].target) as q:
        while q.get("counts", word).value != expected:
            assert time.monotonic() < deadline, f"{word} never reached {expected}\n{cluster.logs()}"
            time.sleep(0.2)


def _full_log(cluster: LocalCluster) -> str:
    return "\n".join(i.log_path.read_text() for i in cluster.instances if i.log_path.exists())


def _env(unique: str) -> dict[str, str]:
    return {"WORDCOUNT_INPUT_TOPIC": f"bad-{unique}", "WORDCOUNT_OUTPUT_TOPIC": f"bad-out-{unique}"}


def test_fail_handler_stops_the_instance_naming_the_record(bootstrap: str, tmp_path: Path,
                                                           unique: str) -> None:
    topic = f"bad-{unique}"
    ensure_topic(bootstrap, topic, 6)
    _produce_to(bootstrap, topic, 2, [b"good line", BAD])
    cluster = LocalCluster(bootstrap, APP, f"bad-{unique}", tmp_path, size=1, env=_env(unique))
    cluster.start()
    try:
        code = cluster.wait_exit(0, 90)
    finally:
        cluster.stop()
    log = _full_log(cluster)
    assert code == 2, log  # the README's exit status of an error line
    assert "Traceback" not in log, log  # the record is named; a stack adds nothing
    assert f"topic={topic} partition=2 offset=1" in log, log
    assert "ERROR" in log
    # the line says what to change to skip such records
    assert "default.deserialization.exception.handler=log-and-continue" in log, log


def test_log_and_continue_skips_the_record_and_keeps_counting(bootstrap: str, tmp_path: Path,
                                                              unique: str) -> None:
    topic = f"bad-{unique}"
    ensure_topic(bootstrap, topic, 6)
    _produce_to(bootstrap, topic, 4, [b"alpha beta", BAD, b"alpha gamma"])
    cluster = LocalCluster(bootstrap, APP, f"bad-{unique}", tmp_path, size=1, env=_env(unique),
                           extra_config=["default.deserialization.exception.handler=log-and-continue"])
    cluster.start()
    try:
        cluster.wait_running(90)
        deadline = time.monotonic() + 60
        with QueryClient(cluster.instances[0].target) as q:
            while q.get("counts", "gamma").value != 1:
                assert time.monotonic() < deadline, cluster.logs()
                time.sleep(0.2)
            assert q.get("counts", "alpha").value == 2

            def dropped() -> int:  # the instance publishes its counters about once a second
                return sum(dict(i.counters.dropped_records).get("deserialization-error", 0)
                           for i in q.metadata().instances)
            while dropped() != 1:
                assert time.monotonic() < deadline, f"dropped-records never counted the skip\n{cluster.logs()}"
                time.sleep(0.2)
    finally:
        cluster.stop()
    assert f"topic={topic} partition=4 offset=1" in cluster.logs()


def test_dead_letter_topic_keeps_the_poison_record_and_the_instance_runs(bootstrap: str, tmp_path: Path,
                                                                       unique: str) -> None:
    topic, dlq = f"bad-{unique}", f"dlq-{unique}"
    ensure_topic(bootstrap, topic, 6)
    ensure_topic(bootstrap, dlq, 1)
    _produce_to(bootstrap, topic, 3, [b"alpha beta", BAD, b"alpha gamma"],
                headers={1: [("trace-id", b"t-42")]})
    cluster = LocalCluster(bootstrap, APP, f"bad-{unique}", tmp_path, size=1, env=_env(unique),
                           extra_config=["default.deserialization.exception.handler=log-and-continue",
                                         f"errors.dead.letter.queue.topic.name={dlq}"])
    cluster.start()
    try:
        cluster.wait_running(90)
        _wait_count(cluster, "gamma", 1)
        _wait_count(cluster, "alpha", 2)
        dead = _consume_all(bootstrap, dlq, 1, timeout=30)
        assert cluster.running(), cluster.logs()  # the instance keeps running
    finally:
        cluster.stop()
    assert len(dead) == 1
    msg = dead[0]
    assert msg.value() == BAD and msg.key() is None
    headers = dict(msg.headers() or [])
    assert headers["trace-id"] == b"t-42"
    assert headers["__streams.errors.topic"] == topic.encode()
    assert headers["__streams.errors.partition"] == b"3"
    assert headers["__streams.errors.offset"] == b"1"
    assert headers["__streams.errors.exception"] == b"builtins.UnicodeDecodeError"


def _consume_all(bootstrap: str, topic: str, expected: int, timeout: float) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    out: list = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expected and time.monotonic() < deadline:
            for m in c.consume(100, timeout=0.5):
                if m.error() is None:
                    out.append(m)
        # anything beyond what was expected would be a bug: one more short look
        out.extend(m for m in c.consume(100, timeout=1.0) if m.error() is None)
    finally:
        c.close()
    return out


BIG_WORD = b"x" * (2 * 1024 * 1024)


def test_a_2mb_word_stops_the_instance_by_default_naming_setting_and_input(bootstrap: str, tmp_path: Path,
                                                                            unique: str) -> None:
    topic = f"bad-{unique}"
    ensure_topic(bootstrap, topic, 6)
    _produce_to(bootstrap, topic, 5, [b"small words", BIG_WORD])
    cluster = LocalCluster(bootstrap, APP, f"bad-{unique}", tmp_path, size=1, env=_env(unique))
    cluster.start()
    try:
        code = cluster.wait_exit(0, 90)
    finally:
        cluster.stop()
    log = _full_log(cluster)
    assert code == 2, log
    assert "Traceback" not in log, log
    assert "MSG_SIZE_TOO_LARGE" in log, log
    assert f"input topic={topic} partition=5 offset=1" in log, log
    assert "-repartition" in log, log  # the topic it could not write
    assert "default.production.exception.handler=continue" in log, log


def test_a_2mb_word_with_production_continue_is_skipped_and_counting_goes_on(bootstrap: str, tmp_path: Path,
                                                                               unique: str) -> None:
    topic = f"bad-{unique}"
    ensure_topic(bootstrap, topic, 6)
    _produce_to(bootstrap, topic, 1, [b"alpha", BIG_WORD, b"alpha omega"])
    cluster = LocalCluster(bootstrap, APP, f"bad-{unique}", tmp_path, size=1, env=_env(unique),
                           extra_config=["default.production.exception.handler=continue"])
    cluster.start()
    try:
        cluster.wait_running(90)
        _wait_count(cluster, "omega", 1)
        _wait_count(cluster, "alpha", 2)
        assert cluster.running(), cluster.logs()
    finally:
        cluster.stop()
    log = _full_log(cluster)
    assert "MSG_SIZE_TOO_LARGE" in log, log
    assert f"input topic={topic} partition=1 offset=1" in log, log


def test_a_record_the_broker_refuses_after_sending_goes_to_the_production_handler(
        bootstrap: str, tmp_path: Path, unique: str) -> None:
    """With the client's size check raised above the broker's limit, the 2 MB word is sent and
    refused by the broker (a failed delivery report, no longer tied to its input record)."""
    topic = f"bad-{unique}"
    ensure_topic(bootstrap, topic, 6)
    _produce_to(bootstrap, topic, 0, [b"alpha", BIG_WORD, b"alpha omega"])
    cluster = LocalCluster(bootstrap, APP, f"bad-{unique}", tmp_path, size=1, env=_env(unique),
                           extra_config=["default.production.exception.handler=continue",
                                         "producer.message.max.bytes=10000000"])
    cluster.start()
    try:
        cluster.wait_running(90)
        _wait_count(cluster, "omega", 1)
        _wait_count(cluster, "alpha", 2)
        assert cluster.running(), cluster.logs()
    finally:
        cluster.stop()
    log = _full_log(cluster)
    assert "MSG_SIZE_TOO_LARGE" in log, log
    assert "refused the record after it was sent" in log, log
