"""Punctuation: callbacks a processor schedules on stream time or wall-clock time.

One :class:`PunctuationQueue` per task and time type, ordered by due time. Semantics of Kafka
Streams' ``PunctuationQueue``/``PunctuationSchedule``: a due schedule fires once with the current
time, then moves to the first multiple of its interval after that time, so a jump over several
intervals fires once, not once per interval. Both queues are only ever driven by the task's
stream thread, between records, so ``process`` and ``punctuate`` never run concurrently.
"""

from __future__ import annotations

import heapq
import itertools
import sys
from collections.abc import Callable

from instance.topology.punctuation import Punctuator

__all__ = ["NEVER", "PunctuationQueue", "PunctuationSchedule"]

#: ``due`` of an empty queue
NEVER = sys.maxsize


class PunctuationSchedule:
    """One scheduled punctuator; ``cancel()`` stops it (also from inside the punctuator)."""

    __slots__ = ("node", "time", "interval", "punctuator", "cancelled")

    def __init__(self, node: str, time: int, interval: int, punctuator: Punctuator) -> None:
        self.node = node
        self.time = time
        self.interval = interval
        self.punctuator = punctuator
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def advance(self, now: int) -> None:
        """Next due time after firing at ``now``: skip every interval ``now`` has passed."""
        nxt = self.time + self.interval
        if now >= nxt:
            nxt = self.time + ((now - self.time) // self.interval + 1) * self.interval
        self.time = nxt


class PunctuationQueue:
    """Schedules of one time type, earliest first. ``due`` is read on the hot path: the time of
    the earliest schedule (maybe a cancelled one, dropped when reached), ``NEVER`` if none."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, PunctuationSchedule]] = []
        self._seq = itertools.count()
        self.due = NEVER

    def __bool__(self) -> bool:
        return bool(self._heap)

    def schedule(self, sched: PunctuationSchedule) -> PunctuationSchedule:
        heapq.heappush(self._heap, (sched.time, next(self._seq), sched))
        self.due = self._heap[0][0]
        return sched

    def punctuate(self, now: int, run: Callable[[PunctuationSchedule, int], None]) -> bool:
        """Fire every schedule due at ``now`` (each once); True if any fired."""
        heap = self._heap
        fired = False
        try:
            while heap and heap[0][0] <= now:
                _, _, sched = heapq.heappop(heap)
                if sched.cancelled:
                    continue
                try:
                    run(sched, now)
                finally:
                    # rescheduled even if it raised: a handler that continues keeps it running
                    if not sched.cancelled:
                        sched.advance(now)
                        heapq.heappush(heap, (sched.time, next(self._seq), sched))
                fired = True
        finally:
            self.due = heap[0][0] if heap else NEVER
        return fired
