"""KafkaStreams.State with Kafka Streams' allowed and ignored transitions."""

from __future__ import annotations

import builtins
import enum
import threading
from collections.abc import Callable

from instance.errors import IllegalStateException


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


_VALID: dict[State, frozenset[State]] = {
    State.CREATED: frozenset({State.REBALANCING, State.PENDING_SHUTDOWN, State.PENDING_ERROR}),
    State.REBALANCING: frozenset({State.RUNNING, State.PENDING_SHUTDOWN, State.PENDING_ERROR}),
    State.RUNNING: frozenset({State.REBALANCING, State.RUNNING, State.PENDING_SHUTDOWN, State.PENDING_ERROR}),
    State.PENDING_SHUTDOWN: frozenset({State.NOT_RUNNING}),
    State.NOT_RUNNING: frozenset(),
    State.PENDING_ERROR: frozenset({State.ERROR}),
    State.ERROR: frozenset(),
}

StateListener = Callable[[State, State], None]


def _ignored(old: State, new: State) -> bool:
    """Transitions Kafka Streams' ``KafkaStreams.setState`` refuses silently (returns false)."""
    return ((old is State.PENDING_SHUTDOWN and new is not State.NOT_RUNNING)
            or (old is State.NOT_RUNNING and new in (State.PENDING_SHUTDOWN, State.NOT_RUNNING))
            or (old is State.REBALANCING and new is State.REBALANCING)
            or (old is State.ERROR and new in (State.PENDING_ERROR, State.ERROR))
            or (old is State.PENDING_ERROR and new is not State.ERROR))


class StateMachine:
    """Thread-safe holder of the client state; notifies the listener outside the lock."""

    def __init__(self) -> None:
        self._state = State.CREATED
        self._lock = threading.Condition()
        self.listener: StateListener | None = None

    @property
    def state(self) -> State:
        return self._state

    def set(self, new: State) -> bool:
        """Move to ``new``; returns False when Kafka Streams ignores the transition."""
        with self._lock:
            old = self._state
            if _ignored(old, new):
                return False
            if not old.valid_transition(new):
                raise IllegalStateException(f"invalid state transition from {old.name} to {new.name}")
            self._state = new
            self._lock.notify_all()
        if self.listener is not None and old is not new:
            self.listener(new, old)
        return True

    def wait_for(self, states: builtins.set[State], timeout: float) -> bool:
        with self._lock:
            return self._lock.wait_for(lambda: self._state in states, timeout)
