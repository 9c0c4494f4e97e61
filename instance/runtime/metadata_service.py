"""Publishes this instance's InstanceInfo and reads everyone's into a ClusterView.

Topic ``<application.id>-iqmesh-instances`` (compacted, one partition, key = instance id). The
reader is the instances-topic follower the gateway and the snapshot job use too
(kernel/instances_follower.py): it reads the topic whole, like a global table, and fetches only
when its end offset moved, so it costs the broker nothing while idle.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from instance.config import StreamsConfig
from instance.kafka_errors import is_topic_exists
from kernel.idle_fetch import FOLLOWER_PAUSE_S
from kernel.instances_follower import InstancesFollower, ViewWriter, instances_topic
from kernel.metadata import ClusterView, InstanceInfo

log = logging.getLogger(__name__)


def ensure_metadata_topic(admin: AdminClient, application_id: str, replication_factor: int = 1) -> str:
    topic = instances_topic(application_id)
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
        self.topic = instances_topic(application_id)
        self.instance_id = instance_id
        self._snapshot = snapshot
        self.view = view
        self._interval = interval_ms / 1000.0
        self._on_tick = on_tick
        self._stopping = threading.Event()
        self._wake = threading.Event()
        # the instance-metadata publisher and reader are clients like any other: producer. and
        # consumer. settings (security included) apply
        self._producer = Producer(config.client_config("producer", **{
            "linger.ms": 0, "client.id": f"{instance_id}-metadata"}))
        self._follower = InstancesFollower(config.client_config("restore.consumer", **{
            "group.id": f"{application_id}-metadata", "enable.auto.commit": False,
            "client.id": f"{instance_id}-metadata"}), application_id, ViewWriter(view, own_id=instance_id),
            on_current=view.mark_current)
        #: set once the whole topic has been read: the view knows every instance
        self.loaded = self._follower.loaded

    def publish_now(self) -> None:
        """Ask for an immediate publication (state or assignment changed)."""
        self._wake.set()

    def publish(self, info: InstanceInfo | None = None, flush_s: float = 5.0) -> None:
        info = info or self._snapshot()
        self.view.update(info)
        self._producer.produce(self.topic, info.to_json(), info.instance_id.encode())
        self._producer.flush(flush_s)

    def publish_tombstone(self, instance_id: str) -> None:
        """Drop another instance from every view (it was removed from the group as dead)."""
        self._producer.produce(self.topic, None, instance_id.encode())
        self._producer.flush(5)

    def run(self) -> None:
        next_beat = 0.0
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
                self._follower.catch_up(self._stopping)
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
            self._wake.wait(min(FOLLOWER_PAUSE_S, max(0.0, next_beat - time.monotonic())))

    def stop(self, final: InstanceInfo | None = None, timeout: float = 20.0) -> None:
        """Stop following and publishing, publish ``final`` last; within about ``timeout`` even
        when the broker does not answer (a pod's grace period is running)."""
        deadline = time.monotonic() + timeout
        self._stopping.set()
        self._wake.set()
        if self.is_alive():
            self.join(min(10.0, timeout))
        if final is not None:
            try:
                self.publish(final, flush_s=max(0.5, min(5.0, deadline - time.monotonic())))
            except Exception:
                log.exception("publishing final instance metadata failed")
        self._follower.close()
        self._producer.flush(max(0.5, min(5.0, deadline - time.monotonic())))
