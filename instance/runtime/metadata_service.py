"""Publishes this instance's InstanceInfo and reads everyone's into a ClusterView.

Topic ``<application.id>-iqmesh-instances`` (compacted, one partition, key = instance id). The
reader is a group-less consumer that reads the topic whole, like a global table, and pauses
whenever it is caught up, so it costs the broker nothing while idle.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from instance.config import StreamsConfig
from instance.kafka_errors import is_topic_exists
from router.metadata import ClusterView, InstanceInfo

log = logging.getLogger(__name__)


def metadata_topic(application_id: str) -> str:
    return f"{application_id}-iqmesh-instances"


def ensure_metadata_topic(admin: AdminClient, application_id: str, replication_factor: int = 1) -> str:
    topic = metadata_topic(application_id)
    if topic not in admin.list_topics(timeout=10).topics:
        fut = admin.create_topics([NewTopic(topic, 1, replication_factor,
                                            config={"cleanup.policy": "compact"})])[topic]
        try:
            fut.result()
        except Exception as e:
            if not is_topic_exists(e):
                raise
    return topic


class MetadataService(threading.Thread):
    def __init__(self, config: StreamsConfig, instance_id: str,
                 snapshot: Callable[[], InstanceInfo], view: ClusterView, interval_ms: int,
                 on_tick: Callable[[], None] | None = None) -> None:
        application_id = config.application_id
        super().__init__(name=f"{instance_id}-metadata", daemon=True)
        self.topic = metadata_topic(application_id)
        self.instance_id = instance_id
        self._snapshot = snapshot
        self.view = view
        self._interval = interval_ms / 1000.0
        self._on_tick = on_tick
        self._stopping = threading.Event()
        #: set once the whole topic has been read: the view knows every instance
        self.loaded = threading.Event()
        self._wake = threading.Event()
        # the instance-metadata publisher and reader are clients like any other: producer. and
        # consumer. settings (security included) apply
        self._producer = Producer(config.client_config("producer", **{
            "linger.ms": 0, "client.id": f"{instance_id}-metadata"}))
        self._consumer = Consumer(config.client_config("restore.consumer", **{
            "group.id": f"{application_id}-metadata", "enable.auto.commit": False,
            "client.id": f"{instance_id}-metadata"}))
        self._consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])

    def publish_now(self) -> None:
        """Ask for an immediate publication (state or assignment changed)."""
        self._wake.set()

    def publish(self, info: InstanceInfo | None = None) -> None:
        info = info or self._snapshot()
        self.view.update(info)
        self._producer.produce(self.topic, info.to_json(), info.instance_id.encode())
        self._producer.flush(5)

    def publish_tombstone(self, instance_id: str) -> None:
        """Drop another instance from every view (it was removed from the group as dead)."""
        self._producer.produce(self.topic, None, instance_id.encode())
        self._producer.flush(5)

    def run(self) -> None:
        next_beat = 0.0
        tp = TopicPartition(self.topic, 0)
        self._consumer.pause([tp])
        position = 0
        failing = False  # the broker did not answer: said once, and again when it does
        while not self._stopping.is_set():
            now = time.monotonic()
            if now >= next_beat or self._wake.is_set():
                self._wake.clear()
                try:
                    self.publish()
                except Exception:
                    log.exception("publishing instance metadata failed")
                next_beat = now + self._interval
            try:
                position = self._catch_up(tp, position)
                if failing:
                    log.warning("reading instance metadata works again")
                    failing = False
                if self._on_tick is not None:
                    self._on_tick()
            except KafkaException as e:  # the broker is away: not a traceback every few seconds
                if not failing:
                    log.warning("reading instance metadata failed (retrying until the broker answers): %s", e)
                    failing = True
            except Exception:
                log.exception("reading instance metadata failed")
            self._wake.wait(min(0.2, max(0.0, next_beat - time.monotonic())))

    def _catch_up(self, tp: TopicPartition, position: int) -> int:
        """Fetch only when the end offset moved: an idle fetch loop costs the dev broker a core."""
        _, high = self._consumer.get_watermark_offsets(tp, timeout=2)
        if high <= position:
            self.loaded.set()
            return position
        self._consumer.resume([tp])
        deadline = time.monotonic() + 2.0
        try:
            while position < high and time.monotonic() < deadline:
                for m in self._consumer.consume(num_messages=1000, timeout=0.1):
                    if m.error() is not None:
                        continue
                    offset = m.offset()
                    assert offset is not None  # set on every message without error
                    position = offset + 1
                    key, value = m.key(), m.value()
                    if key is None:
                        continue
                    iid = key.decode()
                    if value is None:
                        self.view.remove(iid)
                    elif iid != self.instance_id:
                        try:
                            self.view.update(InstanceInfo.from_json(value))
                        except Exception:
                            log.warning("ignoring malformed instance metadata for %s", iid)
        finally:
            self._consumer.pause([tp])
        if position >= high:
            self.loaded.set()
        return position

    def stop(self, final: InstanceInfo | None = None) -> None:
        self._stopping.set()
        self._wake.set()
        if self.is_alive():
            self.join(10)
        if final is not None:
            try:
                self.publish(final)
            except Exception:
                log.exception("publishing final instance metadata failed")
        self._consumer.close()
        self._producer.flush(5)
