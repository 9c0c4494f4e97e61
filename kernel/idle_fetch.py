"""The idle-fetch pause: the one way a caught-up consumer stops fetching for a while.

The dev broker (noida-db) ignores fetch long-polling: a caught-up consumer makes it answer empty
fetches in a tight loop, about a core of broker CPU each (ARCHITECTURE.md, measured). So every
follower of a topic that is mostly idle (the main consumer, the changelog reader, a watch, the
instances-topic follower) stops fetching once it is caught up, for ``pause_s``, then fetches again.
On a broker that long-polls the pause only adds up to ``pause_s`` of latency to a quiet consumer,
so it is not tied to the broker kind.

:class:`IdleFetch` is the policy (when to stop, for how long, when to start again); a
:class:`FetchSwitch` is how one consumer stops and starts fetching (pause/resume its partitions,
or unassign/assign them: see instance/server/watch.py for why a watch lets go of them).
Used two ways: blocking (:meth:`IdleFetch.hold`: stop, wait, start) by a loop that has nothing else
to do, or stepwise (:meth:`IdleFetch.may_fetch` / :meth:`IdleFetch.pause`) by one that must keep
turning meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from confluent_kafka import TopicPartition

#: how long a caught-up follower of changelogs or the instances topic stops fetching (its latency)
FOLLOWER_PAUSE_S = 0.2


class FetchSwitch(Protocol):
    """How one consumer stops and starts fetching."""

    def stop(self) -> None: ...

    def start(self) -> None: ...


class PausableConsumer(Protocol):
    """What :class:`PauseAssignment` needs of a confluent-kafka Consumer."""

    def assignment(self) -> list[TopicPartition]: ...

    def pause(self, partitions: list[TopicPartition], /) -> None: ...

    def resume(self, partitions: list[TopicPartition], /) -> None: ...


@dataclass(frozen=True)
class PauseAssignment:
    """Pauses every assigned partition; resumes those ``resumable`` names (default: every assigned
    one; a caller that holds some partitions back on purpose leaves them out)."""

    consumer: PausableConsumer
    resumable: Callable[[], list[TopicPartition]] | None = None

    def stop(self) -> None:
        self.consumer.pause(self.consumer.assignment())

    def start(self) -> None:
        parts = self.resumable() if self.resumable is not None else self.consumer.assignment()
        if parts:
            self.consumer.resume(parts)


@dataclass(frozen=True)
class CallbackSwitch:
    """A switch made of two callables (pause/resume of the partitions the caller chooses)."""

    on_stop: Callable[[], None]
    on_start: Callable[[], None]

    def stop(self) -> None:
        self.on_stop()

    def start(self) -> None:
        self.on_start()


@dataclass
class IdleFetch:
    """Stops ``switch`` for ``pause_s`` once its owner is caught up.

    ``window_s``: once fetching again, at least this long before the next pause (a fetch needs
    time to come back). ``moved``: a cheap check (an end offset) asked when a pause is over;
    while it says nothing moved the pause goes on, so the consumer sends no fetch at all (with
    ``pause_s`` 0 it is asked at every :meth:`may_fetch`: the owner's loop sets the pace).
    """

    switch: FetchSwitch
    pause_s: float
    window_s: float = 0.0
    moved: Callable[[], bool] | None = None
    clock: Callable[[], float] = time.monotonic
    _paused: bool = field(default=False, init=False)
    _paused_until: float = field(default=0.0, init=False)
    _fetching_until: float = field(default=0.0, init=False)

    @property
    def paused(self) -> bool:
        return self._paused

    def may_fetch(self) -> bool:
        """False while paused; a pause that is over ends here (the switch starts) unless ``moved``
        says there is still nothing to read."""
        if not self._paused:
            return True
        now = self.clock()
        if now < self._paused_until:
            return False
        if self.moved is not None and not self.moved():
            self._paused_until = now + self.pause_s
            return False
        self._paused = False
        self._fetching_until = now + self.window_s
        self.switch.start()
        return True

    def fetched(self, records: int) -> None:
        """Records arrived: the fetch window starts again."""
        if records:
            self._fetching_until = self.clock() + self.window_s

    @property
    def quiet(self) -> bool:
        """Nothing arrived for ``window_s``: the owner may check it is caught up and :meth:`pause`."""
        return self.clock() >= self._fetching_until

    def pause(self) -> None:
        """Caught up: stop fetching for ``pause_s``."""
        self.switch.stop()
        self._paused = True
        self._paused_until = self.clock() + self.pause_s

    def reset(self) -> None:
        """The owner started fetching by itself (a new assignment): no pause, a fresh window."""
        self._paused = False
        self._fetching_until = self.clock() + self.window_s

    def hold(self, wait: Callable[[float], object]) -> None:
        """Caught up, nothing else to do: stop, ``wait(pause_s)``, start again."""
        self.switch.stop()
        wait(self.pause_s)
        self.switch.start()
