"""KafkaStreams.State transitions (instance/runtime/states.py)."""

from __future__ import annotations

import threading

import pytest

from instance.errors import IllegalStateException
from instance.runtime.states import State, StateMachine

C, RB, R, PS, NR, PE, E = (State.CREATED, State.REBALANCING, State.RUNNING, State.PENDING_SHUTDOWN,
                           State.NOT_RUNNING, State.PENDING_ERROR, State.ERROR)

# how to reach each state from CREATED through valid transitions
PATH = {C: [], RB: [RB], R: [RB, R], PS: [PS], NR: [PS, NR], PE: [PE], E: [PE, E]}

VALID = {
    C: {RB, PS, PE},
    RB: {R, PS, PE},
    R: {RB, R, PS, PE},
    PS: {NR},
    NR: set(),
    PE: {E},
    E: set(),
}


def machine_in(state: State) -> tuple[StateMachine, list[tuple[State, State]]]:
    m = StateMachine()
    for s in PATH[state]:
        assert m.set(s)
    assert m.state is state
    calls: list[tuple[State, State]] = []
    m.listener = lambda new, old: calls.append((new, old))
    return m, calls


def _ignored(old: State, new: State) -> bool:
    """Kafka Streams' KafkaStreams.setState: refused silently, not an exception."""
    return ((old is PS and new is not NR) or (old is NR and new in (PS, NR)) or (old is RB and new is RB)
            or (old is E and new in (PE, E)) or (old is PE and new is not E))


ALL_PAIRS = [(a, b) for a in State for b in State]


def test_new_machine_is_created() -> None:
    assert StateMachine().state is C


@pytest.mark.parametrize("old,new", [(a, b) for a in State for b in sorted(VALID[a], key=lambda s: s.value)],
                         ids=lambda s: s.name)
def test_valid_transitions(old: State, new: State) -> None:
    m, calls = machine_in(old)
    assert old.valid_transition(new)
    assert m.set(new) is True
    assert m.state is new
    if new is not old:
        assert calls == [(new, old)]


@pytest.mark.parametrize("old,new", [(a, b) for a, b in ALL_PAIRS if b not in VALID[a]],
                         ids=lambda s: s.name)
def test_valid_transition_table_rejects_everything_else(old: State, new: State) -> None:
    assert not old.valid_transition(new)


@pytest.mark.parametrize("old,new", [(a, b) for a, b in ALL_PAIRS if _ignored(a, b)], ids=lambda s: s.name)
def test_ignored_transitions(old: State, new: State) -> None:
    m, calls = machine_in(old)
    assert m.set(new) is False
    assert m.state is old
    assert calls == []


def test_ignored_set_includes_the_documented_cases() -> None:
    ignored = {(a, b) for a, b in ALL_PAIRS if _ignored(a, b)}
    assert (RB, RB) in ignored
    assert {(PS, s) for s in (C, RB, R, PS, PE, E)} <= ignored
    assert {(PE, s) for s in (C, RB, R, PS, PE, NR)} <= ignored
    assert {(NR, PS), (NR, NR), (E, PE), (E, E)} <= ignored
    assert (NR, R) not in ignored and (E, R) not in ignored


INVALID = [(a, b) for a, b in ALL_PAIRS if b not in VALID[a] and not _ignored(a, b)]


@pytest.mark.parametrize("old,new", INVALID, ids=lambda s: s.name)
def test_invalid_transitions_raise(old: State, new: State) -> None:
    m, calls = machine_in(old)
    with pytest.raises(IllegalStateException, match=f"{old.name} to {new.name}"):
        m.set(new)
    assert m.state is old
    assert calls == []


def test_invalid_transitions_cover_the_obvious_cases() -> None:
    assert (C, R) in INVALID
    assert (C, NR) in INVALID
    assert (C, E) in INVALID
    assert (RB, C) in INVALID
    assert (R, C) in INVALID
    assert (R, NR) in INVALID
    assert (NR, R) in INVALID
    assert (E, R) in INVALID


def test_listener_gets_new_then_old_along_a_lifecycle() -> None:
    m, calls = machine_in(C)
    for s in (RB, R, RB, R, PS, NR):
        assert m.set(s)
    assert m.set(PS) is False  # close() again: ignored
    assert calls == [(RB, C), (R, RB), (RB, R), (R, RB), (PS, R), (NR, PS)]


def test_listener_on_error_path() -> None:
    m, calls = machine_in(R)
    assert m.set(PE)
    assert m.set(PS) is False
    assert m.set(E)
    assert calls == [(PE, R), (E, PE)]


def test_listener_is_called_outside_the_lock() -> None:
    m = StateMachine()
    seen: list[State] = []

    def listener(new: State, old: State) -> None:
        # would deadlock if the lock were held (threading.Condition wraps an RLock, so check from
        # another thread)
        t = threading.Thread(target=lambda: seen.append(m.state) if m.wait_for({new}, 1.0) else None)
        t.start()
        t.join(30.0)  # at once, unless the lock is held (then only after the listener): a deadline only

    m.listener = listener
    m.set(RB)
    assert seen == [RB]


def test_is_running_or_rebalancing() -> None:
    assert {s for s in State if s.is_running_or_rebalancing()} == {R, RB}


def test_wait_for() -> None:
    m = StateMachine()
    assert m.wait_for({C}, 0.0)
    assert not m.wait_for({R}, 0.01)
    t = threading.Timer(0.02, lambda: (m.set(RB), m.set(R)))
    t.start()
    try:
        assert m.wait_for({R}, 5.0)
    finally:
        t.join()
    assert m.state is R
