"""TaskManager: the active and standby tasks of one stream thread, and the commit protocol.

It creates tasks when the group assigns partitions (their stores restored by the thread's changelog
reader), closes them on revocation, hands consumed records to them, commits (flush stores and
producer, then offsets, or the transaction under exactly_once_v2, then checkpoints), keeps the
standby replicas the placement asks for (which of them answers a query: runtime/query/replicas.py). Task
directories, checkpoints and stores are each task's ProcessorStateManager's. The stream thread only
loops; the consumer it owns is lent here for commits and pauses.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from instance.config import StreamsConfig
from instance.errors import ProductionException, StreamsException
from instance.runtime.changelog_reader import StoreChangelogReader
from instance.runtime.collector import AUTHORIZATION_ERRORS, ProducerLostException, RecordCollector
from instance.runtime.handlers import LATE_OR_INVALID, ErrorHandling
from instance.runtime.internal_topics import TopicLayout
from instance.runtime.metrics import SampleConfig, ThreadMetrics, recording_level
from instance.runtime.punctuation import NEVER
from instance.runtime.standby import StandbyTask, StandbyTasks
from instance.runtime.state_manager import ProcessorStateManager
from instance.runtime.task import StreamTask, system_clock_ms
from instance.runtime.task_timeout import TaskTimeoutException, kafka_error, retrying
from instance.runtime.timestamps import timestamp_extractor
from instance.state.kv_store import ChangelogSend
from instance.state.source_offsets import HEADER as SOURCE_HEADER
from instance.topology.topology import Topology
from router.task_id import TaskId

log = logging.getLogger(__name__)

TopicPart = tuple[str, int]

#: the group moved on: the commit is refused, the records are processed again by the next owner
REBALANCE_ERRORS = frozenset({KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS,
                              KafkaError.UNKNOWN_MEMBER_ID, KafkaError._ASSIGNMENT_LOST,
                              # the consumer protocol's (KIP-848) ways of saying the same
                              KafkaError.STALE_MEMBER_EPOCH, KafkaError.FENCED_MEMBER_EPOCH})
#: another producer has our transactional id
FENCED_ERRORS = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})


class TaskManager:
    def __init__(self, name: str, config: StreamsConfig, topology: Topology, layout: TopicLayout,
                 resolve: Callable[[str], str], new_collector: Callable[[], RecordCollector],
                 restorer: StoreChangelogReader, errors: ErrorHandling) -> None:
        self.name = name
        self.config = config
        self.topology = topology
        self.layout = layout
        self._resolve = resolve
        #: the instance's global stores (read-only for tasks); set by the stream thread
        self.global_stores: Mapping[str, Any] = {}
        self._new_collector = new_collector
        self.collector = new_collector()
        #: the thread's changelog reader: restores active tasks, keeps standbys warm
        self.restorer = restorer
        self.standby = StandbyTasks(restorer)
        self.errors = errors
        #: this thread's metrics and its tasks' (runtime/metrics.py)
        self.metrics = ThreadMetrics(name, recording_level(config.metrics_recording_level),
                                     SampleConfig(config.metrics_sample_window_ms, config.metrics_num_samples))
        errors.send = self._send_dead_letter
        self._extractor = timestamp_extractor(config.default_timestamp_extractor)
        self.consumer: Consumer | None = None  # the thread's, replaced when it rejoins
        self.tasks: dict[TaskId, StreamTask] = {}
        self.restoring: set[TaskId] = set()
        self.by_tp: dict[TopicPart, StreamTask] = {}
        #: committed offset of each assigned partition (0 where none), as of the assignment
        self.start_offsets: dict[TopicPart, int] = {}
        self.assignment_version = 0
        self.lock = threading.RLock()  # held while tasks are created/closed (queries read tasks)
        self.topic_to_sub: dict[str, int] = {resolve(t): st.id for st in topology.subtopologies()
                                             for t in st.source_topics}
        n_stores = max(1, len(topology.stores))
        self._cache_entries = config.statestore_cache_max_bytes // (100 * n_stores)
        self._in_txn = False
        #: a transaction was aborted because the group moved on: the thread must rejoin
        self.rejoin_requested = False
        #: told the transactional id of each producer replaced here (runtime/membership.py fences it
        #: on the dev broker, which never times out the transaction it may have left open)
        self.on_producer_replaced: Callable[[str], None] | None = None
        #: records handed to tasks and not processed yet
        self.buffered = False
        self.last_commit = time.monotonic()

    # -- processing -------------------------------------------------------------------------------
    def add_records(self, msgs: list[Any]) -> None:
        """Hand records to tasks in runs of the same partition (librdkafka returns them so)."""
        by_tp = self.by_tp
        run: list[Any] = []
        run_tp: TopicPart | None = None
        for m in msgs:
            tp = (m.topic(), m.partition())
            if tp != run_tp:
                if run and (task := by_tp.get(run_tp)) is not None:  # type: ignore[arg-type]
                    task.add_records(run_tp[0], run)  # type: ignore[index]
                run, run_tp = [], tp
            if m.error() is None:
                run.append(m)
            else:
                _consume_error(m)
        if run and (task := by_tp.get(run_tp)) is not None:  # type: ignore[arg-type]
            task.add_records(run_tp[0], run)  # type: ignore[index]
        self.buffered = True

    def process(self) -> int:
        """Process every buffered record; returns how many."""
        if not self.buffered:
            return 0
        self.buffered = False
        self.begin_txn()
        n = 0
        for task in self.tasks.values():
            n += task.process()
            if task.catch_up_to:
                task.check_caught_up()
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

    def _caught_up(self, topic: str, partition: int) -> bool:
        """The input partition has no records on the broker beyond what was fetched (from the
        high watermark of the last fetch answer: unknown before the first)."""
        consumer = self.consumer
        assert consumer is not None
        tp = TopicPartition(topic, partition)
        low, high = consumer.get_watermark_offsets(tp, cached=True)
        if high is None or high < 0:
            return False
        position = consumer.position([tp])[0].offset
        if position < 0:  # nothing returned yet: fetching starts at the commit (or the log start)
            position = max(self.start_offsets.get((topic, partition), 0), low)
        return position >= high

    def punctuate(self) -> int:
        """Fire the wall-clock punctuations that are due (running tasks only); returns when the
        next one is due (ms, punctuation.NEVER if none), for the thread's poll timeout."""
        if not self.tasks:
            return NEVER
        now = system_clock_ms()
        next_due = NEVER
        for tid, task in self.tasks.items():
            due = task.wall_clock_due()
            if due <= now and tid not in self.restoring:
                self.begin_txn()
                task.punctuate_wall_clock(now)
                due = task.wall_clock_due()
            next_due = min(next_due, due)
        return next_due

    def commit_requested(self) -> bool:
        """A processor asked for a commit (``context.commit()``)."""
        return any(t.commit_requested for t in self.tasks.values())

    def _send_dead_letter(self, topic: str, key: bytes | None, value: bytes | None, ts: int, partition: int,
                          headers: Any) -> None:
        self.collector.send(topic, key, value, ts, partition, headers)  # the current producer

    def begin_txn(self) -> None:
        if self.config.eos and not self._in_txn:
            self.collector.producer.begin_transaction()
            self._in_txn = True

    # -- commit -------------------------------------------------------------------------------------
    def commit(self) -> bool:
        """Flush caches and stores, flush the producer, then commit offsets (or the transaction).
        False if the group refused the commit (a rebalance is under way): the next owner then
        processes those records again, and restores none of their store updates (at-least-once:
        source offsets on the changelog; exactly-once: the transaction aborted)."""
        # no lock: only the owning thread changes tasks; queries read stores, whose flush
        # writes RocksDB before it drops cache entries
        started = time.perf_counter_ns()
        running = [t for tid, t in self.tasks.items() if tid not in self.restoring]
        if self.config.eos:
            self.begin_txn()
        for task in running:
            task.flush()
        offsets = self._offsets()
        try:
            if self.config.eos:
                if not self._commit_transaction(offsets):
                    return False
            else:
                self.collector.flush(self.config.task_timeout_ms, self.name)
                if offsets and not self._commit_offsets(offsets):
                    return False
        except (ProducerLostException, TaskTimeoutException) as e:
            # the producer failed, or the broker did not take the records or the commit within
            # task.timeout.ms: start over from the last commit once it answers (at-least-once
            # processes those records again) instead of ending the thread on a broker outage
            self._producer_lost(str(e))
            return False
        for task in running:
            task.commit_requested = False
            task.committable.clear()
            task.state.checkpoint()  # not under exactly-once (the state manager's rule)
        self.standby.checkpoint_all()
        self.last_commit = time.monotonic()
        self.metrics.commit.record((time.perf_counter_ns() - started) / 1e6, self.metrics.clock())
        return True

    def _offsets(self) -> list[TopicPartition]:
        """Offsets to commit: what tasks processed since the last commit."""
        return [TopicPartition(topic, task.partition, off)
                for task in self.tasks.values() for topic, off in task.committable.items()]

    def _commit_transaction(self, offsets: list[TopicPartition]) -> bool:
        """Commit the transaction with the input offsets in it. If the group moved on or the
        transaction must abort, abort it, close every task dirty (their stores may hold aborted
        writes and carry no checkpoint, so they are rebuilt) and ask the thread to rejoin: Kafka
        Streams' TaskMigrated handling."""
        assert self.consumer is not None
        producer = self.collector.producer
        # waiting longer than the transaction's timeout is no use: the broker aborts it by then
        wait_ms = min(self.config.task_timeout_ms, self.collector.transaction_timeout_ms)
        try:
            if offsets:
                group = self.consumer.consumer_group_metadata()
                retrying(lambda: producer.send_offsets_to_transaction(offsets, group, 30),
                         "adding the offsets to the transaction", wait_ms, self.name)
            retrying(lambda: producer.commit_transaction(60), "committing the transaction", wait_ms, self.name)
            self._in_txn = False
            self.collector.check()
            for task in self.tasks.values():
                task.state.transaction_committed()
            return True
        except TaskTimeoutException as e:
            # the broker is away: leave the transaction to its timeout (or to the janitor's fence
            # on the dev broker) and start over with a new producer once it is back
            self._producer_lost(str(e))
            return False
        except KafkaException as e:
            err = kafka_error(e)
            if err is not None and (err.code() in FENCED_ERRORS
                                    or (err.fatal() and err.code() not in AUTHORIZATION_ERRORS)):
                # another producer took our transactional id (a peer fenced us as dead, or a
                # newer run of this instance), or the producer cannot go on: our transaction is
                # gone; start over as Kafka Streams does on TaskMigrated, with a new producer
                self._producer_lost(f"{err.name()}: {err.str()}")
                return False
            if err is None or err.fatal() or not (err.txn_requires_abort() or err.code() in REBALANCE_ERRORS):
                raise
            log.warning("%s: transaction aborted (%s); closing tasks dirty and starting over", self.name, err.name())
            self.abort_txn()
            self._drop_tasks_and_producer()
            self.rejoin_requested = True
            return False

    def _commit_offsets(self, offsets: list[TopicPartition]) -> bool:
        """Commit; False when the group has moved on (a rebalance is under way). Kafka Streams
        calls this TaskMigrated: the records since the last commit are processed again by
        whoever owns them next (at-least-once), so the thread keeps going instead of dying."""
        assert self.consumer is not None
        consumer = self.consumer
        try:
            retrying(lambda: consumer.commit(offsets=offsets, asynchronous=False), "committing offsets",
                     self.config.task_timeout_ms, self.name, final=REBALANCE_ERRORS)
            return True
        except KafkaException as e:
            err = kafka_error(e)
            if err is not None and err.code() in REBALANCE_ERRORS:
                log.warning("%s: offset commit rejected during a rebalance (%s)", self.name, err.name())
                return False
            raise

    def abort_txn(self) -> bool:
        """Abort an open transaction (True if one was open: the caller then replaces the producer).
        An abort that fails (the broker is away, the producer failed fatally) leaves the
        transaction to the broker, which aborts it after ``transaction.timeout.ms``; the stores
        are rebuilt from committed changelog records either way."""
        if self.config.eos and self._in_txn:
            self._in_txn = False
            producer = self.collector.producer
            try:
                retrying(lambda: producer.abort_transaction(30), "aborting the transaction",
                         min(self.config.task_timeout_ms, self.collector.transaction_timeout_ms), self.name)
            except (KafkaException, TaskTimeoutException) as e:
                log.warning("%s: the abort failed (%s); the broker aborts the transaction after its timeout",
                            self.name, e)
            return True
        return False

    def _producer_lost(self, why: str) -> None:
        log.warning("%s: the producer cannot go on (%s); closing tasks dirty, new producer, rejoining",
                    self.name, why)
        self._in_txn = False
        self._drop_tasks_and_producer()
        self.rejoin_requested = True

    def _drop_tasks_and_producer(self) -> None:
        """After an abort or a fence: close every task dirty (their stores may hold aborted writes
        and carry no checkpoint, so they are rebuilt), and send through a new producer from now
        on, since one that aborted must not write again (runtime/membership.py says why). The
        next tasks are created with the new one."""
        self.close_tasks(list(self.tasks), clean=False)
        old, old_id = self.collector.producer, self.collector.transactional_id
        self.collector = self._new_collector()
        if old_id is not None and self.on_producer_replaced is not None:
            self.on_producer_replaced(old_id)
        with contextlib.suppress(KafkaException, SystemError):  # a producer that failed fatally raises
            # what it still holds must never be written: a changelog record delivered later would
            # land after the next owner's and corrupt every restore from then on
            old.purge()
            old.flush(0)

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
        with self.lock:
            for tid in sorted(wanted):
                if tid in self.standby.tasks:
                    self.standby.remove(tid)  # writes its checkpoint: the active restores the delta
                self._create_task(tid, committed)
            self.assignment_version += 1
        return [tp for tid in self.restoring for tp in wanted.get(tid, [])]

    def revoke(self, partitions: list[TopicPartition] | None = None) -> None:
        """Commit every task, then close those of ``partitions`` (every task when None: the classic
        protocol's eager revocation). A refused commit leaves no checkpoint: the stores hold
        updates the committed offsets do not cover, so the next owner restores without them."""
        if partitions is None:
            ids = list(self.tasks)
        else:
            moved = {(tp.topic, tp.partition) for tp in partitions}
            ids = sorted({task.id for tp, task in self.by_tp.items() if tp in moved})
        if not ids:
            return
        try:
            if self.commit():
                self.close_tasks(ids, clean=True)
                return
        except (KafkaException, ProductionException):
            log.exception("%s: commit on revocation failed; closing tasks dirty", self.name)
            self._abort_and_close()
            self.rejoin_requested = partitions is not None  # the tasks kept are gone too: start over
            return
        # refused: if it aborted, commit() closed every task already (and asked to rejoin)
        self.close_tasks([tid for tid in ids if tid in self.tasks])

    def lost(self) -> None:
        self._abort_and_close()

    def _abort_and_close(self) -> None:
        """Abort an open transaction and close every task dirty (with a new producer after an abort)."""
        if self.abort_txn():
            self._drop_tasks_and_producer()
        else:
            self.close_tasks(list(self.tasks))

    def committed_offsets(self, tps: list[TopicPart]) -> dict[TopicPart, int]:
        """The group's committed offsets (0 where none): what restores may keep (at-least-once)."""
        if self.consumer is None or not tps:
            return {}
        consumer = self.consumer
        found = retrying(lambda: consumer.committed([TopicPartition(t, p) for t, p in tps], timeout=30),
                         "reading the committed offsets", self.config.task_timeout_ms, self.name)
        return {(tp.topic, tp.partition): max(tp.offset, 0) for tp in found}

    def _create_task(self, tid: TaskId, committed: dict[TopicPart, int]) -> None:
        config = self.config
        state = ProcessorStateManager(tid, config.app_state_dir, config.application_id, active=True,
                                      eos=config.eos, lock_wait_s=5.0)  # the cleaner holds unowned dirs briefly
        task = StreamTask(tid, self.topology, self.topology.subtopologies()[tid.subtopology], config.application_id,
                          self._resolve, self.collector.send, self._changelog_sender, state, self._cache_entries,
                          config.in_memory_stores, self.errors, self.global_stores, extractor=self._extractor,
                          metrics=self.metrics.task_metrics(str(tid)))
        self.tasks[tid] = task
        for topic in task.sources:
            self.by_tp[(topic, tid.partition)] = task
        if len(task.sources) > 1 and config.max_task_idle_ms >= 0 and self.consumer is not None:
            task.caught_up = partial(self._caught_up, partition=tid.partition)
            task.max_idle_ms = config.max_task_idle_ms
        # input the previous owner may have processed (and answered queries from) beyond the
        # commit: answers are flagged stale until this task has processed it again
        consumer = self.consumer
        for t in task.sources:
            tp = TopicPartition(t, tid.partition)
            end = retrying(partial(consumer.get_watermark_offsets, tp, timeout=10), "reading an end offset",
                           config.task_timeout_ms, self.name)[1] if consumer is not None else 0
            if end > committed.get((t, tid.partition), 0):
                task.catch_up_to[t] = end
        marks = None if config.eos else {t: committed.get((t, tid.partition), 0) for t in task.sources}
        if self.restorer.register_restoring(task, marks):
            self.restoring.add(tid)

    def _changelog_sender(self, topic: str, partition: int, task: StreamTask) -> ChangelogSend:
        """Logs a store's write batch. The changelog partition has one writer (this thread,
        idempotent), so the records take the next offsets in order: the store's position is
        counted, and a failed delivery fails the next commit (RecordCollector). At-least-once
        records carry the input offsets they reflect (instance/state/source_offsets.py)."""
        send = self.collector.send
        tp = (topic, partition)
        eos = self.config.eos
        logged = task.state.logged

        def send_batch(batch: list[tuple[bytes, bytes | None, int]]) -> None:
            if not batch:
                return
            mark = None if eos else task.source_mark()
            headers: list[tuple[str, str | bytes | None]] | None = \
                None if mark is None else [(SOURCE_HEADER, mark)]
            for kb, vb, ts in batch:
                send(topic, kb, vb, ts, partition, headers)
            logged(tp, len(batch))
        return send_batch

    def restore_step(self) -> list[StreamTask]:
        """One restore batch; returns the tasks that are now fully restored."""
        done = [self.tasks[owner.id] for owner in self.restorer.restore(self.config.restore_max_poll_records)]
        for task in done:
            self.restoring.discard(task.id)
        return done

    def close_tasks(self, ids: list[TaskId], clean: bool = False) -> None:
        """Close tasks; ``clean`` (just committed) checkpoints those not restoring."""
        with self.lock:
            for tid in ids:
                task = self.tasks.pop(tid)
                self.errors.dropped[LATE_OR_INVALID] += task.dropped_records
                was_restoring = tid in self.restoring
                self.restorer.unregister(task)
                self.restoring.discard(tid)
                for topic in task.sources:
                    self.by_tp.pop((topic, tid.partition), None)
                try:
                    task.close(checkpoint=clean and not was_restoring)
                except (StreamsException, KafkaException, OSError):
                    # the task's checkpoint is not written: its state is rebuilt next time
                    log.exception("%s: closing task %s failed", self.name, tid)

    def shutdown(self, clean: bool) -> None:
        """Close every task (committing first when ``clean``) and the standbys."""
        if clean:
            # a refused commit (a rebalance began) leaves no checkpoint: the stores hold updates
            # the committed offsets do not cover
            committed = self.commit() if self.tasks else True
            self.close_tasks(list(self.tasks), clean=committed)
        else:
            try:
                self.abort_txn()
            finally:
                self.close_tasks(list(self.tasks))

    # -- standbys -------------------------------------------------------------------------------------
    def update_standbys(self, wanted: set[TaskId]) -> None:
        """Hold exactly the ``wanted`` standbys (those not active here)."""
        standby = self.standby
        wanted = {tid for tid in wanted if tid not in self.tasks}
        with self.lock:
            for tid in [t for t in standby.tasks if t not in wanted]:
                standby.remove(tid)
            for tid in sorted(wanted - set(standby.tasks)):
                try:
                    standby.add(self._new_standby(tid))
                except StreamsException as e:  # task dir still locked by its old owner here
                    log.info("%s: standby %s not created yet: %s", self.name, tid, e)

    def _new_standby(self, tid: TaskId) -> StandbyTask:
        config = self.config
        st = self.topology.subtopologies()[tid.subtopology]
        state = ProcessorStateManager(tid, config.app_state_dir, config.application_id, active=False, eos=config.eos)
        return StandbyTask(tid, [self.topology.stores[s] for s in st.stores], state,
                           [self._resolve(t) for t in st.source_topics], config.in_memory_stores, self.restorer,
                           self.metrics.task_metrics(str(tid), standby=True))


def _consume_error(m: Any) -> None:
    err = m.error()
    if err.code() == KafkaError._PARTITION_EOF:
        return
    if err.fatal() or not err.retriable():
        raise StreamsException(f"consumer error on {m.topic()}[{m.partition()}]: {err}")
