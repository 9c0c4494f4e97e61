"""TaskManager: the active and standby tasks of one stream thread.

It owns the tasks and orchestrates them, as Kafka Streams' TaskManager does: it creates tasks when
the group assigns partitions (ActiveTaskCreator; their stores restored by the thread's changelog
reader, each task's state in its lifecycle: runtime/task_state.py), closes them on revocation,
hands consumed records to them, commits through the TaskCommitter (which raises
TaskMigratedException when the group moved on: the stream thread handles it), keeps the standby
replicas the placement asks for (StandbyTaskCreator, StandbyTasks). The tasks themselves are held
in the registry ``tasks`` (runtime/tasks.py: lookups by id and by partition, the replica a query
reads or the instance publishes). The stream thread only loops; the consumer it owns is lent here
for commits (a getter: the thread replaces it when it rejoins). Every collaborator comes in through
the constructor (the stream thread's factory builds them: runtime/stream_thread.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from instance.config import StreamsConfig
from instance.errors import ProductionException, StreamsException, TaskMigratedException
from instance.runtime.active_task_creator import ActiveTaskCreator
from instance.runtime.changelog_reader import StoreChangelogReader
from instance.runtime.collector import RecordCollector
from instance.runtime.internal_topics import TopicLayout
from instance.runtime.metrics import SampleConfig, ThreadMetrics, recording_level
from instance.runtime.punctuation import NEVER
from instance.runtime.standby import StandbyTasks
from instance.runtime.standby_task_creator import StandbyTaskCreator
from instance.runtime.task import StreamTask, system_clock_ms
from instance.runtime.task_committer import TaskCommitter
from instance.runtime.task_state import TaskState
from instance.runtime.task_timeout import retrying
from instance.runtime.tasks import Tasks
from instance.runtime.txn_offset_commit import TransactionalOffsetCommit
from instance.topology.handlers import LATE_OR_INVALID, ErrorHandling
from instance.topology.topology import Topology
from kernel.task_id import TaskId

log = logging.getLogger(__name__)

TopicPart = tuple[str, int]


class TaskManager:
    def __init__(self, name: str, config: StreamsConfig, topology: Topology, layout: TopicLayout,
                 resolve: Callable[[str], str], new_collector: Callable[[], RecordCollector],
                 restorer: StoreChangelogReader, errors: ErrorHandling,
                 consumer: Callable[[], Consumer | None], global_stores: Mapping[str, Any] | None = None,
                 on_producer_replaced: Callable[[str], None] | None = None,
                 refused_at_revocation: TransactionalOffsetCommit | None = None) -> None:
        """``consumer``: the thread's group consumer now (None before it subscribed or once closed);
        ``global_stores``: the instance's, read-only for tasks; ``on_producer_replaced`` and
        ``refused_at_revocation``: the TaskCommitter's (runtime/task_committer.py)."""
        self.name = name
        self.config = config
        self.topology = topology
        self.layout = layout
        #: the thread's changelog reader: restores active tasks, keeps standbys warm
        self.restorer = restorer
        #: the thread's tasks, active and standby
        self.tasks = Tasks(layout.changelogs, restorer.progress)
        self.standby = StandbyTasks(restorer, self.tasks, name)
        self.errors = errors
        self._consumer = consumer
        #: this thread's metrics and its tasks' (runtime/metrics.py)
        self.metrics = ThreadMetrics(name, recording_level(config.metrics_recording_level),
                                     SampleConfig(config.metrics_sample_window_ms, config.metrics_num_samples))
        #: committed offset of each assigned partition (0 where none), as of the assignment
        self.start_offsets: dict[TopicPart, int] = {}
        self.active_creator = ActiveTaskCreator(name, config, topology, resolve, errors, self.metrics,
                                                self.start_offsets, global_stores or {})
        self.standby_creator = StandbyTaskCreator(config, topology, resolve, restorer, self.metrics)
        #: the commit protocol and the thread's producer
        self.committer = TaskCommitter(name, config, new_collector, self.metrics, on_producer_replaced,
                                       refused_at_revocation)
        self.assignment_version = 0
        self.topic_to_sub: dict[str, int] = {resolve(t): st.id for st in topology.subtopologies()
                                             for t in st.source_topics}
        #: records handed to tasks and not processed yet
        self.buffered = False
        self.last_commit = time.monotonic()

    @property
    def collector(self) -> RecordCollector:
        """The thread's current producer (replaced after a fence, a failure or an abort)."""
        return self.committer.collector

    @property
    def consumer(self) -> Consumer | None:
        """The thread's group consumer now (None before it subscribed or once it is closed)."""
        return self._consumer()

    @property
    def restoring(self) -> set[TaskId]:
        """The active tasks still restoring their stores (from their lifecycle)."""
        return self.tasks.restoring_ids()

    # -- processing -------------------------------------------------------------------------------
    def add_records(self, msgs: list[Any]) -> None:
        """Hand records to tasks in runs of the same partition (librdkafka returns them so)."""
        task_of = self.tasks.partition_lookup()
        run: list[Any] = []
        run_tp: TopicPart | None = None
        for m in msgs:
            tp = (m.topic(), m.partition())
            if tp != run_tp:
                if run and (task := task_of(run_tp)) is not None:  # type: ignore[arg-type]
                    task.add_records(run_tp[0], run)  # type: ignore[index]
                run, run_tp = [], tp
            if m.error() is None:
                run.append(m)
            else:
                _consume_error(m)
        if run and (task := task_of(run_tp)) is not None:  # type: ignore[arg-type]
            task.add_records(run_tp[0], run)  # type: ignore[index]
        self.buffered = True

    def process(self) -> int:
        """Process every buffered record; returns how many."""
        if not self.buffered:
            return 0
        self.buffered = False
        self.committer.begin_txn()
        n = 0
        for task in self.tasks.values():
            n += task.process()
            if task.catch_up_to:
                task.check_caught_up(self.consumer)
            if task.caught_up is not None and task.has_buffered:
                self.buffered = True  # held back for an input not caught up: try again next loop
        return n

    def dropped_records(self) -> dict[str, int]:
        """Records dropped by reason: the handlers' skips, and what the processors dropped (late
        for a window, a null key or value) in live and closed tasks. Read from other threads."""
        dropped = dict(self.errors.dropped)
        try:
            live = sum(t.dropped_records for t in list(self.tasks.values()))
        except RuntimeError:  # the task map changed under us (a rebalance): next time
            live = 0
        dropped[LATE_OR_INVALID] = dropped.get(LATE_OR_INVALID, 0) + live
        return dropped

    def punctuate(self) -> int:
        """Fire the wall-clock punctuations that are due (running tasks only); returns when the
        next one is due (ms, punctuation.NEVER if none), for the thread's poll timeout."""
        if not self.tasks:
            return NEVER
        now = system_clock_ms()
        next_due = NEVER
        for task in self.tasks.values():
            due = task.wall_clock_due()
            if due <= now and task.lifecycle.running:
                self.committer.begin_txn()
                task.punctuate_wall_clock(now)
                due = task.wall_clock_due()
            next_due = min(next_due, due)
        return next_due

    def commit_requested(self) -> bool:
        """A processor asked for a commit (``context.commit()``)."""
        return any(t.commit_requested for t in self.tasks.values())

    # -- commit -------------------------------------------------------------------------------------
    def commit(self, revoking: bool = False) -> None:
        """Commit the running tasks (TaskCommitter), then checkpoint the standbys. Raises
        TaskMigratedException when the group moved on: the next owner then processes the records
        since the last commit again, and restores none of their store updates (at-least-once:
        source offsets on the changelog; exactly-once: the transaction aborted)."""
        # no lock: only the owning thread changes tasks; queries read stores, whose flush
        # writes RocksDB before it drops cache entries
        tasks = list(self.tasks.values())
        self.committer.commit([t for t in tasks if t.lifecycle.running], tasks, self.consumer, revoking)
        self.standby.checkpoint_all()
        self.last_commit = time.monotonic()
        for task in tasks:
            if task.catch_up_to:  # idle since its assignment: only markers may have been left to read
                task.check_caught_up(self.consumer)

    def handle_lost_all(self) -> None:
        """Kafka Streams' handleLostAll: abort an open transaction, close every task dirty (their
        stores may hold writes no commit covers and carry no checkpoint, so they are rebuilt), and
        go on with a new producer if the old one must not write again (runtime/membership.py says
        why). The next tasks are created with the new one."""
        self.committer.abort_txn()
        self.close_tasks(list(self.tasks))
        self.committer.replace_discarded_producer()

    def _commit_before_closing(self) -> TaskMigratedException | None:
        """Commit ahead of closing tasks; returns the group having moved on instead of raising it
        (a start-over has closed every task already). A refused commit leaves no checkpoint: the
        stores hold updates the committed offsets do not cover, so the next owner restores
        without them."""
        try:
            self.commit(revoking=True)
        except TaskMigratedException as e:
            log.warning("%s: %s; closing tasks dirty", self.name, e)
            if e.start_over:
                self.handle_lost_all()
            return e
        return None

    # -- assignment ---------------------------------------------------------------------------------
    def assign(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Create the tasks of a new assignment; returns the input partitions whose tasks must
        restore first (to be paused)."""
        wanted: dict[TaskId, list[TopicPartition]] = {}
        for tp in partitions:
            sub = self.topic_to_sub.get(tp.topic)
            if sub is not None:
                wanted.setdefault(TaskId(sub, tp.partition), []).append(tp)
        committed = self.committed_offsets([(tp.topic, tp.partition) for tp in partitions])
        self.start_offsets.update(committed)  # where fetching starts: the thread's idle check
        with self.tasks.lock:
            for tid in sorted(wanted):
                if tid in self.standby.tasks:
                    self.standby.remove(tid)  # writes its checkpoint: the active restores the delta
                self._create_task(tid, committed)
            self.assignment_version += 1
        return [tp for tid in self.restoring for tp in wanted.get(tid, [])]

    def revoke(self, partitions: list[TopicPartition] | None = None) -> None:
        """Commit every task, then close those of ``partitions`` (every task when None: the classic
        protocol's eager revocation). Raises TaskMigratedException, every task closed, when the
        thread must start over (the stream thread handles it once the rebalance callback returns)."""
        if partitions is None:
            ids = list(self.tasks)
        else:
            moved = {(tp.topic, tp.partition) for tp in partitions}
            ids = self.tasks.ids_of(moved)
        if not ids:
            return
        try:
            refused = self._commit_before_closing()
        except (KafkaException, ProductionException) as e:
            log.exception("%s: commit on revocation failed; closing tasks dirty", self.name)
            self.handle_lost_all()
            if partitions is not None:  # the tasks kept are gone too: start over
                raise TaskMigratedException(f"the commit on revocation failed ({e})", start_over=True) from e
            return
        if refused is None:
            self.close_tasks(ids, clean=True)
            return
        self.close_tasks([tid for tid in ids if tid in self.tasks])
        if refused.start_over:
            raise refused

    def committed_offsets(self, tps: list[TopicPart]) -> dict[TopicPart, int]:
        """The group's committed offsets (0 where none): what restores may keep (at-least-once)."""
        consumer = self.consumer
        if consumer is None or not tps:
            return {}
        found = retrying(lambda: consumer.committed([TopicPartition(t, p) for t, p in tps], timeout=30),
                         "reading the committed offsets", self.config.task_timeout_ms, self.name)
        return {(tp.topic, tp.partition): max(tp.offset, 0) for tp in found}

    def _create_task(self, tid: TaskId, committed: dict[TopicPart, int]) -> None:
        task = self.active_creator.create(tid, self.collector, self.consumer, committed)
        self.tasks.add_active(task)
        marks = None if self.config.eos else {t: committed.get((t, tid.partition), 0) for t in task.sources}
        task.lifecycle.initialized(restoring=self.restorer.register_restoring(task, marks))

    def restore_step(self) -> list[StreamTask]:
        """One restore batch; returns the tasks that are now fully restored (and running)."""
        done = [self.tasks[owner.id] for owner in self.restorer.restore(self.config.restore_max_poll_records)]
        for task in done:
            task.lifecycle.transition_to(TaskState.RUNNING)
        return done

    def close_tasks(self, ids: list[TaskId], clean: bool = False) -> None:
        """Close tasks; ``clean`` (just committed) checkpoints those not restoring. Otherwise they
        are closed dirty: the thread's ``dirty-close`` metric counts them."""
        if not clean and ids:
            self.metrics.dirty_close.record(float(len(ids)), self.metrics.clock(), count=len(ids))
        with self.tasks.lock:
            for tid in ids:
                task = self.tasks.remove_active(tid)
                self.errors.dropped[LATE_OR_INVALID] += task.dropped_records
                was_restoring = task.lifecycle.restoring
                self.restorer.unregister(task)
                try:
                    task.close(checkpoint=clean and not was_restoring)
                except (StreamsException, KafkaException, OSError):
                    # the task's checkpoint is not written: its state is rebuilt next time
                    log.exception("%s: closing task %s failed", self.name, tid)

    def shutdown(self, clean: bool) -> None:
        """Close every task (committing first when ``clean``) and the standbys."""
        if clean:
            refused = self._commit_before_closing() if self.tasks else None
            self.close_tasks(list(self.tasks), clean=refused is None)
        else:
            try:
                self.committer.abort_txn()
            finally:
                self.close_tasks(list(self.tasks))

    # -- standbys -------------------------------------------------------------------------------------
    def update_standbys(self, wanted: set[TaskId]) -> None:
        """Hold exactly the ``wanted`` standbys (those not active here)."""
        with self.tasks.lock:
            self.standby.hold({tid for tid in wanted if tid not in self.tasks}, self.standby_creator.create)


def _consume_error(m: Any) -> None:
    err = m.error()
    if err.code() == KafkaError._PARTITION_EOF:
        return
    if err.fatal() or not err.retriable():
        raise StreamsException(f"consumer error on {m.topic()}[{m.partition()}]: {err}")
