"""StreamThread: the poll → process → commit loop of one group member.

Kafka Streams' main loop, paid per batch: ``consume(num_messages=max.poll.records)`` returns a
batch, the TaskManager hands it to the tasks, each drains its buffer depth-first, and every
``commit.interval.ms`` the TaskManager commits. The thread owns the clients (consumer, producer,
the changelog reader's consumer), the rebalance callbacks, the idle backoff and the pause for an
announced membership change (runtime/membership.py); everything about tasks is the TaskManager's.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from instance.config import StreamsConfig
from instance.errors import TaskMigratedException
from instance.runtime import rebalance_protocol
from instance.runtime.changelog_reader import StoreChangelogReader
from instance.runtime.collector import RecordCollector, producer_config
from instance.runtime.departure import static_member_id
from instance.runtime.handlers import ErrorHandling
from instance.runtime.holds import Hold, held
from instance.runtime.internal_topics import TopicLayout, internal_name
from instance.runtime.membership import MembershipCoordinator, thread_client_prefix, transactional_id
from instance.runtime.restore import StateRestoreListener
from instance.runtime.task import system_clock_ms
from instance.runtime.task_manager import TaskManager
from instance.runtime.task_timeout import retrying
from instance.runtime.txn_offset_commit import TransactionalOffsetCommit
from instance.topology.topology import Topology
from router.core.idle_fetch import IdleFetch, PauseAssignment
from router.core.task_id import TaskId

log = logging.getLogger(__name__)


class ThreadState(enum.Enum):
    CREATED = 0
    STARTING = 1
    PARTITIONS_REVOKED = 2
    PARTITIONS_ASSIGNED = 3
    RUNNING = 4
    PENDING_SHUTDOWN = 5
    DEAD = 6


@dataclass(frozen=True)
class _Pace:
    """The loop's settings, in the units it uses."""

    max_records: int
    poll_s: float
    idle_s: float
    commit_s: float

    @classmethod
    def of(cls, config: StreamsConfig) -> _Pace:
        return cls(config.max_poll_records, config.poll_ms / 1000.0, config.idle_backoff_ms / 1000.0,
                   config.effective_commit_interval_ms / 1000.0)


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
        #: the instance's global stores, loaded before this thread starts (KafkaStreams sets it)
        self.global_stores: Mapping[str, Any] = {}
        self._on_error = on_error
        self.state = ThreadState.CREATED
        self._shutdown = threading.Event()
        self.processed = 0
        app = config.application_id
        self._resolve = internal_name(app, topology)
        self.tasks: TaskManager | None = None  # from the start of run()
        member = config.instance_id
        self.client_id = f"{thread_client_prefix(member)}{index}"
        cconf: dict[str, Any] = {
            "group.id": app,
            "client.id": self.client_id,
            "partition.assignment.strategy": "range",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": config.auto_offset_reset,
            "session.timeout.ms": config.session_timeout_ms,
            # also the rebalance timeout: how long a rebalance waits for members that do not rejoin
            "max.poll.interval.ms": max(config.max_poll_interval_ms, config.session_timeout_ms),
            # members learn of a rebalance at their next heartbeat: keep it short
            "heartbeat.interval.ms": max(100, config.session_timeout_ms // 10),
            "isolation.level": "read_committed" if config.eos else "read_uncommitted",
            "queued.max.messages.kbytes": 65536,
        }
        if config.group_instance_id:
            # static membership is opt-in, as in Kafka Streams: a static member does not leave the
            # group on close, so its partitions wait for it (session.timeout.ms) instead of moving
            cconf["group.instance.id"] = static_member_id(config.group_instance_id, index)
        self._consumer_conf = rebalance_protocol.main_consumer_settings(
            config.group_protocol, config.client_config("main.consumer", **cconf))
        #: partitions move a few at a time (KIP-848): revocations and assignments are increments
        self._incremental = config.group_protocol == rebalance_protocol.CONSUMER
        self._restore_conf = config.client_config(
            "restore.consumer", **{"group.id": f"{app}-restore", "client.id": f"{self.client_id}-restore",
                                   "isolation.level": "read_committed" if config.eos else "read_uncommitted"})
        self._restore_listener = restore_listener
        self._standby_wanted = standby_wanted
        self._membership = membership
        #: membership intents (see runtime/membership.py) to commit and pause for; set by the
        #: metadata thread, read here
        self._quiesce_requests: frozenset[str] = frozenset()
        self.quiesce_done: frozenset[str] = frozenset()
        #: intents we committed and paused for -> when (monotonic)
        self._paused_for: dict[str, float] = {}
        self._paused_since = 0.0
        self._revoked_at = 0.0
        self._next_standby_check = 0.0
        #: the exception handlers and what they dropped
        self.errors = ErrorHandling(config.to_properties())
        #: this thread's group member id once it has joined (published for standby placement)
        self.member_id = ""
        #: when the loop last turned (monotonic): a thread stuck longer than a bound is not live
        self.last_turn = time.monotonic()
        #: the consumer is being closed: an assignment it still reports must create no task
        self._leaving = False
        #: raised in a rebalance callback, raised again once the poll returns (as Kafka's consumer
        #: rethrows from poll()): the loop handles it with the others
        self._from_callback: TaskMigratedException | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def dropped_records(self) -> dict[str, int]:
        """Records this thread dropped, by reason (read from other threads)."""
        tm = self.tasks
        return tm.dropped_records() if tm is not None else dict(self.errors.dropped)

    def dirty_closes(self) -> int:
        """Active tasks this thread closed without a commit (its ``dirty-close-total``)."""
        tm = self.tasks
        return tm.metrics.dirty_close.count if tm is not None else 0

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
        return self.tasks is None or self.tasks.consumer is None or intent in self.quiesce_done

    def run(self) -> None:
        try:
            self._set_state(ThreadState.STARTING)
            tm = self._open_clients()
            self._loop(tm)
            self._set_state(ThreadState.PENDING_SHUTDOWN)
            tm.shutdown(clean=True)
        except BaseException as e:  # reported to the client's uncaught-exception handling
            try:
                if self.tasks is not None:
                    self.tasks.shutdown(clean=False)
            except BaseException:
                log.exception("%s: closing tasks after a failure failed too", self.name)
            finally:
                self._close_clients()
            self._set_state(ThreadState.DEAD)
            self._on_error(self, e)
            return
        self._close_clients()
        self._set_state(ThreadState.DEAD)

    def _open_clients(self) -> TaskManager:
        reader = StoreChangelogReader(self._restore_conf, self._restore_listener,
                                      committed=None if self.config.eos else self._committed_lookup,
                                      task_timeout_ms=self.config.task_timeout_ms)
        self.tasks = TaskManager(self.name, self.config, self.topology, self.layout, self._resolve,
                                 self._new_collector, reader, self.errors)
        self.tasks.global_stores = self.global_stores
        if self._membership is not None:
            self.tasks.committer.on_producer_replaced = self._membership.fence_later
            if self._membership.enabled and not self.config.eos:
                self.tasks.committer.refused_at_revocation = TransactionalOffsetCommit(self.config, self.client_id)
            self._membership.prepare_join(static=bool(self.config.group_instance_id))
        self._subscribe(self.tasks)
        return self.tasks

    def _new_collector(self) -> RecordCollector:
        """A producer of our own; under exactly-once with a transactional id never used before
        (runtime/membership.py says why). One that saw every broker go away while it waited for
        its producer id is dropped at once where the membership assist abandons such producers."""
        while True:
            collector = self._make_collector()
            if not collector.abandoned:
                return collector
            log.info("%s: the broker went away while the producer started; starting another", self.name)
            collector.discard()

    def _make_collector(self) -> RecordCollector:
        config = self.config
        tid = transactional_id(config.application_id, config.instance_id, self.index) if config.eos else None
        abandon = self._membership is not None and self._membership.abandons_producers_on_outage
        collector = RecordCollector(producer_config(config, f"{self.client_id}-producer", transactional_id=tid),
                                    abandon_when_brokers_down=abandon)
        collector.on_delivery_error = self.errors.delivery_failed
        if tid is not None:
            producer = collector.producer
            retrying(lambda: producer.init_transactions(30), "initialising transactions", config.task_timeout_ms,
                     self.name)
            collector.poll()  # an outage reported during the wait: the producer is abandoned now
        return collector

    def _committed_lookup(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return self.tasks.committed_offsets(tps) if self.tasks is not None else {}

    def _subscribe(self, tm: TaskManager) -> Consumer:
        consumer = Consumer({**self._consumer_conf, "error_cb": self._consumer_error})
        tm.consumer = consumer
        consumer.subscribe(sorted(tm.topic_to_sub), on_assign=self._on_assign,
                           on_revoke=self._on_revoke, on_lost=self._on_lost)
        return consumer

    def _task_migrated(self, tm: TaskManager, consumer: Consumer, e: TaskMigratedException) -> Consumer:
        """The one place the group having moved on is handled (Kafka Streams' handleTaskMigrated).
        Offsets refused (at-least-once): the rebalance under way moves the tasks, which keep their
        state meanwhile. Otherwise: every task closed dirty, a new producer, and the group rejoined."""
        if not e.start_over:
            log.warning("%s: %s; the rebalance under way moves the tasks", self.name, e)
            return consumer
        log.warning("%s: %s; closing tasks dirty, starting over from the last commit", self.name, e)
        tm.handle_lost_all()
        return self._rejoin_group(tm, consumer)

    def _rejoin_group(self, tm: TaskManager, consumer: Consumer) -> Consumer:
        """Start over from the last commit after an aborted transaction or a lost producer (Kafka
        Streams' TaskMigrated handling). Classic protocol: leave with this consumer (revoking, so
        committing, through on_revoke) and join with a new one. Consumer protocol: the member
        keeps its place and its partitions (another member's join bumps its epoch, which aborts
        a transaction in flight; leaving would only start another rebalance): re-assign them here
        so fetching resumes at the committed offsets, and create their tasks again."""
        if self._incremental:
            log.warning("%s: restarting its tasks from the last commit", self.name)
            parts = consumer.assignment()
            consumer.incremental_unassign(parts)
            self._on_assign(consumer, parts)
            return consumer
        log.warning("%s: leaving and rejoining the group", self.name)
        self._leaving = True
        try:
            consumer.close()
        finally:
            self._leaving = False
        return self._subscribe(tm)

    def _consumer_error(self, err: KafkaError) -> None:
        if err.fatal():
            log.error("%s: fatal consumer error %s", self.name, err)

    # -- main loop -------------------------------------------------------------------------------
    def _loop(self, tm: TaskManager) -> None:
        consumer = tm.consumer
        assert consumer is not None
        pace = _Pace.of(self.config)
        while not self._shutdown.is_set():
            try:
                self._turn(tm, consumer, pace)
            except TaskMigratedException as e:
                consumer = self._task_migrated(tm, consumer, e)

    def _turn(self, tm: TaskManager, consumer: Consumer, pace: _Pace) -> None:
        """One turn of the loop: pause or resume for a membership change, restore or poll,
        process, maybe commit. The pause comes first, so a commit that raises does not delay it."""
        self.last_turn = time.monotonic()
        if self._quiesce_requests != self.quiesce_done:
            self._quiesce(tm, consumer)
        elif self._paused_for and self._membership is not None \
                and self._membership.may_resume(set(self._paused_for), self._paused_since):
            self._paused_for.clear()
            self._resume(consumer)
        restorer = tm.restorer
        if restorer.active:
            self._restored(tm, tm.restore_step())
            timeout = 0.0
        else:
            timeout = pace.poll_s
        self._update_standbys(tm)
        if not self._paused_for:
            # wall-clock punctuation between batches, on this thread: never during process()
            wait_ms = tm.punctuate() - system_clock_ms()
            if wait_ms < timeout * 1000:
                timeout = max(0.0, wait_ms / 1000.0)
        msgs = consumer.consume(num_messages=pace.max_records, timeout=timeout)
        if self._from_callback is not None:
            e, self._from_callback = self._from_callback, None
            raise e
        if msgs:
            tm.add_records(msgs)
        # every turn, idle too: an outage the producer reports must be seen before a restarted
        # broker could take its records (runtime/membership.py)
        tm.collector.poll()
        if tm.buffered and not self._paused_for:
            # paused for a membership change: keep what was fetched unprocessed; the next
            # owner starts from the commit, or we go on if no rebalance comes
            self.processed += tm.process()
            tm.collector.poll()
        elif not msgs and not restorer.active and tm.tasks and pace.idle_s > 0:
            self._idle(consumer, pace.idle_s)
        if (time.monotonic() - tm.last_commit >= pace.commit_s or tm.commit_requested()) and not held(Hold.COMMIT):
            tm.commit()

    def _quiesce(self, tm: TaskManager, consumer: Consumer) -> None:
        """Commit, then stop fetching until the announced membership change has happened."""
        requests = self._quiesce_requests
        new = requests - self.quiesce_done
        try:
            if new and tm.tasks:
                tm.commit()  # the group having moved on is handled by the loop, paused all the same
        finally:
            if new:
                consumer.pause(consumer.assignment())
                self._paused_since = now = time.monotonic()
                self._paused_for.update(dict.fromkeys(new, now))
            self.quiesce_done = requests

    def _consumable(self) -> list[TopicPartition]:
        """Assigned input partitions that may be fetched: not restoring, not paused for a
        membership change."""
        tm = self.tasks
        if self._paused_for or tm is None:
            return []
        return [TopicPartition(t, p) for (t, p), task in tm.by_tp.items() if not task.lifecycle.restoring]

    def _resume(self, consumer: Consumer) -> None:
        parts = self._consumable()
        if parts:
            consumer.resume(parts)

    def _idle(self, consumer: Consumer, idle_s: float) -> None:
        """Caught up: pause fetching briefly (router/core/idle_fetch.py: the dev broker answers idle
        fetches in a tight loop)."""
        parts = consumer.assignment()
        if not parts:
            self._shutdown.wait(idle_s)
            return
        # an empty poll with records still behind the end offset is fetch latency, not idleness:
        # a pause would make the fetch in flight outdated and throw its answer away. Before a
        # partition returned a record its position is unknown: compare with where fetching
        # starts, or a first fetch slower than poll.ms + the backoff is thrown away at every
        # pause (the dev broker answers it with the whole partition: 16 MB for 300k lines).
        start = self.tasks.start_offsets if self.tasks is not None else {}
        for tp in consumer.position(parts):
            low, high = consumer.get_watermark_offsets(tp, cached=True)
            if high is None or high < 0:
                return  # no fetch answered yet
            position = tp.offset if tp.offset >= 0 else max(start.get((tp.topic, tp.partition), 0), low)
            if high > position:
                return
        IdleFetch(PauseAssignment(consumer, self._consumable), idle_s).hold(self._shutdown.wait)

    # -- rebalance ---------------------------------------------------------------------------------
    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._set_state(ThreadState.PARTITIONS_REVOKED)
        self._revoked_at = time.monotonic()
        assert self.tasks is not None
        try:
            if self._incremental:
                # only these move: commit everything (one transaction covers every task), close theirs
                try:
                    self.tasks.revoke(partitions)
                finally:
                    consumer.incremental_unassign(partitions)
            else:
                self.tasks.revoke()
        except TaskMigratedException as e:  # every task is closed: the loop starts over after the poll
            self._from_callback = e

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._set_state(ThreadState.PARTITIONS_REVOKED)
        assert self.tasks is not None
        self.tasks.handle_lost_all()

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._leaving:
            return
        self.member_id = consumer.memberid() or ""
        self._set_state(ThreadState.PARTITIONS_ASSIGNED)
        # a change we paused for has happened if it was announced before this rebalance began
        # and, for a leave or a removal, its announcer is done (a leaver that is still leaving
        # causes the next rebalance, not this one): otherwise stay paused
        if self._membership is not None:
            self._paused_for = {i: t for i, t in self._paused_for.items()
                                if not self._membership.happened(i, t, self._revoked_at)}
        if self._membership is not None:
            self._membership.joined()
        assert self.tasks is not None
        if self._incremental:
            consumer.incremental_assign(partitions)  # added to what this member keeps
        else:
            consumer.assign(partitions)
        paused = self.tasks.assign(partitions)
        if self._paused_for:
            paused = partitions
        if paused:
            consumer.pause(paused)
        self._resume(consumer)
        if not self.tasks.restoring:
            self._set_state(ThreadState.RUNNING)

    def _restored(self, tm: TaskManager, done: list[Any]) -> None:
        if not done:
            return
        if not self._paused_for and tm.consumer is not None:
            tm.consumer.resume([TopicPartition(t, task.partition) for task in done for t in task.sources])
        if not tm.restoring and self.state is ThreadState.PARTITIONS_ASSIGNED:
            self._set_state(ThreadState.RUNNING)

    # -- standbys ---------------------------------------------------------------------------------
    def _update_standbys(self, tm: TaskManager) -> None:
        """Follow the placement every half second; keep the standbys' changelogs flowing."""
        if self._standby_wanted is None:
            return
        now = time.monotonic()
        if now >= self._next_standby_check and self.state is ThreadState.RUNNING:
            self._next_standby_check = now + 0.5
            tm.update_standbys(self._standby_wanted(self))
        tm.standby.step()

    def _close_clients(self) -> None:
        tm = self.tasks
        if tm is None:
            return
        if tm.consumer is not None:
            self._leaving = True
            try:
                tm.consumer.close()
            except RuntimeError:  # already closed
                pass
            tm.consumer = None
        tm.restorer.close()
        tm.standby.close()
        if tm.committer.refused_at_revocation is not None:
            tm.committer.refused_at_revocation.close()
        try:
            tm.collector.producer.flush(10)
        except (KafkaException, SystemError) as e:  # a producer that failed fatally raises here too
            log.warning("%s: closing the producer: %s", self.name, e)
