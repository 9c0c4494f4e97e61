"""Standby replicas: a task's stores kept warm from its changelogs, never processing input.

Placement is computed by every instance from the same view (runtime/kafka_streams.py), so no
coordination is needed. A standby checkpoints its position at a commit once it moved 10,000
records, and on close; when its instance becomes the task's active owner the standby is closed and
the active task reads that checkpoint and restores only the delta.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Set
from typing import cast

from instance.errors import StreamsException
from instance.runtime.changelog_reader import StoreChangelogReader
from instance.runtime.metrics import TaskMetrics
from instance.runtime.state_manager import ProcessorStateManager, TopicPart
from instance.runtime.task_state import TaskLifecycle
from instance.runtime.tasks import TaskRegistryError, Tasks
from instance.state.spec import StoreSpec
from kernel.task_id import TaskId

log = logging.getLogger(__name__)

CHECKPOINT_MIN_RECORDS = 10_000


class StandbyTask:
    """The stores of one task (no cache, no changelog writes), followed by the thread's reader
    from the moment it exists until :meth:`close`."""

    def __init__(self, task_id: TaskId, specs: list[StoreSpec], state: ProcessorStateManager,
                 sources: list[str], in_memory: bool, reader: StoreChangelogReader,
                 metrics: TaskMetrics | None = None) -> None:
        self.id = task_id
        self.lifecycle = TaskLifecycle(task_id)
        #: update-rate / update-total (None: not measured)
        self.metrics = metrics
        #: input topics of the task (at-least-once: the reader holds back records their commits
        #: do not cover yet)
        self.sources = sources
        self.state = state
        self.stores = state.register_stores(specs, in_memory=in_memory, cache_max_entries=0,
                                            changelog_for=lambda spec: None)
        self._reader = reader
        try:
            reader.register_standby(self)
        except BaseException:
            if metrics is not None:
                metrics.close()
            state.close(checkpoint=False)
            raise
        self.lifecycle.initialized(restoring=False)  # followed from now on

    @property
    def changelog_offsets(self) -> dict[TopicPart, int]:
        return self.state.changelog_offsets

    @property
    def end_offsets(self) -> dict[TopicPart, int]:
        """The changelogs' end offsets last seen (queries: the standby's lag)."""
        return {tp: end for tp, (_, end) in self._reader.progress(self).items()}

    def checkpoint(self) -> None:
        """At a commit, once the changelogs moved ``CHECKPOINT_MIN_RECORDS`` since the last one
        (Kafka Streams' rule: a flush and a file write every 100 ms under exactly-once would cost
        more than restoring 10,000 records after a crash); close always checkpoints."""
        if self.state.moved_since_checkpoint() >= CHECKPOINT_MIN_RECORDS:
            self.state.flush()
            self.state.checkpoint()

    def close(self) -> None:
        """Stop following, flush, checkpoint (a later active task restores only the delta), close."""
        self.lifecycle.close()
        self._reader.unregister(self)
        if self.metrics is not None:
            self.metrics.close()
        try:
            self.state.flush()
        except BaseException:
            self.state.close(checkpoint=False)
            raise
        self.state.close(checkpoint=True)


class StandbyTasks:
    """The standby tasks of one stream thread: created and closed here, held in the thread's task
    registry (runtime/tasks.py), which keeps a task from being standby and active at once."""

    def __init__(self, reader: StoreChangelogReader, registry: Tasks, name: str = "") -> None:
        self.reader = reader
        self.registry = registry
        self.name = name

    @property
    def tasks(self) -> Mapping[TaskId, StandbyTask]:
        return cast(Mapping[TaskId, StandbyTask], self.registry.standbys())  # the registry holds only these

    def add(self, task: StandbyTask) -> None:
        self.registry.add_standby(task)

    def remove(self, tid: TaskId) -> StandbyTask | None:
        task = cast(StandbyTask | None, self.registry.remove_standby(tid))
        if task is not None:
            task.close()
        return task

    def hold(self, wanted: Set[TaskId], create: Callable[[TaskId], StandbyTask]) -> None:
        """Hold exactly the ``wanted`` standbys: close the others, create the missing ones (one
        whose task directory is still locked by its old owner here is created at a later call)."""
        for tid in [t for t in self.tasks if t not in wanted]:
            self.remove(tid)
        for tid in sorted(wanted - set(self.tasks)):
            try:
                task = create(tid)
                try:
                    self.add(task)
                except BaseException:
                    task.close()
                    raise
            except TaskRegistryError:
                raise  # a bug, not a task directory still locked
            except StreamsException as e:
                log.info("%s: standby %s not created yet: %s", self.name, tid, e)

    def step(self, max_records: int = 10_000) -> int:
        """Keep the standbys' changelogs flowing (the reader waits while a restore runs)."""
        return self.reader.update_standbys(max_records) if self.tasks else 0

    def checkpoint_all(self) -> None:
        for task in list(self.tasks.values()):
            task.checkpoint()

    def close(self) -> None:
        for tid in list(self.tasks):
            self.remove(tid)
