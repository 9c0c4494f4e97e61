"""Standby replicas: stores kept warm by following their changelog, never processing input.

Placement is computed by every instance from the same view (sorted ring of live instance ids,
the ``num.standby.replicas`` instances after the active's owner), so no coordination is needed.
A standby checkpoints its position on each commit; when its instance becomes the active owner the
active task reads that checkpoint and restores only the delta.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from instance.runtime.restore import changelog_batches
from instance.state.bytes_store import InMemoryBytesStore, RocksDBBytesStore
from instance.state.checkpoint import TaskDirLock, read_checkpoint, write_checkpoint
from instance.state.kv_store import KeyValueStore
from instance.state.source_offsets import covered
from instance.state.spec import StoreSpec
from router.task_id import TaskId

CommittedLookup = Callable[[list[tuple[str, int]]], dict[tuple[str, int], int]]


class StandbyTask:
    """The stores of one task, updated from the changelog only (no cache, no changelog writes)."""

    def __init__(self, task_id: TaskId, specs: list[StoreSpec], changelogs: dict[str, str],
                 task_dir: Path, in_memory: bool, sources: list[str]) -> None:
        self.id = task_id
        #: input topics of the task (at-least-once: records their commits do not cover yet are
        #: held back, see instance/state/source_offsets.py)
        self.sources = sources
        self.task_dir = task_dir
        self.dir_lock = TaskDirLock(task_dir)
        self.dir_lock.acquire()
        checkpoint = read_checkpoint(task_dir)
        self.stores: dict[str, KeyValueStore] = {}
        self.changelog_of: dict[tuple[str, int], KeyValueStore] = {}
        self.changelog_offsets: dict[tuple[str, int], int] = {}
        complete = all((changelogs[s.name], task_id.partition) in checkpoint
                       for s in specs if s.name in changelogs)
        for spec in specs:
            inner: Any
            persistent = not (in_memory or spec.in_memory)
            if persistent:
                path = task_dir / "rocksdb" / spec.name
                if not complete:
                    shutil.rmtree(path, ignore_errors=True)
                inner = RocksDBBytesStore(spec.name, path)
            else:
                inner = InMemoryBytesStore(spec.name)
            store = KeyValueStore(spec, inner, None, 0)
            self.stores[spec.name] = store
            cl = changelogs.get(spec.name)
            if cl is not None:
                tp = (cl, task_id.partition)
                self.changelog_of[tp] = store
                self.changelog_offsets[tp] = checkpoint.get(tp, 0) if complete and persistent else 0
        self.end_offsets: dict[tuple[str, int], int] = dict(self.changelog_offsets)

    def checkpoint(self) -> None:
        for store in self.stores.values():
            store.flush()
        write_checkpoint(self.task_dir, self.changelog_offsets)

    def close(self) -> None:
        try:
            self.checkpoint()
            for store in self.stores.values():
                store.close()
        finally:
            self.dir_lock.release()


class StandbyUpdater:
    """One group-less consumer following the changelogs of every standby task of a thread.

    Caught up, it pauses for ``idle_s`` (the dev broker answers idle fetches in a tight loop);
    after resuming it stays resumed for ``window_s`` so a fetch has time to come back."""

    def __init__(self, consumer_conf: dict[str, Any], idle_s: float = 0.2, window_s: float = 0.1,
                 committed: CommittedLookup | None = None) -> None:
        conf = dict(consumer_conf)
        conf.setdefault("enable.auto.commit", False)
        self._consumer = Consumer(conf)
        self.tasks: dict[TaskId, StandbyTask] = {}
        #: at-least-once: the group's committed input offsets; None under exactly-once
        self._committed = committed
        self._marks: dict[tuple[str, int], int] = {}
        #: changelog partition -> offset of the first record no commit covers yet (paused there)
        self._held: dict[tuple[str, int], int] = {}
        self._next_marks = 0.0
        self._idle_s = idle_s
        self._window_s = window_s
        self._paused_until = 0.0
        self._active_until = 0.0

    def _assign(self) -> None:
        tps = [TopicPartition(t, p, pos) for task in self.tasks.values()
               for (t, p), pos in task.changelog_offsets.items()]
        self._held.clear()
        self._consumer.assign(tps)
        self._paused_until = 0.0
        self._active_until = time.monotonic() + self._window_s

    def add(self, task: StandbyTask) -> None:
        for tp in task.changelog_of:
            _, high = self._consumer.get_watermark_offsets(TopicPartition(*tp), timeout=5)
            task.end_offsets[tp] = int(high)
        self.tasks[task.id] = task
        self._assign()

    def remove(self, tid: TaskId) -> StandbyTask | None:
        task = self.tasks.pop(tid, None)
        if task is not None:
            task.close()
            self._assign()
        return task

    def step(self, max_records: int = 10_000) -> int:
        if not self.tasks:
            return 0
        now = time.monotonic()
        if self._paused_until:
            if now < self._paused_until:
                return 0
            self._resume()
            self._paused_until = 0.0
            self._active_until = now + self._window_s
        owners = {tp: task for task in self.tasks.values() for tp in task.changelog_of}
        if self._held:
            self._release_held(owners, now)
        msgs = self._consumer.consume(num_messages=max_records, timeout=0)
        if self._committed is not None:
            msgs = self._hold_uncovered(msgs, owners)
        by_tp, last = changelog_batches(msgs)
        for tp, batch in by_tp.items():
            task = owners.get(tp)
            if task is not None:
                task.changelog_of[tp].restore_batch(batch)
                task.changelog_offsets[tp] = last[tp] + 1
        for tp, task in owners.items():
            _, high = self._consumer.get_watermark_offsets(TopicPartition(*tp), cached=True)
            if high is not None and high >= 0:
                task.end_offsets[tp] = int(high)
        if msgs:
            self._active_until = now + self._window_s
        elif now >= self._active_until:
            # caught up; transaction markers leave gaps, so take the consumer's own position
            for tp_pos in self._consumer.position(self._consumer.assignment()):
                tp = (tp_pos.topic, tp_pos.partition)
                task = owners.get(tp)
                if task is not None and tp not in self._held and tp_pos.offset > task.changelog_offsets[tp]:
                    task.changelog_offsets[tp] = tp_pos.offset
            self._consumer.pause(self._consumer.assignment())
            self._paused_until = now + self._idle_s
        return len(msgs)

    def _resume(self) -> None:
        parts = [tp for tp in self._consumer.assignment() if (tp.topic, tp.partition) not in self._held]
        if parts:
            self._consumer.resume(parts)

    def _hold_uncovered(self, msgs: list[Any], owners: dict[tuple[str, int], StandbyTask]) -> list[Any]:
        """Keep records in changelog order up to the first one the committed input offsets do
        not cover; pause that partition there until a commit covers it."""
        kept = []
        for m in msgs:
            if m.error():
                continue
            tp = (m.topic(), m.partition())
            if tp in self._held:
                continue
            task = owners.get(tp)
            if task is not None and not covered(m.headers(), self._task_marks(task)):
                self._held[tp] = m.offset()
                task.changelog_offsets[tp] = m.offset()
                self._consumer.pause([TopicPartition(*tp)])
                continue
            kept.append(m)
        return kept

    def _task_marks(self, task: StandbyTask) -> dict[str, int]:
        return {t: self._marks.get((t, task.id.partition), 0) for t in task.sources}

    def _release_held(self, owners: dict[tuple[str, int], StandbyTask], now: float) -> None:
        """Every half second, with fresh committed offsets, go on from where a partition is held."""
        if now < self._next_marks or self._committed is None:
            return
        self._next_marks = now + 0.5
        wanted = sorted({(t, task.id.partition) for tp in self._held if (task := owners.get(tp))
                         for t in task.sources})
        self._marks.update(self._committed(wanted))
        for tp, offset in list(self._held.items()):
            del self._held[tp]
            self._consumer.seek(TopicPartition(tp[0], tp[1], offset))
            self._consumer.resume([TopicPartition(*tp)])
        self._paused_until = 0.0
        self._active_until = now + self._window_s

    def checkpoint_all(self) -> None:
        for task in self.tasks.values():
            task.checkpoint()

    def close(self) -> None:
        for tid in list(self.tasks):
            self.remove(tid)
        self._consumer.close()
