"""KafkaStreams: the client that runs a topology on this instance and answers for its state."""

from __future__ import annotations

import collections
import enum
import logging
import threading
import time
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
from instance.runtime.query.placement import StorePlacement, parse_query_key
from instance.runtime.query_counters import QueryCounters
from instance.runtime.reachability import reached_admin
from instance.runtime.restore import StateRestoreListener
from instance.runtime.states import State, StateListener, StateMachine
from instance.runtime.stream_thread import StreamThread, ThreadState
from instance.runtime.task_manager import TaskManager
from instance.state.cleanup import clean_unowned_task_dirs
from instance.state.spec import StoreSpec
from instance.topology.topology import Topology
from router.core.echo import echo
from router.core.local_read import Role
from router.core.metadata import (
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
from router.core.partitioner import default_partition
from router.core.task_id import TaskId

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
        self._sm = StateMachine()
        self._handler: UncaughtExceptionHandler | None = None
        self.restore_listener: StateRestoreListener | None = None
        self.threads: list[StreamThread] = []
        self.global_thread: GlobalStreamThread | None = None
        self.layout: internal_topics.TopicLayout | None = None
        self.instance_id = self.config.instance_id
        self.view = ClusterView(liveness_ms=liveness_ms(self.config.heartbeat_interval_ms))
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
            rebalance_protocol.check_broker(self.config.group_protocol, admin, self.config.membership_assist)
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
        t = StreamThread(index, self.config, self.topology, self.layout, self._on_thread_state,
                         self._on_thread_error, self.restore_listener, self._standby_wanted,
                         self.membership)
        if self.global_thread is not None:
            t.global_stores = self.global_thread.stores
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
        # partition, offset, the setting that skips it): a stack adds nothing there; a processor
        # that raised keeps its traceback, which points into the user's code
        record_failure = isinstance(exc, (SerializationException, ProductionException))
        log.error("stream thread %s died: %s", thread.name, exc, exc_info=None if record_failure else exc)
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
        done = self._shutdown(State.NOT_RUNNING, timeout)
        if for_good:
            remove_static_members(self.config)
        return done

    def _shutdown(self, final: State, timeout: float = 60.0) -> bool:
        with self._close_lock:
            deadline = time.monotonic() + timeout
            for t in self.threads:
                t.shutdown()
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
        active: list[TaskId] = []
        restoring: list[TaskId] = []
        standby: list[TaskId] = []
        stores: list[StorePartitionInfo] = []
        for tm in self.task_managers():
            with tm.lock:
                for tid, task in list(tm.tasks.items()):
                    is_restoring = tid in tm.restoring
                    (restoring if is_restoring else active).append(tid)
                    progress = tm.restorer.progress(task) if is_restoring else {}
                    role = Role.RESTORING if is_restoring else Role.ACTIVE
                    for name in task.stores:
                        tp = self._changelog_tp(name, tid.partition)
                        if tp in progress:
                            pos, end = progress[tp]
                        else:
                            pos = end = task.state.position(tp) if tp else -1
                        stores.append(StorePartitionInfo(name, tid.partition, role, pos, end, tid))
                for tid, sb in list(tm.standby.tasks.items()):
                    standby.append(tid)
                    for name in sb.stores:
                        tp = self._changelog_tp(name, tid.partition)
                        pos = sb.changelog_offsets.get(tp, -1) if tp else -1
                        end = sb.end_offsets.get(tp, -1) if tp else -1
                        stores.append(StorePartitionInfo(name, tid.partition, Role.STANDBY, pos, end, tid))
        return InstanceInfo(
            instance_id=self.instance_id,
            endpoint=self.config.application_server,
            state=self.state,
            active_tasks=tuple(sorted(active)),
            standby_tasks=tuple(sorted(standby)),
            restoring_tasks=tuple(sorted(restoring)),
            assignment_version=sum(tm.assignment_version for tm in self.task_managers()),
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
        return [t.tasks for t in list(self.threads) if t.tasks is not None]

    def _changelog_tp(self, store: str, partition: int) -> tuple[str, int] | None:
        cl = self.layout.changelogs.get(store) if self.layout else None
        return (cl, partition) if cl else None

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
            with tm.lock:
                owned.update(str(tid) for tid in tm.tasks)
                owned.update(str(tid) for tid in tm.standby.tasks)
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
                    if thread.tasks is not None and tid in thread.tasks.standby.tasks:
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

    def store_tasks(self, store: str) -> tuple[int, int]:
        """(sub-topology, number of partitions) of ``store``: the tasks a scan of it covers. A
        global store has none (ValueError: :meth:`query` answers it as one partition)."""
        if store not in self.topology.stores:
            if self.is_global_store(store):
                raise ValueError(f"store {store!r} is global: it has no partitions to route to")
            raise self._unknown(store)
        if self.layout is None:
            raise StreamsNotStartedException("KafkaStreams is not started; call start() first")
        st = self.topology.subtopology_of_store(store)
        return st.id, self.layout.tasks_per_subtopology[st.id]

    def key_bytes_partition(self, store: str, key_bytes: bytes) -> int:
        """The partition of ``store`` that holds the key serialized as ``key_bytes``."""
        return default_partition(key_bytes, self.store_tasks(store)[1])

    def store_partition(self, store: str, key: Any) -> tuple[int, int]:
        """(sub-topology, partition) that holds ``key`` in ``store``."""
        sub, partitions = self.store_tasks(store)
        kb = self.topology.stores[store].key_serde.serialize(key)
        if kb is None:
            raise ValueError("key must not be None")
        return sub, default_partition(kb, partitions)

    def query_metadata_for_key(self, store: str, key: Any) -> KeyQueryMetadata:
        """Where ``key`` of ``store`` lives: active host, standby hosts, partition. A global store
        lives on every instance: this one, partition -1 (as Kafka Streams answers)."""
        if self.state is State.CREATED:
            raise StreamsNotStartedException("KafkaStreams is not started; call start() first")
        if self.is_global_store(store):
            if not self.state.is_running_or_rebalancing() or not self.config.application_server:
                return NOT_AVAILABLE
            return KeyQueryMetadata(HostInfo.parse(self.config.application_server), (), -1)
        sub, partition = self.store_partition(store, key)
        if not self.state.is_running_or_rebalancing():
            return NOT_AVAILABLE
        md = self.view.key_query_metadata(sub, partition)
        return md if md.available else NOT_AVAILABLE

    def query(self, request: StateQueryRequest[R]) -> StateQueryResult[R]:
        """Kafka Streams' IQv2 ``query``: ``request`` answered by this instance's replicas, a
        result per partition with the replica that answered or why it refused
        (instance/runtime/query). Raises for the request as a whole: unknown store, not started,
        a query the store cannot answer."""
        return execute(self, request)

    def query_key(self, store: str, text: str = "", raw: bytes = b"") -> tuple[Any, bytes]:
        """A query's key of ``store`` and its serialized bytes, each computed once: from ``raw``
        bytes (checked against the store's key serde), else parsed from ``text``. BadRequest for
        what is not a key of that serde."""
        return parse_query_key(self.store_spec(store), text, raw)

    def store_placement(self, store: str) -> StorePlacement:
        """``store``'s spec and tasks, looked up once (neither changes once started): what a Get
        needs to place its key. Raises as :meth:`store_tasks` does, but answers a global store."""
        placement = self._placements.get(store)
        if placement is None:
            if self.is_global_store(store):
                placement = StorePlacement(store, self.store_spec(store))
            else:
                sub, partitions = self.store_tasks(store)  # raises for an unknown store / not started
                placement = StorePlacement(store, self.topology.stores[store], sub, partitions)
            self._placements[store] = placement
        return placement

__all__ = ["KafkaStreams", "State", "StreamThreadExceptionResponse"]
