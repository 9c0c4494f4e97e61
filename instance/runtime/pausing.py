"""Why the main consumer's partitions are paused: one object that knows, as Quix Streams'
``PausingManager``.

A stream thread stops fetching a partition for several reasons at once, each with its own end:
its task restores its stores first (until restored), an announced membership change (until it has
happened: runtime/membership.py), and a caught-up idle pause (kernel/idle_fetch.py: the dev
broker answers idle fetches in a tight loop). A partition is fetched again only when no reason is
left: resuming for one reason never undoes another.

Two kinds of reason: RESTORING is per partition; MEMBERSHIP and IDLE cover the whole assignment,
partitions assigned while they hold included. The membership intents paused for (and since when)
are kept here too: the reason ends when the last one has happened.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from typing import Protocol

from confluent_kafka import TopicPartition

TopicPart = tuple[str, int]


class PauseReason(enum.Enum):
    #: the partition's task restores its stores before it processes
    RESTORING = "restoring"
    #: committed and paused for an announced membership change (the whole assignment)
    MEMBERSHIP = "membership"
    #: caught up: a short pause instead of empty fetches (the whole assignment)
    IDLE = "idle"


#: the reasons that cover every assigned partition
WHOLE_ASSIGNMENT = frozenset({PauseReason.MEMBERSHIP, PauseReason.IDLE})


class PausableConsumer(Protocol):
    """What pausing needs of the confluent-kafka Consumer."""

    def assignment(self) -> list[TopicPartition]: ...

    def pause(self, partitions: list[TopicPartition], /) -> None: ...

    def resume(self, partitions: list[TopicPartition], /) -> None: ...


class Pausing:
    """The paused partitions of one main consumer and why.

    ``consumer``: the thread's current consumer (replaced when it rejoins; None before the first).
    ``inputs``: the assigned input partitions the thread has tasks for, the only ones ever resumed.
    """

    def __init__(self, consumer: Callable[[], PausableConsumer | None],
                 inputs: Callable[[], Iterable[TopicPart]]) -> None:
        self._consumer = consumer
        self._inputs = inputs
        self._whole: set[PauseReason] = set()
        self._restoring: set[TopicPart] = set()
        #: membership intents paused for -> when (monotonic)
        self._intents: dict[str, float] = {}
        self._since = 0.0

    # -- what is paused and why --------------------------------------------------------------------
    def reasons(self, tp: TopicPart) -> frozenset[PauseReason]:
        """Why ``tp`` is paused (empty: it is fetched)."""
        return frozenset(self._whole | ({PauseReason.RESTORING} if tp in self._restoring else set()))

    def fetchable(self) -> list[TopicPartition]:
        """The input partitions no reason holds: what a resume resumes."""
        if self._whole:
            return []
        return [TopicPartition(t, p) for t, p in self._inputs() if (t, p) not in self._restoring]

    @property
    def for_membership(self) -> bool:
        """Paused for a membership change (processing waits too: runtime/stream_thread.py)."""
        return PauseReason.MEMBERSHIP in self._whole

    @property
    def intents(self) -> dict[str, float]:
        """The membership intents paused for, and when each was."""
        return dict(self._intents)

    @property
    def since(self) -> float:
        """When the last membership pause began (monotonic)."""
        return self._since

    # -- assignment --------------------------------------------------------------------------------
    def assigned(self, partitions: Iterable[TopicPartition], restoring: Iterable[TopicPartition],
                 incremental: bool) -> None:
        """``partitions`` were assigned (all of them under the classic protocol, else an increment),
        ``restoring`` those whose tasks restore first: pause them (all, if the whole assignment is
        paused), then resume every input partition no reason holds."""
        parts = list(partitions)
        held = list(restoring)
        if not incremental:
            self._restoring.clear()
        for tp in parts:
            self._restoring.discard((tp.topic, tp.partition))
        self._restoring.update((tp.topic, tp.partition) for tp in held)
        consumer = self._consumer()
        if consumer is None:
            return
        paused = parts if self._whole else held
        if paused:
            consumer.pause(paused)
        self._resume(consumer)

    def revoked(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """``partitions`` (None: all) are no longer assigned: forget their reasons."""
        if partitions is None:
            self._restoring.clear()
        else:
            self._restoring.difference_update((tp.topic, tp.partition) for tp in partitions)

    def restored(self, partitions: Iterable[TopicPart]) -> None:
        """Their tasks are restored: resume them unless another reason holds them."""
        parts = list(partitions)
        self._restoring.difference_update(parts)
        consumer = self._consumer()
        if parts and not self._whole and consumer is not None:
            consumer.resume([TopicPartition(t, p) for t, p in parts])

    # -- membership --------------------------------------------------------------------------------
    def pause_for_membership(self, intents: Iterable[str], now: float) -> None:
        """Stop fetching the whole assignment for these announced membership changes."""
        self._intents.update(dict.fromkeys(intents, now))
        self._since = now
        self._pause_whole(PauseReason.MEMBERSHIP)

    def keep_intents(self, pending: Callable[[str, float], bool]) -> None:
        """Keep only the intents still ``pending`` (intent, when): the reason ends with the last
        one. Nothing is resumed here: the assignment that follows resumes what is fetchable."""
        self._intents = {i: t for i, t in self._intents.items() if pending(i, t)}
        if not self._intents:
            self._whole.discard(PauseReason.MEMBERSHIP)

    def end_membership_pause(self) -> None:
        """Every change paused for has happened: resume what no other reason holds."""
        self._intents.clear()
        self._release_whole(PauseReason.MEMBERSHIP)

    # -- idle ----------------------------------------------------------------------------------------
    def pause_idle(self) -> None:
        self._pause_whole(PauseReason.IDLE)

    def resume_idle(self) -> None:
        self._release_whole(PauseReason.IDLE)

    # -----------------------------------------------------------------------------------------------
    def _pause_whole(self, reason: PauseReason) -> None:
        self._whole.add(reason)
        consumer = self._consumer()
        if consumer is not None:
            consumer.pause(consumer.assignment())

    def _release_whole(self, reason: PauseReason) -> None:
        self._whole.discard(reason)
        consumer = self._consumer()
        if consumer is not None:
            self._resume(consumer)

    def _resume(self, consumer: PausableConsumer) -> None:
        parts = self.fetchable()
        if parts:
            consumer.resume(parts)
