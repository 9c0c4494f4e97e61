"""StreamThread: the poll → process → commit loop of one group member.

Kafka Streams' main loop, paid per batch: ``consume(num_messages=max.poll.records)`` returns a
batch, the TaskManager hands it to the tasks, each drains its buffer depth-first, and every
``commit.interval.ms`` the TaskManager commits. The thread owns the clients (consumer, producer,
the changelog reader's consumer) and the rebalance callbacks; everything about tasks is the
TaskManager's, every reason a partition is paused (restoring, a membership change, idle) the
Pausing's (runtime/pausing.py).

:meth:`StreamThread.create` is the one factory, as Kafka Streams' ``StreamThread.create``: it
decides every part of a thread (client settings from runtime/thread_clients.py, callbacks, the
global stores); :meth:`StreamThread._open` opens the clients and builds the TaskManager with all
its collaborators when the thread runs, so a client that fails to start fails the thread (the
uncaught-exception handler decides), not ``KafkaStreams.start()``.
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
from instance.runtime.collector import RecordCollector
from instance.runtime.holds import Hold, held
from instance.runtime.internal_topics import TopicLayout, internal_name
from instance.runtime.membership import MembershipCoordinator, thread_client_prefix, transactional_id
from instance.runtime.pausing import Pausing
from instance.runtime.restore import StateRestoreListener
from instance.runtime.streams_group.assignment import PartitionsByEndpoint
from instance.runtime.streams_group.declaration import declare
from instance.runtime.streams_group.thread_member import ThreadMember, thread_member
from instance.runtime.task import system_clock_ms
from instance.runtime.task_manager import TaskManager
from instance.runtime.task_timeout import retrying
from instance.runtime.thread_clients import main_consumer_config, producer_config, restore_consumer_config
from instance.runtime.txn_offset_commit import TransactionalOffsetCommit
from instance.topology.handlers import ErrorHandling
from instance.topology.topology import Topology
from kernel.idle_fetch import CallbackSwitch, IdleFetch
from kernel.task_id import TaskId

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


@dataclass(frozen=True)
class ThreadClients:
    """The settings of a thread's consumers (runtime/thread_clients.py), decided by the factory."""

    client_id: str
    main_consumer: Mapping[str, Any]
    restore_consumer: Mapping[str, Any]


class StreamThread(threading.Thread):
    @classmethod
    def create(cls, index: int, config: StreamsConfig, topology: Topology, layout: TopicLayout, *,
               on_state: Callable[[StreamThread, ThreadState], None],
               on_error: Callable[[StreamThread, BaseException], None],
               restore_listener: StateRestoreListener | None = None,
               standby_wanted: Callable[[StreamThread], set[TaskId]] | None = None,
               membership: MembershipCoordinator | None = None,
               global_stores: Mapping[str, Any] | None = None, process_id: str = "") -> StreamThread:
        """Stream thread ``index`` with everything it is made of: its clients' settings, the
        client's callbacks (state, error, standby placement, membership), the restore listener and
        the instance's global stores (loaded before any thread starts); ``process_id``: the
        instance's, shared by its threads' members under ``group.protocol=streams``."""
        client_id = f"{thread_client_prefix(config.instance_id)}{index}"
        clients = ThreadClients(client_id, main_consumer_config(config, client_id, index),
                                restore_consumer_config(config, client_id))
        return cls(index, config, topology, layout, clients, on_state, on_error, restore_listener, standby_wanted,
                   membership, global_stores or {}, process_id)

    def __init__(self, index: int, config: StreamsConfig, topology: Topology, layout: TopicLayout,
                 clients: ThreadClients, on_state: Callable[[StreamThread, ThreadState], None],
                 on_error: Callable[[StreamThread, BaseException], None],
                 restore_listener: StateRestoreListener | None,
                 standby_wanted: Callable[[StreamThread], set[TaskId]] | None,
                 membership: MembershipCoordinator | None, global_stores: Mapping[str, Any],
                 process_id: str = "") -> None:
        """Use :meth:`create`."""
        super().__init__(name=f"{config.application_id}-StreamThread-{index}", daemon=True)
        self.index = index
        self.config = config
        self.topology = topology
        self.layout = layout
        self._on_state = on_state
        #: the instance's global stores, loaded before this thread starts
        self._global_stores = global_stores
        self._on_error = on_error
        self.state = ThreadState.CREATED
        self._shutdown = threading.Event()
        #: set with the shutdown: leave the group for good though a static member
        self._leave_group = False
        self.processed = 0
        self._resolve = internal_name(config.application_id, topology)
        #: the thread's tasks, from the start of run() (:meth:`_open`)
        self.task_manager: TaskManager | None = None
        self.client_id = clients.client_id
        self._clients = clients
        #: the group consumer now: replaced when the thread rejoins, None before it subscribes and once closed
        self._consumer: Consumer | None = None
        #: partitions move a few at a time (KIP-848, KIP-1071): revocations and assignments are increments
        self._incremental = config.group_protocol in (rebalance_protocol.CONSUMER, rebalance_protocol.STREAMS)
        #: group.protocol=streams: this thread's streams group member (runtime/streams_group/thread_member.py)
        self._group: ThreadMember | None = None
        self._process_id = process_id
        self._restore_listener = restore_listener
        self._standby_wanted = standby_wanted
        self._membership = membership
        #: which input partitions are paused and why (restoring, a membership change, idle)
        self._pausing = Pausing(self._current_consumer, self._input_partitions)
        #: membership intents (see runtime/membership.py) to commit and pause for; set by the
        #: metadata thread, read here
        self._quiesce_requests: frozenset[str] = frozenset()
        self.quiesce_done: frozenset[str] = frozenset()
        self._revoked_at = 0.0
        self._next_standby_check = 0.0
        #: the exception handlers and what they dropped
        self.errors = ErrorHandling(config.to_properties(), send=self._send_dead_letter)
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
        tm = self.task_manager
        return tm.dropped_records() if tm is not None else dict(self.errors.dropped)

    def dirty_closes(self) -> int:
        """Active tasks this thread closed without a commit (its ``dirty-close-total``)."""
        tm = self.task_manager
        return tm.metrics.dirty_close.count if tm is not None else 0

    def _set_state(self, s: ThreadState) -> None:
        self.state = s
        self._on_state(self, s)

    def shutdown(self, leave_group: bool = False) -> None:
        """Stop at the next turn; ``leave_group``: a static member leaves the group for good
        (under the streams protocol with epoch -1: its tasks move at once, not after the session)."""
        self._leave_group = leave_group
        self._shutdown.set()

    @property
    def group_endpoints(self) -> PartitionsByEndpoint | None:
        """group.protocol=streams: the broker's endpoint map as this thread's member last heard it."""
        return self._group.member.endpoints if self._group is not None else None

    def set_quiesce_requests(self, intents: frozenset[str]) -> None:
        """Membership changes announced in the cluster: commit and stop consuming for each new one
        (answered through ``quiesce_done``) until the next assignment."""
        self._quiesce_requests = intents

    def acked(self, intent: str) -> bool:
        """Committed and paused for ``intent`` (or not in the group yet: nothing to commit)."""
        return self.task_manager is None or self._consumer is None or intent in self.quiesce_done

    def run(self) -> None:
        try:
            self._set_state(ThreadState.STARTING)
            tm = self._open()
            self._loop(tm)
            self._set_state(ThreadState.PENDING_SHUTDOWN)
            tm.shutdown(clean=True)
        except BaseException as e:  # reported to the client's uncaught-exception handling
            try:
                if self.task_manager is not None:
                    self.task_manager.shutdown(clean=False)
            except BaseException:
                log.exception("%s: closing tasks after a failure failed too", self.name)
            finally:
                self._close_clients()
            self._set_state(ThreadState.DEAD)
            self._on_error(self, e)
            return
        self._close_clients()
        self._set_state(ThreadState.DEAD)

    def _open(self) -> TaskManager:
        """Open the clients and build the TaskManager with every collaborator it needs, then join
        the group."""
        config, membership = self.config, self._membership
        reader = StoreChangelogReader(dict(self._clients.restore_consumer), self._restore_listener,
                                      committed=None if config.eos else self._committed_lookup,
                                      task_timeout_ms=config.task_timeout_ms)
        refused = None
        if membership is not None and membership.enabled and not config.eos:
            refused = TransactionalOffsetCommit(config, self.client_id)
        self.task_manager = tm = TaskManager(
            self.name, config, self.topology, self.layout, self._resolve, self._new_collector, reader, self.errors,
            consumer=self._current_consumer, global_stores=self._global_stores,
            on_producer_replaced=membership.fence_later if membership is not None else None,
            refused_at_revocation=refused)
        if membership is not None:
            membership.prepare_join(static=bool(config.group_instance_id))
        self._subscribe(tm)
        return tm

    def _send_dead_letter(self, topic: str, key: bytes | None, value: bytes | None, ts: int, partition: int,
                          headers: Any) -> None:
        """A dead letter goes through the thread's current producer (replaced after a fence, a
        failure or an abort), as the records of the task that dropped it do."""
        tm = self.task_manager
        assert tm is not None  # records are processed only once the task manager exists
        tm.collector.send(topic, key, value, ts, partition, headers)

    def _current_consumer(self) -> Consumer | None:
        return self._consumer

    def _input_partitions(self) -> list[tuple[str, int]]:
        tm = self.task_manager
        return tm.tasks.input_partitions() if tm is not None else []

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
        return self.task_manager.committed_offsets(tps) if self.task_manager is not None else {}

    def _subscribe(self, tm: TaskManager) -> Consumer:
        settings = {**self._clients.main_consumer, "error_cb": self._consumer_error}
        if self.config.group_protocol == rebalance_protocol.STREAMS:
            # a member of the streams group: the consumer is assigned what the broker gives the member
            declaration = declare(self.topology, self.config.application_id, self.config.replication_factor)
            self._group, member_consumer = thread_member(self.config, declaration, self._process_id, self.index,
                                                         settings, self)
            self._consumer = member_consumer
            return member_consumer
        consumer = Consumer(settings)
        self._consumer = consumer
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
        consumer = self._consumer
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
        if self._group is not None:
            self._group.poll()  # a heartbeat when due; a new assignment is acted on here
        pausing = self._pausing
        if self._quiesce_requests != self.quiesce_done:
            self._quiesce(tm, consumer)
        elif pausing.for_membership and self._membership is not None \
                and self._membership.may_resume(set(pausing.intents), pausing.since):
            pausing.end_membership_pause()
        restorer = tm.restorer
        if restorer.active:
            self._restored(tm, tm.restore_step())
            timeout = 0.0
        else:
            timeout = pace.poll_s
        self._update_standbys(tm)
        if not pausing.for_membership:
            # wall-clock punctuation between batches, on this thread: never during process()
            wait_ms = tm.punctuate() - system_clock_ms()
            if wait_ms < timeout * 1000:
                timeout = max(0.0, wait_ms / 1000.0)
        if self._group is not None:
            timeout = min(timeout, self._group.seconds_to_heartbeat())
        msgs = consumer.consume(num_messages=pace.max_records, timeout=timeout)
        if self._from_callback is not None:
            e, self._from_callback = self._from_callback, None
            raise e
        if msgs:
            tm.add_records(msgs)
        # every turn, idle too: an outage the producer reports must be seen before a restarted
        # broker could take its records (runtime/membership.py)
        tm.collector.poll()
        if tm.buffered and not pausing.for_membership:
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
                self._pausing.pause_for_membership(new, time.monotonic())
            self.quiesce_done = requests

    def _idle(self, consumer: Consumer, idle_s: float) -> None:
        """Caught up: pause fetching briefly (kernel/idle_fetch.py: the dev broker answers idle
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
        start = self.task_manager.start_offsets if self.task_manager is not None else {}
        for tp in consumer.position(parts):
            low, high = consumer.get_watermark_offsets(tp, cached=True)
            if high is None or high < 0:
                return  # no fetch answered yet
            position = tp.offset if tp.offset >= 0 else max(start.get((tp.topic, tp.partition), 0), low)
            if high > position:
                return
        pausing = self._pausing
        IdleFetch(CallbackSwitch(pausing.pause_idle, pausing.resume_idle), idle_s).hold(self._shutdown.wait)

    # -- rebalance ---------------------------------------------------------------------------------
    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._set_state(ThreadState.PARTITIONS_REVOKED)
        self._revoked_at = time.monotonic()
        assert self.task_manager is not None
        try:
            if self._incremental:
                # only these move: commit everything (one transaction covers every task), close theirs
                try:
                    self.task_manager.revoke(partitions)
                finally:
                    consumer.incremental_unassign(partitions)
                    self._pausing.revoked(partitions)
            else:
                self.task_manager.revoke()
        except TaskMigratedException as e:  # every task is closed: the loop starts over after the poll
            self._from_callback = e

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._set_state(ThreadState.PARTITIONS_REVOKED)
        assert self.task_manager is not None
        self.task_manager.handle_lost_all()
        self._pausing.revoked()

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._leaving:
            return
        self.member_id = consumer.memberid() or ""
        self._set_state(ThreadState.PARTITIONS_ASSIGNED)
        # a change we paused for has happened if it was announced before this rebalance began
        # and, for a leave or a removal, its announcer is done (a leaver that is still leaving
        # causes the next rebalance, not this one): otherwise stay paused
        membership = self._membership
        if membership is not None:
            revoked_at = self._revoked_at
            self._pausing.keep_intents(lambda i, t: not membership.happened(i, t, revoked_at))
            membership.joined()
        assert self.task_manager is not None
        if self._incremental:
            consumer.incremental_assign(partitions)  # added to what this member keeps
        else:
            consumer.assign(partitions)
        restoring = self.task_manager.assign(partitions)
        self._pausing.assigned(partitions, restoring, self._incremental)
        if not self.task_manager.restoring:
            self._set_state(ThreadState.RUNNING)

    # -- streams group (group.protocol=streams): runtime/streams_group/thread_member.py's hooks --------
    def take_partitions(self, partitions: list[TopicPartition]) -> None:
        consumer = self._consumer
        assert consumer is not None
        self._on_assign(consumer, partitions)

    def give_up_partitions(self, partitions: list[TopicPartition]) -> None:
        consumer = self._consumer
        assert consumer is not None
        self._on_revoke(consumer, partitions)

    def lose_all(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        log.warning("%s: fenced out of the streams group; its tasks are lost, rejoining", self.name)
        self._on_lost(consumer, [])
        held = consumer.assignment()
        if held:
            consumer.incremental_unassign(held)

    def task_offsets(self) -> tuple[dict[TaskId, int], dict[TaskId, int]]:
        offsets: dict[TaskId, int] = {}
        ends: dict[TaskId, int] = {}
        tm = self.task_manager
        if tm is None:
            return offsets, ends
        for hosted in tm.tasks.snapshot().replicas:
            replica, tid = hosted.replica, hosted.task_id
            if replica.position < 0:
                continue  # not logged
            offsets[tid] = offsets.get(tid, 0) + replica.position
            ends[tid] = ends.get(tid, 0) + max(replica.end_offset, replica.position)
        return offsets, ends

    def _restored(self, tm: TaskManager, done: list[Any]) -> None:
        if not done:
            return
        self._pausing.restored([(t, task.partition) for task in done for t in task.sources])
        if not tm.restoring and self.state is ThreadState.PARTITIONS_ASSIGNED:
            self._set_state(ThreadState.RUNNING)

    # -- standbys ---------------------------------------------------------------------------------
    def _update_standbys(self, tm: TaskManager) -> None:
        """Follow the placement every half second; keep the standbys' changelogs flowing."""
        group, wanted = self._group, self._standby_wanted
        if group is None and wanted is None:
            return
        now = time.monotonic()
        if now >= self._next_standby_check and self.state is ThreadState.RUNNING:
            self._next_standby_check = now + 0.5
            # under the streams protocol the broker places them (standbys and warm-ups)
            tm.update_standbys(set(group.standbys) if group is not None else wanted(self))  # type: ignore[misc]
        tm.standby.step()

    def _close_clients(self) -> None:
        tm = self.task_manager
        if tm is None:
            return
        if self._group is not None:
            self._group.leave(for_good=self._leave_group)  # after the tasks were committed and closed
        if self._consumer is not None:
            self._leaving = True
            try:
                self._consumer.close()
            except RuntimeError:  # already closed
                pass
            self._consumer = None
        tm.restorer.close()
        tm.standby.close()
        if tm.committer.refused_at_revocation is not None:
            tm.committer.refused_at_revocation.close()
        try:
            tm.collector.producer.flush(10)
        except (KafkaException, SystemError) as e:  # a producer that failed fatally raises here too
            log.warning("%s: closing the producer: %s", self.name, e)
