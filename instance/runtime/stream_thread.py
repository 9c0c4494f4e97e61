"""StreamThread: the poll → process → commit loop of one consumer and its tasks.

Kafka Streams' main loop, paid per batch: ``consume(num_messages=max.poll.records)`` returns a
batch, records are handed to their task in runs per partition, each task drains its buffer
depth-first, and every ``commit.interval.ms`` the thread commits (flush caches and stores, flush
the producer, commit offsets — or the transaction, under exactly_once_v2).
"""

from __future__ import annotations

import enum
import logging
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from instance.config import StreamsConfig
from instance.errors import StreamsException
from instance.runtime.collector import RecordCollector, producer_config
from instance.runtime.internal_topics import TopicLayout, internal_name
from instance.runtime.membership import MembershipCoordinator, thread_client_prefix, transactional_id
from instance.runtime.restore import ChangelogReader, StateRestoreListener
from instance.runtime.standby import StandbyTask, StandbyUpdater
from instance.runtime.task import DeserializationHandler, StreamTask, TaskId
from instance.state.checkpoint import TaskDirLock, delete_checkpoint, read_checkpoint, write_checkpoint
from instance.state.kv_store import KeyValueStore
from instance.state.source_offsets import HEADER as SOURCE_HEADER
from instance.topology.topology import Topology

log = logging.getLogger(__name__)

_REBALANCE_ERRORS = frozenset({KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS,
                               KafkaError.UNKNOWN_MEMBER_ID, KafkaError._ASSIGNMENT_LOST})


class ThreadState(enum.Enum):
    CREATED = 0
    STARTING = 1
    PARTITIONS_REVOKED = 2
    PARTITIONS_ASSIGNED = 3
    RUNNING = 4
    PENDING_SHUTDOWN = 5
    DEAD = 6


class StreamThread(threading.Thread):
    def __init__(self, index: int, config: StreamsConfig, topology: Topology, layout: TopicLayout,
                 on_state: Callable[[StreamThread, ThreadState], None],
                 on_error: Callable[[StreamThread, BaseException], None],
                 restore_listener: StateRestoreListener | None = None,
                 standby_wanted: Callable[[StreamThread], set[TaskId]] | None = None,
                 membership: MembershipCoordinator | None = None) -> None:
        super().__init__(name=f"{config.application_id}-StreamThread-{index}", daemon=True)
        self.index = index
        self.config = config
        self.topology = topology
        self.layout = layout
        self._on_state = on_state
        self._on_error = on_error
        self.state = ThreadState.CREATED
        self._shutdown = threading.Event()
        self.tasks: dict[TaskId, StreamTask] = {}
        self.restoring: set[TaskId] = set()
        self._by_tp: dict[tuple[str, int], StreamTask] = {}
        self.assignment_version = 0
        self.processed = 0
        app = config.application_id
        self._resolve = internal_name(app, topology)
        self._topic_to_sub: dict[str, int] = {}
        for st in topology.subtopologies():
            for t in st.source_topics:
                self._topic_to_sub[self._resolve(t)] = st.id
        member = config.instance_id
        self.client_id = f"{thread_client_prefix(member)}{index}"
        base = {"bootstrap.servers": config.bootstrap_servers}
        cconf: dict[str, Any] = {
            **base,
            "group.id": app,
            "client.id": self.client_id,
            "partition.assignment.strategy": "range",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": config.auto_offset_reset,
            "session.timeout.ms": config.session_timeout_ms,
            # also the rebalance timeout: how long a rebalance waits for members that do not rejoin
            "max.poll.interval.ms": max(config.max_poll_interval_ms, config.session_timeout_ms),
            "heartbeat.interval.ms": max(100, config.session_timeout_ms // 5),
            "isolation.level": "read_committed" if config.eos else "read_uncommitted",
            "queued.max.messages.kbytes": 65536,
        }
        if config.group_instance_id:
            # static membership is opt-in, as in Kafka Streams: a static member does not leave the
            # group on close, so its partitions wait for it (session.timeout.ms) instead of moving
            cconf["group.instance.id"] = f"{config.group_instance_id}-{index}"
        cconf.update(config.client_overrides("consumer."))
        self._consumer_conf = cconf
        self.consumer: Consumer | None = None
        pconf = producer_config(config.bootstrap_servers, f"{self.client_id}-producer",
                                config.client_overrides("producer."),
                                transactional_id=transactional_id(app, member, index) if config.eos else None)
        self._producer_conf = pconf
        self.collector: RecordCollector | None = None
        rconf = {**base, "group.id": f"{app}-restore", "client.id": f"{self.client_id}-restore",
                 "isolation.level": "read_committed" if config.eos else "read_uncommitted"}
        self._restore_conf = rconf
        self._restore_listener = restore_listener
        self._standby_wanted = standby_wanted
        self._membership = membership
        #: membership intents (see runtime/membership.py) to commit and pause for; set by the
        #: metadata thread, read here
        self._quiesce_requests: frozenset[str] = frozenset()
        self.quiesce_done: frozenset[str] = frozenset()
        self._paused_for: set[str] = set()
        self._paused_since = 0.0
        self.standby: StandbyUpdater | None = None
        self._next_standby_check = 0.0
        self.restorer: ChangelogReader | None = None
        self._handler = DeserializationHandler(config.default_deserialization_exception_handler)
        n_stores = max(1, len(topology.stores))
        self._cache_entries = config.statestore_cache_max_bytes // (100 * n_stores)
        self._last_commit = time.monotonic()
        self._in_txn = False
        self._rejoin = False
        #: this thread's group member id once it has joined (published for standby placement)
        self.member_id = ""
        self.lock = threading.RLock()  # held while tasks are created/closed (queries read tasks)

    # -- lifecycle -----------------------------------------------------------------------------
    def _set_state(self, s: ThreadState) -> None:
        self.state = s
        self._on_state(self, s)

    def shutdown(self) -> None:
        self._shutdown.set()

    def set_quiesce_requests(self, intents: frozenset[str]) -> None:
        """Membership changes announced in the cluster: commit and stop consuming for each new one
        (answered through ``quiesce_done``) until the next assignment."""
        self._quiesce_requests = intents

    def acked(self, intent: str) -> bool:
        """Committed and paused for ``intent`` (or not in the group yet: nothing to commit)."""
        return self.consumer is None or intent in self.quiesce_done

    def run(self) -> None:
        try:
            self._set_state(ThreadState.STARTING)
            self._open_clients()
            self._loop()
            self._close_clean()
        except BaseException as e:  # reported to the client's uncaught-exception handling
            self._close_dirty()
            self._set_state(ThreadState.DEAD)
            self._on_error(self, e)
            return
        self._set_state(ThreadState.DEAD)

    def _open_clients(self) -> None:
        producer = Producer({**self._producer_conf, "error_cb": self._producer_error})
        self.collector = RecordCollector(producer)
        if self.config.eos:
            producer.init_transactions(30)
        self.restorer = ChangelogReader(self._restore_conf, self._restore_listener)
        self.standby = StandbyUpdater({**self._restore_conf, "client.id": f"{self.client_id}-standby"},
                                      committed=None if self.config.eos else self._committed_lookup)
        if self._membership is not None:
            self._membership.prepare_join(static=bool(self.config.group_instance_id))
        self.consumer = Consumer({**self._consumer_conf, "error_cb": self._consumer_error})
        self._subscribe()

    def _rejoin_group(self, consumer: Consumer) -> Consumer:
        """Leave with this consumer (revoking, so committing, through on_revoke) and join with a
        new one (Kafka Streams' TaskMigrated handling after an aborted transaction)."""
        log.warning("%s: leaving and rejoining the group", self.name)
        consumer.close()
        self.consumer = Consumer({**self._consumer_conf, "error_cb": self._consumer_error})
        self._subscribe()
        return self.consumer

    def _subscribe(self) -> None:
        assert self.consumer is not None
        self.consumer.subscribe(sorted(self._topic_to_sub), on_assign=self._on_assign,
                                on_revoke=self._on_revoke, on_lost=self._on_lost)

    def _producer_error(self, err: KafkaError) -> None:
        if self.collector is not None:
            self.collector.error_cb(err)

    def _consumer_error(self, err: KafkaError) -> None:
        if err.fatal():
            log.error("%s: fatal consumer error %s", self.name, err)

    # -- main loop -------------------------------------------------------------------------------
    def _loop(self) -> None:
        consumer = self.consumer
        assert consumer is not None and self.restorer is not None and self.collector is not None
        max_records = self.config.max_poll_records
        poll_s = self.config.poll_ms / 1000.0
        idle_s = self.config.idle_backoff_ms / 1000.0
        commit_s = self.config.effective_commit_interval_ms / 1000.0
        restore_batch = self.config.restore_max_poll_records
        by_tp = self._by_tp
        restorer = self.restorer
        collector = self.collector
        while not self._shutdown.is_set():
            if restorer.active:
                restorer.step(max_records=restore_batch, on_done=self._restored)
                timeout = 0.0
            else:
                timeout = poll_s
            self._update_standbys()
            msgs = consumer.consume(num_messages=max_records, timeout=timeout)
            if msgs:
                self._begin_txn()
                self._dispatch(msgs, by_tp)
                for task in self.tasks.values():
                    self.processed += task.process()
                collector.poll()
            elif not restorer.active and self.tasks and idle_s > 0:
                self._idle(consumer, idle_s)
            if time.monotonic() - self._last_commit >= commit_s:
                self.commit()
            if self._quiesce_requests != self.quiesce_done:
                self._quiesce(consumer)
            elif self._paused_for and self._membership is not None \
                    and self._membership.may_resume(self._paused_for, self._paused_since):
                self._paused_for.clear()
                self._resume(consumer)
            if self._rejoin:
                self._rejoin = False
                consumer = self._rejoin_group(consumer)

    def _dispatch(self, msgs: list[Any], by_tp: dict[tuple[str, int], StreamTask]) -> None:
        """Hand records to tasks in runs of the same partition (librdkafka returns them so)."""
        run: list[Any] = []
        run_tp: tuple[str, int] | None = None
        for m in msgs:
            tp = (m.topic(), m.partition())
            if tp != run_tp:
                if run:
                    self._deliver(run_tp, run, by_tp)  # type: ignore[arg-type]
                run, run_tp = [], tp
            if m.error() is None:
                run.append(m)
            else:
                self._consume_error(m)
        if run:
            self._deliver(run_tp, run, by_tp)  # type: ignore[arg-type]

    def _deliver(self, tp: tuple[str, int], run: list[Any], by_tp: dict[tuple[str, int], StreamTask]) -> None:
        task = by_tp.get(tp)
        if task is not None:
            task.add_records(tp[0], run)

    def _consume_error(self, m: Any) -> None:
        err = m.error()
        if err.code() == KafkaError._PARTITION_EOF:
            return
        if err.fatal() or not err.retriable():
            raise StreamsException(f"consumer error on {m.topic()}[{m.partition()}]: {err}")

    def _quiesce(self, consumer: Consumer) -> None:
        """Commit, then stop fetching until the announced membership change has happened."""
        requests = self._quiesce_requests
        new = requests - self.quiesce_done
        if new:
            if self.tasks:
                self.commit()
            consumer.pause(consumer.assignment())
            self._paused_for |= new
            self._paused_since = time.monotonic()
        self.quiesce_done = requests

    def _consumable(self) -> list[TopicPartition]:
        """Assigned input partitions that may be fetched: not restoring, not paused for a
        membership change."""
        if self._paused_for:
            return []
        return [TopicPartition(t, p) for (t, p), task in self._by_tp.items() if task.id not in self.restoring]

    def _resume(self, consumer: Consumer) -> None:
        parts = self._consumable()
        if parts:
            consumer.resume(parts)

    def _idle(self, consumer: Consumer, idle_s: float) -> None:
        """Caught up: pause fetching briefly (the dev broker answers idle fetches in a tight loop)."""
        parts = consumer.assignment()
        if not parts:
            self._shutdown.wait(idle_s)
            return
        # an empty poll with records still behind the end offset is fetch latency, not idleness:
        # pausing then would throw away what is being fetched
        for tp in consumer.position(parts):
            high = consumer.get_watermark_offsets(tp, cached=True)[1]
            if tp.offset >= 0 and high is not None and high > tp.offset:
                return
        consumer.pause(parts)
        self._shutdown.wait(idle_s)
        self._resume(consumer)

    # -- commit ----------------------------------------------------------------------------------
    def _begin_txn(self) -> None:
        if self.config.eos and not self._in_txn:
            assert self.collector is not None
            self.collector.producer.begin_transaction()
            self._in_txn = True

    def _offsets(self) -> list[TopicPartition]:
        """Offsets to commit: what tasks processed since the last commit."""
        out: dict[tuple[str, int], int] = {}
        for task in self.tasks.values():
            for topic, off in task.committable.items():
                out[(topic, task.partition)] = off
        return [TopicPartition(t, p, off) for (t, p), off in out.items()]

    def commit(self) -> bool:
        """Flush caches and stores, flush the producer, then commit offsets (or the transaction).
        False if the group refused the commit (a rebalance is under way): the next owner then
        processes those records again, and restores none of their store updates (at-least-once:
        source offsets on the changelog; exactly-once: the transaction aborted)."""
        assert self.collector is not None and self.consumer is not None
        # no lock: only this thread changes tasks; queries read stores, whose flush writes
        # RocksDB before it drops cache entries
        running = [t for tid, t in self.tasks.items() if tid not in self.restoring]
        if self.config.eos:
            self._begin_txn()
        for task in running:
            task.flush()
        offsets = self._offsets()
        if self.config.eos:
            if not self._commit_transaction(offsets):
                return False
        else:
            self.collector.flush()
            if offsets and not self._commit_offsets(offsets):
                return False
        for task in running:
            task.committable.clear()
        if not self.config.eos:
            for task in running:
                self._checkpoint(task)
        if self.standby is not None:
            self.standby.checkpoint_all()
        self._last_commit = time.monotonic()
        return True

    def _checkpoint(self, task: StreamTask) -> None:
        """Record the changelog end offsets the flushed stores now reflect. This thread is the
        only writer of its tasks' changelog partitions, so after a producer flush the end offset
        is exactly what the store holds."""
        assert self.restorer is not None
        if not task.changelogs:
            return
        for tp in task.changelogs:
            task.changelog_offsets[tp] = self.restorer.end_offsets(*tp)[1]
        write_checkpoint(self._task_dir(task.id), task.changelog_offsets)
        task.checkpoint_current = True

    def _commit_transaction(self, offsets: list[TopicPartition]) -> bool:
        """Commit the transaction with the input offsets in it. If the group moved on or the
        transaction must abort, abort it, close every task dirty (their stores may hold aborted
        writes and carry no checkpoint, so they are rebuilt) and rejoin: Kafka Streams'
        TaskMigrated handling."""
        assert self.collector is not None and self.consumer is not None
        producer = self.collector.producer
        try:
            if offsets:
                producer.send_offsets_to_transaction(offsets, self.consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(60)
            self._in_txn = False
            self.collector.check()
            return True
        except KafkaException as e:
            err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
            if err is None or err.fatal() or not (err.txn_requires_abort() or err.code() in _REBALANCE_ERRORS):
                raise
            log.warning("%s: transaction aborted (%s); closing tasks dirty and rejoining", self.name, err.name())
            self._abort_txn()
            self._close_tasks(list(self.tasks), clean=False)
            self._rejoin = True
            return False

    def _commit_offsets(self, offsets: list[TopicPartition]) -> bool:
        """Commit; False when the group has moved on (a rebalance is under way). Kafka Streams
        calls this TaskMigrated: the records since the last commit are processed again by
        whoever owns them next (at-least-once), so the thread keeps going instead of dying."""
        assert self.consumer is not None
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
            return True
        except KafkaException as e:
            err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
            if err is not None and err.code() in _REBALANCE_ERRORS:
                log.warning("%s: offset commit rejected during a rebalance (%s)", self.name, err.name())
                return False
            raise

    # -- rebalance ---------------------------------------------------------------------------------
    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._set_state(ThreadState.PARTITIONS_REVOKED)
        clean = True
        if self.tasks:
            try:
                # a refused commit leaves no checkpoint: the store holds updates the committed
                # offsets do not cover, so whoever owns the task next restores without them
                clean = self.commit()
            except Exception:
                log.exception("%s: commit on revocation failed; closing tasks dirty", self.name)
                self._abort_txn()
                clean = False
        self._close_tasks(list(self.tasks), clean=clean)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._set_state(ThreadState.PARTITIONS_REVOKED)
        self._abort_txn()
        self._close_tasks(list(self.tasks))

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.member_id = consumer.memberid() or ""
        self._set_state(ThreadState.PARTITIONS_ASSIGNED)
        self._paused_for.clear()  # the membership change we paused for has happened
        if self._membership is not None:
            self._membership.joined()
        wanted: dict[TaskId, list[TopicPartition]] = {}
        for tp in partitions:
            sub = self._topic_to_sub.get(tp.topic)
            if sub is not None:
                wanted.setdefault(TaskId(sub, tp.partition), []).append(tp)
        consumer.assign(partitions)
        committed = {} if self.config.eos else self._committed_offsets(partitions)
        with self.lock:
            for tid in sorted(wanted):
                if self.standby is not None and tid in self.standby.tasks:
                    self.standby.remove(tid)  # writes its checkpoint: the active restores the delta
                self._create_task(tid, committed)
            self.assignment_version += 1
        paused = [tp for tid in self.restoring for tp in wanted.get(tid, [])]
        if paused:
            consumer.pause(paused)
        self._resume(consumer)
        if not self.restoring:
            self._set_state(ThreadState.RUNNING)

    def _task_dir(self, tid: TaskId) -> Path:
        return self.config.app_state_dir / str(tid)

    def _committed_lookup(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        if self.consumer is None or not tps:
            return {}
        return self._committed_offsets([TopicPartition(t, p) for t, p in tps])

    def _committed_offsets(self, partitions: list[TopicPartition]) -> dict[tuple[str, int], int]:
        """The group's committed offsets (0 where none): what restores may keep (at-least-once)."""
        assert self.consumer is not None
        found = self.consumer.committed([TopicPartition(tp.topic, tp.partition) for tp in partitions], timeout=30)
        return {(tp.topic, tp.partition): max(tp.offset, 0) for tp in found}

    def _create_task(self, tid: TaskId, committed: dict[tuple[str, int], int]) -> None:
        assert self.collector is not None and self.restorer is not None
        st = self.topology.subtopologies()[tid.subtopology]
        task_dir = self._task_dir(tid)
        lock = TaskDirLock(task_dir)
        if st.stores:
            lock.acquire(wait_s=5.0)
        changelogs = [(self.layout.changelogs[s], tid.partition) for s in st.stores
                      if s in self.layout.changelogs]
        checkpoint = read_checkpoint(task_dir) if st.stores else {}
        if st.stores and not all(tp in checkpoint for tp in changelogs):
            # no trustworthy checkpoint (first start, crash under EOS, or unreadable): rebuild
            checkpoint = {}
            shutil.rmtree(task_dir / "rocksdb", ignore_errors=True)
        if self.config.eos:
            # while the task runs its local state may hold uncommitted writes: a crash must
            # leave no checkpoint behind
            delete_checkpoint(task_dir)
            checkpoint_current = False
        else:
            checkpoint_current = bool(checkpoint)  # until the first write (task.before_write)
        collector = self.collector
        eos = self.config.eos

        def changelog_sender(topic: str, partition: int, task: StreamTask
                             ) -> Callable[[bytes, bytes | None, int], None]:
            send = collector.send
            if eos:  # read_committed restores see committed writes only: no marks needed
                def send_changelog(kb: bytes, vb: bytes | None, ts: int) -> None:
                    send(topic, kb, vb, ts, partition)
                return send_changelog
            mark = task.source_mark

            def send_marked(kb: bytes, vb: bytes | None, ts: int) -> None:
                send(topic, kb, vb, ts, partition, [(SOURCE_HEADER, mark())])
            return send_marked

        task = StreamTask(tid, self.topology, st, self.config.application_id, self._resolve,
                          collector.send, changelog_sender, self.config.app_state_dir,
                          self._cache_entries, self.config.in_memory_stores, self._handler)
        task.dir_lock = lock
        task.changelogs = changelogs
        task.changelog_offsets = {tp: checkpoint.get(tp, 0) for tp in changelogs}
        task.checkpoint_current = checkpoint_current
        self.tasks[tid] = task
        for topic in task.sources:
            self._by_tp[(topic, tid.partition)] = task
        marks = None if self.config.eos else {t: committed.get((t, tid.partition), 0) for t in task.sources}
        for name, store in task.stores.items():
            cl = self.layout.changelogs.get(name)
            if cl is not None and self.restorer.register(task, store, cl, tid.partition,
                                                         checkpoint.get((cl, tid.partition)), marks):
                self.restoring.add(tid)

    def _restored(self, task: StreamTask) -> None:
        assert self.restorer is not None
        for tp in task.changelogs:
            task.changelog_offsets[tp] = self.restorer.end_offsets(*tp)[1]
        self.restoring.discard(task.id)
        assert self.consumer is not None
        if not self._paused_for:
            self.consumer.resume([TopicPartition(t, task.partition) for t in task.sources])
        if not self.restoring and self.state is ThreadState.PARTITIONS_ASSIGNED:
            self._set_state(ThreadState.RUNNING)

    def _close_tasks(self, ids: list[TaskId], clean: bool = False) -> None:
        """Close tasks; ``clean`` (just committed, not restoring) writes their checkpoint."""
        with self.lock:
            for tid in ids:
                task = self.tasks.pop(tid)
                was_restoring = tid in self.restoring
                if self.restorer is not None:
                    self.restorer.remove_owner(task)
                self.restoring.discard(tid)
                for topic in task.sources:
                    self._by_tp.pop((topic, tid.partition), None)
                try:
                    task.close()
                    if clean and not was_restoring:
                        self._checkpoint(task)
                except Exception:
                    log.exception("%s: closing task %s failed", self.name, tid)
                finally:
                    task.dir_lock.release()

    def _abort_txn(self) -> None:
        if self.config.eos and self._in_txn and self.collector is not None:
            try:
                self.collector.producer.abort_transaction(30)
            except Exception:
                log.exception("%s: abort_transaction failed", self.name)
            self._in_txn = False

    def _close_clean(self) -> None:
        self._set_state(ThreadState.PENDING_SHUTDOWN)
        if self.tasks:
            self.commit()
        self._close_tasks(list(self.tasks), clean=True)
        self._close_clients()

    def _close_dirty(self) -> None:
        self._abort_txn()
        try:
            self._close_tasks(list(self.tasks))
        finally:
            self._close_clients()

    # -- standbys ---------------------------------------------------------------------------------
    def _update_standbys(self) -> None:
        """Follow the placement every half second; keep the standbys' changelogs flowing."""
        standby = self.standby
        if standby is None or self._standby_wanted is None:
            return
        now = time.monotonic()
        if now >= self._next_standby_check and self.state is ThreadState.RUNNING:
            self._next_standby_check = now + 0.5
            wanted = {tid for tid in self._standby_wanted(self) if tid not in self.tasks}
            with self.lock:
                for tid in [t for t in standby.tasks if t not in wanted]:
                    standby.remove(tid)
                for tid in sorted(wanted - set(standby.tasks)):
                    try:
                        standby.add(self._new_standby(tid))
                    except StreamsException as e:  # task dir still locked by its old owner here
                        log.info("%s: standby %s not created yet: %s", self.name, tid, e)
        standby.step()

    def _new_standby(self, tid: TaskId) -> StandbyTask:
        assert self.layout is not None
        st = self.topology.subtopologies()[tid.subtopology]
        specs = [self.topology.stores[s] for s in st.stores]
        return StandbyTask(tid, specs, self.layout.changelogs, self._task_dir(tid), self.config.in_memory_stores,
                           [self._resolve(t) for t in st.source_topics])

    def _close_clients(self) -> None:
        if self.consumer is not None:
            try:
                self.consumer.close()
            except Exception:
                log.exception("%s: consumer close failed", self.name)
            self.consumer = None
        if self.restorer is not None:
            self.restorer.close()
            self.restorer = None
        if self.standby is not None:
            self.standby.close()
            self.standby = None
        if self.collector is not None:
            self.collector.producer.flush(10)

    # -- queries -----------------------------------------------------------------------------------
    def local_store(self, store: str, partition: int) -> tuple[KeyValueStore, str, int, int] | None:
        """(store, role, changelog position, end offset) of this thread's replica, or None."""
        with self.lock:
            for tid, task in self.tasks.items():
                if tid.partition == partition and store in task.stores:
                    tp = next((tp for tp in task.changelogs
                               if self.layout.changelogs.get(store) == tp[0]), None)
                    if tid in self.restoring and self.restorer is not None and tp is not None:
                        pos, end = self.restorer.progress(task).get(tp, (-1, -1))
                        return task.stores[store], "RESTORING", pos, end
                    pos = task.changelog_offsets.get(tp, -1) if tp else -1
                    return task.stores[store], "ACTIVE", pos, pos
            if self.standby is not None:
                for tid, sb in self.standby.tasks.items():
                    if tid.partition == partition and store in sb.stores:
                        tp = (self.layout.changelogs.get(store, ""), partition)
                        return (sb.stores[store], "STANDBY", sb.changelog_offsets.get(tp, -1),
                                sb.end_offsets.get(tp, -1))
        return None
