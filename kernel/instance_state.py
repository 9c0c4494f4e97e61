"""KafkaStreams.State: the states of an instance and Kafka Streams' allowed transitions. A value
type of the shared core: the runtime moves through it, the cluster view and the router read it
(an instance publishes its state: its name in the instances topic's JSON and the REST API, its proto
mirror on gRPC, kernel/wire_enums.py)."""

from __future__ import annotations

import enum


class State(enum.StrEnum):
    """A str whose value is its name, so JSON carries the name with no mapping of its own."""

    CREATED = "CREATED"
    REBALANCING = "REBALANCING"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    NOT_RUNNING = "NOT_RUNNING"
    PENDING_ERROR = "PENDING_ERROR"
    ERROR = "ERROR"

    def is_running_or_rebalancing(self) -> bool:
        return self in RUNNING_OR_REBALANCING

    def valid_transition(self, new: State) -> bool:
        return new in _VALID[self]

    @staticmethod
    def named(name: str) -> State:
        """The state called ``name`` on the wire; a name this version does not know (a newer
        instance's) is NOT_RUNNING: such an instance is not routed to."""
        return State.__members__.get(name, State.NOT_RUNNING)


#: the states in which an instance answers queries and is routed to (``state in
#: RUNNING_OR_REBALANCING``: what the query path tests, a set lookup rather than a method call)
RUNNING_OR_REBALANCING: frozenset[State] = frozenset({State.RUNNING, State.REBALANCING})

_VALID: dict[State, frozenset[State]] = {
    State.CREATED: frozenset({State.REBALANCING, State.PENDING_SHUTDOWN, State.PENDING_ERROR}),
    State.REBALANCING: frozenset({State.RUNNING, State.PENDING_SHUTDOWN, State.PENDING_ERROR}),
    State.RUNNING: frozenset({State.REBALANCING, State.RUNNING, State.PENDING_SHUTDOWN, State.PENDING_ERROR}),
    State.PENDING_SHUTDOWN: frozenset({State.NOT_RUNNING}),
    State.NOT_RUNNING: frozenset(),
    State.PENDING_ERROR: frozenset({State.ERROR}),
    State.ERROR: frozenset(),
}
