"""A client's routing table: the cluster view one instance answered a Metadata call with, plus
what is needed to place a key (each store's sub-topology, partition count and key serde).

Routing over it is :class:`router.client.query_router.QueryRouter`'s, as on the instances. Liveness is
frozen as the answering instance judged it when asked: the table ages, heartbeats do not, and a
routing failure (not a clock) is what makes the client ask again.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from kernel.metadata import ClusterView, InstanceInfo, StorePartitionInfo
from kernel.partitioner import default_partition
from kernel.query_keys import MAX_QUERY_KEY_BYTES
from kernel.rpc import iqmesh_pb2 as pb
from kernel.serdes import Serde, serde_by_name
from kernel.task_id import TaskId
from kernel.wire_enums import role_of, state_of


@dataclass(frozen=True)
class StoreRoute:
    store: str
    subtopology: int
    partitions: int  # 0: a global store, asked of any instance
    key_serde: str
    value_serde: str
    global_store: bool = False


class FrozenView(ClusterView):
    """A ClusterView whose liveness is the ``alive`` flags of one Metadata reply. It does not
    change once built, so each task's owner and standbys are computed once (every Get asks)."""

    def __init__(self, alive: set[str]) -> None:
        super().__init__()
        self._alive = alive
        self._owners: dict[TaskId, InstanceInfo | None] = {}
        self._standbys: dict[TaskId, list[InstanceInfo]] = {}

    def is_alive(self, info: InstanceInfo, now_ms: int | None = None) -> bool:
        return info.instance_id in self._alive and info.state.is_running_or_rebalancing()

    def owner(self, task_id: TaskId) -> InstanceInfo | None:
        if task_id not in self._owners:
            self._owners[task_id] = super().owner(task_id)
        return self._owners[task_id]

    def standbys(self, task_id: TaskId) -> list[InstanceInfo]:
        if task_id not in self._standbys:
            self._standbys[task_id] = super().standbys(task_id)
        return list(self._standbys[task_id])


class RoutingTable:
    """Built from a MetadataReply; ``fetched_at`` is ``time.monotonic()`` when it arrived."""

    def __init__(self, reply: pb.MetadataReply, fetched_at: float | None = None) -> None:
        self.asked = reply.asked
        self.fetched_at = time.monotonic() if fetched_at is None else fetched_at
        self.stores = {r.store: StoreRoute(r.store, r.subtopology, r.partitions, r.key_serde, r.value_serde,
                                           r.global_store)
                       for r in reply.store_routes}
        sub_of = {r.store: r.subtopology for r in self.stores.values() if not r.global_store}
        self.view = FrozenView({i.instance_id for i in reply.instances if i.alive})
        for i in reply.instances:  # the wire's enums and task-id text become types here
            stores = tuple(StorePartitionInfo(s.store, s.partition, role, s.position, s.end_offset,
                                              TaskId(sub_of[s.store], s.partition) if s.store in sub_of else None)
                           for s in i.stores if (role := role_of(s.role)) is not None)
            self.view.update(InstanceInfo(
                instance_id=i.instance_id, endpoint=i.endpoint, state=state_of(i.state),
                active_tasks=_task_ids(i.active_tasks), standby_tasks=_task_ids(i.standby_tasks),
                restoring_tasks=_task_ids(i.restoring_tasks), assigned_at_ms=i.assigned_at_ms, stores=stores))
        self._serdes: dict[str, Serde | None] = {}

    def age(self) -> float:
        return time.monotonic() - self.fetched_at

    def endpoints(self) -> list[str]:
        """Endpoints of the live instances."""
        return [i.endpoint for i in self.view.instances() if self.view.is_alive(i) and i.endpoint]

    def is_global(self, store: str) -> bool:
        """``store`` is global: any instance answers it from its own copy."""
        route = self.stores.get(store)
        return route is not None and route.global_store

    def task_of(self, store: str, key: Any) -> TaskId | None:
        """The task holding ``key`` (text parsed with the store's key serde, bytes as serialized,
        anything else as its JSON text); None when the table cannot tell (unknown store, a
        custom serde the client does not know, a key the serde refuses or one too long to
        query), and for a global store, which any instance answers itself: the caller then lets
        an instance route, which answers with the precise error."""
        route = self.stores.get(store)
        if route is None or route.partitions <= 0:
            return None
        if isinstance(key, str | bytes) and len(key) > MAX_QUERY_KEY_BYTES:
            return None  # refused by the instance, not hashed here
        serde = self._key_serde(route)
        if serde is None:
            return None
        try:
            if isinstance(key, bytes):
                kb: bytes | None = key
            else:  # parsed from text as the instances parse GetRequest.key
                kb = serde.serialize(serde.parse(key if isinstance(key, str) else json.dumps(key)))
        except Exception:
            return None
        if kb is None:
            return None
        return TaskId(route.subtopology, default_partition(kb, route.partitions))

    def value_serde(self, store: str) -> Serde | None:
        route = self.stores.get(store)
        return _serde(route.value_serde) if route else None

    def _key_serde(self, route: StoreRoute) -> Serde | None:
        if route.store not in self._serdes:
            self._serdes[route.store] = _serde(route.key_serde)
        return self._serdes[route.store]


def _task_ids(texts: Any) -> tuple[TaskId, ...]:
    return tuple(TaskId.parse(t) for t in texts)


def _serde(name: str) -> Serde | None:
    try:
        return serde_by_name(name)
    except ValueError:
        return None


def decode_value(reply: pb.GetReply, serde: Serde | None) -> Any:
    """The value of a Get reply decoded with the store's value serde; the JSON text when the
    serde is not one this client knows (a custom serde of the application)."""
    if not reply.found:
        return None
    if serde is None or serde.name != reply.value_serde:
        known = _serde(reply.value_serde) if reply.value_serde else None
        if known is None:
            return json.loads(reply.value_json)
        serde = known
    return serde.deserialize(reply.value)
