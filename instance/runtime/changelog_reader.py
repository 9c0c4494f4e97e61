"""StoreChangelogReader: one group-less consumer per stream thread reading every changelog partition
its tasks need (Kafka Streams' class of that name).

A partition is registered in one of two modes:

- *restoring* (an active task): read from the checkpoint (or the beginning) to the end offset taken
  at registration; when every partition of the task is done the task may run. Under at-least-once
  records written from input the group's commits do not cover are left out
  (instance/state/source_offsets.py).
- *standby*: follow for ever. Under at-least-once records are applied in order only as far as the
  committed input offsets cover them; the rest is held back (the partition paused at the first
  such record) and released when a commit covers it, re-reading the committed offsets every half
  second. So a standby never reflects input that will be processed again.

Restoring has priority: standby partitions stay paused while any partition restores. Caught up, the
standby partitions pause for ``idle_s`` (kernel/idle_fetch.py: the dev broker answers idle fetches
in a tight loop) and, resumed, stay resumed for ``window_s`` so a fetch has time to come back. The
stream thread calls :meth:`restore` and :meth:`update_standbys` between polls, so neither blocks
the group heartbeat.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from instance.runtime.holds import Hold, held
from instance.runtime.metrics import TaskMetrics
from instance.runtime.restore import StateRestoreListener
from instance.runtime.state_manager import ProcessorStateManager
from instance.runtime.task_timeout import retrying
from instance.state.source_offsets import covered
from kernel.idle_fetch import FOLLOWER_PAUSE_S, IdleFetch, PauseAssignment
from kernel.task_id import TaskId

TopicPart = tuple[str, int]
#: the group's committed offsets of (input topic, partition) pairs (0 where none)
CommittedLookup = Callable[[list[TopicPart]], dict[TopicPart, int]]


class ChangelogOwner(Protocol):
    """A task whose state the reader brings up to date."""

    @property
    def id(self) -> TaskId: ...

    @property
    def state(self) -> ProcessorStateManager: ...

    @property
    def sources(self) -> Collection[str]: ...


@dataclass(eq=False)
class _Changelog:
    owner: ChangelogOwner
    tp: TopicPart
    standby: bool
    end: int       # restoring: the end offset at registration (exclusive); standby: the last one seen
    position: int  # the next offset to read
    marks: Mapping[str, int] | None = None  # restoring, at-least-once: the task's committed input offsets
    restored: int = 0


def _monotonic() -> float:
    """The clock of the idle pause (looked up at each call: tests replace ``time``)."""
    return time.monotonic()


def _metrics(owner: ChangelogOwner) -> TaskMetrics | None:
    """The owner's task metrics (restore / update figures), if it has any (global stores do not)."""
    return getattr(owner, "metrics", None)


class StoreChangelogReader:
    def __init__(self, consumer_conf: dict[str, Any], listener: StateRestoreListener | None = None,
                 committed: CommittedLookup | None = None, idle_s: float = FOLLOWER_PAUSE_S, window_s: float = 0.1,
                 consumer: Any = None, task_timeout_ms: int = 300_000) -> None:
        """``committed``: at-least-once, the group's committed offsets (standbys hold back what they
        do not cover); None under exactly-once. ``consumer``: for tests, instead of a new one.
        ``task_timeout_ms``: how long an end-offset read waits for a broker that does not answer."""
        self._task_timeout_ms = task_timeout_ms
        conf = dict(consumer_conf)
        conf.setdefault("enable.auto.commit", False)
        conf.setdefault("enable.partition.eof", False)
        self._consumer = consumer if consumer is not None else Consumer(conf)
        self.listener = listener
        self._committed = committed
        self._idle = IdleFetch(PauseAssignment(self._consumer, self._unheld), idle_s, window_s, clock=_monotonic)
        self._parts: dict[TopicPart, _Changelog] = {}
        self._restoring: set[TopicPart] = set()
        #: standby: committed offset per (input topic, partition), refreshed while records are held
        self._marks: dict[TopicPart, int] = {}
        #: standby: changelog partition -> offset of the first record no commit covers yet (paused there)
        self._held: dict[TopicPart, int] = {}
        self._next_marks = 0.0
        self._closed = False

    # -- registration ---------------------------------------------------------------------------------
    def end_offsets(self, topic: str, partition: int, timeout: float = 10.0) -> tuple[int, int]:
        """(low, high) watermarks, waiting out a leader election or a broker restart (task.timeout.ms)."""
        tp = TopicPartition(topic, partition)

        def read() -> tuple[int, int]:
            try:
                return self._consumer.get_watermark_offsets(tp, timeout=timeout)  # type: ignore[no-any-return]
            except KafkaException:
                # the leader may have moved (a broker died): librdkafka asks the cached one until
                # its metadata is refreshed, so refresh it before the next try
                with contextlib.suppress(KafkaException):
                    self._consumer.list_topics(topic, timeout=5)
                raise

        low, high = retrying(read,
                             f"reading the end offset of {topic}[{partition}]", self._task_timeout_ms,
                             "changelog reader")
        return int(low), int(high)

    def register_restoring(self, owner: ChangelogOwner, marks: Mapping[str, int] | None = None) -> bool:
        """Restore ``owner``'s stores from its checkpoint (or the beginning) to the current end
        offsets; False if there is nothing to read. ``marks``: the task's committed input offsets
        (at-least-once)."""
        state = owner.state
        started = False
        for tp in state.changelog_partitions:
            low, high = self.end_offsets(*tp)
            start = state.checkpointed.get(tp)
            begin = low if start is None else max(start, low)
            if begin >= high:
                state.changelog_offsets[tp] = high  # the position counts on from here
                continue
            self._parts[tp] = _Changelog(owner, tp, False, high, begin, marks)
            self._restoring.add(tp)
            metrics = _metrics(owner)
            if metrics is not None:
                metrics.restore_started(tp, high - begin)
            started = True
            if self.listener:
                self.listener.on_restore_start(tp[0], tp[1], state.store_of(tp).name, begin, high)
        if started:
            self._reassign()
        return started

    def register_standby(self, owner: ChangelogOwner) -> None:
        """Follow ``owner``'s changelogs from the offsets its stores reflect."""
        state = owner.state
        for tp in state.changelog_partitions:
            _, high = self.end_offsets(*tp)
            self._parts[tp] = _Changelog(owner, tp, True, high, state.changelog_offsets[tp])
        self._reassign()

    def unregister(self, owner: ChangelogOwner) -> None:
        gone = [tp for tp, c in self._parts.items() if c.owner is owner]
        for tp in gone:
            del self._parts[tp]
            self._restoring.discard(tp)
        if gone:
            self._reassign()

    def _reassign(self) -> None:
        """Assign every registered partition at its position; standby partitions paused while
        anything restores. Held partitions are read again (and held again unless covered by now).
        The others are resumed explicitly: librdkafka keeps a partition the application paused
        paused across assign() calls (a standby paused when caught up, then assigned again to
        restore as an active task, would never be fetched)."""
        if self._closed:
            return
        self._held.clear()
        consumer = self._consumer
        consumer.assign([TopicPartition(t, p, c.position if c.position > 0 else OFFSET_BEGINNING)
                         for (t, p), c in self._parts.items()])
        self._idle.reset()
        wait = bool(self._restoring)
        fetch = [TopicPartition(*tp) for tp, c in self._parts.items() if not (wait and c.standby)]
        paused = [TopicPartition(*tp) for tp, c in self._parts.items() if wait and c.standby]
        if fetch:
            consumer.resume(fetch)
        if paused:
            consumer.pause(paused)

    # -- what queries see -------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        """A changelog partition is restoring (the thread polls without blocking meanwhile)."""
        return bool(self._restoring)

    def is_restoring(self, owner: ChangelogOwner) -> bool:
        return any(self._parts[tp].owner is owner for tp in self._restoring)

    def progress(self, owner: ChangelogOwner) -> dict[TopicPart, tuple[int, int]]:
        """(position, end offset) of each changelog partition of ``owner`` being restored or
        followed. Called from query and metadata threads: reads a snapshot (one C-level copy)."""
        return {c.tp: (c.position, c.end) for c in tuple(self._parts.values()) if c.owner is owner}

    # -- restoring --------------------------------------------------------------------------------
    def restore(self, max_records: int = 10_000, timeout: float = 0.05) -> list[ChangelogOwner]:
        """Apply one batch to the restoring stores; returns the owners now fully restored."""
        if not self._restoring:
            return []
        if held(Hold.RESTORE):
            time.sleep(timeout)  # as long as an empty fetch would have taken: no busy loop
            return []
        msgs = self._consumer.consume(num_messages=max_records, timeout=timeout)
        self._apply(msgs)
        if not msgs:
            # transaction markers leave gaps: ask the consumer where it really is
            for tp in self._restoring:
                c = self._parts[tp]
                pos = self._consumer.position([TopicPartition(*tp)])[0].offset
                if pos > c.position:
                    c.position = pos
                    c.owner.state.advance(tp, pos)
        done = [tp for tp in self._restoring if self._parts[tp].position >= self._parts[tp].end]
        if not done:
            return []
        owners: list[ChangelogOwner] = []
        for tp in done:
            c = self._parts.pop(tp)
            self._restoring.discard(tp)
            metrics = _metrics(c.owner)
            if metrics is not None:
                metrics.restore_remaining[tp] = 0
            state = c.owner.state
            state.restored_to_end(tp, self.end_offsets(*tp)[1])
            if self.listener:
                self.listener.on_restore_end(tp[0], tp[1], state.store_of(tp).name, c.restored)
            if c.owner not in owners:
                owners.append(c.owner)
        self._reassign()
        return [o for o in owners if not self.is_restoring(o)]

    def _apply(self, msgs: list[Any]) -> int:
        """Apply consumed records to their stores, one batch per partition; returns how many."""
        runs: dict[TopicPart, list[Any]] = {}
        for m in msgs:
            if m.error() is None:
                tp = (m.topic(), m.partition())
                run = runs.get(tp)
                if run is None:
                    runs[tp] = [m]
                else:
                    run.append(m)
        n = 0
        for tp, run in runs.items():
            c = self._parts.get(tp)
            if c is not None:
                n += self._apply_standby(c, run) if c.standby else self._apply_restoring(c, run)
        return n

    def _apply_restoring(self, c: _Changelog, run: list[Any]) -> int:
        marks = c.marks
        batch = run if marks is None else [m for m in run if covered(m.headers(), marks)]
        last = run[-1].offset()
        c.position = last + 1
        c.restored += len(batch)
        state = c.owner.state
        state.apply(c.tp, batch, c.position)
        metrics = _metrics(c.owner)
        if metrics is not None:
            metrics.restored(c.tp, len(batch), c.end - c.position)
        if self.listener:
            self.listener.on_batch_restored(c.tp[0], c.tp[1], state.store_of(c.tp).name, last, len(batch))
        return len(batch)

    # -- standby ----------------------------------------------------------------------------------
    def update_standbys(self, max_records: int = 10_000) -> int:
        """Apply what the standby partitions have; nothing while a restore runs."""
        if self._restoring or not self._parts:
            return 0
        if held(Hold.STANDBY):
            self._follow_ends()  # the lag a held standby reports grows with the active's writes
            return 0
        if not self._idle.may_fetch():
            return 0
        consumer = self._consumer
        now = time.monotonic()
        if self._held:
            self._release_held(now)
        n = self._apply(consumer.consume(num_messages=max_records, timeout=0))
        self._follow_ends()
        self._idle.fetched(n)
        if not n and self._idle.quiet:
            # caught up; transaction markers leave gaps, so take the consumer's own position
            for tp_pos in consumer.position(consumer.assignment()):
                tp = (tp_pos.topic, tp_pos.partition)
                c = self._parts.get(tp)
                if c is not None and tp not in self._held and tp_pos.offset > c.position:
                    c.position = tp_pos.offset
                    c.owner.state.advance(tp, tp_pos.offset)
            self._idle.pause()
        return n

    def _follow_ends(self) -> None:
        """Each standby partition's end offset, as librdkafka's fetches last saw it."""
        consumer = self._consumer
        for tp, part in self._parts.items():
            _, high = consumer.get_watermark_offsets(TopicPartition(*tp), cached=True)
            if high is not None and high >= 0:
                part.end = int(high)

    def _apply_standby(self, c: _Changelog, run: list[Any]) -> int:
        """Apply records in changelog order up to the first one the committed input offsets do
        not cover; hold the partition there until a commit covers it."""
        tp = c.tp
        if tp in self._held:
            return 0
        held_at = -1
        if self._committed is not None:
            marks = self._task_marks(c.owner)
            for i, m in enumerate(run):
                if not covered(m.headers(), marks):
                    held_at = m.offset()
                    run = run[:i]
                    break
        state = c.owner.state
        if run:
            c.position = run[-1].offset() + 1
            state.apply(tp, run, c.position)
            metrics = _metrics(c.owner)
            if metrics is not None:
                metrics.updated(len(run))
        if held_at >= 0:
            self._held[tp] = c.position = held_at
            state.advance(tp, held_at)
            self._consumer.pause([TopicPartition(*tp)])
        return len(run)

    def _task_marks(self, owner: ChangelogOwner) -> dict[str, int]:
        partition = owner.id.partition
        return {t: self._marks.get((t, partition), 0) for t in owner.sources}

    def _release_held(self, now: float) -> None:
        """Every half second, with fresh committed offsets, go on from where a partition is held."""
        if now < self._next_marks or self._committed is None:
            return
        self._next_marks = now + 0.5
        wanted = sorted({(t, c.owner.id.partition) for tp in self._held if (c := self._parts.get(tp))
                         for t in c.owner.sources})
        self._marks.update(self._committed(wanted))
        for tp, offset in list(self._held.items()):
            del self._held[tp]
            self._consumer.seek(TopicPartition(tp[0], tp[1], offset))
            self._consumer.resume([TopicPartition(*tp)])
        self._idle.reset()

    def _unheld(self) -> list[TopicPartition]:
        """Assigned partitions the idle pause may resume (held ones wait for a commit)."""
        return [tp for tp in self._consumer.assignment() if (tp.topic, tp.partition) not in self._held]

    def close(self) -> None:
        """Close the consumer; owners unregistered afterwards are only forgotten."""
        if not self._closed:
            self._closed = True
            self._consumer.close()
