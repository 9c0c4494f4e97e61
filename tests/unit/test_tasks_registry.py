"""The task registry (runtime/tasks.py, Kafka Streams' Tasks): its invariants (a task is active or
standby, never both; each input partition belongs to one active task; the partition index follows
the tasks), its lookups, and the one place a replica's role and position are worked out, for
queries and published metadata alike."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from instance.runtime.task_state import TaskLifecycle, TaskState
from instance.runtime.tasks import TaskRegistryError, Tasks
from kernel.local_read import LocalReplica, Role
from kernel.task_id import TaskId

CHANGELOG = "app-counts-changelog"
IN, OTHER = "input", "other"


@dataclass
class FakeState:
    positions: dict[tuple[str, int], int] = field(default_factory=dict)

    def position(self, tp: tuple[str, int]) -> int:
        return self.positions.get(tp, 0)


@dataclass
class FakeTask:
    """What the registry reads of a StreamTask."""

    id: TaskId
    sources: tuple[str, ...] = (IN,)
    stores: dict[str, Any] = field(default_factory=lambda: {"counts": {"k": 1}, "unlogged": {"u": 2}})
    state: FakeState = field(default_factory=FakeState)
    catch_up_to: dict[str, int] = field(default_factory=dict)
    lifecycle: TaskLifecycle = field(init=False)

    def __post_init__(self) -> None:
        self.lifecycle = TaskLifecycle(self.id)

    @property
    def partition(self) -> int:
        return self.id.partition


@dataclass
class FakeStandby:
    id: TaskId
    stores: dict[str, Any] = field(default_factory=lambda: {"counts": {"k": 0}})


class Get:
    """A key query: reads ``key`` from a dict store."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.reads = 0

    def run(self, store: Any, partition: int) -> Any:
        self.reads += 1
        return store.get(self.key)


def _registry(progress: dict[Any, dict[tuple[str, int], tuple[int, int]]] | None = None) -> Tasks:
    table = progress if progress is not None else {}
    return Tasks({"counts": CHANGELOG}, lambda owner: table.get(owner.id, {}))


def _running(tid: TaskId, **kw: Any) -> FakeTask:
    task = FakeTask(tid, **kw)
    task.lifecycle.initialized(restoring=False)
    return task


def _restoring(tid: TaskId) -> FakeTask:
    task = FakeTask(tid)
    task.lifecycle.initialized(restoring=True)
    return task


# -- invariants --------------------------------------------------------------------------------------
def test_active_tasks_are_found_by_id_and_by_each_input_partition() -> None:
    tasks = _registry()
    a, b = _running(TaskId(0, 0), sources=(IN, OTHER)), _running(TaskId(0, 1), sources=(IN, OTHER))
    tasks.add_active(a)  # type: ignore[arg-type]
    tasks.add_active(b)  # type: ignore[arg-type]
    assert tasks[TaskId(0, 0)] is a and TaskId(0, 1) in tasks and len(tasks) == 2
    assert tasks.by_partition(OTHER, 1) is b and tasks.by_partition(IN, 2) is None
    assert tasks.partition_lookup()((IN, 0)) is a
    assert tasks.ids_of({(OTHER, 1), (IN, 0), (IN, 9)}) == [TaskId(0, 0), TaskId(0, 1)]
    assert sorted(tasks.input_partitions()) == [(IN, 0), (IN, 1), (OTHER, 0), (OTHER, 1)]


def test_removing_a_task_removes_every_partition_it_consumed() -> None:
    tasks = _registry()
    tasks.add_active(_running(TaskId(0, 0), sources=(IN, OTHER)))  # type: ignore[arg-type]
    removed = tasks.remove_active(TaskId(0, 0))
    assert removed.id == TaskId(0, 0) and not tasks and tasks.input_partitions() == []
    assert tasks.by_partition(IN, 0) is None and tasks.by_partition(OTHER, 0) is None
    with pytest.raises(TaskRegistryError, match="0_0 is not active"):
        tasks.remove_active(TaskId(0, 0))


def test_a_task_is_added_once_and_an_input_partition_belongs_to_one_task() -> None:
    tasks = _registry()
    tasks.add_active(_running(TaskId(0, 0)))  # type: ignore[arg-type]
    with pytest.raises(TaskRegistryError, match="already active"):
        tasks.add_active(_running(TaskId(0, 0)))  # type: ignore[arg-type]
    # another sub-topology reading the same partition: refused, nothing half indexed
    with pytest.raises(TaskRegistryError, match="belong to another task"):
        tasks.add_active(_running(TaskId(1, 0), sources=(OTHER, IN)))  # type: ignore[arg-type]
    assert list(tasks) == [TaskId(0, 0)] and tasks.by_partition(OTHER, 0) is None


def test_a_task_is_never_active_and_standby_at_once() -> None:
    tasks = _registry()
    tasks.add_standby(FakeStandby(TaskId(0, 0)))
    with pytest.raises(TaskRegistryError, match="remove the standby first"):
        tasks.add_active(_running(TaskId(0, 0)))  # type: ignore[arg-type]
    assert tasks.remove_standby(TaskId(0, 0)) is not None
    tasks.add_active(_running(TaskId(0, 0)))  # type: ignore[arg-type]
    with pytest.raises(TaskRegistryError, match="active here"):
        tasks.add_standby(FakeStandby(TaskId(0, 0)))
    with pytest.raises(TaskRegistryError, match="already a standby"):
        tasks.add_standby(FakeStandby(TaskId(0, 1)))
        tasks.add_standby(FakeStandby(TaskId(0, 1)))
    assert tasks.owned_ids() == {TaskId(0, 0), TaskId(0, 1)}
    assert tasks.remove_standby(TaskId(0, 7)) is None


def test_restoring_ids_follow_the_task_lifecycle() -> None:
    tasks = _registry()
    restoring, running = _restoring(TaskId(0, 0)), _running(TaskId(0, 1))
    tasks.add_active(restoring)  # type: ignore[arg-type]
    tasks.add_active(running)  # type: ignore[arg-type]
    assert tasks.restoring_ids() == {TaskId(0, 0)}
    assert tasks.input_partitions(restoring=False) == [(IN, 1)]
    restoring.lifecycle.transition_to(TaskState.RUNNING)
    assert tasks.restoring_ids() == set() and sorted(tasks.input_partitions(restoring=False)) == [(IN, 0), (IN, 1)]


# -- replicas: one source for queries and metadata ----------------------------------------------------------
def test_a_running_active_answers_at_its_own_position_with_no_lag() -> None:
    tasks = _registry()
    task = _running(TaskId(0, 2), catch_up_to={IN: 5})
    task.state.positions[(CHANGELOG, 2)] = 40
    tasks.add_active(task)  # type: ignore[arg-type]
    query = Get("k")
    assert tasks.read("counts", 2, query, allow_stale=False) == (1, LocalReplica(Role.ACTIVE, 2, 40, 40, True))
    assert tasks.replica_of("counts", 2) == LocalReplica(Role.ACTIVE, 2, 40, 40, True)
    assert tasks.replica_of("unlogged", 2) == LocalReplica(Role.ACTIVE, 2, -1, -1, True)  # no changelog
    assert tasks.replica_of("counts", 3) is None and tasks.replica_of("nope", 2) is None
    assert query.reads == 1  # replica_of reads no store


def test_a_restoring_active_is_at_the_readers_progress_and_read_only_when_stale_is_allowed() -> None:
    task = _restoring(TaskId(0, 1))
    tasks = _registry({TaskId(0, 1): {(CHANGELOG, 1): (7, 30)}})
    tasks.add_active(task)  # type: ignore[arg-type]
    query = Get("k")
    expected = LocalReplica(Role.RESTORING, 1, 7, 30, True)
    assert tasks.read("counts", 1, query, allow_stale=False) == (None, expected) and query.reads == 0
    assert tasks.read("counts", 1, query, allow_stale=True) == (1, expected) and query.reads == 1
    assert expected.lag == 23
    # a store without a changelog of a restoring task is restoring too (queries and metadata agree)
    assert tasks.replica_of("unlogged", 1) == LocalReplica(Role.RESTORING, 1, -1, -1, True)


def test_a_standby_is_at_the_readers_progress_for_queries_and_metadata_alike() -> None:
    tasks = _registry({TaskId(0, 3): {(CHANGELOG, 3): (12, 20)}})
    tasks.add_standby(FakeStandby(TaskId(0, 3)))
    query = Get("k")
    expected = LocalReplica(Role.STANDBY, 3, 12, 20)
    assert tasks.read("counts", 3, query, allow_stale=False) == (None, expected) and query.reads == 0
    assert tasks.read("counts", 3, query, allow_stale=True) == (0, expected)
    snapshot = tasks.snapshot()
    assert snapshot.standby == (TaskId(0, 3),) and snapshot.active == () and snapshot.restoring == ()
    assert [(h.store, h.task_id, h.replica) for h in snapshot.replicas] == [("counts", TaskId(0, 3), expected)]


def test_the_active_answers_before_a_standby_and_the_snapshot_lists_every_store_partition() -> None:
    tasks = _registry({TaskId(0, 4): {(CHANGELOG, 4): (1, 2)}})
    active, restoring = _running(TaskId(0, 0)), _restoring(TaskId(0, 1))
    active.state.positions[(CHANGELOG, 0)] = 9
    tasks.add_active(active)  # type: ignore[arg-type]
    tasks.add_active(restoring)  # type: ignore[arg-type]
    tasks.add_standby(FakeStandby(TaskId(0, 4)))
    assert tasks.hosted_partitions("counts") == {0, 1, 4} and tasks.hosted_partitions("unlogged") == {0, 1}
    snapshot = tasks.snapshot()
    assert snapshot.active == (TaskId(0, 0),) and snapshot.restoring == (TaskId(0, 1),)
    assert snapshot.standby == (TaskId(0, 4),)
    published = {(h.store, h.task_id.partition): h.replica for h in snapshot.replicas}
    assert published == {(s, p): tasks.replica_of(s, p) for s, p in published}  # the same replicas as queries see
    assert published[("counts", 0)] == LocalReplica(Role.ACTIVE, 0, 9, 9)
    assert published[("counts", 1)].role is Role.RESTORING and published[("counts", 4)].role is Role.STANDBY
