"""The cluster view: who owns which task, where it answers queries, how fresh it is.

Kafka Streams ships host info inside the assignment userdata; librdkafka gives us no custom
assignor, so every instance publishes its own :class:`InstanceInfo` to a compacted topic and reads
everyone's (see ARCHITECTURE.md). Routing a key is then pure computation over this view.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from kernel.assignment import successor
from kernel.instance_state import RUNNING_OR_REBALANCING, State
from kernel.local_read import Role
from kernel.task_id import TaskId


@dataclass(frozen=True)
class HostInfo:
    host: str
    port: int

    @staticmethod
    def parse(endpoint: str) -> HostInfo:
        host, _, port = endpoint.rpartition(":")
        return HostInfo(host, int(port))

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class StorePartitionInfo:
    """Position (next changelog offset applied) and end offset of one store partition here."""

    store: str
    partition: int
    role: Role  # ACTIVE | STANDBY | RESTORING
    position: int
    end_offset: int
    task_id: TaskId | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: the role's name and the task id as text (``""``: none)."""
        return {**asdict(self), "role": self.role.value, "task_id": "" if self.task_id is None else str(self.task_id)}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> StorePartitionInfo:
        d = _known(StorePartitionInfo, d)
        task = d.get("task_id") or None
        return StorePartitionInfo(**{**d, "role": Role(d["role"]),
                                     "task_id": None if task is None else TaskId.parse(task)})

    @property
    def lag(self) -> int:
        return max(0, self.end_offset - self.position)


@dataclass(frozen=True)
class StoreInfo:
    """What every instance knows of a store from its topology, published so that readers of the
    changelogs (the Spark snapshot job) need no flags: changelog topic ("" when not logged),
    serde names, partitions (tasks). A global store (InstanceInfo.global_stores names them) is
    listed with no changelog and one partition: every instance answers a scan of partition 0 from
    its whole copy."""

    store: str
    changelog: str
    key_serde: str
    value_serde: str
    partitions: int


@dataclass(frozen=True)
class InstanceCounters:
    """Totals since the instance started, published with its InstanceInfo so that /metrics and
    the dashboard derive processing and query rates from what the instance really did."""

    records_processed: int = 0  # input records its stream threads processed
    gets_local: int = 0         # Gets asked here unrouted, answered from a local replica
    gets_routed: int = 0        # Gets routed here (a peer's hop, a routing client), answered locally
    gets_forwarded: int = 0     # Gets asked here that this instance forwarded to a peer
    get_seconds: float = 0.0    # time spent in Get (local and forwarded), for the mean latency
    scans: int = 0              # MultiGet/Range/PrefixScan/All calls (forwarded pages too)
    scan_entries: int = 0       # entries those calls returned
    #: failed query calls by gRPC status name (UNAVAILABLE, NOT_FOUND, INVALID_ARGUMENT...)
    query_errors: tuple[tuple[str, int], ...] = ()
    #: records dropped by reason (Kafka Streams' dropped-records metric; see InstanceCounters in
    #: proto/iqmesh.proto for the reasons)
    dropped_records: tuple[tuple[str, int], ...] = ()
    #: active tasks its stream threads closed without a commit (a refused commit, a lost producer)
    dirty_closes: int = 0

    @property
    def queries_answered(self) -> int:
        """Calls this instance answered itself (a forwarded Get counts where it was answered)."""
        return self.gets_local + self.gets_routed + self.scans

    @staticmethod
    def from_dict(d: dict[str, Any]) -> InstanceCounters:
        known = InstanceCounters.__dataclass_fields__
        d = {k: v for k, v in d.items() if k in known}
        for name in ("query_errors", "dropped_records"):
            d[name] = tuple((str(k), int(n)) for k, n in d.get(name, ()))
        return InstanceCounters(**d)


def liveness_ms(heartbeat_interval_ms: int) -> int:
    """How old an instance's heartbeat may be while it counts as alive: three of its intervals,
    at least 3 s (the instances' routing and the dashboard's "late" use the same rule)."""
    return max(3000, 3 * heartbeat_interval_ms)


@dataclass(frozen=True)
class InstanceInfo:
    """What an instance publishes of itself; typed here (State, TaskId, Role), names and task-id
    text only in its JSON (:meth:`to_json`, :meth:`from_json`) and on the gRPC wire."""

    instance_id: str
    endpoint: str
    state: State
    active_tasks: tuple[TaskId, ...] = ()
    standby_tasks: tuple[TaskId, ...] = ()
    restoring_tasks: tuple[TaskId, ...] = ()
    assignment_version: int = 0
    assigned_at_ms: int = 0
    heartbeat_ms: int = 0
    stores: tuple[StorePartitionInfo, ...] = field(default_factory=tuple)
    #: a membership change this instance is about to make (``kind:subject:by:ms``), see
    #: instance/runtime/membership.py; peers commit, pause and list it in ``acks``
    intent: str = ""
    acks: tuple[str, ...] = ()
    threads: int = 1
    #: group member id of each stream thread (what the ``range`` assignor sorts by)
    member_ids: tuple[str, ...] = ()
    #: every store of the topology (the same on every instance running it)
    store_catalog: tuple[StoreInfo, ...] = ()
    counters: InstanceCounters = field(default_factory=InstanceCounters)
    #: the stores of ``store_catalog`` that are global (every instance holds them whole and
    #: answers them locally); a field of its own, so readers older than it still parse the catalog
    global_stores: tuple[str, ...] = ()
    #: how often it publishes itself, and its group session timeout: how old its heartbeat may
    #: get before it is late, and before it is gone (fields of their own: older readers skip them)
    heartbeat_interval_ms: int = 1000
    session_timeout_ms: int = 10_000

    def to_json(self) -> bytes:
        d = asdict(self)
        d["state"] = self.state.name
        for name in _TASK_FIELDS:
            d[name] = [str(t) for t in getattr(self, name)]
        d["stores"] = [s.to_dict() for s in self.stores]
        return json.dumps(d, separators=(",", ":")).encode()

    @staticmethod
    def from_json(data: bytes) -> InstanceInfo:
        d: dict[str, Any] = json.loads(data)
        d["state"] = State.named(d.get("state", ""))
        for name in _TASK_FIELDS:
            d[name] = tuple(TaskId.parse(t) for t in d.get(name, ()))
        d["acks"] = tuple(d.get("acks", ()))
        d["member_ids"] = tuple(d.get("member_ids", ()))
        d["stores"] = tuple(StorePartitionInfo.from_dict(s) for s in d.get("stores", ()))
        d["store_catalog"] = tuple(StoreInfo(**_known(StoreInfo, s)) for s in d.get("store_catalog", ()))
        d["global_stores"] = tuple(d.get("global_stores", ()))
        d["counters"] = InstanceCounters.from_dict(d.get("counters") or {})
        known = InstanceInfo.__dataclass_fields__
        return InstanceInfo(**{k: v for k, v in d.items() if k in known})  # a newer writer's fields: ignored


_TASK_FIELDS = ("active_tasks", "standby_tasks", "restoring_tasks")


def _known(cls: Any, d: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``d`` that dataclass ``cls`` has (a newer writer's extra fields: ignored)."""
    known = cls.__dataclass_fields__
    return {k: v for k, v in d.items() if k in known}


@dataclass(frozen=True)
class KeyQueryMetadata:
    """Kafka Streams' KeyQueryMetadata; :data:`NOT_AVAILABLE` while the owner is unknown."""

    active_host: HostInfo | None
    standby_hosts: tuple[HostInfo, ...]
    partition: int

    @property
    def available(self) -> bool:
        return self.active_host is not None


NOT_AVAILABLE = KeyQueryMetadata(None, (), -1)


def task_lag(info: InstanceInfo, task_id: TaskId) -> int:
    """Summed lag of the store partitions ``info`` reports for ``task_id`` (0 if none)."""
    return sum(s.lag for s in info.stores if s.task_id == task_id and s.role is not Role.ACTIVE)


class ClusterView:
    """Latest InstanceInfo per instance, thread-safe; liveness from heartbeat age.

    A heartbeat's age is taken at the time the view was last known current (:meth:`mark_current`,
    by the follower of the instances topic), not at the present: a reader that could not read for
    a while (its broker slow, its process starved) does not know that the others stopped
    publishing, so it must not take them for dead. A view nobody marks ages its heartbeats now."""

    def __init__(self, liveness_ms: int = 5000) -> None:
        self._infos: dict[str, InstanceInfo] = {}
        #: the infos by instance id, sorted once per change rather than once per query
        self._sorted: tuple[InstanceInfo, ...] = ()
        self._lock = threading.Lock()
        self.liveness_ms = liveness_ms
        self.changed = threading.Condition(self._lock)
        #: wall-clock ms up to which every heartbeat published has been read (None: not followed)
        self.current_at_ms: int | None = None

    def update(self, info: InstanceInfo) -> None:
        with self._lock:
            old = self._infos.get(info.instance_id)
            if old is None or info.heartbeat_ms >= old.heartbeat_ms:
                self._infos[info.instance_id] = info
                self._resort()
                self.changed.notify_all()

    def remove(self, instance_id: str) -> None:
        with self._lock:
            self._infos.pop(instance_id, None)
            self._resort()
            self.changed.notify_all()

    def _resort(self) -> None:
        self._sorted = tuple(sorted(self._infos.values(), key=lambda i: i.instance_id))

    def instances(self) -> list[InstanceInfo]:
        return list(self._sorted)  # one attribute read: the tuple is replaced whole, never changed

    def mark_current(self, as_of_ms: int) -> None:
        """Every heartbeat published before ``as_of_ms`` (wall clock) has been read."""
        if self.current_at_ms is None or as_of_ms > self.current_at_ms:
            self.current_at_ms = as_of_ms

    def heartbeat_age_ms(self, info: InstanceInfo, now_ms: int | None = None) -> int:
        """How old ``info``'s heartbeat was when the view was last current (see the class)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        current = self.current_at_ms
        return (now if current is None or current > now else current) - info.heartbeat_ms

    def is_alive(self, info: InstanceInfo, now_ms: int | None = None) -> bool:
        return info.state in RUNNING_OR_REBALANCING and self.heartbeat_age_ms(info, now_ms) <= self.liveness_ms

    def owner(self, task_id: TaskId) -> InstanceInfo | None:
        """The live instance that holds ``task_id`` active (restoring counts as holding it); when
        two claim it during a rebalance, the most recent assignment wins."""
        best: InstanceInfo | None = None
        now = int(time.time() * 1000)
        for info in self._sorted:
            if not self.is_alive(info, now):
                continue
            if task_id in info.active_tasks or task_id in info.restoring_tasks:
                if best is None or info.assigned_at_ms > best.assigned_at_ms:
                    best = info
        return best

    def standbys(self, task_id: TaskId) -> list[InstanceInfo]:
        """Live instances that report ``task_id`` as a standby, least lagging first."""
        now = int(time.time() * 1000)
        found = [i for i in self._sorted if task_id in i.standby_tasks and self.is_alive(i, now)]
        return sorted(found, key=lambda i: (task_lag(i, task_id), i.instance_id))

    def takeover_member(self, task_id: TaskId, num_partitions: int) -> str | None:
        """The group member ``range`` will give ``task_id`` if its owner leaves (None: unknown)."""
        owner = self.owner(task_id)
        if owner is None or not owner.member_ids:
            return None
        members = [m for i in self.instances() if self.is_alive(i) for m in i.member_ids]
        return successor(task_id.partition, num_partitions, members, set(owner.member_ids))

    def standby_placement(self, task_id: TaskId, replicas: int, num_partitions: int = 0) -> list[str]:
        """Instance ids that should hold standbys of ``task_id``. The first is the instance the
        assignor will move the task to if its owner leaves (so a takeover restores only the
        delta), the others follow the owner on the sorted ring of live instance ids. Every
        instance computes the same answer from the same view; the owner is never chosen."""
        owner = self.owner(task_id)
        if owner is None or replicas <= 0:
            return []
        live = [i for i in self.instances() if self.is_alive(i)]
        ring = sorted(i.instance_id for i in live)
        if owner.instance_id not in ring:
            return []
        at = ring.index(owner.instance_id)
        others = ring[at + 1:] + ring[:at]
        member = self.takeover_member(task_id, num_partitions) if num_partitions else None
        heir = next((i.instance_id for i in live if member in i.member_ids), None)
        if heir is not None and heir in others:
            others.remove(heir)
            others.insert(0, heir)
        return others[:replicas]

    def key_query_metadata(self, subtopology: int, partition: int) -> KeyQueryMetadata:
        tid = TaskId(subtopology, partition)
        owner = self.owner(tid)
        if owner is None:
            return NOT_AVAILABLE
        return KeyQueryMetadata(HostInfo.parse(owner.endpoint),
                                tuple(HostInfo.parse(s.endpoint) for s in self.standbys(tid)), partition)
