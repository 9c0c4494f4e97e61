"""KafkaStreams.State: the states of an instance and Kafka Streams' allowed transitions. A value
type of the shared core: the runtime moves through it, the cluster view and the router read it
(an instance publishes its state; the wire carries the name)."""

from __future__ import annotations

import enum


class State(enum.Enum):
    CREATED = 0
    REBALANCING = 1
    RUNNING = 2
    PENDING_SHUTDOWN = 3
    NOT_RUNNING = 4
    PENDING_ERROR = 5
    ERROR = 6

    def is_running_or_rebalancing(self) -> bool:
        return self in (State.RUNNING, State.REBALANCING)

    def valid_transition(self, new: State) -> bool:
        return new in _VALID[self]

    @staticmethod
    def named(name: str) -> State:
        """The state called ``name`` on the wire; a name this version does not know (a newer
        instance's) is NOT_RUNNING: such an instance is not routed to."""
        return State.__members__.get(name, State.NOT_RUNNING)


_VALID: dict[State, frozenset[State]] = {
    State.CREATED: frozenset({State.REBALANCING, State.PENDING_SHUTDOWN, State.PENDING_ERROR}),
    State.REBALANCING: frozenset({State.RUNNING, State.PENDING_SHUTDOWN, State.PENDING_ERROR}),
    State.RUNNING: frozenset({State.REBALANCING, State.RUNNING, State.PENDING_SHUTDOWN, State.PENDING_ERROR}),
    State.PENDING_SHUTDOWN: frozenset({State.NOT_RUNNING}),
    State.NOT_RUNNING: frozenset(),
    State.PENDING_ERROR: frozenset({State.ERROR}),
    State.ERROR: frozenset(),
}
