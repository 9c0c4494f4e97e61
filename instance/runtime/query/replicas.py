"""Which local replica answers a partition, and how fresh it is: the active task (running or
restoring) first, then a standby, across the stream threads' task managers; a global store's
copy from the global thread. Moved here from TaskManager.local_store and
KafkaStreams.global_replica: reading is the query's business, the tasks only hold the stores."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from instance.runtime.global_thread import GlobalStreamThread
from instance.runtime.query.request import Query
from instance.runtime.task_manager import TaskManager
from router.core.local_read import LocalReplica, Role

R = TypeVar("R")


def read_partition(managers: Iterable[TaskManager], changelog: str | None, store: str, partition: int,
                   query: Query[R], allow_stale: bool) -> tuple[R | None, LocalReplica] | None:
    """``query`` run on this instance's replica of ``store`` partition and that replica (None:
    no replica here). The read happens under the task manager's lock (tasks are not closed under
    it) and before the position is taken, so the position covers what was read (an active's
    counts what its cache holds: ProcessorStateManager.position). A standby or restoring replica
    is not read without ``allow_stale``: the caller refuses it anyway."""
    tp = (changelog, partition) if changelog else None
    for tm in managers:
        with tm.lock:
            for tid, task in tm.tasks.items():
                if tid.partition != partition or store not in task.stores:
                    continue
                if tp is not None and task.lifecycle.restoring:
                    got = query.run(task.stores[store], partition) if allow_stale else None
                    pos = task.state.changelog_offsets.get(tp, -1)
                    pos, end = tm.restorer.progress(task).get(tp, (pos, pos))
                    return got, LocalReplica(Role.RESTORING, partition, pos, end, True)
                got = query.run(task.stores[store], partition)
                pos = task.state.position(tp) if tp else -1
                return got, LocalReplica(Role.ACTIVE, partition, pos, pos, bool(task.catch_up_to))
            for tid, sb in tm.standby.tasks.items():
                if tid.partition == partition and store in sb.stores:
                    got = query.run(sb.stores[store], partition) if allow_stale else None
                    pos, end = tm.restorer.progress(sb).get(tp, (-1, -1)) if tp else (-1, -1)
                    return got, LocalReplica(Role.STANDBY, partition, pos, end)
    return None


def hosted_partitions(managers: Iterable[TaskManager], store: str) -> list[int]:
    """The partitions of ``store`` this instance holds a replica of (active or standby)."""
    found: set[int] = set()
    for tm in managers:
        with tm.lock:
            found.update(tid.partition for tid, task in tm.tasks.items() if store in task.stores)
            found.update(tid.partition for tid, sb in tm.standby.tasks.items() if store in sb.stores)
    return sorted(found)


def read_global(thread: GlobalStreamThread, topic: str, store: str, query: Query[R]) -> tuple[R, LocalReplica]:
    """``query`` run on this instance's copy of a global store, read after the position is
    taken (so the answer reflects at least that position). The position is the sum over the
    store's topic partitions of the next offset applied; the end offset the sum of the ends the
    global thread last saw (refreshed as it polls)."""
    offsets = dict(thread.state.changelog_offsets)  # written by the global thread: one C-level copy
    ends = thread.progress()
    position = end = 0
    for tp, pos in offsets.items():
        if tp[0] == topic:
            position += pos
            end += max(pos, ends.get(tp, (pos, pos))[1])
    return query.run(thread.stores[store], 0), LocalReplica(Role.GLOBAL, 0, position, end)
