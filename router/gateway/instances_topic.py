"""A read-only follower of the instances topic (``<application.id>-iqmesh-instances``), for a
gateway started with ``--bootstrap``: it learns every instance's endpoint, state and heartbeat
the way the instances learn each other's, and publishes nothing.

Like the instances' own reader it fetches only when the end offset moved: the dev broker answers
idle fetches in a tight loop (docs/architecture.md).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Mapping

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from instance.runtime.kafka_log import client_logging
from instance.runtime.metadata_service import metadata_topic
from router.gateway.discovery_problem import ProblemLog, describe
from router.metadata import ClusterView, InstanceInfo

log = logging.getLogger(__name__)


class InstancesTopicReader(threading.Thread):
    """Keeps ``view`` up to date; ``loaded`` is set once the topic has been read to its end."""

    def __init__(self, bootstrap: str, application_id: str, view: ClusterView, interval_s: float = 0.5,
                 kafka: Mapping[str, str] | None = None) -> None:
        super().__init__(name="gateway-instances-topic", daemon=True)
        self.view = view
        self.loaded = threading.Event()
        self._interval = interval_s
        self._stopping = threading.Event()
        self._tp = TopicPartition(metadata_topic(application_id), 0)
        self._consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"{application_id}-gateway-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False, "client.id": "iqmesh-gateway", **client_logging(), **(kafka or {})})
        self._consumer.assign([TopicPartition(self._tp.topic, 0, OFFSET_BEGINNING)])
        self._consumer.pause([self._tp])
        self._position = 0
        self._where = (bootstrap, application_id)
        #: why no instance is known, when the topic cannot be read (``problem.current``)
        self.problem = ProblemLog(log)

    def run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._catch_up()
                self.problem.clear()
            except KafkaException as e:
                self.problem.report(describe(e, self._tp.topic, *self._where))
            except Exception:
                log.exception("reading %s failed", self._tp.topic)
            self._stopping.wait(self._interval)
        self._consumer.close()

    def _catch_up(self) -> None:
        _, high = self._consumer.get_watermark_offsets(self._tp, timeout=2)
        if high <= self._position:
            self.loaded.set()
            return
        self._consumer.resume([self._tp])
        deadline = time.monotonic() + 2.0
        try:
            while self._position < high and time.monotonic() < deadline and not self._stopping.is_set():
                for m in self._consumer.consume(num_messages=1000, timeout=0.1):
                    offset = m.offset()
                    if m.error() is not None or offset is None:
                        continue
                    self._position = offset + 1
                    self._apply(m.key(), m.value())
        finally:
            self._consumer.pause([self._tp])
        if self._position >= high:
            self.loaded.set()

    def _apply(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        if value is None:
            self.view.remove(key.decode())
            return
        try:
            self.view.update(InstanceInfo.from_json(value))
        except Exception:
            log.warning("ignoring malformed instance metadata for %r", key)

    def stop(self) -> None:
        self._stopping.set()
        if self.is_alive():
            self.join(10)
