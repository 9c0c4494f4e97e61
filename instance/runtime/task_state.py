"""The lifecycle of a task, as Kafka Streams' ``Task.State``: one state on the task instead of
sets and flags kept beside it.

    CREATED -> RESTORING -> RUNNING -> SUSPENDED -> CLOSED
       |           |                     ^  |          |
       +-----------+---------------------+  +-> RESTORING (resumed)
                                                       CLOSED -> CREATED (revived)

An active task restores (RESTORING) until its stores reflect their changelogs, then processes
(RUNNING); a standby goes to RUNNING at once and follows its changelogs from there. Closing always
suspends first. Any other move is a bug and raises.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from instance.errors import IllegalStateException
from kernel.task_id import TaskId


class TaskState(enum.Enum):
    CREATED = 0
    RESTORING = 1
    RUNNING = 2
    SUSPENDED = 3
    CLOSED = 4


_ALLOWED: dict[TaskState, frozenset[TaskState]] = {
    TaskState.CREATED: frozenset({TaskState.RESTORING, TaskState.SUSPENDED}),
    TaskState.RESTORING: frozenset({TaskState.RUNNING, TaskState.SUSPENDED}),
    TaskState.RUNNING: frozenset({TaskState.SUSPENDED}),
    TaskState.SUSPENDED: frozenset({TaskState.RESTORING, TaskState.CLOSED}),
    TaskState.CLOSED: frozenset({TaskState.CREATED}),
}


class IllegalTaskStateTransition(IllegalStateException):
    """A task was moved between two states its lifecycle does not connect."""


@dataclass
class TaskLifecycle:
    """The state of one task; only the task's owning stream thread moves it (queries read it)."""

    task_id: TaskId
    state: TaskState = TaskState.CREATED

    def transition_to(self, new: TaskState) -> None:
        if new not in _ALLOWED[self.state]:
            raise IllegalTaskStateTransition(f"task {self.task_id}: {self.state.name} -> {new.name} is not allowed")
        self.state = new

    def initialized(self, restoring: bool) -> None:
        """Created -> restoring, and on to running when there is nothing to restore."""
        self.transition_to(TaskState.RESTORING)
        if not restoring:
            self.transition_to(TaskState.RUNNING)

    def close(self) -> None:
        """Suspend (unless suspended already), then close."""
        if self.state is not TaskState.SUSPENDED:
            self.transition_to(TaskState.SUSPENDED)
        self.transition_to(TaskState.CLOSED)

    @property
    def restoring(self) -> bool:
        return self.state is TaskState.RESTORING

    @property
    def running(self) -> bool:
        return self.state is TaskState.RUNNING
