"""RecordCollector: the one producer of a stream thread (sinks, repartition topics, changelogs).

The producer batches with ``linger.ms`` and partitions keyed records with librdkafka's
``murmur2_random``, byte-identical to Kafka's Java default partitioner, so the router's partition
for a key is the partition the record was written to.
"""

from __future__ import annotations

import threading
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from instance.errors import StreamsException
from instance.runtime.kafka_log import client_logging
from router.partitioner import LIBRDKAFKA_PARTITIONER

Headers = list[tuple[str, str | bytes | None]]


def producer_config(bootstrap: str, client_id: str, overrides: dict[str, str],
                    transactional_id: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        **client_logging(),
        "client.id": client_id,
        "partitioner": LIBRDKAFKA_PARTITIONER,
        "linger.ms": 5,
        "batch.num.messages": 10000,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "enable.idempotence": True,
        "acks": "all",
    }
    if transactional_id:
        conf["transactional.id"] = transactional_id
        conf["transaction.timeout.ms"] = 10_000  # Kafka Streams' default: a dead producer's transaction
        # blocks read_committed readers at most this long (on brokers that abort it; see membership.py)
    conf.update(overrides)
    return conf


class RecordCollector:
    """Sends serialized records; remembers the first failed delivery (or fatal producer error)
    and raises it at the next flush, so a commit never covers a record that was not written.
    Delivery reports come for failures only: a success costs no Python call."""

    def __init__(self, conf: dict[str, Any]) -> None:
        producer = Producer({**conf, "delivery.report.only.error": True,
                             "on_delivery": self._on_delivery, "error_cb": self.error_cb})
        self.producer = producer
        self._produce = producer.produce
        self._poll = producer.poll
        self._error: KafkaError | None = None
        self._where = ""
        self._lock = threading.Lock()

    def send(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
             partition: int = -1, headers: Headers | None = None) -> None:
        try:
            self._produce(topic, value, key, partition, timestamp=timestamp, headers=headers)
        except BufferError:
            self._send_after_room(topic, key, value, timestamp, partition, headers)

    def _send_after_room(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int,
                         partition: int, headers: Headers | None) -> None:
        while True:
            self._poll(0.05)
            try:
                self._produce(topic, value, key, partition, timestamp=timestamp, headers=headers)
                return
            except BufferError:
                continue

    def _fail(self, err: KafkaError, where: str) -> None:
        with self._lock:
            if self._error is None:
                self._error, self._where = err, where

    def error_cb(self, err: KafkaError) -> None:
        if err.fatal():
            self._fail(err, "the producer")

    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self._fail(err, f"{msg.topic()}[{msg.partition()}]")

    def flush(self, timeout: float = 60.0) -> None:
        remaining = self.producer.flush(timeout)
        if remaining:
            raise StreamsException(f"{remaining} records were not acknowledged within {timeout}s")
        self.check()

    def check(self) -> None:
        if self._error is not None:
            err, self._error = self._error, None
            raise StreamsException(f"a record could not be written to {self._where}: {err.name()}: {err.str()}") \
                from KafkaException(err)

    def poll(self) -> None:
        self._poll(0)
