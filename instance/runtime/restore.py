"""Restore listeners: Kafka Streams' StateRestoreListener, and the one ``iqmesh run`` prints with.

The restore itself is the changelog reader's (runtime/changelog_reader.py). The text of
:class:`LoggingRestoreListener`'s lines is parsed by tests and the load tests: keep it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol


class StateRestoreListener(Protocol):
    """Kafka Streams' StateRestoreListener."""

    def on_restore_start(self, topic: str, partition: int, store: str, start: int, end: int) -> None: ...

    def on_batch_restored(self, topic: str, partition: int, store: str, batch_end: int, n: int) -> None: ...

    def on_restore_end(self, topic: str, partition: int, store: str, total: int) -> None: ...


class LoggingRestoreListener:
    """Prints restore progress (start, at most one progress line a second, end with records/s)."""

    def __init__(self, prefix: str, out: Callable[[str], None] = print) -> None:
        self.prefix = prefix
        self.out = out
        self._started: dict[tuple[str, int], float] = {}
        self._counts: dict[tuple[str, int], int] = {}
        self._last_print = 0.0

    def on_restore_start(self, topic: str, partition: int, store: str, start: int, end: int) -> None:
        self._started[(topic, partition)] = time.monotonic()
        self._counts[(topic, partition)] = 0
        self.out(f"{self.prefix} restore-start store={store} changelog={topic}[{partition}] "
                 f"from={start} to={end}")

    def on_batch_restored(self, topic: str, partition: int, store: str, batch_end: int, n: int) -> None:
        tp = (topic, partition)
        self._counts[tp] = self._counts.get(tp, 0) + n
        now = time.monotonic()
        if now - self._last_print >= 1.0:
            self._last_print = now
            el = max(now - self._started.get(tp, now), 1e-9)
            self.out(f"{self.prefix} restore-progress store={store} changelog={topic}[{partition}] "
                     f"restored={self._counts[tp]} rate={self._counts[tp] / el:.0f}/s")

    def on_restore_end(self, topic: str, partition: int, store: str, total: int) -> None:
        el = max(time.monotonic() - self._started.pop((topic, partition), time.monotonic()), 1e-9)
        self.out(f"{self.prefix} restore-end store={store} changelog={topic}[{partition}] "
                 f"restored={total} seconds={el:.3f} rate={total / el:.0f}/s")
