"""KafkaStreams.State (kernel/instance_state.py, with its allowed transitions), the transitions
Kafka Streams ignores, and the state machine that holds it."""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable

from instance.errors import IllegalStateException
from kernel.instance_state import State

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
        #: written under the lock by :meth:`set`, read without it (a plain attribute: every query
        #: reads it, and an attribute read is atomic)
        self.state = State.CREATED
        self._lock = threading.Condition()
        self.listener: StateListener | None = None

    def set(self, new: State) -> bool:
        """Move to ``new``; returns False when Kafka Streams ignores the transition."""
        with self._lock:
            old = self.state
            if _ignored(old, new):
                return False
            if not old.valid_transition(new):
                raise IllegalStateException(f"invalid state transition from {old.name} to {new.name}")
            self.state = new
            self._lock.notify_all()
        if self.listener is not None and old is not new:
            self.listener(new, old)
        return True

    def wait_for(self, states: builtins.set[State], timeout: float) -> bool:
        with self._lock:
            return self._lock.wait_for(lambda: self.state in states, timeout)
