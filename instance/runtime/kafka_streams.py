"""KafkaStreams: the client that runs a topology on this instance and answers for its state."""

from __future__ import annotations

import collections
import enum
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from confluent_kafka.admin import AdminClient

from instance.config import StreamsConfig
from instance.errors import (
    IllegalStateException,
    ProductionException,
    SerializationException,
    StreamsNotStartedException,
    UnknownStateStoreException,
)
from instance.runtime import internal_topics, rebalance_protocol
from instance.runtime.broker_kind import membership_assist
from instance.runtime.departure import departing, remove_static_members
from instance.runtime.global_thread import GlobalStreamThread
from instance.runtime.membership import MembershipCoordinator
from instance.runtime.metadata_service import MetadataService, ensure_metadata_topic
from instance.runtime.metrics import MetricName, Metrics
from instance.runtime.query import StateQueryRequest, StateQueryResult
from instance.runtime.query.execute import execute
from instance.runtime.query.request import StorePlacement
from instance.runtime.query_counters import QueryCounters
from instance.runtime.reachability import reached_admin
from instance.runtime.restore import StateRestoreListener
from instance.runtime.states import State, StateListener, StateMachine
from instance.runtime.stream_thread import StreamThread, ThreadState
from instance.runtime.streams_group.declaration import declare
from instance.runtime.streams_group.errors import StreamsGroupError
from instance.runtime.streams_group.routing import GroupRoutedView, freshest
from instance.runtime.task_manager import TaskManager
from instance.state.cleanup import clean_unowned_task_dirs
from instance.state.spec import StoreSpec
from instance.topology.topology import Topology
from kernel.echo import echo
from kernel.metadata import (
    NOT_AVAILABLE,
    ClusterView,
    HostInfo,
    InstanceCounters,
    InstanceInfo,
    KeyQueryMetadata,
    StoreInfo,
    StorePartitionInfo,
    liveness_ms,
)
from kernel.task_id import TaskId

log = logging.getLogger(__name__)
R = TypeVar("R")


class StreamThreadExceptionResponse(enum.Enum):
    """What the uncaught-exception handler asks for (Kafka Streams' names)."""

    REPLACE_THREAD = 0
    SHUTDOWN_CLIENT = 1
    SHUTDOWN_APPLICATION = 2


UncaughtExceptionHandler = Callable[[BaseException], StreamThreadExceptionResponse]


class KafkaStreams:
    def __init__(self, topology: Topology, config: StreamsConfig | Mapping[str, Any]) -> None:
        self.config = config if isinstance(config, StreamsConfig) else StreamsConfig.from_properties(config)
        self.topology = topology
        topology.subtopologies()
        topology.configure_serdes(self.config.serde_properties)
        self._sm = StateMachine()
        self._handler: UncaughtExceptionHandler | None = None
        self.restore_listener: StateRestoreListener | None = None
        self.threads: list[StreamThread] = []
        self.global_thread: GlobalStreamThread | None = None
        self.layout: internal_topics.TopicLayout | None = None
        self.instance_id = self.config.instance_id
        self.view = self._new_view()
        self._metadata: MetadataService | None = None
        self._assigned_at_ms = 0
        self._close_lock = threading.Lock()
        self.last_error: BaseException | None = None
        self.membership: MembershipCoordinator | None = None
        #: counted by the query server, published with the instance's metadata
        self.query_counters = QueryCounters()
        #: records processed by stream threads that were replaced (their counts stay in the total)
        self._processed_by_gone_threads = 0
        self._next_cleanup = time.monotonic() + self.config.state_cleanup_delay_ms / 1000.0
        #: store -> its placement, filled as queries name stores (:meth:`store_placement`)
        self._placements: dict[str, StorePlacement] = {}
        #: the process id this instance's stream threads declare under group.protocol=streams
        self.process_id = str(uuid.uuid4())

    def _new_view(self) -> ClusterView:
        """Who holds what: the instances topic's view; under group.protocol=streams owners and
        standbys from the broker's endpoint map (runtime/streams_group/routing.py)."""
        liveness = liveness_ms(self.config.heartbeat_interval_ms)
        if self.config.group_protocol != rebalance_protocol.STREAMS:
            return ClusterView(liveness_ms=liveness)
        declaration = declare(self.topology, self.config.application_id, self.config.replication_factor)

        def partition_of(task: TaskId) -> tuple[str, int] | None:
            return min(declaration.partitions_of(task), default=None)

        return GroupRoutedView(liveness, lambda: freshest([m for t in list(self.threads)
                                                           if (m := t.group_endpoints) is not None]), partition_of)

    # -- state --------------------------------------------------------------------------------
    @property
    def state(self) -> State:
        return self._sm.state

    def set_state_listener(self, listener: StateListener) -> None:
        if self.state is not State.CREATED:
            raise IllegalStateException("the state listener can only be set in state CREATED")
        self._sm.listener = listener

    def set_uncaught_exception_handler(self, handler: UncaughtExceptionHandler) -> None:
        if self.state is not State.CREATED:
            raise IllegalStateException("the exception handler can only be set in state CREATED")
        self._handler = handler

    def wait_for_state(self, states: set[State], timeout: float) -> bool:
        return self._sm.wait_for(states, timeout)

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        if self.state is not State.CREATED:
            raise IllegalStateException(f"start() is only allowed in state CREATED, not {self.state.name}")
        self._sm.set(State.REBALANCING)
        try:
            admin = reached_admin(self.config.client_config("admin"), self.config.bootstrap_servers)
            rebalance_protocol.check_broker(self.config.group_protocol, admin, self.config.membership_assist,
                                            self.config.bootstrap_servers, self.config.client_config("admin"))
            if self.config.group_protocol == rebalance_protocol.STREAMS and self.config.num_standby_replicas > 0:
                log.warning("num.standby.replicas=%d is not used under group.protocol=streams: the broker places "
                            "standbys; set streams.num.standby.replicas on group %s (kafka-configs --entity-type "
                            "groups) or group.streams.num.standby.replicas on the brokers",
                            self.config.num_standby_replicas, self.config.application_id)
            self.layout = internal_topics.prepare(admin, self.topology, self.config.application_id,
                                                  self.config.replication_factor)
            ensure_metadata_topic(admin, self.config.application_id, self.config.replication_factor)
            assist = membership_assist(self.config.membership_assist, admin)
        except BaseException:
            self._sm.set(State.PENDING_ERROR)
            self._sm.set(State.ERROR)
            raise
        if self.topology.global_stores:
            try:
                self._start_global_thread(admin)
            except BaseException:
                self._sm.set(State.PENDING_ERROR)
                self._sm.set(State.ERROR)
                raise
        self._metadata = MetadataService(self.config, self.instance_id, self.instance_info, self.view,
                                         self.config.heartbeat_interval_ms, on_tick=self._on_metadata_tick)
        self.membership = MembershipCoordinator(self.config, self.view, self._metadata.publish_now,
                                                lambda: list(self.threads), self._metadata.publish_tombstone,
                                                self._metadata.loaded, enabled=assist)
        self._metadata.start()
        for i in range(self.config.num_stream_threads):
            self._start_thread(i + 1)

    def _start_global_thread(self, admin: AdminClient) -> None:
        """Load the global stores to the end of their topics before any task runs (Kafka Streams'
        start() waits for its global thread the same way), then keep them current."""
        g = GlobalStreamThread(self.config, self.topology, admin, self._on_global_error)
        try:
            g.bootstrap()
        except BaseException:
            g.shutdown()
            raise
        self.global_thread = g
        g.start()

    def _on_global_error(self, exc: BaseException) -> None:
        """Without its global stores no task can run: the client shuts down in ERROR."""
        self.last_error = exc
        if self._sm.set(State.PENDING_ERROR):
            threading.Thread(target=self._shutdown, args=(State.ERROR,), daemon=True).start()

    def _start_thread(self, index: int) -> None:
        assert self.layout is not None
        t = StreamThread.create(index, self.config, self.topology, self.layout, on_state=self._on_thread_state,
                                on_error=self._on_thread_error, restore_listener=self.restore_listener,
                                standby_wanted=self._standby_wanted, membership=self.membership,
                                global_stores=self.global_thread.stores if self.global_thread is not None else {},
                                process_id=self.process_id)
        self.threads.append(t)
        t.start()

    def _on_thread_state(self, thread: StreamThread, s: ThreadState) -> None:
        if self.state not in (State.CREATED, State.REBALANCING, State.RUNNING):
            return  # shutting down: thread states no longer move the client
        if s in (ThreadState.PARTITIONS_REVOKED, ThreadState.PARTITIONS_ASSIGNED):
            if s is ThreadState.PARTITIONS_ASSIGNED:
                self._assigned_at_ms = int(time.time() * 1000)
            self._sm.set(State.REBALANCING)
        elif s is ThreadState.RUNNING:
            if all(t.state is ThreadState.RUNNING for t in self.threads if t.state is not ThreadState.DEAD):
                self._sm.set(State.RUNNING)
        if self._metadata is not None:
            self._metadata.publish_now()

    def _on_thread_error(self, thread: StreamThread, exc: BaseException) -> None:
        self.last_error = exc
        # a record the configured handler failed on was named by the handler already (topic,
        # partition, offset, the setting that skips it), and a streams group's refusal is a line
        # of the broker's (invalid topology, full group): a stack adds nothing there; a processor
        # that raised keeps its traceback, which points into the user's code
        one_line = isinstance(exc, (SerializationException, ProductionException, StreamsGroupError))
        log.error("stream thread %s died: %s", thread.name, exc, exc_info=None if one_line else exc)
        if self.state in (State.NOT_RUNNING, State.ERROR):
            return
        response = StreamThreadExceptionResponse.SHUTDOWN_CLIENT
        if self._handler is not None:
            try:
                response = self._handler(exc)
            except Exception:
                log.exception("uncaught-exception handler failed; shutting the client down")
        if (response is StreamThreadExceptionResponse.REPLACE_THREAD
                and self.state.is_running_or_rebalancing()):
            self.threads.remove(thread)
            self._processed_by_gone_threads += thread.processed
            self._start_thread(thread.index)
            return
        # SHUTDOWN_APPLICATION cannot reach other instances without assignment userdata: this
        # instance shuts down like SHUTDOWN_CLIENT (see docs/architecture.md)
        if self._sm.set(State.PENDING_ERROR):
            threading.Thread(target=self._shutdown, args=(State.ERROR,), daemon=True).start()

    def close(self, timeout: float = 60.0) -> bool:
        """Stop every thread (committing), publish NOT_RUNNING; True if done within ``timeout``."""
        if self.state in (State.NOT_RUNNING, State.ERROR):
            return True
        if self.state is State.CREATED:
            self._sm.set(State.PENDING_SHUTDOWN)
            self._sm.set(State.NOT_RUNNING)
            return True
        self._sm.set(State.PENDING_SHUTDOWN)
        for_good = departing(self.config)  # a static member of a StatefulSet scaled in
        if self.membership is not None:
            try:
                self.membership.prepare_leave(static=bool(self.config.group_instance_id) and not for_good)
            except Exception:  # leaving goes ahead; peers at worst redo uncommitted work
                log.exception("announcing the leave failed")
        done = self._shutdown(State.NOT_RUNNING, timeout, leave_group=for_good)
        if for_good:
            remove_static_members(self.config)
        return done

    def _shutdown(self, final: State, timeout: float = 60.0, leave_group: bool = False) -> bool:
        """Stop the threads; ``leave_group``: their members leave the group for good (static ones
        too: Kafka Streams' ``CloseOptions.leaveGroup``)."""
        with self._close_lock:
            deadline = time.monotonic() + timeout
            for t in self.threads:
                t.shutdown(leave_group=leave_group)
            ok = True
            for t in self.threads:
                if t is not threading.current_thread():
                    t.join(max(0.0, deadline - time.monotonic()))
                    ok = ok and not t.is_alive()
            if self.global_thread is not None:
                self.global_thread.shutdown(max(0.0, deadline - time.monotonic()))
                self.global_thread = None
            self._sm.set(final)
            if self._metadata is not None:
                self._metadata.stop(final=self.instance_info(), timeout=max(1.0, deadline - time.monotonic()))
                self._metadata = None
            return ok

    # -- metadata -----------------------------------------------------------------------------
    def instance_info(self) -> InstanceInfo:
        """This instance as it publishes itself: tasks and each store partition's replica, as the
        task registries work them out for queries too (runtime/tasks.py)."""
        active: list[TaskId] = []
        restoring: list[TaskId] = []
        standby: list[TaskId] = []
        stores: list[StorePartitionInfo] = []
        managers = self.task_managers()
        for tm in managers:
            held = tm.tasks.snapshot()
            active += held.active
            restoring += held.restoring
            standby += held.standby
            stores += (StorePartitionInfo(h.store, h.task_id.partition, h.replica.role, h.replica.position,
                                          h.replica.end_offset, h.task_id) for h in held.replicas)
        return InstanceInfo(
            instance_id=self.instance_id,
            endpoint=self.config.application_server,
            state=self.state,
            active_tasks=tuple(sorted(active)),
            standby_tasks=tuple(sorted(standby)),
            restoring_tasks=tuple(sorted(restoring)),
            assignment_version=sum(tm.assignment_version for tm in managers),
            assigned_at_ms=self._assigned_at_ms,
            heartbeat_ms=int(time.time() * 1000),
            stores=tuple(stores),
            intent=self.membership.intent if self.membership else "",
            acks=self.membership.acks if self.membership else (),
            threads=self.config.num_stream_threads,
            member_ids=tuple(t.member_id for t in self.threads if t.member_id),
            store_catalog=self._store_catalog(),
            counters=self._counters(),
            global_stores=tuple(sorted(self.topology.global_stores)),
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            session_timeout_ms=self.config.session_timeout_ms,
        )

    def _counters(self) -> InstanceCounters:
        threads = list(self.threads)
        dropped: collections.Counter[str] = collections.Counter()
        for t in threads:
            dropped.update(t.dropped_records())
        if self.global_thread is not None:  # global records the deserialization handler skipped
            dropped.update(self.global_thread.errors.dropped)
        return self.query_counters.totals(self._processed_by_gone_threads + sum(t.processed for t in threads),
                                          dropped, sum(t.dirty_closes() for t in threads))

    def _store_catalog(self) -> tuple[StoreInfo, ...]:
        """Every store; a global one with no changelog and one partition (see StoreInfo)."""
        if self.layout is None:
            return ()
        specs, layout = self.topology.stores, self.layout
        local = (StoreInfo(name, layout.changelogs.get(name, ""), specs[name].key_serde.name,
                           specs[name].value_serde.name, layout.tasks_per_subtopology[st.id])
                 for st in self.topology.subtopologies() for name in st.stores if name in specs)
        glob = (StoreInfo(name, "", g.spec.key_serde.name, g.spec.value_serde.name, 1)
                for name, g in self.topology.global_stores.items())
        return tuple(sorted((*local, *glob), key=lambda s: s.store))

    def metrics(self) -> Metrics:
        """Kafka Streams' ``metrics()``: the client's, its threads', their tasks' and stores'
        (runtime/metrics.py), name -> value. Read from any thread."""
        alive = [t for t in list(self.threads) if t.is_alive()]
        out: Metrics = {MetricName("alive-stream-threads", "stream-metrics", (("client-id", self.instance_id),),
                                   "The current number of alive stream threads"): float(len(alive))}
        for tm in self.task_managers():
            out.update(tm.metrics.metrics())
        return out

    def task_managers(self) -> list[TaskManager]:
        return [tm for t in list(self.threads) if (tm := t.task_manager) is not None]

    def all_local_store_partition_lags(self) -> dict[str, dict[int, StorePartitionInfo]]:
        """Kafka Streams' ``allLocalStorePartitionLags``: store → partition → position/end/lag."""
        out: dict[str, dict[int, StorePartitionInfo]] = {}
        for s in self.instance_info().stores:
            out.setdefault(s.store, {})[s.partition] = s
        return out

    def _maybe_clean_state_dir(self) -> None:
        """Every ``state.cleanup.delay.ms``: remove task directories no thread holds."""
        now = time.monotonic()
        if now < self._next_cleanup:
            return
        self._next_cleanup = now + self.config.state_cleanup_delay_ms / 1000.0
        owned: set[str] = set()
        for tm in self.task_managers():
            owned.update(str(tid) for tid in tm.tasks.owned_ids())
        clean_unowned_task_dirs(self.config.app_state_dir, owned, self.config.state_cleanup_delay_ms)

    def stuck_threads(self) -> list[str]:
        """Stream threads whose loop has not turned for longer than any wait of theirs may last
        (``max.poll.interval.ms``, ``task.timeout.ms``, plus a minute): a process that needs a
        restart, which is what the instance's liveness health service reports (instance/server)."""
        bound = max(self.config.max_poll_interval_ms, self.config.task_timeout_ms) / 1000 + 60
        now = time.monotonic()
        return [t.name for t in self.threads
                if t.state not in (ThreadState.CREATED, ThreadState.DEAD) and now - t.last_turn > bound]

    def is_live(self) -> bool:
        """Not in ERROR and no stream thread stuck (see :meth:`stuck_threads`)."""
        return self.state is not State.ERROR and not self.stuck_threads()

    def _on_metadata_tick(self) -> None:
        if self.membership is not None:
            self.membership.tick(in_group=self.state.is_running_or_rebalancing())
        self._maybe_clean_state_dir()

    def _standby_wanted(self, thread: StreamThread) -> set[TaskId]:
        """Standby tasks this thread should hold under the current placement: on this instance,
        the thread whose member the assignor would give the task to, else the task's partition
        modulo the thread count."""
        n = self.config.num_standby_replicas
        if n <= 0 or self.layout is None:
            return set()
        out = set()
        mine = {t.member_id: t for t in self.threads if t.member_id}
        for st in self.topology.subtopologies():
            if not st.stores:
                continue
            parts = self.layout.tasks_per_subtopology[st.id]
            for p in range(parts):
                tid = TaskId(st.id, p)
                heir = mine.get(self.view.takeover_member(tid, parts) or "")
                host = heir.index if heir is not None else p % self.config.num_stream_threads + 1
                if host != thread.index:
                    continue
                if self.view.owner(tid) is None:
                    # its active is gone: a standby held here is now the best replica; keep it
                    tm = thread.task_manager
                    if tm is not None and tm.tasks.standby(tid) is not None:
                        out.add(tid)
                elif self.instance_id in self.view.standby_placement(tid, n, parts):
                    out.add(tid)
        return out

    def metadata_for_all_streams_clients(self) -> list[InstanceInfo]:
        return self.view.instances()

    def is_global_store(self, store: str) -> bool:
        """``store`` is a global store: every instance holds it whole and answers it locally."""
        return store in self.topology.global_stores

    def store_spec(self, store: str) -> StoreSpec:
        """The spec of any store of the topology, global ones included."""
        spec = self.topology.stores.get(store)
        if spec is not None:
            return spec
        g = self.topology.global_stores.get(store)
        if g is None:
            raise self._unknown(store)
        return g.spec

    def _unknown(self, store: str) -> UnknownStateStoreException:
        names = sorted([*self.topology.stores, *self.topology.global_stores])
        return UnknownStateStoreException(f"unknown store {echo(store)}; this topology has {names}")

    def store_placement(self, store: str) -> StorePlacement:
        """Where the keys of ``store`` live: its spec and tasks (runtime/query/request.py: a key
        parsed, serialized and hashed there, once), looked up once (neither changes once started).
        The one placement lookup: queries, scans, watches and :meth:`query_metadata_for_key` place
        keys with it. UnknownStateStoreException for an unknown store; StreamsNotStartedException
        for a store with tasks before start() (a global store has none: every instance holds it)."""
        placement = self._placements.get(store)
        if placement is None:
            if self.is_global_store(store):
                placement = StorePlacement(store, self.store_spec(store))
            elif store not in self.topology.stores:
                raise self._unknown(store)
            elif self.layout is None:
                raise StreamsNotStartedException("KafkaStreams is not started; call start() first")
            else:
                st = self.topology.subtopology_of_store(store)
                placement = StorePlacement(store, self.topology.stores[store], st.id,
                                           self.layout.tasks_per_subtopology[st.id])
            self._placements[store] = placement
        return placement

    def query_metadata_for_key(self, store: str, key: Any) -> KeyQueryMetadata:
        """Kafka Streams' ``queryMetadataForKey``: where ``key`` of ``store`` lives (active host,
        standby hosts, partition), placed by :meth:`store_placement`. A global store lives on
        every instance: this one, partition -1 (as Kafka Streams answers)."""
        if self.state is State.CREATED:
            raise StreamsNotStartedException("KafkaStreams is not started; call start() first")
        placement = self.store_placement(store)
        if placement.is_global:
            if not self.state.is_running_or_rebalancing() or not self.config.application_server:
                return NOT_AVAILABLE
            return KeyQueryMetadata(HostInfo.parse(self.config.application_server), (), -1)
        task = placement.task_of_key(key)
        if not self.state.is_running_or_rebalancing():
            return NOT_AVAILABLE
        md = self.view.key_query_metadata(task.subtopology, task.partition)
        return md if md.available else NOT_AVAILABLE

    def query(self, request: StateQueryRequest[R]) -> StateQueryResult[R]:
        """Kafka Streams' IQv2 ``query``: ``request`` answered by this instance's replicas, a
        result per partition with the replica that answered or why it refused
        (instance/runtime/query). Raises for the request as a whole: unknown store, not started,
        a query the store cannot answer."""
        return execute(self, request)


__all__ = ["KafkaStreams", "State", "StreamThreadExceptionResponse"]
