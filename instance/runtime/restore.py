"""Changelog restoration with its own consumer (no group), one batch per call.

A task whose stores are not yet rebuilt stays RESTORING (its input partitions paused on the main
consumer) until every changelog partition of it has been read to the end offset taken when
restoration started. The stream thread calls :meth:`ChangelogReader.step` between polls, so
restoring never blocks the group heartbeat.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from instance.state.kv_store import KeyValueStore
from instance.state.source_offsets import covered

log = logging.getLogger(__name__)


class StateRestoreListener(Protocol):
    """Kafka Streams' StateRestoreListener."""

    def on_restore_start(self, topic: str, partition: int, store: str, start: int, end: int) -> None: ...

    def on_batch_restored(self, topic: str, partition: int, store: str, batch_end: int, n: int) -> None: ...

    def on_restore_end(self, topic: str, partition: int, store: str, total: int) -> None: ...


TopicPart = tuple[str, int]


def changelog_batches(msgs: list[Any], committed: Mapping[TopicPart, Mapping[str, int]] | None = None
                      ) -> tuple[dict[TopicPart, list[tuple[bytes, bytes | None]]], dict[TopicPart, int]]:
    """Changelog records of one consume call, per partition as (key, value) pairs ready for
    ``KeyValueStore.restore_batch``, and the last offset seen per partition. With ``committed``
    (changelog partition -> committed input offsets of its task), records written from input
    the commits do not cover are left out (instance/state/source_offsets.py)."""
    batches: dict[TopicPart, list[tuple[bytes, bytes | None]]] = {}
    last: dict[TopicPart, int] = {}
    for m in msgs:
        if m.error():
            continue
        topic, partition, offset = m.topic(), m.partition(), m.offset()
        assert topic is not None and partition is not None and offset is not None  # set unless error
        tp = (topic, partition)
        last[tp] = offset
        batch = batches.get(tp)
        if batch is None:
            batch = batches[tp] = []
        if committed is not None:
            marks = committed.get(tp)
            if marks is not None and not covered(m.headers(), marks):
                continue
        batch.append((cast(bytes, m.key()), m.value()))
    return batches, last


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


@dataclass
class _Restoring:
    owner: Any            # the task (anything hashable with an ``id``)
    store: KeyValueStore
    end: int              # end offset when restoration started (exclusive)
    position: int         # next offset to apply
    committed: Mapping[str, int] | None  # skip records these input offsets do not cover
    restored: int = 0
    started: float = field(default_factory=time.monotonic)


class ChangelogReader:
    def __init__(self, consumer_conf: dict[str, Any], listener: StateRestoreListener | None = None) -> None:
        conf = dict(consumer_conf)
        conf.setdefault("enable.auto.commit", False)
        conf.setdefault("enable.partition.eof", False)
        self._consumer = Consumer(conf)
        self._parts: dict[tuple[str, int], _Restoring] = {}
        self._committed: dict[TopicPart, Mapping[str, int]] = {}
        self.listener = listener
        self.total_restored = 0

    def end_offsets(self, topic: str, partition: int, timeout: float = 10.0) -> tuple[int, int]:
        low, high = self._consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
        return int(low), int(high)

    def register(self, owner: Any, store: KeyValueStore, topic: str, partition: int,
                 start: int | None, committed: Mapping[str, int] | None = None) -> int:
        """Start restoring ``store`` from ``start`` (None: the beginning), unless there is
        nothing to read; returns the changelog's end offset. ``committed``: the task's committed
        input offsets (at-least-once, see instance/state/source_offsets.py)."""
        low, high = self.end_offsets(topic, partition)
        begin = low if start is None else max(start, low)
        if begin >= high:
            return high
        self._parts[(topic, partition)] = _Restoring(owner, store, high, begin, committed)
        self._committed = {tp: r.committed for tp, r in self._parts.items() if r.committed is not None}
        if self.listener:
            self.listener.on_restore_start(topic, partition, store.name, begin, high)
        self._reassign()
        return high

    def _reassign(self) -> None:
        tps = [TopicPartition(t, p, r.position if r.position > 0 else OFFSET_BEGINNING)
               for (t, p), r in self._parts.items()]
        self._consumer.assign(tps)

    def remove_owner(self, owner: Any) -> None:
        gone = [tp for tp, r in self._parts.items() if r.owner is owner]
        for tp in gone:
            del self._parts[tp]
        if gone:
            self._reassign()

    def is_restoring(self, owner: Any) -> bool:
        return any(r.owner is owner for r in self._parts.values())

    def progress(self, owner: Any) -> dict[tuple[str, int], tuple[int, int]]:
        """(position, end offset) of each changelog partition ``owner`` is restoring."""
        return {tp: (r.position, r.end) for tp, r in self._parts.items() if r.owner is owner}

    @property
    def active(self) -> bool:
        return bool(self._parts)

    def step(self, max_records: int = 10_000, timeout: float = 0.05,
             on_done: Callable[[Any], None] | None = None) -> int:
        """Apply one batch; call ``on_done(owner)`` for each owner whose changelogs are all read."""
        if not self._parts:
            return 0
        msgs = self._consumer.consume(num_messages=max_records, timeout=timeout)
        batches, last = changelog_batches(msgs, self._committed)
        n = 0
        for tp, batch in batches.items():
            r = self._parts.get(tp)
            if r is None:
                continue
            r.store.restore_batch(batch)
            r.restored += len(batch)
            r.position = last[tp] + 1
            n += len(batch)
            if self.listener:
                self.listener.on_batch_restored(tp[0], tp[1], r.store.name, last[tp], len(batch))
        if not msgs:
            # transaction markers leave gaps: ask the consumer where it really is
            for tp, r in self._parts.items():
                pos = self._consumer.position([TopicPartition(tp[0], tp[1])])[0].offset
                if pos > r.position:
                    r.position = pos
        self.total_restored += n
        done = [tp for tp, r in self._parts.items() if r.position >= r.end]
        if done:
            owners = set()
            for tp in done:
                r = self._parts.pop(tp)
                owners.add(r.owner)
                if self.listener:
                    self.listener.on_restore_end(tp[0], tp[1], r.store.name, r.restored)
            self._reassign()
            for owner in owners:
                if not self.is_restoring(owner) and on_done is not None:
                    on_done(owner)
        return n

    def close(self) -> None:
        self._consumer.close()
