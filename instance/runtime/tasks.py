"""Tasks: the registry of one stream thread's tasks, as Kafka Streams' ``Tasks`` (processor/internals).

The TaskManager decides when tasks are created and closed; this registry holds them, with the
invariants every reader relies on, and answers for them:

* a task id is active or standby here, never both (a standby is removed before its task becomes
  active here: its checkpoint lets the active restore only the delta);
* each input partition belongs to exactly one active task, and the partition index holds exactly
  the sources of the active tasks (a task is indexed and unindexed under the lock, as a whole);
* other threads (queries, the metadata publisher) read under :attr:`Tasks.lock`, which the owning
  thread holds while it creates or closes tasks.

A replica's role and position are worked out in one place, :meth:`Tasks.replica_of`, for queries
and published metadata alike: a standby's position comes from the changelog reader's progress,
whoever asks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from instance.errors import IllegalStateException
from instance.runtime.task_state import TaskState
from kernel.local_read import LocalReplica, Role
from kernel.task_id import TaskId

if TYPE_CHECKING:
    from instance.runtime.task import StreamTask

TopicPart = tuple[str, int]
R_co = TypeVar("R_co", covariant=True)
#: (position, end offset) of each changelog partition an owner restores or follows
Progress = Callable[[Any], Mapping[TopicPart, tuple[int, int]]]


class StoreRead(Protocol[R_co]):
    """A read of one partition's store (``runtime/query/request.py``'s queries are ones)."""

    def run(self, store: Any, partition: int, /) -> R_co: ...


class StandbyTask(Protocol):
    """What the registry reads of a standby (runtime/standby.py, which imports this module)."""

    @property
    def id(self) -> TaskId: ...

    @property
    def stores(self) -> Mapping[str, Any]: ...


class TaskRegistryError(IllegalStateException):
    """A change to the registry that would break one of its invariants: a bug in the caller."""


@dataclass(frozen=True, slots=True)
class HostedReplica:
    """One store partition held here, for published metadata."""

    store: str
    task_id: TaskId
    replica: LocalReplica


@dataclass(frozen=True, slots=True)
class TasksSnapshot:
    """The registry at one moment (taken under its lock): what the instance publishes."""

    active: tuple[TaskId, ...]
    restoring: tuple[TaskId, ...]
    standby: tuple[TaskId, ...]
    replicas: tuple[HostedReplica, ...]


class Tasks(Mapping[TaskId, "StreamTask"]):
    """The active tasks by id (the mapping itself) and by input partition, and the standbys."""

    def __init__(self, changelogs: Mapping[str, str], progress: Progress) -> None:
        #: held while tasks are added or removed, and by readers from other threads
        self.lock = threading.RLock()
        self._changelogs = changelogs
        self._progress = progress
        self._active: dict[TaskId, StreamTask] = {}
        self._by_partition: dict[TopicPart, StreamTask] = {}
        self._standby: dict[TaskId, StandbyTask] = {}

    # -- the mapping of active tasks (the owning thread's hot path: plain dict calls) --------------
    def __getitem__(self, tid: TaskId) -> StreamTask:
        return self._active[tid]

    def __iter__(self) -> Iterator[TaskId]:
        return iter(self._active)

    def __len__(self) -> int:
        return len(self._active)

    def __contains__(self, tid: object) -> bool:
        return tid in self._active

    def values(self) -> Any:  # the dict's own view: the loops over tasks run per batch
        return self._active.values()

    def items(self) -> Any:
        return self._active.items()

    # -- lookups -----------------------------------------------------------------------------------
    def by_partition(self, topic: str, partition: int) -> StreamTask | None:
        """The active task that consumes ``topic`` partition ``partition`` (None: no task here)."""
        return self._by_partition.get((topic, partition))

    def partition_lookup(self) -> Callable[[TopicPart], StreamTask | None]:
        """The index's lookup, for a loop over a batch of records (one bound method, no call per run)."""
        return self._by_partition.get

    def ids_of(self, partitions: Iterable[TopicPart]) -> list[TaskId]:
        """The ids of the active tasks consuming any of ``partitions``, sorted."""
        index = self._by_partition
        return sorted({index[tp].id for tp in partitions if tp in index})

    def input_partitions(self, restoring: bool | None = None) -> list[TopicPart]:
        """The input partitions of the active tasks (only of those restoring or not, if given)."""
        return [tp for tp, task in self._by_partition.items()
                if restoring is None or task.lifecycle.restoring == restoring]

    def restoring_ids(self) -> set[TaskId]:
        """The active tasks still restoring their stores (from their lifecycle)."""
        return {tid for tid, task in list(self._active.items()) if task.lifecycle.restoring}

    def standby(self, tid: TaskId) -> StandbyTask | None:
        return self._standby.get(tid)

    def standbys(self) -> Mapping[TaskId, StandbyTask]:
        """The standby tasks by id (read-only by convention: add and remove them here)."""
        return self._standby

    def owned_ids(self) -> set[TaskId]:
        """Every task id held here, active or standby (their task directories are in use)."""
        with self.lock:
            return {*self._active, *self._standby}

    # -- changes (the owning thread) -----------------------------------------------------------------
    def add_active(self, task: StreamTask) -> None:
        with self.lock:
            tid = task.id
            if tid in self._active:
                raise TaskRegistryError(f"task {tid} is already active here")
            if tid in self._standby:
                raise TaskRegistryError(f"task {tid} is a standby here: remove the standby first")
            parts = [(topic, tid.partition) for topic in task.sources]
            taken = [tp for tp in parts if tp in self._by_partition]
            if taken:
                raise TaskRegistryError(f"task {tid}: partitions {taken} belong to another task")
            self._active[tid] = task
            for tp in parts:
                self._by_partition[tp] = task

    def remove_active(self, tid: TaskId) -> StreamTask:
        with self.lock:
            task = self._active.pop(tid, None)
            if task is None:
                raise TaskRegistryError(f"task {tid} is not active here")
            for topic in task.sources:
                self._by_partition.pop((topic, tid.partition), None)
            return task

    def add_standby(self, task: StandbyTask) -> None:
        with self.lock:
            if task.id in self._active:
                raise TaskRegistryError(f"task {task.id} is active here: it cannot be a standby too")
            if task.id in self._standby:
                raise TaskRegistryError(f"task {task.id} is already a standby here")
            self._standby[task.id] = task

    def remove_standby(self, tid: TaskId) -> StandbyTask | None:
        with self.lock:
            return self._standby.pop(tid, None)

    # -- replicas ----------------------------------------------------------------------------------
    def replica_of(self, store: str, partition: int) -> LocalReplica | None:
        """The replica of ``store`` partition held here (role, position, end offset, lag), or None."""
        found = self.read(store, partition, None, True)
        return found[1] if found is not None else None

    def read(self, store: str, partition: int, query: StoreRead[R_co] | None,
             allow_stale: bool) -> tuple[R_co | None, LocalReplica] | None:
        """``query`` run on the replica of ``store`` partition held here, and that replica (None:
        none here). Under the lock (no task is closed meanwhile), the read before the position is
        taken, so the position covers what was read (an active's counts what its cache holds:
        ProcessorStateManager.position). A standby or restoring replica is read only with
        ``allow_stale`` (a query refuses it otherwise)."""
        changelog = self._changelogs.get(store)
        tp = (changelog, partition) if changelog else None
        with self.lock:
            for tid, task in self._active.items():
                if tid.partition != partition or store not in task.stores:
                    continue
                restoring = task.lifecycle.state is TaskState.RESTORING  # the property's test, no call per Get
                got = None
                if query is not None and (allow_stale or not restoring):
                    got = query.run(task.stores[store], partition)
                return got, self._active_replica(task, partition, tp, restoring)
            for tid, sb in self._standby.items():
                if tid.partition == partition and store in sb.stores:
                    got = query.run(sb.stores[store], partition) if query is not None and allow_stale else None
                    return got, self._standby_replica(sb, partition, tp)
        return None

    def hosted_partitions(self, store: str) -> set[int]:
        """The partitions of ``store`` held here, active or standby."""
        with self.lock:
            found = {tid.partition for tid, task in self._active.items() if store in task.stores}
            found.update(tid.partition for tid, sb in self._standby.items() if store in sb.stores)
        return found

    def snapshot(self) -> TasksSnapshot:
        """Every task and store partition held here, with its replica, at one moment."""
        active: list[TaskId] = []
        restoring: list[TaskId] = []
        replicas: list[HostedReplica] = []
        with self.lock:
            for tid, task in self._active.items():
                is_restoring = task.lifecycle.restoring
                (restoring if is_restoring else active).append(tid)
                for name in task.stores:
                    replica = self._active_replica(task, tid.partition, self._changelog_tp(name, tid.partition),
                                                   is_restoring)
                    replicas.append(HostedReplica(name, tid, replica))
            for tid, sb in self._standby.items():
                for name in sb.stores:
                    replica = self._standby_replica(sb, tid.partition, self._changelog_tp(name, tid.partition))
                    replicas.append(HostedReplica(name, tid, replica))
            standby = tuple(self._standby)
        return TasksSnapshot(tuple(active), tuple(restoring), standby, tuple(replicas))

    def _changelog_tp(self, store: str, partition: int) -> TopicPart | None:
        changelog = self._changelogs.get(store)
        return (changelog, partition) if changelog else None

    def _active_replica(self, task: StreamTask, partition: int, tp: TopicPart | None,
                        restoring: bool) -> LocalReplica:
        """An active task's replica: restoring, at the reader's progress (the task's own position
        before the reader has it); else running, at its position (no lag: it writes the changelog)."""
        if restoring:
            pos = end = task.state.position(tp) if tp else -1
            if tp is not None:
                pos, end = self._progress(task).get(tp, (pos, end))
            return LocalReplica(Role.RESTORING, partition, pos, end, True)
        pos = task.state.position(tp) if tp else -1
        return LocalReplica(Role.ACTIVE, partition, pos, pos, bool(task.catch_up_to))

    def _standby_replica(self, sb: StandbyTask, partition: int, tp: TopicPart | None) -> LocalReplica:
        """A standby's replica: position and end offset as the changelog reader follows them."""
        pos, end = self._progress(sb).get(tp, (-1, -1)) if tp else (-1, -1)
        return LocalReplica(Role.STANDBY, partition, pos, end)
