"""ProcessorStateManager: the state of one task, active or standby (Kafka Streams' class of that name).

It owns the task directory (``.lock`` and ``.checkpoint``), builds the task's stores, and knows for
each changelog partition the offset its store reflects. The task processes; the changelog reader
(runtime/changelog_reader.py) brings stores up to date through :meth:`restore`.

The checkpoint rule: a checkpoint must never claim less than the stores hold, or a restore after a
crash would re-apply (at-least-once: keep) updates the committed offsets do not cover. So an active
task's checkpoint is removed before the first write after it was taken, and written again at the
next commit; under exactly-once it is removed when the task opens and written only on clean close.
Restored records never invalidate it: they are covered, and re-applying them is idempotent.

Under at-least-once it also keeps the task's origin high-water (instance/state/origins.py): what
it applied from internal topics. Written with each commit to the first logged store's changelog
(a reserved key, never applied to the store) and into the checkpoint, and taken back from either,
so it always matches the stores it was restored with.
"""

from __future__ import annotations

import functools
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from instance.state import origins
from instance.state.bytes_store import BytesStore, InMemoryBytesStore, RocksDBBytesStore
from instance.state.change_logging import Batch
from instance.state.checkpoint import (
    TaskDirLock,
    delete_checkpoint,
    read_checkpoint,
    read_origins,
    write_checkpoint,
)
from instance.state.committed_view import CommittedView
from instance.state.kv_store import ChangelogSend, KeyValueStore
from instance.state.spec import StoreSpec
from instance.state.store_builder import build_store
from kernel.task_id import TaskId

TopicPart = tuple[str, int]


class ProcessorStateManager:
    """The stores of one task and their changelog positions, in ``<state_dir>/<task_id>``.
    ``state_dir`` None: no directory, no lock, no checkpoint, stores in memory (TopologyTestDriver)."""

    def __init__(self, task_id: TaskId, state_dir: Path | None, application_id: str, *, active: bool = True,
                 eos: bool = False, lock_wait_s: float = 0.0) -> None:
        self.task_id = task_id
        self.task_dir = None if state_dir is None else state_dir / str(task_id)
        self.application_id = application_id
        self.active = active
        self.eos = eos
        self._lock_wait_s = lock_wait_s
        self._lock: TaskDirLock | None = None
        self.stores: dict[str, KeyValueStore] = {}
        self._store_of: dict[TopicPart, KeyValueStore] = {}
        #: changelog partitions whose offsets a checkpoint may carry (persistent stores only: an
        #: in-memory store starts empty whatever the checkpoint says)
        self._persistent: set[TopicPart] = set()
        #: changelog partition -> the next offset its store reflects (everything before it applied)
        self.changelog_offsets: dict[TopicPart, int] = {}
        #: offsets of the checkpoint found at registration, if it covered every persistent store
        self.checkpointed: dict[TopicPart, int] = {}
        #: the on-disk checkpoint describes the stores (no write since it was taken)
        self.checkpoint_current = False
        #: changelogs written in the open transaction (exactly-once: its commit marker takes an offset)
        self.txn_changelogs: set[TopicPart] = set()
        #: an active task under exactly-once: queries read what the last commit left (KIP-892's
        #: read-committed queries; ``state/committed_view.py``), at these changelog positions
        self._committed_reads = active and eos
        self._views: list[CommittedView] = []
        self.committed_offsets: dict[TopicPart, int] = {}
        self._written: dict[TopicPart, int] | None = None
        self._closed = False
        #: what the task applied from internal topics (at-least-once; instance/state/origins.py)
        self.origins = origins.HighWater()
        #: writes the high-water to a changelog at a commit (None: no logged store, or not needed)
        self._log_origins: ChangelogSend | None = None

    # -- opening -------------------------------------------------------------------------------
    def register_stores(self, specs: Iterable[StoreSpec], *, in_memory: bool, cache_max_entries: int,
                        changelog_for: Callable[[StoreSpec], ChangelogSend | None]) -> dict[str, KeyValueStore]:
        """Lock the task directory, validate its checkpoint (wiping the persistent stores it does
        not cover: they may hold uncommitted writes), and build the stores. Nothing stays locked
        or open if this raises."""
        specs = list(specs)
        if not specs:
            return self.stores
        try:
            self._open(specs, in_memory, cache_max_entries, changelog_for)
        except BaseException:
            self._close_stores()
            self._release()
            raise
        return self.stores

    def _open(self, specs: list[StoreSpec], in_memory: bool, cache_max_entries: int,
              changelog_for: Callable[[StoreSpec], ChangelogSend | None]) -> None:
        task_dir = self.task_dir
        partition = self.task_id.partition
        tps = {s.name: (s.changelog_topic(self.application_id), partition) for s in specs if s.logging_enabled}
        persistent = {s.name for s in specs if task_dir is not None and not (in_memory or s.in_memory)}
        self._persistent = {tp for name, tp in tps.items() if name in persistent}
        checkpoint: dict[TopicPart, int] = {}
        if task_dir is not None:
            self._lock = TaskDirLock(task_dir)
            self._lock.acquire(wait_s=self._lock_wait_s)
            checkpoint = read_checkpoint(task_dir)
            if not all(tp in checkpoint for tp in self._persistent):
                # first start, crash or unreadable: rebuild the logged stores from their changelogs
                checkpoint = {}
                delete_checkpoint(task_dir)
                for name in persistent & tps.keys():
                    shutil.rmtree(task_dir / "rocksdb" / name, ignore_errors=True)
            elif self.active and self.eos:
                # while an exactly-once task runs its stores may hold uncommitted writes: a crash
                # must leave no checkpoint behind
                delete_checkpoint(task_dir)
        if checkpoint and task_dir is not None and not self.eos:
            self.origins.load(read_origins(task_dir))
        self.checkpointed = {tp: checkpoint[tp] for tp in self._persistent if tp in checkpoint}
        self.changelog_offsets = {tp: self.checkpointed.get(tp, 0) for tp in tps.values()}
        self.checkpoint_current = bool(self.checkpointed) and not (self.active and self.eos)
        self.committed_offsets = dict(self.changelog_offsets)
        for spec in specs:
            inner: BytesStore
            if spec.name in persistent:
                assert task_dir is not None
                inner = RocksDBBytesStore(spec.name, task_dir / "rocksdb" / spec.name)
            else:
                inner = InMemoryBytesStore(spec.name)
            send = changelog_for(spec) if self.active else None
            if send is not None and self._log_origins is None and not self.eos:
                self._log_origins = send
            store = build_store(spec, inner, send, cache_max_entries if self.active else 0, self._committed_reads)
            if store.committed_view is not None:
                self._views.append(store.committed_view)
            if self.active:
                store.before_write = self.invalidate_checkpoint
            self.stores[spec.name] = store
            tp = tps.get(spec.name)
            if tp is not None:
                self._store_of[tp] = store
                store.bind_position(functools.partial(self.position, tp))

    @property
    def changelog_partitions(self) -> list[TopicPart]:
        return list(self._store_of)

    def store_of(self, tp: TopicPart) -> KeyValueStore:
        return self._store_of[tp]

    # -- changelog positions ---------------------------------------------------------------------
    def apply(self, tp: TopicPart, msgs: list[Any], next_offset: int) -> None:
        """Apply changelog messages (the reader's): :meth:`restore` of their key, value, timestamp."""
        self.restore(tp, [(m.key(), m.value(), m.timestamp()[1]) for m in msgs], next_offset)

    def restore(self, tp: TopicPart, records: Batch, next_offset: int) -> None:
        """Apply changelog records ``(key, value, timestamp)`` (restore or standby update); the store now reflects the
        changelog up to ``next_offset`` (exclusive). A high-water record (origins.RESERVED_KEY) is
        never applied: under at-least-once it is taken as the task's origin high-water."""
        if records and any(r[0] == origins.RESERVED_KEY for r in records):
            # left out under exactly-once too: the changelog may have been written under at-least-once
            records, marks = origins.split_reserved(records)
            if not self.eos:
                self.origins.load(origins.from_record(marks))
        if records:
            store = self._store_of[tp]
            view = store.committed_view
            if view is None:
                store.restore_batch(records)
            else:
                with view.unrecorded():  # what a changelog holds was committed
                    store.restore_batch(records)
        self.changelog_offsets[tp] = next_offset
        if self._committed_reads:
            self.committed_offsets = dict(self.changelog_offsets)

    def position(self, tp: TopicPart) -> int:
        """The changelog offset that reflects what the store holds now, for a query's read metadata.
        An active task's cache holds updates its changelog has not received yet (until the next
        commit); they take the next offsets in order, so they count. Without them the first
        commit interval answered "position 0" with the value already counted, and a token from that
        answer let a standby at 0 serve older state. Call it after reading the value: both parts
        only grow, and no flush is half done while they are read."""
        store = self._store_of.get(tp)
        offsets = self.changelog_offsets
        if self._committed_reads:  # queries read the committed view: its position
            return self.committed_offsets.get(tp, 0)
        if store is None or not self.active:
            return offsets.get(tp, 0)
        return store.position_with_unlogged(lambda: offsets.get(tp, 0))

    def restored_to_end(self, tp: TopicPart, end: int) -> None:
        """Restore of ``tp`` done: the task writes next at the log's end (which may have moved
        past the last record restored, e.g. by an abort marker)."""
        self.changelog_offsets[tp] = end
        if self._committed_reads:
            self.committed_offsets = dict(self.changelog_offsets)

    def advance(self, tp: TopicPart, offset: int) -> None:
        """Move the position past records that carry no data (transaction markers)."""
        if offset > self.changelog_offsets.get(tp, 0):
            self.changelog_offsets[tp] = offset
            if self._committed_reads:
                self.committed_offsets = dict(self.changelog_offsets)

    def logged(self, tp: TopicPart, n: int) -> None:
        """``n`` records were sent to the changelog: one idempotent writer per changelog
        partition, so they take the next offsets in order."""
        offsets = self.changelog_offsets
        offsets[tp] = offsets.get(tp, 0) + n
        if self.eos:
            self.txn_changelogs.add(tp)

    def transaction_committed(self) -> None:
        """The commit marker takes one offset in every changelog the transaction wrote."""
        for tp in self.txn_changelogs:
            self.changelog_offsets[tp] += 1
        self.txn_changelogs.clear()
        self._now_committed()

    def _now_committed(self) -> None:
        """Queries may read what the stores hold now. The positions move first: a query reads the
        value, then the position, which must cover the value (see :meth:`position`)."""
        self.committed_offsets = dict(self.changelog_offsets)
        for view in self._views:
            view.mark_committed()

    # -- commit and checkpoint -----------------------------------------------------------------------
    def invalidate_checkpoint(self) -> None:
        """Called before the stores receive writes the checkpoint does not cover (see module doc)."""
        if self.checkpoint_current and self.task_dir is not None:
            delete_checkpoint(self.task_dir)
            self._written = None
        self.checkpoint_current = False

    def flush(self) -> None:
        """Commit step one: every cache (forwarding downstream, which may write another store of
        the task), then the stores' memtables to disk for the checkpoint that follows. An active
        task under exactly-once writes no checkpoint while it runs, so it skips that disk flush (the
        WAL is off and a crash rebuilds the stores anyway; Kafka Streams skips it too): at a 100 ms
        commit interval it was the largest part of a commit."""
        for store in self.stores.values():
            store.flush_cache()
        if self._log_origins is not None and self.origins.changed():
            # after the caches (their flush runs no source, so the marks are final here), with
            # the commit's source mark: a restore takes the marks that match its stores
            self._log_origins([(origins.RESERVED_KEY, origins.record_value(self.origins.snapshot()),
                                time.time_ns() // 1_000_000)])
            self.origins.written()
        if self.active and self.eos:
            return
        for store in self.stores.values():
            store.flush()

    def moved_since_checkpoint(self) -> int:
        """Changelog records the stores took in since the checkpoint last written (or since open)."""
        written = self._written or {}
        return sum(max(0, o - written.get(tp, 0)) for tp, o in self.changelog_offsets.items()
                   if tp in self._persistent)

    def checkpoint(self) -> None:
        """After a commit: record the offsets the flushed stores reflect. Not for an active task
        under exactly-once while it runs (see module doc)."""
        if not (self.active and self.eos):
            self._write_checkpoint()

    def _write_checkpoint(self) -> None:
        offsets = {tp: o for tp, o in self.changelog_offsets.items() if tp in self._persistent}
        if self.task_dir is None or not offsets:
            return
        if offsets != self._written:
            write_checkpoint(self.task_dir, offsets, self.origins.snapshot())
            self._written = offsets
        self.checkpoint_current = True

    # -- closing -----------------------------------------------------------------------------------
    def close(self, checkpoint: bool) -> None:
        """Close the stores and release the directory. ``checkpoint``: a clean close of flushed
        stores (after a commit); a dirty close leaves no new checkpoint, so what the stores hold
        beyond the last one is rebuilt."""
        try:
            self._close_stores()
            if checkpoint:
                self._write_checkpoint()
        finally:
            self._release()

    def _close_stores(self) -> None:
        if self._closed:
            return
        self._closed = True
        error: BaseException | None = None
        for store in self.stores.values():
            try:
                store.close()
            except Exception as e:  # close the others all the same
                error = error or e
        if error is not None:
            raise error

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None
