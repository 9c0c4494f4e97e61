"""Query routing from the streams group itself (``group.protocol=streams``).

Every StreamsGroupHeartbeat answer may carry ``PartitionsByUserEndpoint``: per ``application.server``
endpoint, the input partitions of the tasks its members hold active and standby (warm-ups count as
standbys). Under the streams protocol that map decides who is active and who is standby for each
task, the metadata ``queryMetadataForKey`` answers with in Kafka Streams; the instances topic
(runtime/metadata_service.py) still says which instance at an endpoint is alive and how far its
replicas lag. Until a member has heard the map (or for a task the map does not name) the view answers
from the instances topic, as under the other protocols.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from instance.runtime.streams_group.assignment import PartitionsByEndpoint
from kernel.metadata import ClusterView, HostInfo, InstanceInfo, task_lag
from kernel.task_id import TaskId

#: a task's first input partition (topic, partition): how the broker's map names the task
PartitionOf = Callable[[TaskId], "tuple[str, int] | None"]


class GroupRoutedView(ClusterView):
    """A ClusterView whose owners and standbys come from the broker's endpoint map."""

    def __init__(self, liveness_ms: int, endpoints: Callable[[], PartitionsByEndpoint | None],
                 partition_of: PartitionOf) -> None:
        super().__init__(liveness_ms)
        self._endpoints = endpoints
        self._partition_of = partition_of

    def _map(self, task_id: TaskId) -> tuple[PartitionsByEndpoint, tuple[str, int]] | None:
        found = self._endpoints()
        tp = self._partition_of(task_id)
        if found is None or not found.entries or tp is None:
            return None
        if not any(tp in e.active or tp in e.standby for e in found.entries):
            return None
        return found, tp

    def _live_at(self, host: HostInfo, now_ms: int) -> InstanceInfo | None:
        for info in self.instances():
            if info.endpoint and HostInfo.parse(info.endpoint) == host and self.is_alive(info, now_ms):
                return info
        return None

    def owner(self, task_id: TaskId) -> InstanceInfo | None:
        mapped = self._map(task_id)
        if mapped is None:
            return super().owner(task_id)
        found, tp = mapped
        host = found.active_owner(*tp)
        return None if host is None else self._live_at(host, int(time.time() * 1000))

    def standbys(self, task_id: TaskId) -> list[InstanceInfo]:
        mapped = self._map(task_id)
        if mapped is None:
            return super().standbys(task_id)
        found, tp = mapped
        now = int(time.time() * 1000)
        live = [info for e in found.entries if tp in e.standby and (info := self._live_at(e.endpoint, now)) is not None]
        return sorted(live, key=lambda i: (task_lag(i, task_id), i.instance_id))


def freshest(maps: list[PartitionsByEndpoint]) -> PartitionsByEndpoint | None:
    """The map of the highest endpoint epoch among an instance's members (None: none heard yet)."""
    heard = [m for m in maps if m.epoch >= 0]
    return max(heard, key=lambda m: m.epoch) if heard else None
