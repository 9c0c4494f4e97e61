"""A task's lifecycle (Kafka Streams' Task.State): the allowed moves, the others refused; an active
task restores, then runs; a standby runs from the start; closing suspends first."""

from __future__ import annotations

from pathlib import Path

import pytest

from instance.runtime.changelog_reader import StoreChangelogReader
from instance.runtime.standby import StandbyTask
from instance.runtime.state_manager import ProcessorStateManager
from instance.runtime.task_state import IllegalTaskStateTransition, TaskLifecycle, TaskState
from instance.state.spec import StoreSpec
from kernel.serdes import StringSerde
from kernel.task_id import TaskId
from tests.unit.kafka_fakes import FakeConsumer

C, RS, RN, SU, CL = (TaskState.CREATED, TaskState.RESTORING, TaskState.RUNNING, TaskState.SUSPENDED,
                     TaskState.CLOSED)
ALLOWED = {(C, RS), (C, SU), (RS, RN), (RS, SU), (RN, SU), (SU, RS), (SU, CL), (CL, C)}


@pytest.mark.parametrize("before", list(TaskState))
@pytest.mark.parametrize("after", list(TaskState))
def test_only_the_moves_of_kafka_streams_task_state_are_allowed(before: TaskState, after: TaskState) -> None:
    lifecycle = TaskLifecycle(TaskId(0, 1), before)
    if (before, after) in ALLOWED:
        lifecycle.transition_to(after)
        assert lifecycle.state is after
    else:
        with pytest.raises(IllegalTaskStateTransition, match="0_1"):
            lifecycle.transition_to(after)
        assert lifecycle.state is before


def test_initialized_restores_only_when_there_is_something_to_restore() -> None:
    restoring, idle = TaskLifecycle(TaskId(0, 0)), TaskLifecycle(TaskId(0, 1))
    restoring.initialized(restoring=True)
    idle.initialized(restoring=False)
    assert restoring.restoring and idle.running


@pytest.mark.parametrize("state", [C, RS, RN, SU])
def test_close_suspends_first_from_any_open_state(state: TaskState) -> None:
    lifecycle = TaskLifecycle(TaskId(0, 0), state)
    lifecycle.close()
    assert lifecycle.state is CL
    with pytest.raises(IllegalTaskStateTransition):
        lifecycle.close()  # closed twice is a bug


def test_a_standby_runs_from_its_creation_and_is_closed_once(tmp_path: Path) -> None:
    spec = StoreSpec("counts", StringSerde(), StringSerde())
    reader = StoreChangelogReader({}, consumer=FakeConsumer())
    state = ProcessorStateManager(TaskId(0, 0), tmp_path, "app", active=False)
    standby = StandbyTask(TaskId(0, 0), [spec], state, ["input"], False, reader)
    assert standby.lifecycle.running
    standby.close()
    assert standby.lifecycle.state is CL
