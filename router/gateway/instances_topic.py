"""The gateway's thread around the instances-topic follower (kernel/instances_follower.py), for a
gateway started with ``--bootstrap``: it learns every instance's endpoint, state and heartbeat the
way the instances learn each other's, and publishes nothing. When the topic cannot be read it says
why (``problem``), once and then at most every 30 s (discovery_problem.py).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Mapping

from confluent_kafka import KafkaException

from kernel.instances_follower import InstancesFollower, ViewWriter
from kernel.kafka_clients import ClientKind, client_config
from kernel.metadata import ClusterView
from router.gateway.discovery_problem import ProblemLog, describe

log = logging.getLogger(__name__)
#: which client's settings the reader takes (``restore.consumer.`` ones, over ``consumer.`` and
#: the unprefixed): a consumer that reads a topic to its end, as the instances' restore consumer
READER_KIND: ClientKind = "restore.consumer"


class InstancesTopicReader(threading.Thread):
    """Keeps ``view`` up to date; ``loaded`` is set once the topic has been read to its end."""

    def __init__(self, bootstrap: str, application_id: str, view: ClusterView, interval_s: float = 0.5,
                 kafka: Mapping[str, str] | None = None) -> None:
        """``kafka``: the client settings as a properties file gives them (GatewayConfig.kafka)."""
        super().__init__(name="gateway-instances-topic", daemon=True)
        self.view = view
        self._interval = interval_s
        self._stopping = threading.Event()
        self._follower = InstancesFollower(client_config(bootstrap, kafka or {}, READER_KIND, **{
            "group.id": f"{application_id}-gateway-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
            "client.id": "iqmesh-gateway"}), application_id, ViewWriter(view), on_current=view.mark_current)
        self.loaded = self._follower.loaded
        self._where = (bootstrap, application_id)
        #: why no instance is known, when the topic cannot be read (``problem.current``)
        self.problem = ProblemLog(log)

    def run(self) -> None:
        topic = self._follower.topic
        while not self._stopping.is_set():
            try:
                self._follower.catch_up(self._stopping)
                self.problem.clear()
            except KafkaException as e:
                self.problem.report(describe(e, topic, *self._where))
            except Exception:
                log.exception("reading %s failed", topic)
            self._stopping.wait(self._interval)
        self._follower.close()

    def stop(self) -> None:
        self._stopping.set()
        if self.is_alive():
            self.join(10)
