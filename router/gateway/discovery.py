"""Which instances the gateway may ask: from ``--seeds``, or from the instances topic (``--bootstrap``).

Either way the live instances named by the latest routing table (:meth:`Discovery.learn`) come
first, so the gateway keeps working when the instances it was started with are gone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

from kernel.instance_state import State
from kernel.metadata import ClusterView


class Discovery:
    """Seeds given by hand; a base for discoveries that find their own."""

    def __init__(self, seeds: list[str] | None = None) -> None:
        self._seeds = list(seeds or [])
        self._learned: list[str] = []
        self._lock = threading.Lock()

    def found(self) -> list[str]:
        """Endpoints this discovery found by itself (the seeds here)."""
        return list(self._seeds)

    def endpoints(self) -> list[str]:
        """Live endpoints of the latest routing table, then the rest of :meth:`found`, once each."""
        with self._lock:
            learned = list(self._learned)
        return list(dict.fromkeys(learned + self.found()))

    def learn(self, alive: list[str]) -> None:
        with self._lock:
            self._learned = list(alive)

    def last_heard(self) -> dict[str, tuple[State, int]]:
        """Instance id -> (state, heartbeat age in ms) as the instances last said themselves
        outside the routing table (the instances topic); empty for seeds."""
        return {}

    @property
    def ready(self) -> bool:
        return bool(self.endpoints())

    @property
    def problem(self) -> str:
        """Why no instance can be found, when this discovery knows (``""`` otherwise)."""
        return ""

    def start(self) -> None:
        """Nothing to start for seeds."""

    def stop(self) -> None:
        """Nothing to stop for seeds."""


class TopicDiscovery(Discovery):
    """Live instances from the instances topic of ``application_id`` on ``bootstrap``."""

    def __init__(self, bootstrap: str, application_id: str, kafka: Mapping[str, str] | None = None) -> None:
        super().__init__()
        from router.gateway.instances_topic import InstancesTopicReader  # confluent-kafka only here

        self.view = ClusterView()
        self.reader = InstancesTopicReader(bootstrap, application_id, self.view, kafka=kafka)

    def found(self) -> list[str]:
        return [i.endpoint for i in self.view.instances() if self.view.is_alive(i) and i.endpoint]

    def last_heard(self) -> dict[str, tuple[State, int]]:
        """An instance that failed or stopped published its last state there before it exited."""
        now = int(time.time() * 1000)
        return {i.instance_id: (i.state, now - i.heartbeat_ms) for i in self.view.instances()}

    @property
    def ready(self) -> bool:
        return self.reader.loaded.is_set() and super().ready

    @property
    def problem(self) -> str:
        return self.reader.problem.current

    def start(self) -> None:
        self.reader.start()

    def stop(self) -> None:
        self.reader.stop()
